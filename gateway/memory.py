"""Cross-channel memory: the persona's recent messages from every channel, newest kept when cut."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from gateway.models import Message, Persona, Role
from gateway.store import RedisStore

# Read a little more than asked so channel / system filters still leave ``count`` messages.
_OVERFETCH = 4


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
    ) -> list[Message]:
        """Up to ``count`` messages, oldest first, whose texts add up to at most ``max_chars``."""
        persona_id = persona if isinstance(persona, str) else persona.id
        wanted = set(channels) if channels is not None else None
        fetched = await self.store.persona_messages(
            persona_id, newest=count * _OVERFETCH, since=since, until=until
        )
        kept: list[Message] = []
        used = 0
        for message in reversed(fetched):
            if wanted is not None and message.channel not in wanted:
                continue
            if message.role is Role.SYSTEM and not include_system:
                continue
            if len(kept) == count or used + len(message.text) > max_chars:
                break
            kept.append(message)
            used += len(message.text)
        kept.reverse()
        return kept


def format_history(messages: Iterable[Message]) -> str:
    """The transcript form prompts use: one ``User:`` / ``Agent:`` line per message."""
    labels = {Role.USER: "User", Role.AGENT: "Agent", Role.SYSTEM: "System"}
    return "\n".join(f"{labels[m.role]}: {m.text}" for m in messages)
