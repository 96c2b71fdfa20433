"""Citations in real turns: the numbered context and instruction per format, [N] verification,
sources stored on the agent message, and how each channel style delivers them."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.models import InboundMessage, Role, SourceRef, new_id
from gateway.services import Services
from gateway.turn.citations import CITE_INSTRUCTION, CitationPolicy, check_markers, deliverable
from rag_core.rag_context import format_rag
from rag_core.topic import Topic
from tests.sinks import RecordingSink as Sink

TOPICS = [
    Topic(source="rent", title="E-bike rental prices", facts=["35 euros per day"],
          summary="E-bikes cost 35 euros per day, helmet included."),
    Topic(source="repair", title="Repairs", facts=["flat tyre 12 euros"], summary="A flat tyre repair is 12 euros."),
]
ANSWER = "E-bikes cost 35 euros a day [1]. Helmets are free [7]."


@pytest.fixture
def citations_format():
    return "structured"


@pytest.fixture
def citations_verify():
    return True


@pytest.fixture
async def services(settings, citations_format, citations_verify):
    built = Services.build(settings.model_copy(update={
        "rag_top_k": 2, "retrieval_strategy": "hybrid",
        "citations_format": citations_format, "citations_verify": citations_verify,
    }))
    await built.knowledge.kb.upsert_many(TOPICS)
    await built.start()
    built.register_jobs(asyncio.get_running_loop())
    yield built
    built.unregister_jobs()
    await built.aclose()


def inbound(text: str) -> InboundMessage:
    return InboundMessage(channel="test", external_user_id="u1", external_message_id=new_id(),
                          identity="test:u1", text=text)


async def _turn(services, fake_openai, answer=ANSWER):
    fake_openai.script_reply(answer)
    sink = Sink()
    outcome = await services.pipeline.handle(inbound("How much does an e-bike rental cost per day?"), sink)
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    [stored] = [m for m in await services.store.conversation_messages(outcome.turn.conversation.id)
                if m.role is Role.AGENT]
    return outcome, system, sink.sent, stored


def test_numbered_context_and_markers():
    assert format_rag(TOPICS, numbered=True) == (
        "[1] E-bike rental prices\nE-bikes cost 35 euros per day, helmet included.\n\n---\n\n"
        "[2] Repairs\nA flat tyre repair is 12 euros.\n\n---\n\n")
    checked = check_markers("Yes [1][2], no [3, 1] and a[0] or [x](https://e.com) [9].", 2, remove_invalid=True)
    assert checked.cited == [1, 2] and checked.invalid == [3, 9]
    assert checked.text == "Yes [1][2], no [1] and a[0] or [x](https://e.com)."


def test_each_channel_style_delivers_the_sources_its_own_way():
    sources = [SourceRef(n=1, source="rent", title="E-bike rental prices", cited=True, url="https://bikes.test/r"),
               SourceRef(n=2, source="repair", title="Repairs")]
    inline = CitationPolicy(format="inline")
    text = "E-bikes cost 35 euros a day [1]."
    assert deliverable(text, sources, "footnote", inline) == (
        "E-bikes cost 35 euros a day [1].\n\nSources:\n[1] E-bike rental prices (https://bikes.test/r)")
    assert deliverable(text, sources, "drop", inline) == "E-bikes cost 35 euros a day."
    assert deliverable(text, sources, "structured", inline) == text
    # structured: nothing was numbered, so nothing is appended or taken out
    assert deliverable(text, sources, "footnote", CitationPolicy(format="structured")) == text


async def test_structured_keeps_the_prompt_and_stores_the_sources(services, fake_openai):
    outcome, system, sent, stored = await _turn(services, fake_openai, "E-bikes cost 35 euros a day.")
    assert "E-bike rental prices\nE-bikes cost 35 euros" in system
    assert "[1] E-bike rental prices" not in system and CITE_INSTRUCTION not in system
    assert [(s.n, s.source, s.title) for s in stored.sources][0] == (1, "rent", "E-bike rental prices")
    assert outcome.turn.trace.citations.format == "structured"
    assert sent == ["E-bikes cost 35 euros a day."]


@pytest.mark.parametrize("citations_format", ["inline"])
async def test_inline_numbers_the_context_and_verify_removes_an_invalid_marker(services, fake_openai):
    outcome, system, sent, stored = await _turn(services, fake_openai)
    assert "[1] E-bike rental prices\nE-bikes cost 35 euros per day" in system
    assert system.rstrip().endswith(CITE_INSTRUCTION)
    citations = outcome.turn.trace.citations
    assert (citations.format, citations.cited, citations.invalid) == ("inline", [1], [7])
    assert stored.text == "E-bikes cost 35 euros a day [1]. Helmets are free."
    assert sent == ["E-bikes cost 35 euros a day [1]. Helmets are free."]  # the test channel shows them beside it
    rent = next(s for s in stored.sources if s.source == "rent")
    assert rent.n == 1 and rent.cited and not any(s.cited for s in stored.sources if s.n != 1)
    [trace] = await services.store.conversation_traces(outcome.turn.conversation.id)
    assert trace.citations.invalid == [7]  # stored with the turn, for the console


@pytest.mark.parametrize(("citations_format", "citations_verify"), [("footnote", False)])
async def test_without_verify_an_invalid_marker_stays(services, fake_openai):
    outcome, system, _, stored = await _turn(services, fake_openai)
    assert "[1] E-bike rental prices" in system
    assert stored.text == ANSWER and outcome.turn.trace.citations.invalid == []


@pytest.mark.parametrize("citations_format", ["none"])
async def test_none_stores_no_sources_and_leaves_the_reply_alone(services, fake_openai):
    outcome, system, sent, stored = await _turn(services, fake_openai)
    assert "[1] E-bike" not in system and CITE_INSTRUCTION not in system
    assert stored.sources == [] and stored.text == ANSWER and outcome.turn.trace.citations is None
    assert outcome.turn.hits  # retrieval ran; only citing is off


async def test_the_agent_definition_overrides_the_settings(services, fake_openai):
    await services.agents.patch(services.settings.agent_id, {"config": {"citations": {"format": "inline"}}})
    outcome, system, _, stored = await _turn(services, fake_openai)
    assert "[1] E-bike rental prices" in system and outcome.turn.trace.citations.format == "inline"
    assert outcome.turn.trace.citations.verify is True  # left out: the settings' value
    assert stored.text == "E-bikes cost 35 euros a day [1]. Helmets are free."
