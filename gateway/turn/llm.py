"""The language-model client: chat, streaming and schema-constrained structured generation.

Built on ``openai.AsyncOpenAI`` so any OpenAI-compatible server works (OpenAI, Ollama, vLLM,
llama.cpp). Vendor errors are translated to ``LLMError`` here and nowhere else.
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import urlsplit

import jsonschema
import openai
from openai import AsyncOpenAI, AsyncStream, DefaultAioHttpClient
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from gateway.core.errors import LLMError
from gateway.core.models import ModelCallTrace, PromptMessage, TokenUsage
from gateway.core.settings import Settings
from rag_core.clean_text import scrub, scrub_deep
from rag_core.errors import StructuredOutputError

log = logging.getLogger(__name__)


@dataclass
class Completion:
    text: str
    usage: TokenUsage


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass
class ToolStep:
    """One model call with tools: its text (streamed through ``on_delta`` when given) and the tools
    it asked for (none means the text is the answer)."""

    text: str
    calls: list[ToolCall]
    usage: TokenUsage


@dataclass(frozen=True)
class CallOptions:
    """Per-call settings an agent's configuration gives (model, sampling, length, retries)."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_retries: int | None = None

    def body(self) -> dict:
        out: dict = {}
        if self.model:
            out["model"] = self.model
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out


def model_of(options: CallOptions | None, default: str) -> str:
    """The model a call with ``options`` goes to: the agent's own, else the gateway's (``default``)."""
    return options.model if options is not None and options.model else default


class ToolsUnsupported(LLMError):
    """The server refused a request because it carried tools: this model cannot call them."""


class LLMUnreachable(LLMError):
    """Nothing listens at the model server's address: said at once, not retried, never a timeout."""


