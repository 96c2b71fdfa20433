"""The language-model client: chat, streaming and schema-constrained structured generation.

Built on ``openai.AsyncOpenAI`` so any OpenAI-compatible server works (OpenAI, Ollama, vLLM,
llama.cpp). Vendor errors are translated to ``LLMError`` here and nowhere else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import jsonschema
import openai
from openai import AsyncOpenAI, AsyncStream, DefaultAioHttpClient
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.errors import LLMError
from gateway.models import PromptMessage, TokenUsage
from gateway.settings import Settings
from rag_core.errors import StructuredOutputError

log = logging.getLogger(__name__)


@dataclass
class Completion:
    text: str
    usage: TokenUsage


def _wire(messages: Sequence[PromptMessage]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def _usage(raw: object | None) -> TokenUsage:
    if raw is None:
        return TokenUsage()
    return TokenUsage(
        prompt_tokens=getattr(raw, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(raw, "completion_tokens", 0) or 0,
        total_tokens=getattr(raw, "total_tokens", 0) or 0,
    )


class LLMClient:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = settings.llm_model
        self.search_model = settings.search_llm_model or settings.llm_model
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        self._client = AsyncOpenAI(
            api_key=key,
            base_url=settings.llm_base_url,
            timeout=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            http_client=DefaultAioHttpClient(timeout=settings.llm_timeout_s),
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _chat(self, body: dict, *, stream: bool = False):
        """POST /chat/completions with a plain JSON body.

        ``chat.completions.create`` first walks every parameter through the SDK's TypedDict
        transform, which cost a quarter of the gateway's CPU per turn; our messages are plain
        dicts with standard keys, so the body goes out as it is. Same client, retries and errors.
        """
        return await self._client.post(
            "/chat/completions",
            body={**body, "stream": stream},
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=stream,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )

    async def complete(self, messages: Sequence[PromptMessage]) -> Completion:
        try:
            resp = await self._chat(
                {"model": self.model, "messages": _wire(messages), "temperature": self.settings.llm_temperature}
            )
        except openai.OpenAIError as exc:
            raise LLMError(f"language model request failed: {type(exc).__name__}") from exc
        if not resp.choices or resp.choices[0].message.content is None:
            raise LLMError("language model returned no text")
        return Completion(text=resp.choices[0].message.content, usage=_usage(resp.usage))

    async def stream(self, messages: Sequence[PromptMessage], usage: TokenUsage) -> AsyncIterator[str]:
        """Yield text deltas; fills ``usage`` in place when the server reports it."""
        try:
            stream = await self._chat(
                {
                    "model": self.model,
                    "messages": _wire(messages),
                    "temperature": self.settings.llm_temperature,
                    "stream_options": {"include_usage": True},
                },
                stream=True,
            )
            async for chunk in stream:
                if chunk.usage is not None:
                    reported = _usage(chunk.usage)
                    usage.prompt_tokens = reported.prompt_tokens
                    usage.completion_tokens = reported.completion_tokens
                    usage.total_tokens = reported.total_tokens
                for choice in chunk.choices:
                    if choice.delta and choice.delta.content:
                        yield choice.delta.content
        except openai.OpenAIError as exc:
            raise LLMError(f"language model stream failed: {type(exc).__name__}") from exc

    async def structured_generation(self, prompt: str, schema: dict) -> dict:
        """Ask for JSON matching ``schema``, validate it, retry once; ``StructuredOutputError`` after."""
        last_problem = ""
        for attempt in (1, 2):
            try:
                resp = await self._chat({
                    "model": self.search_model,
                    "messages": [{"role": "system", "content": prompt.strip()}],
                    "temperature": self.settings.structured_temperature,
                    "top_p": self.settings.structured_top_p,
                    "max_tokens": self.settings.structured_max_tokens,
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": "result", "schema": schema, "strict": True},
                    },
                })
            except openai.OpenAIError as exc:
                raise LLMError(f"structured generation failed: {type(exc).__name__}") from exc
            content = resp.choices[0].message.content if resp.choices else None
            try:
                data = json.loads(content or "")
                jsonschema.validate(data, schema)
                return data
            except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
                last_problem = str(exc).splitlines()[0]
                log.warning("structured output invalid (attempt %d): %s", attempt, last_problem)
        raise StructuredOutputError(f"model output did not match the schema: {last_problem}")
