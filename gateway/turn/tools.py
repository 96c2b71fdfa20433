"""The tool loop: the model calls the agent's tools round by round, each call exactly once per turn.

The model is offered the turn's tools as OpenAI function tools (``crm.book_table`` travels as
``crm__book_table``); the calls of one round run concurrently, each bounded by
``SWITCHBOARD_TOOL_TIMEOUT_S`` and by the turn's deadline (a call ends a quarter of the turn deadline
before the turn does, so the model can still answer); an answer over
``SWITCHBOARD_TOOL_RESULT_MAX_CHARS`` is cut with a note; an error or a timeout reaches the model as
an error result. After ``SWITCHBOARD_TOOL_MAX_ROUNDS`` model rounds the model must answer.

Exactly once: a round's calls and their results are stored together (``ToolJournal``, keyed by turn id,
one round trip per round) as soon as the round's calls are done, before the next model round. A run of
the same turn (resumed after a crash, or re-run for a retried delivery) replays the stored rounds and
results instead of asking the model and calling the tools again; a round whose process died before it
was stored is asked for again and its calls made with the same idempotency keys (turn id + call index),
so the server can tell they are the same calls. What a turn reads (its journal, the conversation's
proposed action) is read in the round trip that takes the turn lock (``ToolLoop.read_into``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel
from redis.asyncio.client import Pipeline

from gateway.conversation.handoff import Handoffs
from gateway.conversation.store import RedisStore
from gateway.core.errors import LLMError
from gateway.core.models import TokenUsage, ToolCallTrace, TurnTrace
from gateway.core.settings import Settings
from gateway.turn.llm import CallOptions, LLMClient, ToolCall, ToolStep, model_of
from gateway.turn.responders import Reply, ReplyRequest, Responder, ToolEvent, ToolListener
from gateway.turn.tool_confirm import CONFIRM_CHOICES, PendingAction, PendingActions, is_yes, proposal

__all__ = ["BUILTIN_TOOLS", "HANDOFF", "JOURNAL_TTL_S", "ToolCaller", "ToolJournal", "ToolLoop", "ToolOutcome",
           "ToolSpec", "ToolState", "TurnTools", "cut", "wire_names", "with_builtins"]

log = logging.getLogger(__name__)
JOURNAL_TTL_S = 24 * 3600  # as long as an accepted turn is kept for resuming (reply intents)
_WIRE_FORBIDDEN = re.compile(r"[^a-zA-Z0-9_-]")
_SECRET_ARGUMENT = re.compile(r"pass(word)?|secret|token|api[_-]?key|authori[sz]ation|credential", re.I)
_TRACE_RESULT_CHARS = 2000  # what the trace keeps of a result (the model gets up to the setting's cut)


@dataclass(frozen=True)
class ToolSpec:
    name: str  # ``<source>.<tool>``
    description: str
    parameters: dict  # JSON schema of the arguments
    confirm: bool = False  # proposed to the customer, called on their yes in the next turn (tool_confirm)


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    error: str | None = None


class ToolCaller(Protocol):
    """Calls one of the turn's tools; ``idempotency_key`` is the same on every run of the same call."""

    async def call(self, name: str, arguments: dict, idempotency_key: str) -> ToolOutcome: ...


@dataclass
class TurnTools:
    """The tools a turn may use (set by a context preparer from the agent's ``config.tools``)."""

    specs: list[ToolSpec]
    caller: ToolCaller
    options: CallOptions | None = None  # the agent's model and sampling
    redact: Callable[[str], str] = field(default=lambda text: text)  # the sources' secrets out of traces


# Built-in tools an agent may name in ``config.tools`` besides its sources' (no source lists them).
HANDOFF = ToolSpec(name="handoff", description=(
    "Hand the conversation to a person (a human operator). Call it when the customer asks for a person, or "
    "when you cannot help and a person can; the customer is told a person will answer."),
    parameters={"type": "object", "properties": {"reason": {
        "type": "string", "description": "why a person should take over, in a few words"}}})
BUILTIN_TOOLS = {HANDOFF.name: HANDOFF}


class _NoSources:
    async def call(self, name: str, arguments: dict, idempotency_key: str) -> ToolOutcome:
        return ToolOutcome(text="", error=f"no tool source lists {name!r}")


def with_builtins(tools: TurnTools | None, names: Sequence[str]) -> TurnTools | None:
    """``tools`` with the built-in tools among ``names`` added (a turn whose only tool is built in too)."""
    builtins = [BUILTIN_TOOLS[n] for n in dict.fromkeys(names) if n in BUILTIN_TOOLS]
    if not builtins:
        return tools
    if tools is None:
        return TurnTools(specs=builtins, caller=_NoSources())
    return TurnTools(specs=[*tools.specs, *builtins], caller=tools.caller, options=tools.options, redact=tools.redact)