class _Refused(openai.APIConnectionError):
    pass


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):  # a chain is short; never follow a cycle
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or (isinstance(seen, OSError) and seen.errno == errno.ECONNREFUSED):
            return True
        os_error = getattr(seen, "os_error", None)  # aiohttp's ClientConnectorError carries the socket's
        if isinstance(os_error, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _HttpClient(DefaultAioHttpClient):
    """The SDK's aiohttp transport maps every aiohttp connection error to a ``ConnectTimeout``, so a
    refused connection was retried with back-off and reported as ``APITimeoutError`` after 1.4 s. A
    refused connection is raised as an SDK error instead, which the SDK passes on without retrying."""

    async def send(self, request, **kwargs):
        try:
            return await super().send(request, **kwargs)
        except Exception as exc:
            if _refused(exc):
                raise _Refused(request=request) from exc
            raise


def _wire(messages: Sequence[PromptMessage]) -> list[dict]:
    return [m.wire() for m in messages]  # PromptMessage text is already clean


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
            http_client=_HttpClient(timeout=settings.llm_timeout_s),
        )
        where = urlsplit(settings.llm_base_url)  # no user:password@ or query in an error message
        self._refusal = (f"the language model at {where.scheme}://{where.netloc.rpartition('@')[2]}{where.path} "
                         "refused the connection (is it running?)")

    async def aclose(self) -> None:
        await self._client.close()

    async def _chat(self, body: dict, *, stream: bool = False, max_retries: int | None = None):
        """POST /chat/completions with a plain JSON body.

        ``chat.completions.create`` first walks every parameter through the SDK's TypedDict
        transform, which cost a quarter of the gateway's CPU per turn; our messages are plain
        dicts with standard keys, so the body goes out as it is. Same client, retries and errors.
        """
        client = self._client if max_retries is None else self._client.with_options(max_retries=max_retries)
        return await client.post(
            "/chat/completions",
            body={**body, "stream": stream},
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},
            stream=stream,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )

    async def _completion(self, body: dict, what: str, max_retries: int | None = None) -> ChatCompletion:
        """One non-streamed completion; anything but a well-formed one is an ``LLMError``."""
        try:
            resp = await self._chat(body, max_retries=max_retries)
        except _Refused as exc:
            raise LLMUnreachable(self._refusal) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"{what} failed: {type(exc).__name__}") from exc
        except _MALFORMED as exc:  # a 200 whose body is truncated JSON, or a proxy's error page
            problem = f"the server's answer is not a chat completion ({type(exc).__name__})"
            raise LLMError(f"{what} failed: {problem}") from exc
        if not isinstance(resp, ChatCompletion):  # the SDK hands back non-JSON bodies as text
            raise LLMError(f"{what} failed: the server answered {_describe_body(resp)}, not a chat completion")
        return resp

    async def complete(self, messages: Sequence[PromptMessage], options: CallOptions | None = None) -> Completion:
        resp = await self._completion(
            {"model": self.model, "messages": _wire(messages), "temperature": self.settings.llm_temperature,
             **(options.body() if options else {})},
            "language model request", options.max_retries if options else None,
        )
        text = _first_text(resp)
        if not text.strip():
            raise LLMError("language model returned no text")
        return Completion(text=text, usage=_usage(resp.usage))

    async def stream(self, messages: Sequence[PromptMessage], usage: TokenUsage,
                     options: CallOptions | None = None) -> AsyncIterator[str]:
        """Yield text deltas; fills ``usage`` in place when the server reports it.

        A stream that ends without any text is an ``LLMError`` like any other failure."""
        produced = False
        try:
            stream = await self._chat(
                {
                    "model": self.model,
                    "messages": _wire(messages),
                    "temperature": self.settings.llm_temperature,
                    "stream_options": {"include_usage": True},
                    **(options.body() if options else {}),
                },
                stream=True, max_retries=options.max_retries if options else None,
            )
            if not isinstance(stream, AsyncStream):
                raise LLMError(f"language model stream failed: the server answered {_describe_body(stream)}")
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    reported = _usage(chunk.usage)
                    usage.prompt_tokens = reported.prompt_tokens
                    usage.completion_tokens = reported.completion_tokens
                    usage.total_tokens = reported.total_tokens
                for choice in chunk.choices or ():
                    content = choice.delta.content if choice.delta else None
                    if isinstance(content, str) and content:
                        produced = produced or bool(content.strip())
                        yield scrub(content)
        except _Refused as exc:
            raise LLMUnreachable(self._refusal) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"language model stream failed: {type(exc).__name__}") from exc
        except _MALFORMED as exc:  # an event that is not JSON, or not a chunk
            raise LLMError(f"language model stream failed: malformed event ({type(exc).__name__})") from exc
        if not produced:
            raise LLMError("language model stream ended without any text")

    async def tool_step(self, messages: list[dict], tools: list[dict], on_delta=None, *,
                        final: bool = False, options: CallOptions | None = None) -> ToolStep:
        """One chat completion offered ``tools``; streamed when ``on_delta`` is given (text deltas go
        out as they come, tool-call fragments are assembled). ``final``: the tools stay described but
        may not be called (the answer must come now)."""
        body = {"model": self.model, "messages": messages, "tools": tools, "tool_choice": "none" if final else "auto",
                "temperature": self.settings.llm_temperature, **(options.body() if options else {})}
        usage = TokenUsage()
        try:
            if on_delta is None:
                resp = await self._chat(body)
                if not isinstance(resp, ChatCompletion):
                    raise LLMError(f"tool step failed: the server answered {_describe_body(resp)}")
                message = resp.choices[0].message if resp.choices else None
                calls = [ToolCall(c.id, c.function.name, c.function.arguments or "{}")
                         for c in (message.tool_calls or []) if message and c.function] if message else []
                return ToolStep(text=_first_text(resp), calls=calls, usage=_usage(resp.usage))
            stream = await self._chat({**body, "stream_options": {"include_usage": True}}, stream=True)
            if not isinstance(stream, AsyncStream):
                raise LLMError(f"tool step failed: the server answered {_describe_body(stream)}")
            parts: list[str] = []
            pending: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is None:
                        continue
                    if isinstance(delta.content, str) and delta.content:
                        parts.append(scrub(delta.content))
                        await on_delta(parts[-1])
                    for fragment in delta.tool_calls or ():
                        call = pending.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
                        call["id"] = fragment.id or call["id"]
                        if fragment.function is not None:
                            call["name"] += fragment.function.name or ""
                            call["arguments"] += fragment.function.arguments or ""
            calls = [ToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"] or "{}")
                     for i, c in sorted(pending.items())]
            return ToolStep(text="".join(parts), calls=calls, usage=usage)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            raise ToolsUnsupported(f"the model server refused tools ({type(exc).__name__})") from exc
        except _Refused as exc:
            raise LLMUnreachable(self._refusal) from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"tool step failed: {type(exc).__name__}") from exc
        except _MALFORMED as exc:
            raise LLMError(f"tool step failed: malformed answer ({type(exc).__name__})") from exc

    async def structured_generation(self, prompt: str, schema: dict) -> dict:
        """Ask for JSON matching ``schema``, validate it, retry once; ``StructuredOutputError`` after."""
        last_problem = ""
        for attempt in (1, 2):
            resp = await self._completion({
                "model": self.search_model,
                "messages": [{"role": "system", "content": scrub(prompt.strip())}],
                "temperature": self.settings.structured_temperature,
                "top_p": self.settings.structured_top_p,
                "max_tokens": self.settings.structured_max_tokens,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "result", "schema": schema, "strict": True},
                },
            }, "structured generation")
            _record_call("structured", self.search_model, resp)
            try:
                data = scrub_deep(json.loads(_first_text(resp)))
                _validator(schema).validate(data)
                return data
            except (ValueError, RecursionError, jsonschema.ValidationError) as exc:
                last_problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                log.warning("structured output invalid (attempt %d): %s", attempt, last_problem)
        raise StructuredOutputError(f"model output did not match the schema: {last_problem}")


