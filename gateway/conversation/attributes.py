"""Typed key/value attributes: per persona (``rag``, ``conversation_meta`` …) and per customer/project.

An attribute is declared once with an ``AttributeSpec`` (type, default, whether the session end
clears it); values are validated on write so a bad value is refused and the old one stays. Text is repaired
(lone surrogates become U+FFFD) on write and on read, so one bad value never breaks a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError
from redis.exceptions import WatchError

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput, NotFound
from gateway.core.events import AttributeChanged, EventBus
from rag_core.clean_text import scrub_deep


@dataclass(frozen=True)
class AttributeSpec:
    name: str
    type: Any = str
    default: Any = ""
    description: str = ""
    session_scoped: bool = False  # cleared on conversation_ended
    private: bool = False  # written by the system, read-only through the API
    check: Callable[[Any], Any] | None = None  # extra validation, raises ValueError with the reason
    _adapter: TypeAdapter = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_adapter", TypeAdapter(self.type))

    def validate(self, value: Any) -> Any:
        try:
            parsed = self._adapter.validate_python(scrub_deep(value))
            if self.check is not None:
                parsed = self.check(parsed)
        except (ValidationError, ValueError, TypeError) as exc:
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise InvalidInput(f"attribute {self.name!r}: {reason}") from exc
        return parsed

    def dump(self, value: Any) -> str:
        return json.dumps(self._adapter.dump_python(value, mode="json"))


RAG = AttributeSpec("rag", description="knowledge-base context for this session", session_scoped=True)
CONVERSATION_META = AttributeSpec("conversation_meta", description="what is known about the user and conversation")
CUSTOM_PROMPT_SECTION = AttributeSpec("custom_prompt_section", description="named sections injected into the prompt")


class _AttributeHash:
    def __init__(self, store: RedisStore, specs: Mapping[str, AttributeSpec], what: str) -> None:
        self.store = store
        self.specs = specs
        self.what = what

    def spec(self, name: str) -> AttributeSpec:
        try:
            return self.specs[name]
        except KeyError:
            raise NotFound(f"unknown {self.what} attribute {name!r}") from None

    async def _get(self, key: str, name: str) -> Any:
        spec = self.spec(name)
        raw = await self.store.redis.hget(key, name)
        return spec.default if raw is None else scrub_deep(json.loads(raw))

    async def _all(self, key: str) -> dict[str, Any]:
        return self.values(await self.store.redis.hgetall(key))

    def values(self, raw: Mapping[bytes, bytes]) -> dict[str, Any]:
        """Every attribute from the hash as HGETALL answered it (read in someone's pipeline), defaults filled in."""
        values = {name: spec.default for name, spec in self.specs.items()}
        # Repaired on read too: a value stored before invalid text was refused must not break every turn.
        values.update({k.decode(): scrub_deep(json.loads(v)) for k, v in raw.items() if k.decode() in self.specs})
        return values

    async def _set(self, key: str, name: str, value: Any) -> Any:
        spec = self.spec(name)
        parsed = spec.validate(value)
        await self.store.redis.hset(key, name, spec.dump(parsed))
        return parsed

    async def _update(self, key: str, name: str, change: Callable[[Any], Any]) -> Any:
        """Read, change and write one value atomically (WATCH/MULTI): a write that lands between the
        read and the write makes the change run again on the new value, so no concurrent edit is lost."""
        spec = self.spec(name)
        async with self.store.redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    raw = await pipe.hget(key, name)
                    parsed = spec.validate(change(spec.default if raw is None else scrub_deep(json.loads(raw))))
                    pipe.multi()
                    pipe.hset(key, name, spec.dump(parsed))
                    await pipe.execute()
                    return parsed
                except WatchError:
                    continue


class PersonaAttributes(_AttributeHash):
    def __init__(self, store: RedisStore, specs: Mapping[str, AttributeSpec]) -> None:
        super().__init__(store, specs, "persona")

    def _key(self, persona_id: str) -> str:
        return self.store.key("persona", persona_id, "attrs")

    def key(self, persona_id: str) -> str:
        """The persona's hash, for a caller that reads it in its own pipeline (then ``values``)."""
        return self._key(persona_id)

    async def get(self, persona_id: str, name: str) -> Any:
        return await self._get(self._key(persona_id), name)

    async def all(self, persona_id: str) -> dict[str, Any]:
        return await self._all(self._key(persona_id))

    async def set(self, persona_id: str, name: str, value: Any) -> Any:
        return await self._set(self._key(persona_id), name, value)

    def get_into(self, pipe, persona_id: str, name: str) -> None:
        """Queue ``get``'s read in ``pipe``; ``parse`` its answer."""
        self.spec(name)
        pipe.hget(self._key(persona_id), name)

    def parse(self, name: str, raw: bytes | None) -> Any:
        return self.spec(name).default if raw is None else scrub_deep(json.loads(raw))

    def set_into(self, pipe, persona_id: str, name: str, value: Any) -> Any:
        """Queue ``set``'s write in ``pipe`` (a turn's closing round trip); the value is checked now."""
        spec = self.spec(name)
        parsed = spec.validate(value)
        pipe.hset(self._key(persona_id), name, spec.dump(parsed))
        return parsed

    async def update(self, persona_id: str, name: str, change: Callable[[Any], Any]) -> Any:
        return await self._update(self._key(persona_id), name, change)

    async def clear_session_scoped(self, persona_id: str) -> None:
        names = [name for name, spec in self.specs.items() if spec.session_scoped]
        if names:
            await self.store.redis.hdel(self._key(persona_id), *names)


class CustomerAttributes(_AttributeHash):
    """Project-wide attributes; every write is published as ``AttributeChanged`` when a bus is given."""

    def __init__(self, store: RedisStore, specs: Mapping[str, AttributeSpec], events: EventBus | None = None) -> None:
        super().__init__(store, specs, "customer")
        self.events = events

    @property
    def _key(self) -> str:
        return self.store.key("customer", "attrs")

    @property
    def key(self) -> str:
        """The project's hash, for a caller that reads it in its own pipeline (then ``values``)."""
        return self._key

    async def get(self, name: str) -> Any:
        return await self._get(self._key, name)

    async def all(self) -> dict[str, Any]:
        return await self._all(self._key)

    async def set(self, name: str, value: Any) -> Any:
        parsed = await self._set(self._key, name, value)
        if self.events is not None:
            await self.events.publish(AttributeChanged(name))
        return parsed
