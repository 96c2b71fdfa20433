"""Cross-channel memory: the persona's recent messages from every channel, newest kept when cut."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from gateway.conversation.store import RedisStore
from gateway.core.models import Message, Persona, Role

# Read a little more than asked so channel / system filters usually leave ``count`` messages;
# read again, wider, only when they did not.
_MARGIN = 6


class Memory:
    def __init__(self, store: RedisStore) -> None:
        self.store = store

    async def get_memory(
        self,
        persona: Persona | str,
        count: int = 15,
        max_chars: int = 10_000,
        channels: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        include_system: bool = False,
        fetched: list[Message] | None = None,
    ) -> list[Message]:
        """Up to ``count`` messages, oldest first, whose texts add up to at most ``max_chars``. ``fetched``
        is what ``read_into`` read for the same ``count`` and ``since`` in someone's round trip (read
        again, wider, only when filters leave too few)."""
        persona_id = persona if isinstance(persona, str) else persona.id
        wanted = set(channels) if channels is not None else None
        window = count + _MARGIN
        while True:
            if fetched is None:
                fetched = await self.store.persona_messages(persona_id, newest=window, since=since, until=until)
            kept, cut = _newest(fetched, count, max_chars, wanted, include_system)
            if len(kept) == count or cut or len(fetched) < window:
                return kept
            window *= 4
            fetched = None

    def read_into(self, pipe, persona_id: str, count: int, since: datetime | None = None) -> None:
        """Queue the read ``get_memory(count=count, since=since)`` starts with; ``parse`` its answer."""
        self.store.persona_messages_into(pipe, persona_id, newest=count + _MARGIN, since=since)

    def parse(self, raws: list[bytes]) -> list[Message]:
        return self.store.messages_of(raws)


def _newest(
    messages: list[Message], count: int, max_chars: int, wanted: set[str] | None, include_system: bool
) -> tuple[list[Message], bool]:
    """The newest messages that pass the filters, oldest first, and whether the character limit cut them."""
    kept: list[Message] = []
    used = 0
    for message in reversed(messages):
        if wanted is not None and message.channel not in wanted:
            continue
        if message.role is Role.SYSTEM and not include_system:
            continue
        if len(kept) == count:
            break
        if used + len(message.text) > max_chars:
            kept.reverse()
            return kept, True
        kept.append(message)
        used += len(message.text)
    kept.reverse()
    return kept, False


def format_history(messages: Iterable[Message]) -> str:
    """The transcript form prompts use: one ``User:`` / ``Agent:`` line per message."""
    labels = {Role.USER: "User", Role.AGENT: "Agent", Role.OPERATOR: "Operator", Role.SYSTEM: "System"}
    return "\n".join(f"{labels[m.role]}: {m.text}" for m in messages)
