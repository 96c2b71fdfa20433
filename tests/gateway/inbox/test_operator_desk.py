"""Handoff in process: the bot is silent while a person answers, a turn already running when the
conversation is taken over is not delivered, the user (or the model) can ask for a person, an idle
handoff returns to the bot with a note, and the bot sees the operator's words afterwards."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.core.errors import Conflict, InvalidInput
from gateway.core.models import InboundMessage, Role
from gateway.inbox.operator_desk import CannotHandOff
from gateway.services import Services
from gateway.turn.ports import Capabilities
from tests.sinks import RecordingSink

CHANNEL = "test"


@pytest.fixture
async def services(settings):
    services = Services.build(settings)
    # A channel that can be handed off, whose operator replies are recorded like the bot's.
    services.pipeline.capabilities[CHANNEL] = Capabilities(max_length=4000)
    services.pipeline.capabilities["phone"] = Capabilities(max_length=4000, voice=True, handoff=False)
    operator_sent: list[str] = []
    services.direct_sinks[CHANNEL] = lambda conversation: RecordingSink(operator_sent)
    services.operator_sent = operator_sent
    yield services
    await services.aclose()


def inbound(text: str, n: int, channel: str = CHANNEL) -> InboundMessage:
    return InboundMessage(channel=channel, external_user_id="u", external_message_id=f"m{n}-{time.time_ns()}",
                          identity=f"{channel}:u1", text=text)


async def turn(services: Services, text: str, n: int, sent: list[str], channel: str = CHANNEL):
    accepted = await services.pipeline.accept(inbound(text, n, channel))
    return await services.pipeline.run(accepted, RecordingSink(sent))


async def test_taken_over_the_bot_is_silent_the_operator_replies_and_the_bot_sees_it_after(services, fake_openai):
    sent: list[str] = []
    first = await turn(services, "hello", 1, sent)
    conversation_id = first.turn.conversation.id
    desk = services.desk

    await desk.take_over(conversation_id, "ann")
    quiet = await turn(services, "is anyone there?", 2, sent)
    assert quiet.suppressed and sent == ["echo: hello"]
    assert "handed off to ann" in quiet.turn.trace.suppressed
    with pytest.raises(Conflict, match="ann has taken over"):
        await desk.send(conversation_id, "bob", "me too")
    with pytest.raises(InvalidInput):
        await desk.send(conversation_id, "ann", "   ")
    reply = await desk.send(conversation_id, "ann", "Hi, Ann here. Your order ships today.")
    assert services.operator_sent == ["Hi, Ann here. Your order ships today."]
    assert reply.role is Role.OPERATOR and reply.delivery.value == "delivered"

    await desk.hand_back(conversation_id, "ann")
    with pytest.raises(Conflict, match="Take over"):
        await desk.send(conversation_id, "ann", "too late")
    await turn(services, "thanks!", 3, sent)
    assert sent[-1] == "echo: thanks!"
    prompt = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert {"role": "assistant", "content": "Hi, Ann here. Your order ships today."} in prompt
    assert {"role": "user", "content": "is anyone there?"} in prompt
    roles = [m.role for m in await services.store.conversation_messages(conversation_id)]
    assert roles == [Role.USER, Role.AGENT, Role.SYSTEM, Role.USER, Role.OPERATOR, Role.SYSTEM, Role.USER, Role.AGENT]
    assert len(fake_openai.chat_requests()) == 2  # nothing was asked of the model while handed off


async def test_a_turn_running_when_taken_over_is_not_delivered(services, fake_openai):
    sent: list[str] = []
    first = await turn(services, "hi", 1, sent)
    fake_openai.script_reply("the bot's late answer", delay_s=0.8)
    running = asyncio.create_task(turn(services, "what are your hours?", 2, sent))
    for _ in range(100):  # the model has the request: the turn is past its start-of-turn check
        if len(fake_openai.chat_requests()) == 2:
            break
        await asyncio.sleep(0.02)
    await services.desk.take_over(first.turn.conversation.id, "ann")
    outcome = await running
    assert outcome.suppressed and sent == ["echo: hi"]
    trace = await services.store.get_trace(outcome.turn.trace.turn_id)
    assert trace.suppressed.startswith("handed off to ann") and trace.reply == "the bot's late answer"
    assert trace.agent_message_id is None
    texts = [m.text for m in await services.store.conversation_messages(first.turn.conversation.id)]
    assert "the bot's late answer" not in texts and "what are your hours?" in texts


async def test_asking_for_a_person_hands_off_without_asking_the_model(services, fake_openai):
    sent: list[str] = []
    outcome = await turn(services, "Can I please TALK TO A   HUMAN?", 1, sent)
    assert sent == [services.settings.handoff_message]
    assert fake_openai.chat_requests() == []
    state = await services.handoffs.get(outcome.turn.conversation.id)
    assert state.status == "waiting" and state.operator is None
    assert outcome.turn.trace.handoff == "the user asked for a person"
    assert (await turn(services, "hello?", 2, sent)).suppressed and len(sent) == 1
    assert outcome.turn.conversation.id in await services.handoffs.listed()


async def test_the_model_can_ask_for_a_person_and_the_marker_is_never_sent(services, fake_openai):
    sent: list[str] = []
    fake_openai.script_reply("I'll get a colleague to check your refund. [HANDOFF]")
    outcome = await turn(services, "my refund is wrong", 1, sent)
    assert sent == ["I'll get a colleague to check your refund."]
    assert (await services.handoffs.get(outcome.turn.conversation.id)).status == "waiting"
    assert outcome.turn.trace.handoff == "the model asked for a person"


async def test_an_idle_handoff_returns_to_the_bot_with_a_note(services, fake_openai):
    sent: list[str] = []
    first = await turn(services, "hi", 1, sent)
    conversation_id = first.turn.conversation.id
    await services.desk.take_over(conversation_id, "ann")
    assert await services.desk.return_idle() == 0  # just taken over: not idle
    # Ann's last action was longer ago than SWITCHBOARD_HANDOFF_IDLE_S.
    await services.redis.hset(services.store.key("handoff", conversation_id), "touched",
                              time.time() - services.settings.handoff_idle_s - 1)
    await services.redis.zadd(services.store.key("handoffs"), {conversation_id: 0})
    assert await services.desk.return_idle() == 1
    assert await services.handoffs.get(conversation_id) is None
    last = (await services.store.conversation_messages(conversation_id))[-1]
    assert last.role is Role.SYSTEM and last.text == services.settings.handoff_return_note
    await turn(services, "back?", 2, sent)
    assert sent[-1] == "echo: back?"


async def test_a_phone_call_cannot_be_taken_over_and_another_operator_cannot_steal_one(services):
    call = await turn(services, "hello", 1, [], channel="phone")
    with pytest.raises(CannotHandOff, match="phone call cannot be taken over mid-call"):
        await services.desk.take_over(call.turn.conversation.id, "ann")
    chat = await turn(services, "hello", 2, [])
    await services.desk.take_over(chat.turn.conversation.id, "ann")
    with pytest.raises(Conflict, match="ann has already taken over"):
        await services.desk.take_over(chat.turn.conversation.id, "bob")
