"""Conversation meta: a queued job after each turn asks the LLM (structured) and stores the result."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

from gateway.core.models import InboundMessage, utcnow
from gateway.turn.ports import DeliveryReport
from tests.gateway.live.conftest import eventually

META = {
    "name": "Ada Lovelace",
    "contact": {"email": "ada@example.com", "phone": None},
    "intent": "book a sea-view room for 3 nights",
    "stage": "booking",
    "preferences": ["sea view", "quiet floor"],
    "summary": "Ada wants a sea-view room from 2 March.",
}


@dataclass
class CollectingSink:
    channel: str = "webchat"
    streaming: bool = False
    delivered: list[str] = field(default_factory=list)

    async def delta(self, text: str) -> None:
        raise AssertionError("not streaming")

    async def deliver(self, text: str) -> DeliveryReport:
        self.delivered.append(text)
        return DeliveryReport(delivered=True)


def _inbound(text: str, n: int) -> InboundMessage:
    return InboundMessage(channel="webchat", external_user_id="u1", external_message_id=f"m{n}",
                          identity="web:meta-test", text=text)


async def test_meta_is_extracted_after_a_turn_and_feeds_the_next_prompt(worker_services, fake_openai):
    services = worker_services
    fake_openai.script_reply("Happy to help, Ada. Which dates?")
    fake_openai.script_json(META)
    sink = CollectingSink()
    outcome = await services.pipeline.handle(
        _inbound("Hi, I'm Ada Lovelace (ada@example.com). I'd like a quiet sea-view room.", 1), sink)
    assert sink.delivered == ["Happy to help, Ada. Which dates?"]
    persona_id = outcome.turn.persona.id
    meta = await eventually(lambda: services.persona_attributes.get(persona_id, "conversation_meta"))
    assert meta == (
        "name: Ada Lovelace\nemail: ada@example.com\nintent: book a sea-view room for 3 nights\n"
        "stage: booking\npreferences: sea view; quiet floor\nsummary: Ada wants a sea-view room from 2 March."
    )
    extraction = fake_openai.chat_requests()[-1]["body"]
    assert extraction["response_format"]["type"] == "json_schema"
    assert extraction["temperature"] == 0.2
    prompt = extraction["messages"][0]["content"]
    assert "User: Hi, I'm Ada Lovelace (ada@example.com)" in prompt
    assert "Agent: Happy to help, Ada. Which dates?" in prompt
    assert "No notes yet." in prompt
    # The next turn's prompt carries the meta inside <ConversationMeta>.
    fake_openai.script_reply("Noted.")
    fake_openai.script_json({**META, "stage": "deciding"})
    await services.pipeline.handle(_inbound("From 2 March please", 2), sink)
    turn_prompt = [r for r in fake_openai.chat_requests() if "response_format" not in r["body"]][-1]
    system = turn_prompt["body"]["messages"][0]["content"]
    assert "<ConversationMeta>\nname: Ada Lovelace\nemail: ada@example.com" in system
    # And the second extraction was given the current notes to update.
    await eventually(lambda: len(fake_openai.chat_requests()) == 4)
    second = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "<CurrentNotes>\nname: Ada Lovelace" in second
    assert await eventually(
        lambda: _has(services.persona_attributes.get(persona_id, "conversation_meta"), "stage: deciding"))


async def _has(value, fragment):
    return fragment in await value


async def test_without_an_llm_nothing_is_extracted(live_settings, clock):
    from gateway.services import Services

    settings = live_settings.model_copy(update={"llm_api_key": None, "llm_base_url": "https://api.openai.com/v1"})
    services = Services.build(settings, run_worker=False, clock=clock)
    try:
        outcome = await services.pipeline.handle(_inbound("Hi, I'm Ada", 1), CollectingSink())
        assert await services.live.conversation_meta.extract(outcome.turn.persona.id) is None
        assert services.queues["jobs"].count == 0
        assert await services.persona_attributes.get(outcome.turn.persona.id, "conversation_meta") == ""
    finally:
        await services.aclose()


def test_schema_is_strict_json_schema():
    from gateway.live.conversation_meta import SCHEMA

    assert SCHEMA["additionalProperties"] is False
    assert set(SCHEMA["required"]) == set(SCHEMA["properties"])
    json.dumps(SCHEMA)


async def test_a_burst_of_turns_queues_one_extraction_once_its_delay_has_passed(services, clock, fake_openai):
    from gateway.core.events import TurnCompleted

    meta = services.live.conversation_meta
    meta.delay_s = 30
    jobs = services.queues["jobs"]
    persona = await services.store.resolve_persona("web:burst")
    for n in range(3):
        await meta.on_turn_completed(TurnCompleted(persona.id, "c1", f"t{n}"))
        clock.advance(timedelta(seconds=5))
    assert await meta.sweep() == 0 and jobs.count == 0  # 15 s after the first turn: not yet
    clock.advance(timedelta(seconds=16))
    assert await meta.sweep() == 1
    [job] = jobs.get_jobs()
    assert job.func_name == "gateway.jobs.registry.run_job" and job.args[1:] == ("extract_meta", persona.id)
    assert await meta.sweep() == 0  # taken off the due-set: a second sweep queues nothing
    # A turn after that marks the persona due again.
    fake_openai.script_json(META)
    assert "Ada Lovelace" in await meta.extract(persona.id)
    # the extraction's model call (a job's, outside any turn) is counted in insight's tokens, with no channel
    today = utcnow().date()
    [day] = await services.insight.counters.read(today, today, (None, None, None))
    assert day.counts["prompt"] == 11 and day.counts["completion"] > 0  # what the fake model server reports
    await meta.on_turn_completed(TurnCompleted(persona.id, "c1", "t3"))
    clock.advance(timedelta(seconds=31))
    assert await meta.sweep() == 1 and jobs.count == 2


async def test_the_sweep_runs_on_its_timer(services):
    from gateway.live.conversation_meta import TIMER

    timer = services.live.timers.timers[TIMER]
    slot = await timer.following(services.live.clock.now())
    assert slot.id.startswith(f"sweep{services.settings.conversation_meta_sweep_s}s-")