# Counts model calls made outside a turn's task (a job's) at (agent, channel, connection): insight's cost.
UsageRecorder = Callable[[str | None, str | None, str | None, list[ModelCallTrace]], Awaitable[None]]

# The running turn's record of its model calls besides the reply (``TurnTrace.model_calls``): the pipeline points
# it at the turn's trace when the turn starts; None outside a turn (nothing is recorded).
turn_model_calls: ContextVar[list[ModelCallTrace] | None] = ContextVar("turn_model_calls", default=None)


def _record_call(kind: str, model: str | None, resp: ChatCompletion) -> None:
    usage = _usage(resp.usage)
    record_model_call(kind, model, usage.prompt_tokens, usage.completion_tokens)


def record_model_call(kind: str, model: str | None, prompt_tokens: int, completion_tokens: int = 0) -> None:
    """A model call (structured generation, embeddings) into the running turn's record, or the running job's
    (``model_calls_recorded``); outside both it is not counted."""
    calls = turn_model_calls.get()
    if calls is not None:
        calls.append(ModelCallTrace(kind=kind, model=model, prompt_tokens=prompt_tokens,
                                    completion_tokens=completion_tokens))


def record_embedding(model: str, prompt_tokens: int) -> None:
    """The embeddings endpoint's reported usage (``rag_core.encoders.UsageHook``)."""
    record_model_call("embedding", model, prompt_tokens)


@contextmanager
def model_calls_recorded() -> Iterator[list[ModelCallTrace]]:
    """Work done outside a turn's task (a job) records its model calls in the list this yields."""
    calls: list[ModelCallTrace] = []
    token = turn_model_calls.set(calls)
    try:
        yield calls
    finally:
        turn_model_calls.reset(token)


_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _validator(schema: dict) -> jsonschema.protocols.Validator:
    """The schema's validator, built (and the schema itself checked) once: ``jsonschema.validate`` does
    both on every call, which cost a retrieval-on turn about 3 ms of CPU for the search answer alone."""
    key = json.dumps(schema, sort_keys=True)
    validator = _VALIDATORS.get(key)
    if validator is None:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = _VALIDATORS[key] = cls(schema)
        if len(_VALIDATORS) > 64:  # schemas are a few constants; never let a caller grow this without bound
            _VALIDATORS.pop(next(iter(_VALIDATORS)))
    return validator


# What a misbehaving server (or a proxy in front of it) makes the SDK raise besides its own errors.
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)


def _first_text(resp: ChatCompletion) -> str:
    choices = resp.choices or []
    content = choices[0].message.content if choices and choices[0].message else None
    return scrub(content) if isinstance(content, str) else ""


def _describe_body(body: object) -> str:
    if isinstance(body, str):
        head = body.lstrip()[:15].lower()
        return "an HTML page" if head.startswith(("<!doctype", "<html")) else f"{len(body)} characters of text"
    return type(body).__name__
