"""Actions that wait for the customer's yes: a ``confirm: true`` tool the model asked for is proposed,
not called; the next turn of the conversation calls it once on a yes and drops it on anything else.

``pendingtool:<conversation id>`` holds the one proposed action (a newer proposal replaces it) for
``SWITCHBOARD_TOOL_CONFIRM_TTL_S``; the next turn reads it with the turn lock and removes it in the
transaction that journals the call (or drops it), so two turns can never both call it. Its idempotency
key is the proposing turn's (turn id + call index).
"""

from __future__ import annotations

import re

from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from gateway.conversation.store import RedisStore

__all__ = ["CONFIRM_CHOICES", "PendingAction", "PendingActions", "is_yes", "proposal"]

CONFIRM_CHOICES = ("Yes", "No")  # a proposal's buttons, where the channel has them: pressing one says it

_YES = frozenset({"yes", "y", "yeah", "yep", "yup", "ok", "okay", "sure", "confirm", "confirmed", "correct",
                  "go ahead", "please do", "do it", "yes please", "ja", "oui", "si", "sí"})
_FIRST_YES = frozenset({"yes", "yeah", "yep", "ok", "okay", "sure", "confirm", "confirmed"})
_WORDS = re.compile(r"[^\w\s]+")


class PendingAction(BaseModel):
    tool: str  # ``crm.book_table``
    arguments: dict
    key: str  # the idempotency key: the proposing turn's id and the call's index
    turn_id: str


def is_yes(text: str) -> bool:
    words = " ".join(_WORDS.sub(" ", text.lower()).split())
    return words in _YES or (words.split(" ", 1)[0] in _FIRST_YES and len(words.split()) <= 4)


def proposal(description: str, tool: str, arguments: dict) -> str:
    """The proposed action in plain words, and how to answer."""
    what = description.strip().rstrip(".") or tool
    details = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in arguments.items())
    return (f"Before I do this, please confirm: {what}{f' ({details})' if details else ''}. "
            "Reply yes to go ahead, or no to cancel.")


class PendingActions:
    def __init__(self, store: RedisStore, ttl_s: int) -> None:
        self.store = store
        self.ttl_s = ttl_s

    def key(self, conversation_id: str) -> str:
        return self.store.key("pendingtool", conversation_id)

    def propose_into(self, pipe: Pipeline, conversation_id: str, action: PendingAction) -> None:
        pipe.set(self.key(conversation_id), action.model_dump_json(), ex=self.ttl_s)

    def drop_into(self, pipe: Pipeline, conversation_id: str) -> None:
        pipe.delete(self.key(conversation_id))

    async def drop(self, conversation_id: str) -> None:
        await self.store.redis.delete(self.key(conversation_id))
