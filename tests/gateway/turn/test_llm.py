"""The LLM client through the real openai library against the fake server."""

from __future__ import annotations

import pytest

from gateway.core.errors import LLMError
from gateway.core.models import PromptMessage, TokenUsage
from gateway.turn.llm import LLMClient
from rag_core.errors import StructuredOutputError

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.fixture
async def llm(settings):
    client = LLMClient(settings)
    yield client
    await client.aclose()


async def test_structured_generation_valid_first_time(llm, fake_openai):
    fake_openai.script_json({"answer": "42"})
    assert await llm.structured_generation("  What is it?  ", SCHEMA) == {"answer": "42"}
    body = fake_openai.chat_requests()[0]["body"]
    assert body["temperature"] == 0.2 and body["top_p"] == 0
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert body["messages"] == [{"role": "system", "content": "What is it?"}]
    assert fake_openai.chat_requests()[0]["headers"]["authorization"] == "Bearer sk-test"


async def test_structured_generation_retries_once_on_invalid_output(llm, fake_openai):
    fake_openai.script_json("not json at all")
    fake_openai.script_json({"answer": "ok"})
    assert await llm.structured_generation("q", SCHEMA) == {"answer": "ok"}
    assert len(fake_openai.chat_requests()) == 2


async def test_structured_generation_gives_up_after_the_retry(llm, fake_openai):
    fake_openai.script_json({"wrong": 1})
    fake_openai.script_json({"answer": 5})
    with pytest.raises(StructuredOutputError):
        await llm.structured_generation("q", SCHEMA)
    assert len(fake_openai.chat_requests()) == 2


async def test_streaming_yields_deltas_and_usage(llm, fake_openai):
    fake_openai.script_reply("Hello there, friend")
    usage = TokenUsage()
    parts = [p async for p in llm.stream([PromptMessage(role="user", content="hi")], usage)]
    assert len(parts) > 1 and "".join(parts) == "Hello there, friend"
    assert usage.prompt_tokens == 11 and usage.total_tokens > 11


async def test_http_errors_become_llm_errors(llm, fake_openai):
    fake_openai.fail_next(503)
    with pytest.raises(LLMError):
        await llm.complete([PromptMessage(role="user", content="hi")])
