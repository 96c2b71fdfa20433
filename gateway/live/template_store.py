"""Operator-editable Jinja2 prompt templates: packaged defaults, overrides in Redis, every save versioned.

Templates run in jinja's sandbox with ``StrictUndefined`` and bounded values (``template_sandbox``),
rendered off the event loop within a time and output budget (``template_render``). A save is checked
before it goes live — syntax, variables the template may not use, and a budgeted trial render with
sample values (which also trips the sandbox) — and refused with the line number or the budget it
exceeded; the old version stays live.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from importlib import resources

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, meta, nodes
from redis.exceptions import WatchError

from gateway.conversation.store import RedisStore
from gateway.core.clock import Clock
from gateway.core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from gateway.live.template_render import RenderBudget, render, template_line
from gateway.live.template_sandbox import BoundedSandbox, OverBudget
from rag_core.clean_text import scrub_deep

MAX_SOURCE_CHARS = 100_000
HISTORY = 50

_SYSTEM_SAMPLE: dict[str, object] = {
    "agent_name": "Switchboard",
    "business_name": "Example Ltd",
    "business_instructions": "Be kind.",
    "channel": "webchat",
    "conversation_meta": "name: Ada",
    "custom_sections": "<note>\nsample\n</note>\n---\n",
    "calendar": "today Monday 24th of February 2026",
    "injected_data": "<ExternalData updated=\"just now\">\nsample\n</ExternalData>",
    "now": "2026-02-24 09:00 UTC",
    "timezone": "UTC",
    "persona_id": "0" * 32,
    "caller_language": "Spanish",
}

#: Every template the gateway renders, with sample values for each variable it is given.
TEMPLATE_VARIABLES: dict[str, dict[str, object]] = {
    "system": _SYSTEM_SAMPLE,
    "conversation_meta": {"current_meta": "name: Ada", "history": "User: hi\nAgent: hello"},
    "data_summary": {"data": "sample data", "max_tokens": 500},
}


_UNREAD = object()  # render: the stored version was not read with the turn's other reads

class TemplateInvalid(InvalidInput):
    def __init__(self, name: str, line: int | None, problem: str) -> None:
        where = f" line {line}" if line else ""
        super().__init__(f"template {name!r}{where}: {problem}")
        self.line = line


class TemplateRenderFailed(InvalidInput):
    """A live template failed while rendering (the caller falls back to the packaged default)."""

    limit: str | None = None  # the budget it went over (``time``, ``output``, ``value``), if that was why


class TemplateOverBudget(TemplateRenderFailed):
    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class TemplateVersion:
    name: str
    source: str
    is_default: bool
    saved_at: datetime | None = None
    previous_versions: int = 0

    @property
    def fingerprint(self) -> str:
        """What an editor saw when it opened the template; a save that brings another one is stale."""
        return hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class TemplateChanged(Conflict):
    """Someone saved the template after the editor opened it: this save would overwrite their change."""


@functools.cache
def default_source(name: str) -> str:
    return resources.files("gateway.templates").joinpath(f"{name}.j2").read_text(encoding="utf-8")


class TemplateStore:
    def __init__(self, store: RedisStore, clock: Clock, budget: RenderBudget | None = None) -> None:
        self.store = store
        self.clock = clock
        self.budget = budget or RenderBudget()  # callers that hold the settings pass their own
        self.env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
        self._compiled: dict[str, Template] = {}

    def _key(self, name: str, *rest: str) -> str:
        return self.store.key("template", name, *rest)

    @staticmethod
    def _known(name: str) -> dict[str, object]:
        try:
            return TEMPLATE_VARIABLES[name]
        except KeyError:
            raise NotFound(f"no template named {name!r}; known: {', '.join(TEMPLATE_VARIABLES)}") from None

    async def get(self, name: str) -> TemplateVersion:
        self._known(name)
        raw = await self.store.redis.get(self._key(name))
        versions = await self.store.redis.llen(self._key(name, "history"))
        if raw is None:
            return TemplateVersion(name, default_source(name), True, None, versions)
        saved = scrub_deep(json.loads(raw))
        return TemplateVersion(name, saved["source"], False, datetime.fromisoformat(saved["saved_at"]), versions)

    async def history(self, name: str) -> list[TemplateVersion]:
        self._known(name)
        raws = await self.store.redis.lrange(self._key(name, "history"), 0, -1)
        out = []
        for raw in raws:
            saved = scrub_deep(json.loads(raw))
            saved_at = datetime.fromisoformat(saved["saved_at"]) if saved["saved_at"] else None
            out.append(TemplateVersion(name, saved["source"], saved["saved_at"] is None, saved_at))
        return out

    async def put(self, name: str, source: str, budget: RenderBudget | None = None, *,
                  expected: str | None = None) -> TemplateVersion:
        """Save a new version (the old one goes to the history). With ``expected`` (the fingerprint the
        editor opened), a save after someone else's is refused with ``TemplateChanged`` — atomically:
        the write happens only if the stored version did not change since it was read."""
        await self.check(name, source, budget)
        async with self.store.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(self._key(name))
            previous = await self.get(name)
            if expected is not None and previous.fingerprint != expected:
                raise TemplateChanged(f"template {name!r} was changed by someone else since you opened it; "
                                      "reload to see their version (yours is kept below) and save again")
            saved_at = self.clock.now()
            old = {"source": previous.source,
                   "saved_at": previous.saved_at.isoformat() if previous.saved_at else None}
            pipe.multi()
            pipe.lpush(self._key(name, "history"), json.dumps(old))
            pipe.ltrim(self._key(name, "history"), 0, HISTORY - 1)
            pipe.set(self._key(name), json.dumps({"source": source, "saved_at": saved_at.isoformat()}))
            try:
                await pipe.execute()
            except WatchError:
                raise TemplateChanged(f"template {name!r} was saved by someone else at the same moment; "
                                      "reload and save again") from None
        return await self.get(name)

    async def check(self, name: str, source: str, budget: RenderBudget | None = None) -> Template:
        """Compile and trial-render ``source`` within the budget; ``TemplateInvalid`` (with the line or
        the budget it went over) when it cannot go live."""
        sample = self._known(name)
        if len(source) > MAX_SOURCE_CHARS:
            raise PayloadTooLarge(f"template {name!r} is longer than {MAX_SOURCE_CHARS} characters")
        try:
            tree = self.env.parse(source)
        except TemplateSyntaxError as exc:
            raise TemplateInvalid(name, exc.lineno, exc.message or "syntax error") from exc
        unknown = meta.find_undeclared_variables(tree) - set(sample) - set(self.env.globals)
        if unknown:
            first = min(
                (n for n in tree.find_all(nodes.Name) if n.name in unknown and n.ctx == "load"),
                key=lambda n: n.lineno,
            )
            raise TemplateInvalid(
                name, first.lineno,
                f"{first.name!r} is undefined; available variables: {', '.join(sorted(sample))}",
            )
        template = self.env.from_string(source)
        try:
            await render(template, sample, budget or self.budget)
        except OverBudget as exc:
            raise TemplateInvalid(name, template_line(exc), f"over budget: {exc.message}") from exc
        except Exception as exc:  # any failure of the trial render refuses the template
            raise TemplateInvalid(name, template_line(exc), f"{type(exc).__name__}: {exc}") from exc
        return template

    def compiled(self, name: str, source: str) -> Template:
        template = self._compiled.get(source)
        if template is None:
            template = self.env.from_string(source)
            if len(self._compiled) > 32:
                self._compiled.clear()
            self._compiled[source] = template
        return template

    def read_into(self, pipe, name: str) -> None:
        """Queue the read of ``name``'s live version in ``pipe`` (with a turn's other prompt reads); its
        answer is ``render``'s ``stored``."""
        self._known(name)
        pipe.get(self._key(name))

    async def render(self, name: str, budget: RenderBudget | None = None, *, stored: bytes | None | object = _UNREAD,
                     **variables: object) -> str:
        """Render the live version within the budget; ``TemplateRenderFailed`` names the line that
        failed, ``TemplateOverBudget`` the budget it went over. ``stored`` is the live version as
        ``read_into`` read it (otherwise it is read here: one read per render, on every turn)."""
        self._known(name)
        raw = await self.store.redis.get(self._key(name)) if stored is _UNREAD else stored
        source = scrub_deep(json.loads(raw))["source"] if raw is not None else default_source(name)
        try:
            return await render(self.compiled(name, source), variables, budget or self.budget)
        except OverBudget as exc:
            line = template_line(exc)
            raise TemplateOverBudget(
                f"template {name!r}{f' line {line}' if line else ''}: over budget: {exc.message}", exc.limit
            ) from exc
        except Exception as exc:  # translated once, here, for every template user
            line = template_line(exc)
            raise TemplateRenderFailed(
                f"template {name!r}{f' line {line}' if line else ''}: {type(exc).__name__}: {exc}"
            ) from exc

    def render_default(self, name: str, **variables: object) -> str:
        return self.compiled(name, default_source(name)).render(**variables)
