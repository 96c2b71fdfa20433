"""A reply is recorded before it is sent, so a resumed turn never answers twice.

A turn consumer can die between sending a reply and storing it. Before its first send a turn records
the text it is about to deliver (``begin``); a turn resumed after a crash finds that record and, on a
channel with no idempotency key, does not send it again (the user most likely has it: the record was
made an instant before the send) — it only records it. A channel that takes an idempotency key
(``IdempotentSink``: Twilio) resends it under the same key and the vendor drops the duplicate.

With a ``Fence`` the record is made only while this consumer still owns the turn's inbox entry (the
consumer group's pending list names its owner): a consumer that stalled past the reclaim time and
lost its entry to another gets ``TurnFenced`` instead, and sends and stores nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

from gateway.conversation.store import RedisStore
from gateway.core.errors import TurnFenced

__all__ = ["Fence", "Gate", "HandedOff", "PlannedReply", "ReplyIntents", "SendIntent"]

INTENT_TTL_S = 24 * 3600  # as long as an accepted inbox turn is kept for resuming

# KEYS: intent, handoff state, handoff gate[, stream]
# ARGV: text, ttl s, gate holder ('' = no gate), gate ttl ms[, group, entry id, consumer]
# {-2}: handed off (nothing taken); {-1}: fenced; {0, earlier}: resumed; {1}: the first record.
_BEGIN = """
if ARGV[3] ~= '' and redis.call('EXISTS', KEYS[2]) == 1 then
  return {-2}
end
if #KEYS == 4 then
  local pending = redis.call('XPENDING', KEYS[4], ARGV[5], ARGV[6], ARGV[6], 1)
  if #pending == 0 or pending[1][2] ~= ARGV[7] then
    return {-1}
  end
end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
end
local earlier = redis.call('GET', KEYS[1])
if earlier then
  return {0, earlier}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return {1}
"""


@dataclass(frozen=True)
class Fence:
    """The inbox entry a consumer runs a turn for: it may act only while the group says it owns it."""

    stream: str
    group: str
    entry_id: str
    consumer: str


@dataclass(frozen=True)
class Gate:
    """A conversation's handoff gate, taken with the intent: a bot reply is delivered only while it holds it."""

    state_key: str
    gate_key: str
    holder: str
    ttl_ms: int


class HandedOff(Exception):  # noqa: N818 - a state, not a failure: the operator answers this message
    """The gate could not be taken: the conversation is handed off."""


class SendIntent(Enum):
    FIRST = "first"  # nothing was sent for this turn before: send
    RESUMED = "resumed"  # an earlier run recorded this reply and may have sent it


@dataclass(frozen=True)
class PlannedReply:
    """The reply a turn is about to send, and the id its stored message has (reused on resume)."""

    message_id: str
    text: str

    def dump(self) -> str:
        return json.dumps({"message_id": self.message_id, "text": self.text})

    @classmethod
    def load(cls, raw: bytes | str) -> PlannedReply:
        return cls(**json.loads(raw))


class ReplyIntents:
    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self._begin = store.redis.register_script(_BEGIN)

    def _key(self, turn_id: str) -> str:
        return self.store.key("turn", turn_id, "reply")

    async def earlier(self, turn_id: str) -> PlannedReply | None:
        """The reply an earlier run of this turn recorded before sending it, if any."""
        return self.parse(await self.store.redis.get(self._key(turn_id)))

    def earlier_into(self, pipe, turn_id: str) -> None:
        """Queue ``earlier``'s read in ``pipe``; ``parse`` its answer."""
        pipe.get(self._key(turn_id))

    @staticmethod
    def parse(raw: bytes | str | None) -> PlannedReply | None:
        return None if raw is None else PlannedReply.load(raw)

    async def begin(self, turn_id: str, reply: PlannedReply, fence: Fence | None = None,
                    gate: Gate | None = None) -> tuple[SendIntent, PlannedReply]:
        """Record ``reply`` as this turn's; returns whether it is the first record, and the reply that stands.
        With ``gate``, in the same round trip: take the conversation's handoff gate first (``HandedOff``
        when an operator has it, and nothing is recorded)."""
        keys = [self._key(turn_id), gate.state_key if gate else "", gate.gate_key if gate else ""]
        args = [reply.dump(), INTENT_TTL_S, gate.holder if gate else "", gate.ttl_ms if gate else 0]
        if fence is not None:
            keys.append(fence.stream)
            args += [fence.group, fence.entry_id, fence.consumer]
        answer = await self._begin(keys=keys, args=args)
        if int(answer[0]) == -2:
            raise HandedOff(f"turn {turn_id}: the conversation was handed off while the turn ran")
        if int(answer[0]) < 0:
            raise TurnFenced(f"turn {turn_id}: its inbox entry was taken over by another consumer")
        if int(answer[0]) == 0:
            return SendIntent.RESUMED, PlannedReply.load(answer[1])
        return SendIntent.FIRST, reply
