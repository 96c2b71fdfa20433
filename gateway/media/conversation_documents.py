"""Documents sent in a conversation, kept for that conversation only (issue 44): their extracted text is
held in Redis under the conversation's key until it goes idle (``SWITCHBOARD_INACTIVITY_TIMEOUT_S``), and
each of its turns gives the latest few to the model — a follow-up question about the invoice still sees
it (while the message that brought it is in the turn's memory window). Never a knowledge base, never a file."""

from __future__ import annotations

import json
import logging

from gateway.conversation.store import RedisStore
from gateway.turn.media_parts import TurnMedia
from gateway.turn.pipeline import Turn

__all__ = ["ConversationDocuments"]

log = logging.getLogger(__name__)
KEPT = 3  # the latest documents a conversation's turns see
DOCUMENT_NOTE = "a document "  # how a user message's ``media`` note names a document (``ChatMedia``)


class ConversationDocuments:
    """Stores a conversation's documents, and (a context preparer) gives them to each of its turns."""

    def __init__(self, store: RedisStore, ttl_s: int) -> None:
        self.store = store
        self.ttl_s = ttl_s

    def _key(self, conversation_id: str) -> str:
        return self.store.key("conv", conversation_id, "documents")

    async def add(self, conversation_id: str, documents: list[tuple[str, str]]) -> None:
        key = self._key(conversation_id)
        pipe = self.store.redis.pipeline(transaction=False)
        for name, text in documents:
            pipe.rpush(key, json.dumps({"name": name, "text": text}))
        pipe.ltrim(key, -KEPT, -1)
        pipe.expire(key, self.ttl_s)
        await pipe.execute()

    async def prepare(self, turn: Turn) -> None:
        # Read only for a conversation whose recent messages include a document: other turns cost nothing
        if not any(m.media and DOCUMENT_NOTE in m.media and m.conversation_id == turn.conversation.id
                   for m in turn.recent):
            return
        raw = await self.store.redis.lrange(self._key(turn.conversation.id), 0, -1)
        if not raw:
            return
        kept = [json.loads(item) for item in raw]
        documents = tuple((d["name"], d["text"]) for d in kept)
        current = turn.media or TurnMedia()
        # the turn's own documents are among them (stored when it was accepted): each given once
        earlier = tuple(d for d in documents if d not in current.documents)
        turn.media = TurnMedia(current.images, earlier + current.documents, current.remarks)
