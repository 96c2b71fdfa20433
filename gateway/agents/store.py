"""Agents and their immutable versions in Redis.

``agents`` (hash name → id), ``agent:<id>`` (the current definition), ``agent:<id>:versions``
(version ids, newest first) and ``agentversion:<version id>`` (a frozen snapshot). A change writes
the new version and the definition in one transaction, watching the definition it read (a change
made meanwhile makes this one a ``Conflict``, never a lost update); a version once written never
changes, so a caller pinned to a version id keeps its behaviour when ``latest`` moves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from gateway.agents.definitions import AgentCreate, AgentDefinition, AgentVersion
from gateway.conversation.store import RedisStore
from gateway.core.errors import Conflict, InvalidInput, NotFound
from gateway.core.models import new_id, utcnow
from gateway.turn.tools import BUILTIN_TOOLS

__all__ = ["LATEST", "AgentStore", "UnknownTool"]

LATEST = "latest"


def _invalid(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if p != "body") or "agent"
    return InvalidInput(f"{where}: {first['msg'].removeprefix('Value error, ')}")


def _same(a: AgentDefinition, b: AgentDefinition) -> bool:
    volatile = {"updated_at", "latest_version_id"}
    return a.model_dump(exclude=volatile) == b.model_dump(exclude=volatile)


def _changed(current: AgentDefinition, changes: dict[str, Any]) -> AgentDefinition:
    merged = current.model_dump(by_alias=True, mode="json")
    for key, value in changes.items():
        if key == "config" and isinstance(value, dict):
            config = merged["config"]
            for name, inner in value.items():
                if name == "inferenceConfig" and isinstance(inner, dict):
                    config[name] = {**config[name], **inner}
                else:
                    config[name] = inner
        elif key in ("id", "createdAt", "updatedAt", "latestVersionId"):
            raise InvalidInput(f"{key}: cannot be changed")
        else:
            merged[key] = value
    try:
        return AgentDefinition.model_validate({**merged, "updatedAt": utcnow()})
    except ValidationError as exc:
        raise _invalid(exc) from exc


class UnknownTool(InvalidInput):
    """``config.tools`` names a tool no tool source lists: a 422 on every path (the agent API answers
    its other refused definitions with 400, as the seed's API does)."""


# Which of these tool names no tool source lists (``gateway.tools.service.ToolSources.unknown``).
UnknownTools = Callable[[list[str]], Awaitable[list[str]]]


class AgentStore:
    def __init__(self, store: RedisStore, unknown_tools: UnknownTools | None = None) -> None:
        self.store = store
        self.redis = store.redis
        self.unknown_tools = unknown_tools

    async def _check_tools(self, definition: AgentDefinition, current: AgentDefinition | None = None) -> None:
        """A tool the definition names newly must be listed by a tool source (one named before stays,
        so a source that is gone does not block unrelated edits)."""
        before = {t.name for t in current.config.tools} if current is not None else set()
        new = [t.name for t in definition.config.tools if t.name not in before and t.name not in BUILTIN_TOOLS]
        if not new or self.unknown_tools is None:
            return
        unknown = await self.unknown_tools(new)
        if unknown:
            raise UnknownTool(f"config.tools: unknown tool {', '.join(unknown)}; GET /api/tool-sources lists the "
                               "tools of each source (name them <source>.<tool>, or <source>.* for all)")

    def _key(self, *parts: str) -> str:
        return self.store.key(*parts)

    async def list(self) -> list[AgentDefinition]:
        ids = [raw.decode() for raw in await self.redis.hvals(self._key("agents"))]
        raws = await self.redis.mget([self._key("agent", i) for i in ids]) if ids else []
        return sorted((AgentDefinition.model_validate_json(r) for r in raws if r), key=lambda a: a.name)

    async def get(self, agent_id: str) -> AgentDefinition:
        raw = await self.redis.get(self._key("agent", agent_id))
        if raw is None:
            raise NotFound(f"no agent {agent_id!r}; GET /v1/agents lists them")
        return AgentDefinition.model_validate_json(raw)

    async def find(self, ref: str) -> AgentDefinition:
        """The agent whose id is ``ref``, else the one named ``ref``: every path that takes an id takes a name."""
        raw = await self.redis.get(self._key("agent", ref))
        if raw is not None:
            return AgentDefinition.model_validate_json(raw)
        agent_id = await self.redis.hget(self._key("agents"), ref)
        raw = await self.redis.get(self._key("agent", agent_id.decode())) if agent_id else None
        if raw is None:
            raise NotFound(f"no agent {ref!r} (by id or name); GET /v1/agents lists them")
        return AgentDefinition.model_validate_json(raw)

    async def by_name(self, name: str) -> AgentDefinition:
        agent_id = await self.redis.hget(self._key("agents"), name)
        if agent_id is None:
            raise NotFound(f"no agent named {name!r}")
        return await self.get(agent_id.decode())

    async def create(self, data: dict[str, Any], agent_id: str | None = None) -> AgentVersion:
        try:
            spec = AgentCreate.model_validate(data)
            definition = AgentDefinition(id=agent_id or new_id(), **spec.model_dump())
        except ValidationError as exc:
            raise _invalid(exc) from exc
        await self._check_tools(definition)
        key = self._key("agent", definition.id)
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(key)
            if await pipe.exists(key):
                raise Conflict(f"an agent with id {definition.id!r} exists already")
            await self._claim_name(definition)
            pipe.multi()
            version = self._queue_version(pipe, definition)
            await self._execute(pipe, definition, release_name=True)
        return version

    async def patch(self, agent_id: str, changes: dict[str, Any]) -> AgentVersion:
        """Change some fields (``config`` fields merge into the current config); a new version, unless
        nothing changed. A change made meanwhile by someone else makes this one a 409, never a lost update."""
        key = self._key("agent", agent_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(key)
            raw = await pipe.get(key)
            if raw is None:
                raise NotFound(f"no agent {agent_id!r}; GET /v1/agents lists them")
            current = AgentDefinition.model_validate_json(raw)
            definition = _changed(current, changes)
            if _same(definition, current):
                return await self.resolve(agent_id, current.latest_version_id)
            await self._check_tools(definition, current)
            renamed = definition.name != current.name
            if renamed:
                await self._claim_name(definition)
            pipe.multi()
            if renamed:
                pipe.hdel(self._key("agents"), current.name)
            version = self._queue_version(pipe, definition)
            await self._execute(pipe, definition, release_name=renamed)
        return version

    async def delete(self, agent_id: str) -> None:
        """The agent and all its versions. The channels' agent (id = the Redis namespace) stays: the
        channels answer with it, and a restart would bring it back with only the settings' config."""
        if agent_id == self.store.agent_id:
            raise Conflict(f"agent {agent_id!r} answers the gateway's channels and cannot be deleted; "
                           "PATCH it instead")
        key, versions_key = self._key("agent", agent_id), self._key("agent", agent_id, "versions")
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(key, versions_key)
            raw = await pipe.get(key)
            if raw is None:
                raise NotFound(f"no agent {agent_id!r}; GET /v1/agents lists them")
            current = AgentDefinition.model_validate_json(raw)
            versions = [v.decode() for v in await pipe.lrange(versions_key, 0, -1)]
            pipe.multi()
            pipe.hdel(self._key("agents"), current.name)
            pipe.delete(key, versions_key, *(self._key("agentversion", v) for v in versions))
            try:
                await pipe.execute()
            except WatchError:
                raise Conflict(f"agent {agent_id!r} changed while it was being deleted; try again") from None

    async def versions(self, agent_id: str) -> list[AgentVersion]:
        await self.get(agent_id)
        ids = [raw.decode() for raw in await self.redis.lrange(self._key("agent", agent_id, "versions"), 0, -1)]
        raws = await self.redis.mget([self._key("agentversion", v) for v in ids]) if ids else []
        return [AgentVersion.model_validate_json(r) for r in raws if r]

    async def resolve(self, agent_id: str, version_id: str = LATEST,
                      definition: AgentDefinition | None = None) -> AgentVersion:
        """``latest`` or a version id of this agent (``definition``: the agent as just read, not read again)."""
        if version_id == LATEST:
            if definition is None or definition.id != agent_id:
                definition = await self.get(agent_id)
            version_id = definition.latest_version_id
        raw = await self.redis.get(self._key("agentversion", version_id))
        version = AgentVersion.model_validate_json(raw) if raw else None
        if version is None or version.agent_id != agent_id:
            raise NotFound(f"agent {agent_id!r} has no version {version_id!r}")
        return version

    async def _claim_name(self, definition: AgentDefinition) -> None:
        if not await self.redis.hsetnx(self._key("agents"), definition.name, definition.id):
            raise Conflict(f"an agent named {definition.name!r} exists already")

    def _queue_version(self, pipe: Pipeline, definition: AgentDefinition) -> AgentVersion:
        """Queue a new version and the definition pointing at it (in one MULTI with the caller's)."""
        version_id = new_id()
        definition = definition.model_copy(update={"latest_version_id": version_id})
        version = AgentVersion(version_id=version_id, agent_id=definition.id, definition=definition)
        pipe.set(self._key("agentversion", version_id), version.model_dump_json(by_alias=True))
        pipe.lpush(self._key("agent", definition.id, "versions"), version_id)
        pipe.set(self._key("agent", definition.id), definition.model_dump_json(by_alias=True))
        return version

    async def _execute(self, pipe: Pipeline, definition: AgentDefinition, *, release_name: bool) -> None:
        try:
            await pipe.execute()
        except BaseException as exc:
            if release_name:  # the name claimed for this write stays free
                await self.redis.hdel(self._key("agents"), definition.name)
            if isinstance(exc, WatchError):
                raise Conflict(f"agent {definition.id!r} changed meanwhile; read it again and retry") from None
            raise
