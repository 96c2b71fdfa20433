"""Exactly once: a turn stopped after its tool call (the process died while the model wrote its second
round) and run again from its stored snapshot, as the inbox resumes it, reuses the stored result: the
MCP server is not called a second time, and the resumed model round reads the same result."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.models import InboundMessage, new_id
from gateway.services import Services
from gateway.turn.pipeline import Turn
from tests.gateway.tools.conftest import TOKEN
from tests.sinks import RecordingSink as Sink


@pytest.fixture
async def services(tool_settings):
    built = Services.build(tool_settings)
    await built.start()
    yield built
    await built.aclose()


async def _wait_for(check, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_resumed_turn_does_not_call_the_tool_again(services, mcp_server, fake_openai, tool_settings):
    await services.tool_sources.create({"name": "crm", "url": mcp_server.url,
                                        "headers": {"Authorization": f"Bearer {TOKEN}"}})
    await services.agents.patch(tool_settings.agent_id, {"config": {"tools": [{"name": "crm.book_table"}]}})
    # A model that calls the tool for the question and answers from its result (held: the first run is
    # stopped while it writes).
    fake_openai.auto_tool_call = ("crm__book_table", {"party_size": 2, "day": "Saturday"})
    fake_openai.echo_tool_results, fake_openai.tool_result_delay_s = True, 30
    inbound = InboundMessage(channel="test", external_user_id="u1", external_message_id=new_id(),
                             identity="test:u1", text="A table for two on Saturday")
    turn = await services.pipeline.accept(inbound)
    snapshot = turn.snapshot()
    first = asyncio.create_task(services.pipeline.run(turn, Sink()))
    await _wait_for(lambda: len(fake_openai.chat_requests()) == 2)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert [c["idempotency_key"] for c in mcp_server.calls] == [f"{turn.trace.turn_id}:0"]

    fake_openai.tool_result_delay_s = 0
    outcome = await services.pipeline.run(Turn.restore(snapshot), Sink())

    assert len(mcp_server.calls) == 1  # the stored round and result were used: no second booking
    requests = fake_openai.chat_requests()
    assert len(requests) == 3  # the resumed run did not ask for the tool calls again: it went on from them
    [result] = [m for m in requests[2]["body"]["messages"] if m["role"] == "tool"]
    assert result["content"] == "Booked: a table for 2 on Saturday, reference BK-1001."
    assert outcome.reply.text == "From the tools: Booked: a table for 2 on Saturday, reference BK-1001."
    [call] = outcome.turn.trace.tool_calls
    assert call.name == "crm.book_table" and call.reused and call.result == result["content"]
    stored = await services.store.get_trace(turn.trace.turn_id)
    assert stored is not None and stored.tool_calls[0].reused
