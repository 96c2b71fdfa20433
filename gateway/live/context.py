"""Live context, composed: templates, custom sections, feeds, data injection, calendar, conversation
meta and the timers that keep them fresh. Built once by ``Services.build`` and reached as
``services.live``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from rq import Queue, Retry

from gateway.conversation.attributes import CustomerAttributes, PersonaAttributes
from gateway.conversation.memory import Memory
from gateway.conversation.store import RedisStore
from gateway.core.clock import Clock
from gateway.core.events import AttributeChanged, EventBus, TurnCompleted
from gateway.core.metrics import Metrics
from gateway.core.outbound import OutboundPolicy, Resolver, system_resolver
from gateway.core.settings import Settings
from gateway.jobs.registry import run_job
from gateway.live.calendar import (
    BUSINESS_HOURS,
    CLOSED_DATES,
    REBUILD_AFTER_MIDNIGHT,
    TIMEZONE,
    CalendarService,
)
from gateway.live.conversation_meta import ConversationMeta
from gateway.live.data_injection import ENABLED, PERIOD, URL, DataInjection
from gateway.live.feeds import Feeds
from gateway.live.sections import CustomSections
from gateway.live.template_render import RenderBudget
from gateway.live.template_store import TemplateStore
from gateway.live.timers import Slot, Timer, Timers, period_slot
from gateway.turn.llm import LLMClient

FETCH_DATA = "fetch_data"
FETCH_DATA_JOB = "fetch_data"  # the job that runs ``DataInjection.fetch``
CALENDAR = "calendar"
_RESCHEDULES = {ENABLED.name: FETCH_DATA, PERIOD.name: FETCH_DATA, URL.name: FETCH_DATA,
                TIMEZONE.name: CALENDAR}
_REBUILDS_CALENDAR = {TIMEZONE.name, BUSINESS_HOURS.name, CLOSED_DATES.name}


@dataclass
class LiveContext:
    settings: Settings
    clock: Clock
    templates: TemplateStore
    sections: CustomSections
    feeds: Feeds
    outbound: OutboundPolicy
    data_injection: DataInjection
    calendar: CalendarService
    conversation_meta: ConversationMeta
    timers: Timers
    jobs_queue: Queue

    @classmethod
    def build(
        cls,
        settings: Settings,
        store: RedisStore,
        persona_attributes: PersonaAttributes,
        customer_attributes: CustomerAttributes,
        memory: Memory,
        llm: LLMClient | None,
        queues: dict[str, Queue],
        metrics: Metrics,
        clock: Clock | None = None,
        resolver: Resolver = system_resolver,
    ) -> LiveContext:
        clock = clock or Clock()
        templates = TemplateStore(store, clock, RenderBudget.from_settings(settings))
        outbound = OutboundPolicy.parse(settings.outbound_allow_hosts, resolver)
        live = cls(
            settings=settings,
            clock=clock,
            templates=templates,
            sections=CustomSections(persona_attributes),
            feeds=Feeds(store, settings, clock),
            outbound=outbound,
            data_injection=DataInjection(
                customer_attributes, settings, llm, templates, outbound, metrics, clock
            ),
            calendar=CalendarService(customer_attributes, clock),
            conversation_meta=ConversationMeta(
                persona_attributes, memory, llm, templates, queues["jobs"], settings.agent_id, clock,
                settings.conversation_meta_messages, settings.conversation_meta_delay_s,
            ),
            timers=Timers(store, queues["timers"], settings.agent_id, clock),
            jobs_queue=queues["jobs"],
        )
        live.timers.add(Timer(FETCH_DATA, live._fetch_slot, live._next_fetch_slot, live._fire_fetch))
        live.timers.add(Timer(CALENDAR, live._calendar_slot, live._next_calendar_slot, live._fire_calendar))
        live.timers.add(live.conversation_meta.sweep_timer(settings.conversation_meta_sweep_s))
        return live

    def subscribe(self, events: EventBus) -> None:
        if not self.conversation_meta.marks_due:  # otherwise the turn marks it due (``closing_writes``)
            events.subscribe(TurnCompleted, self.conversation_meta.on_turn_completed)
        events.subscribe(AttributeChanged, self._on_attribute_changed)

    def closing_writes(self, pipe, persona_id: str) -> None:
        """What a finished turn writes here, queued in its closing round trip: its persona is due for a
        conversation-meta extraction."""
        if self.conversation_meta.marks_due:
            self.conversation_meta.due_into(pipe, persona_id)

    async def _on_attribute_changed(self, event: AttributeChanged) -> None:
        await self.attribute_changed(event.name)

    async def start(self) -> None:
        await self.timers.ensure_all()

    async def attribute_changed(self, name: str) -> None:
        """After a customer attribute is written (``AttributeChanged``): schedules and the calendar follow it now."""
        if name in _REBUILDS_CALENDAR:
            await self.calendar.rebuild()
        if name in _RESCHEDULES:
            await self.timers.ensure(_RESCHEDULES[name])

    # -- FetchData timer: one slot per period; an idle poll while disabled ----------------------
    async def _fetch_period(self) -> tuple[str, int]:
        period = await self.data_injection.period()
        return ("on", period) if period else ("idle", self.settings.timer_idle_poll_s)

    async def _fetch_slot(self, now: datetime) -> Slot:
        return period_slot(*await self._fetch_period(), now)

    async def _next_fetch_slot(self, now: datetime) -> Slot:
        return period_slot(*await self._fetch_period(), now, offset=1)

    async def _fire_fetch(self, slot: str) -> None:
        if slot.startswith("idle"):
            return
        intervals = self.settings.data_injection_retry_intervals
        retry = Retry(max=len(intervals), interval=intervals) if intervals else None
        await asyncio.to_thread(
            self.jobs_queue.enqueue, run_job, self.settings.agent_id, FETCH_DATA_JOB, slot,
            job_id=f"fetch-{self.settings.agent_id}-{slot}", retry=retry,
            result_ttl=600, failure_ttl=24 * 3600,
        )

    # -- calendar timer: one slot per local day, fired just after local midnight ----------------
    async def _calendar_slot(self, now: datetime, days: int = 0) -> Slot:
        zone = await self.calendar.zone()
        day = now.astimezone(zone).date() + timedelta(days=days)
        at = datetime.combine(day, time(0, 0), tzinfo=zone) + REBUILD_AFTER_MIDNIGHT
        return Slot(f"d{day.isoformat()}", at)

    async def _next_calendar_slot(self, now: datetime) -> Slot:
        return await self._calendar_slot(now, days=1)

    async def _fire_calendar(self, slot: str) -> None:
        await self.calendar.rebuild()