def wire_names(names: Sequence[str]) -> dict[str, str]:
    """OpenAI function names (``^[a-zA-Z0-9_-]{1,64}$``) for tool names, wire name → tool name."""
    out: dict[str, str] = {}
    for name in names:
        wire = _WIRE_FORBIDDEN.sub("_", name.replace(".", "__", 1))
        if len(wire) > 64 or wire in out or not wire:
            wire = wire[:55] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
        out[wire] = name
    return out


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[cut: the tool answered {len(text)} characters; only the first {limit} are shown]"


def _masked(value: object) -> object:
    if isinstance(value, dict):
        return {k: ("••••" if isinstance(k, str) and _SECRET_ARGUMENT.search(k) else _masked(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


class _Round(BaseModel):
    text: str = ""
    calls: list[tuple[str, str, str]]  # (call id, wire name, arguments JSON)
    key: str | None = None  # round 0, a confirmed action: the proposing turn's idempotency key


class _Result(BaseModel):
    text: str
    error: str | None = None
    ms: float = 0.0


@dataclass
class ToolState:
    """What a turn's tool loop starts from, read with the turn lock: its journal (``round:<n>`` and
    ``call:<index>`` of an earlier run of the same turn) and the action its conversation's last turn
    proposed (raw, not yet taken)."""

    stored: dict[str, bytes]
    pending: bytes | None = None


class ToolJournal:
    """A turn's tool rounds and results in Redis: ``turntools:<turn id>``, a hash of ``round:<n>`` and
    ``call:<index>``, kept ``JOURNAL_TTL_S``."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def key(self, turn_id: str) -> str:
        return self.store.key("turntools", turn_id)

    async def write(self, turn_id: str, fields: dict[str, BaseModel],
                    also: Callable[[Pipeline], None] | None = None) -> list:
        """``fields`` in one transaction, with what ``also`` queues (a proposal, a taken one's removal, the
        handoff state's read); the answers to ``also``'s commands."""
        async with self.store.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.key(turn_id), mapping={k: v.model_dump_json() for k, v in fields.items()})
            pipe.expire(self.key(turn_id), JOURNAL_TTL_S)
            if also is not None:
                also(pipe)
            return (await pipe.execute())[2:]


class ToolLoop:
    def __init__(self, settings: Settings, llm: LLMClient | None, journal: ToolJournal,
                 handoffs: Handoffs | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.journal = journal
        self.handoffs = handoffs  # read with each round's results: an operator's take-over stops the loop
        self.pending = PendingActions(journal.store, settings.tool_confirm_ttl_s)

    def read_into(self, pipe: Pipeline, turn_id: str, conversation_id: str) -> int:
        """Queue what a turn's loop starts from (its journal, the conversation's proposed action) in the
        round trip that takes the turn lock; ``parse`` reads their two answers. Read-only: an attempt that
        does not get the lock may queue them again."""
        pipe.hgetall(self.journal.key(turn_id))
        pipe.get(self.pending.key(conversation_id))
        return 2

    @staticmethod
    def parse(answers: list) -> ToolState:
        journal, pending = answers
        return ToolState({k.decode(): v for k, v in (journal or {}).items()}, pending)

    def around(self, responder: Responder, tools: TurnTools | None, trace: TurnTrace, deadline: float,
               state: ToolState | None = None, can_hand_off: bool = True) -> Responder:
        """``responder``, or the tool loop when the turn has tools (and a model to call them). The built-in
        ``handoff`` is offered only where a person can take the conversation over (``can_hand_off``)."""
        if tools is not None and not can_hand_off and any(s is HANDOFF for s in tools.specs):
            tools = TurnTools(specs=[s for s in tools.specs if s is not HANDOFF], caller=tools.caller,
                              options=tools.options, redact=tools.redact)
        if tools is None or not tools.specs or self.llm is None:
            return responder
        return _ToolTurn(self, self.llm, tools, trace, deadline, state or ToolState({}),
                         self.handoffs if can_hand_off else None)


class _ToolTurn:
    def __init__(self, loop: ToolLoop, llm: LLMClient, tools: TurnTools, trace: TurnTrace, deadline: float,
                 state: ToolState, handoffs: Handoffs | None) -> None:
        self.state = state
        self.handoffs = handoffs
        self.taken_over = False  # an operator took the conversation while the tools ran: no more rounds
        self.handoff: str | None = None  # the model called ``handoff``: why
        self.settings = loop.settings
        self.journal = loop.journal
        self.pending = loop.pending
        self.llm = llm
        self.tools = tools
        self.trace = trace
        self.deadline = deadline
        self.wire = wire_names([s.name for s in tools.specs])
        self.by_name = by_name = {s.name: s for s in tools.specs}
        self.offered = [{"type": "function", "function": {
            "name": wire, "description": by_name[name].description[:1024],
            "parameters": by_name[name].parameters or {"type": "object"}}} for wire, name in self.wire.items()]
        self.options = tools.options

    async def reply(self, request: ReplyRequest) -> Reply:
        self.options = self.tools.options or request.options  # the agent's (API) or the channel turn's agent's
        turn_id = self.trace.turn_id
        stored = self.state.stored
        messages: list[dict] = [m.wire() for m in request.prompt]
        usage = TokenUsage()
        index = 0
        confirmed = stored.get("round:0") or await self._confirmed(request, turn_id)
        if confirmed is not None:  # the customer said yes to the action the last turn proposed: called once
            kept = _Round.model_validate_json(confirmed)
            await self._run_round(request, messages, kept, None, 0, stored)  # round 0 is stored as it is taken
            index = len(kept.calls)
        rounds = self.settings.tool_max_rounds
        for number in range(1, rounds + 1):
            final = number == rounds
            recorded = stored.get(f"round:{number}")
            if recorded is not None:
                kept = _Round.model_validate_json(recorded)
                step = ToolStep(text=kept.text, calls=[ToolCall(*c) for c in kept.calls], usage=TokenUsage())
            else:
                step = await self.llm.tool_step(messages, self.offered, request.on_delta, final=final,
                                                options=self.options)
                _add(usage, step.usage)
            if not step.calls or final:
                if not step.text.strip():
                    raise LLMError("language model returned no text")
                return self._reply(step.text, usage)
            kept = _Round(text=step.text, calls=[(c.id, c.name, c.arguments) for c in step.calls])
            asked = await self._run_round(request, messages, kept, number if recorded is None else None, index,
                                          stored)
            index += len(step.calls)
            if self.taken_over:  # the reply is not sent (the handoff gate), the operator answers
                why = "tools: stopped after a round, an operator took the conversation over"
                self.trace.error = f"{self.trace.error}; {why}" if self.trace.error else why
                return Reply(text=step.text.strip() or self.settings.handoff_message, responder="handoff",
                             model=self._model, usage=usage, tool_calls=list(self.trace.tool_calls))
            if self.handoff is not None:  # a person takes over: the customer is told so, as when they ask
                return Reply(text=self.settings.handoff_message, responder="handoff", model=self._model, usage=usage,
                             tool_calls=list(self.trace.tool_calls), handoff=self.handoff)
            if asked is not None:  # an action waits for the customer's yes: the reply asks for it
                reply = self._reply(f"{step.text.strip()}\n\n{asked}".strip(), usage)
                reply.choices = list(CONFIRM_CHOICES)  # buttons where the channel has them
                return reply
        raise AssertionError("unreachable: the last round answers")

    def _reply(self, text: str, usage: TokenUsage) -> Reply:
        return Reply(text=text, responder="llm", model=self._model, usage=usage, tool_calls=list(self.trace.tool_calls))

    async def _run_round(self, request: ReplyRequest, messages: list[dict], kept: _Round, number: int | None,
                         index: int, stored: dict[str, bytes]) -> str | None:
        """Run one round's calls together; their results join ``messages``, and are journalled with the
        round (``number``; None: it is stored already) in one round trip before the next model round.
        Returns the proposal to put to the customer when a call needs their yes first."""
        calls = [ToolCall(*c) for c in kept.calls]
        messages.append({"role": "assistant", "content": kept.text or None, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]})
        answers = await asyncio.gather(*(self._call(c, index + k, stored, kept.key, request.on_tool)
                                         for k, c in enumerate(calls)))
        asked = None
        fields: dict[str, BaseModel] = {} if number is None else {f"round:{number}": kept}
        proposals = []
        for k, (call, (content, entry, proposed, result)) in enumerate(zip(calls, answers, strict=True)):
            self.trace.tool_calls.append(entry)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            if isinstance(result, _Result):
                fields[f"call:{index + k}"] = result
            elif isinstance(result, PendingAction):
                proposals.append(result)
            asked = asked or proposed
        if fields or proposals:
            conversation_id = self.trace.conversation_id

            def also(pipe: Pipeline) -> None:
                for action in proposals:
                    self.pending.propose_into(pipe, conversation_id, action)
                if self.handoffs is not None:
                    self.handoffs.get_into(pipe, conversation_id)

            answers = await self.journal.write(self.trace.turn_id, fields, also)
            if self.handoffs is not None:
                state = self.handoffs.parse(conversation_id, answers[-1])
                self.taken_over = state is not None and state.status == "human"
        return asked

    async def _confirmed(self, request: ReplyRequest, turn_id: str) -> bytes | None:
        """The action the conversation's last turn proposed, as round 0 of this turn when the customer's
        message is a yes (journalled before it runs, in the transaction that takes it from the conversation);
        dropped (and traced) on anything else. The turn lock (held) keeps the conversation's turns apart, so
        the proposal read with it is still there to take."""
        if self.state.pending is None:
            return None
        pending = PendingAction.model_validate_json(self.state.pending)
        conversation_id = self.trace.conversation_id
        said = next((m.content for m in reversed(request.prompt) if m.role == "user"), "")
        wire = next((w for w, n in self.wire.items() if n == pending.tool), None)
        if wire is None or not is_yes(said):
            self.trace.tool_calls.append(ToolCallTrace(name=pending.tool, arguments=_masked(pending.arguments),
                                                       error="proposed action dropped: the customer did not "
                                                             "confirm it"))
            await self.pending.drop(conversation_id)
            return None
        kept = _Round(calls=[(f"confirmed_{pending.turn_id}", wire, json.dumps(pending.arguments))], key=pending.key)
        await self.journal.write(turn_id, {"round:0": kept}, lambda pipe: self.pending.drop_into(pipe, conversation_id))
        return kept.model_dump_json().encode()

    @property
    def _model(self) -> str:
        return model_of(self.options, self.llm.model)

    async def _call(self, call: ToolCall, index: int, stored: dict[str, bytes], confirmed_key: str | None,
                    listener: ToolListener | None = None
                    ) -> tuple[str, ToolCallTrace, str | None, _Result | PendingAction | None]:
        """What the model reads for one call, its trace entry, the proposal when it waits for a yes, and
        what to journal (a new result, or the action to propose)."""
        fresh: _Result | PendingAction | None = None
        name = self.wire.get(call.name, call.name)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        entry = ToolCallTrace(name=name, arguments=_masked(arguments) if isinstance(arguments, dict) else {})
        spec = self.by_name.get(name)
        if spec is None:
            result = _Result(text="", error=f"unknown tool {call.name!r}")
        elif not isinstance(arguments, dict):
            result = _Result(text="", error="the arguments are not a JSON object")
        elif spec is HANDOFF:  # nothing to call: the turn ends asking for a person
            reason = str(arguments.get("reason") or "").strip()[:200]
            self.handoff = f"the model called the handoff tool{f': {reason}' if reason else ''}"
            result = _Result(text="a person will take over the conversation")
        elif (earlier := stored.get(f"call:{index}")) is not None:
            result = _Result.model_validate_json(earlier)
            entry.reused = True
        elif spec.confirm and confirmed_key is None:
            action = PendingAction(tool=name, arguments=arguments, key=f"{self.trace.turn_id}:{index}",
                                   turn_id=self.trace.turn_id)
            entry.result = "proposed: waiting for the customer's yes (not called)"
            return json.dumps({"status": "waiting for the customer's confirmation; not done yet"}), entry, \
                proposal(spec.description, name, arguments), action
        else:
            if listener is not None:
                await _tell(listener, ToolEvent("call", call.id, name, entry.arguments))
            result = fresh = await self._run(name, arguments, confirmed_key or f"{self.trace.turn_id}:{index}")
        text = cut(result.text, self.settings.tool_result_max_chars)
        entry.ms = result.ms
        entry.result = self.tools.redact(text[:_TRACE_RESULT_CHARS]) if result.error is None else None
        entry.error = self.tools.redact(result.error) if result.error is not None else None
        content = text if result.error is None else json.dumps({"error": result.error})
        if listener is not None:
            await _tell(listener, ToolEvent("result", call.id, name, entry.arguments, output=entry.result,
                                            error=entry.error, ms=entry.ms))
        return content, entry, None, fresh

    async def _run(self, name: str, arguments: dict, key: str) -> _Result:
        loop = asyncio.get_running_loop()
        budget = min(self.settings.tool_timeout_s, self.deadline - self.settings.turn_deadline_s / 4 - loop.time())
        t0 = time.perf_counter()
        if budget <= 0:
            return _Result(text="", error="not called: no time left in the turn")
        try:
            async with asyncio.timeout(budget):
                outcome = await self.tools.caller.call(name, arguments, key)
        except TimeoutError:
            outcome = ToolOutcome(text="", error=f"no answer within {budget:.3g} s")
        except Exception as exc:  # a broken tool is the model's to explain, never the turn's end
            outcome = ToolOutcome(text="", error=f"{type(exc).__name__}: {exc}")
        ms = round((time.perf_counter() - t0) * 1000, 3)
        return _Result(text=outcome.text, error=outcome.error, ms=ms)


async def _tell(listener: ToolListener, event: ToolEvent) -> None:
    """A channel's listener failing never fails the call (it only shows progress)."""
    try:
        await listener(event)
    except Exception:
        log.exception("tool event listener failed")


def _add(total: TokenUsage, step: TokenUsage) -> None:
    total.prompt_tokens += step.prompt_tokens
    total.completion_tokens += step.completion_tokens
    total.total_tokens += step.total_tokens
