"""The closing question on SMS and WhatsApp (CSAT): once a conversation has been idle
``SWITCHBOARD_CSAT_AFTER_S`` it is asked ``SWITCHBOARD_CSAT_PROMPT`` (once), and the customer's answer —
1 to 5, or yes (5) / no (1) — within ``SWITCHBOARD_CSAT_WINDOW_S`` is recorded as the conversation's
rating instead of starting a turn. Anything else is an ordinary message, and closes the question.

A turn marks its conversation due in its closing round trip (one ``ZADD`` on a due-set); the ``csat``
timer sweeps the due-set and asks. Only a message that reads as an answer costs a look in Redis (one
Lua call): every other message costs nothing more."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from gateway.conversation.store import RedisStore
from gateway.core.models import Conversation, DeliveryStatus, InboundMessage, Message, Role, utcnow
from gateway.core.settings import Settings
from gateway.insight.counters import DailyCounters, Dims
from gateway.insight.outcomes import CONVERSATION_TTL_S
from gateway.turn.ports import ReplySink

if TYPE_CHECKING:
    from gateway.turn.pipeline import Turn

__all__ = ["CSAT_CHANNELS", "Csat", "score_of"]

log = logging.getLogger(__name__)

CSAT_CHANNELS = frozenset({"twilio_sms", "whatsapp"})
SWEEP_BATCH = 200
_SEP = "\x1f"  # between a due entry's conversation id, channel and identity
_SCORES = {"yes": 5, "y": 5, "no": 1, "n": 1}
_ANSWER = re.compile(r"^\s*([1-5]|yes|no|y|n)\s*(?:/\s*5)?\s*[.!]*\s*$", re.IGNORECASE)

# KEYS: the open question (per channel and customer). ARGV: the answering message's id.
# Closes the question once: answers the conversation it was asked in (and its dims), "" for the message
# that closed it already (a redelivery: it is taken again, nothing more counted), nil for no question.
_TAKE = """
local asked = redis.call('GET', KEYS[1])
if not asked then return nil end
if string.sub(asked, 1, 5) == 'done:' then
  if string.sub(asked, 6) == ARGV[1] then return '' end
  return nil
end
redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'KEEPTTL')
return asked
"""

SinkFor = Callable[[Conversation], Awaitable[ReplySink]]


def score_of(text: str) -> int | None:
    """A closing question's answer as 1-5, or None when the message is not one."""
    found = _ANSWER.match(text)
    if found is None:
        return None
    word = found.group(1).lower()
    return _SCORES.get(word) or int(word)


class Csat:
    def __init__(self, settings: Settings, store: RedisStore, counters: DailyCounters) -> None:
        self.prompt = settings.csat_prompt.strip()
        self.after_s = settings.csat_after_s
        self.window_s = settings.csat_window_s
        self.store = store
        self.counters = counters
        self.sink_for: SinkFor | None = None  # how a conversation is written to (set with the operator desk)
        self.due_key = store.key("insight", "csat", "due")
        self._take = store.redis.register_script(_TAKE)

    @property
    def enabled(self) -> bool:
        return bool(self.prompt)

    @property
    def sweep_period_s(self) -> int:
        return max(1, min(60, self.after_s // 4))

    def asked_key(self, channel: str, identity: str) -> str:
        return self.store.key("insight", "csat", "asked", channel, identity)

    # -- a turn: its conversation is due once idle -------------------------------------------------
    def turn_into(self, pipe, turn: Turn) -> None:
        """Queue the turn's conversation as due in ``after_s`` (a later turn moves it on), and close a
        question the customer answered with something else."""
        inbound = turn.inbound
        if not self.enabled or inbound.channel not in CSAT_CHANNELS:
            return
        entry = _SEP.join((turn.conversation.id, inbound.channel, inbound.identity))
        pipe.zadd(self.due_key, {entry: utcnow().timestamp() + self.after_s})
        pipe.delete(self.asked_key(inbound.channel, inbound.identity))

    # -- the timer ---------------------------------------------------------------------------------
    async def sweep(self) -> int:
        """Ask every conversation idle past ``after_s`` (once each); returns how many were asked."""
        if not self.enabled or self.sink_for is None:
            return 0
        redis = self.store.redis
        asked = 0
        for raw in await redis.zrangebyscore(self.due_key, "-inf", utcnow().timestamp(), start=0, num=SWEEP_BATCH):
            if not await redis.zrem(self.due_key, raw):
                continue  # another sweeper has it
            conversation_id, channel, identity = raw.decode().split(_SEP, 2)
            flags = self.store.key("insight", "conv", conversation_id)
            if not await redis.hsetnx(flags, "csat_asked", 1):
                continue  # asked before: once per conversation
            await redis.expire(flags, CONVERSATION_TTL_S)
            conversation = await self.store.get_conversation(conversation_id)
            if conversation is None:
                continue
            try:
                if await self._ask(conversation, channel, identity):
                    asked += 1
            except Exception:  # the top of one conversation's question: the others are still asked
                log.exception("csat: could not ask conversation %s", conversation_id)
        return asked

    async def _ask(self, conversation: Conversation, channel: str, identity: str) -> bool:
        assert self.sink_for is not None
        sink = await self.sink_for(conversation)
        message = Message(conversation_id=conversation.id, persona_id=conversation.persona_id, role=Role.AGENT,
                          channel=conversation.channel, text=self.prompt, delivery=DeliveryStatus.PENDING)
        report = await sink.deliver(self.prompt)
        message.delivery = DeliveryStatus.DELIVERED if report.delivered else DeliveryStatus.FAILED
        message.delivery_error = report.error
        await self.store.add_message(message)
        if not report.delivered:
            log.warning("csat: the question to conversation %s was not delivered: %s", conversation.id, report.error)
            return False
        raw_dims = await self.store.redis.hget(self.store.key("insight", "conv", conversation.id), "dims")
        dims = raw_dims.decode() if raw_dims else Dims.of(None, conversation.channel, conversation.connection).suffix
        await self.store.redis.set(self.asked_key(channel, identity), f"{conversation.id}{_SEP}{dims}",
                                   ex=self.window_s)
        return True

    # -- the answer --------------------------------------------------------------------------------
    async def take(self, inbound: InboundMessage) -> bool:
        """True when ``inbound`` answers an open closing question: its rating is recorded and it starts no
        turn. Only a message that reads as an answer is looked up."""
        if not self.enabled or inbound.channel not in CSAT_CHANNELS:
            return False
        score = score_of(inbound.text)
        if score is None:
            return False
        asked = await self._take(keys=[self.asked_key(inbound.channel, inbound.identity)],
                                 args=[inbound.external_message_id])
        if asked is None:
            return False
        if asked == b"":
            return True  # a redelivery of the answer: counted the first time
        conversation_id, suffix = asked.decode().split(_SEP, 1)
        pipe = self.store.redis.pipeline(transaction=False)
        pipe.hset(self.store.key("insight", "conv", conversation_id), "csat", score)
        self.counters.add_into(pipe, utcnow(), Dims.parse(suffix), {"csat": 1, "csat_sum": score})
        await pipe.execute()
        log.info("csat: conversation %s rated %d", conversation_id, score)
        return True

    async def sweep_fired(self) -> None:
        if asked := await self.sweep():
            log.info("csat: asked %d conversation(s) the closing question", asked)
