"""PrepareRagContext inside real turns: hybrid_llm selection through the fake LLM, the rag attribute,
the placeholder, fallbacks, and the voice path as an RQ job."""

from __future__ import annotations

import asyncio

import pytest

from gateway.core.models import InboundMessage, new_id, utcnow
from gateway.services import Services
from rag_core.strategies.llm_select import SELECTED_NOTHING
from rag_core.topic import Topic
from tests.sinks import RecordingSink as Sink

TOPICS = [
    Topic(source="hours", title="Opening hours", facts=["open 9 to 5", "closed Sundays"],
          summary="We are open 9:00-17:00 Monday to Saturday."),
    Topic(source="rent", title="E-bike rental prices", facts=["35 euros per day"],
          summary="E-bikes cost 35 euros per day, helmet included."),
    Topic(source="repair", title="Repairs", facts=["flat tyre 12 euros"], summary="A flat tyre repair is 12 euros."),
]


@pytest.fixture
async def services(settings):
    built = Services.build(settings.model_copy(update={"rag_top_k": 3}))
    await built.knowledge.kb.upsert_many(TOPICS)
    await built.start()
    built.register_jobs(asyncio.get_running_loop())
    yield built
    built.unregister_jobs()
    await built.aclose()


def inbound(text, identity="test:u1", channel="test"):
    return InboundMessage(channel=channel, external_user_id="u1", external_message_id=new_id(),
                          identity=identity, text=text)


def selection(*ids):
    padded = [*ids, "none", "none", "none"][:3]
    return {"search_result": {f"article_id_{i + 1}": v for i, v in enumerate(padded)}}


async def test_chat_turn_selects_articles_and_fills_the_placeholder(services, fake_openai):
    fake_openai.script_json(selection("rent", "does-not-exist", "rent"))
    fake_openai.script_reply("It is 35 euros a day.")
    outcome = await services.pipeline.handle(inbound("How much is an e-bike?"), Sink())
    search_call, reply_call = fake_openai.chat_requests()
    prompt = search_call["body"]["messages"][0]["content"]
    assert prompt.startswith("You are the search assistant.")
    assert "<ConversationHistory>\nUser: How much is an e-bike?\n</ConversationHistory>" in prompt
    assert "article_id: rent" in prompt and "article_title: E-bike rental prices" in prompt
    rag = "E-bike rental prices\nE-bikes cost 35 euros per day, helmet included.\n\n---\n\n"
    assert await services.persona_attributes.get(outcome.turn.persona.id, "rag") == rag
    system = reply_call["body"]["messages"][0]["content"]
    assert rag.strip() in system and "<||rag_placeholder||>" not in system
    retrieval = outcome.turn.trace.retrieval
    assert retrieval.strategy == "hybrid_llm" and retrieval.selected == ["rent"]  # unknown + duplicate dropped
    assert retrieval.candidates[0].source == "rent"  # the hybrid pre-filter ranked it first


async def test_nothing_selected_falls_back_to_the_hybrid_ranking_and_says_so(services, fake_openai):
    fake_openai.script_json(selection())
    outcome = await services.pipeline.handle(inbound("How much is a flat tyre repair?"), Sink())
    search, reply = fake_openai.chat_requests()
    assert "article_id: repair" in search["body"]["messages"][0]["content"]
    system = reply["body"]["messages"][0]["content"]
    assert "A flat tyre repair is 12 euros." in system and "No additional information" not in system
    retrieval = outcome.turn.trace.retrieval
    assert retrieval.selected[0] == "repair"
    assert retrieval.fallback == SELECTED_NOTHING  # the trace says why the ranking stood


async def test_nothing_selected_and_nothing_above_the_threshold_gives_no_additional_information(settings, fake_openai):
    built = Services.build(settings.model_copy(update={"rag_top_k": 3, "relevance_threshold": 0.999}))
    await built.knowledge.kb.upsert_many(TOPICS)
    await built.start()
    try:
        fake_openai.script_json(selection())
        outcome = await built.pipeline.handle(inbound("Tell me a joke"), Sink())
        assert "No additional information" in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
        assert outcome.turn.trace.retrieval.selected == []
        assert outcome.turn.trace.retrieval.fallback  # the trace says the model picked nothing
    finally:
        await built.aclose()


