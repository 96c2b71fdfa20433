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

__all__ = ["Fence", "PlannedReply", "ReplyIntents", "SendIntent"]

INTENT_TTL_S = 24 * 3600  # as long as an accepted inbox turn is kept for resuming

# KEYS: intent[, stream]   ARGV: text, ttl s[, group, entry id, consumer]
_BEGIN = """
if #KEYS == 2 then
  local pending = redis.call('XPENDING', KEYS[2], ARGV[3], ARGV[4], ARGV[4], 1)
  if #pending == 0 or pending[1][2] ~= ARGV[5] then
    return {-1}
  end
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
        raw = await self.store.redis.get(self._key(turn_id))
        return None if raw is None else PlannedReply.load(raw)

    async def begin(self, turn_id: str, reply: PlannedReply,
                    fence: Fence | None = None) -> tuple[SendIntent, PlannedReply]:
        """Record ``reply`` as this turn's; returns whether it is the first record, and the reply that stands."""
        keys, args = [self._key(turn_id)], [reply.dump(), INTENT_TTL_S]
        if fence is not None:
            keys.append(fence.stream)
            args += [fence.group, fence.entry_id, fence.consumer]
        answer = await self._begin(keys=keys, args=args)
        if int(answer[0]) < 0:
            raise TurnFenced(f"turn {turn_id}: its inbox entry was taken over by another consumer")
        if int(answer[0]) == 0:
            return SendIntent.RESUMED, PlannedReply.load(answer[1])
        return SendIntent.FIRST, reply