async def test_invalid_selection_falls_back_to_hybrid_and_says_so(services, fake_openai):
    fake_openai.script_json("not json")
    fake_openai.script_json({"search_result": "nope"})
    outcome = await services.pipeline.handle(inbound("flat tyre repair price"), Sink())
    retrieval = outcome.turn.trace.retrieval
    assert retrieval.fallback and retrieval.selected[0] == "repair"
    assert "A flat tyre repair is 12 euros." in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]


async def test_voice_turn_runs_rag_as_a_job_on_the_rag_queue(services, fake_openai):
    services.worker = None  # make sure nothing but our own burst worker runs the queue
    fake_openai.script_json(selection("hours"))
    call = inbound("when do you open", "phone:+15550100", "twilio_voice")
    turn = await services.pipeline.accept(call, rag_mode="queued")
    queue = services.queues["rag"]

    async def work_queue():
        from gateway.jobs.worker import ThreadWorker

        await asyncio.sleep(0.05)
        await asyncio.to_thread(ThreadWorker([queue], connection=services.redis_sync).work, burst=True)

    worker = asyncio.create_task(work_queue())
    outcome = await services.pipeline.run(turn, Sink())
    await worker
    assert outcome.turn.trace.retrieval.selected == ["hours"]
    assert "We are open 9:00-17:00" in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    # The job's selection call is counted with the turn's reply, at the call's channel (insight's cost).
    today = utcnow().date()
    [day] = await services.insight.counters.read(today, today, (None, "twilio_voice", None))
    reply = outcome.turn.trace.usage
    assert outcome.turn.trace.model_calls == []  # the selection ran in the job, not in the turn's task
    assert day.counts["prompt"] == reply.prompt_tokens + 11  # the fake model server reports 11 a call
    assert day.counts["completion"] > reply.completion_tokens


async def test_voice_turn_goes_on_with_the_stored_context_when_the_job_is_late(settings, fake_openai):
    services = Services.build(settings.model_copy(update={"rag_voice_wait_ms": 100}), run_worker=False)
    await services.start()
    try:
        persona = await services.store.resolve_persona("phone:+15550101")
        await services.persona_attributes.set(persona.id, "rag", "Repairs\nA flat tyre repair is 12 euros.\n\n---\n\n")
        call = inbound("and the price?", "phone:+15550101", "twilio_voice")
        turn = await services.pipeline.accept(call, rag_mode="queued")
        outcome = await services.pipeline.run(turn, Sink())  # no worker runs the rag queue
        assert outcome.turn.trace.retrieval.strategy == "queued"
        assert "used the stored context" in outcome.turn.trace.retrieval.skipped
        assert "A flat tyre repair is 12 euros." in fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
        assert services.queues["rag"].count == 1  # the job is still there for a worker to pick up
    finally:
        await services.aclose()


async def test_knowledge_base_down_means_reply_without_rag(services, fake_openai):
    services.knowledge.client.close()  # Qdrant gone
    outcome = await services.pipeline.handle(inbound("hello"), Sink())
    assert outcome.reply.text == "echo: hello"
    assert "knowledge base unavailable" in outcome.turn.trace.retrieval.skipped


async def test_a_call_that_starts_with_history_queues_its_context_only_on_a_queued_channel(services):
    services.channel_context().rag_modes.update({"twilio_voice": "queued", "twilio_sms": "inline"})
    await services.pipeline.handle(inbound("how much is an e-bike", "phone:+15550102", "twilio_sms"), Sink())
    queue = services.queues["rag"]
    assert queue.count == 0  # a text channel: its turns prepared context inline
    await services.pipeline.accept(inbound("hello", "phone:+15550102", "twilio_voice"), rag_mode="queued")
    assert queue.count == 1
    [job] = queue.jobs
    assert job.args[1:] == ("prepare_rag_context", job.args[2], "how much is an e-bike", job.args[4],
                            None, "twilio_voice", None)  # where its model calls are counted
