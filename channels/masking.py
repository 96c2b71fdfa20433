"""A channel connection's vendor boundary: nothing crosses it carrying the connection's credentials.

A vendor may echo a credential in an error (a Slack token in an ``error`` field, a Telegram token in a
``description``, a Twilio account SID in a URL). Every call into a connection's channel code — its
webhook, the inbox's ``accept``, each sink call (send, typing), the vendor check and its undoing —
runs inside ``vendor_boundary``: log records made there are masked as they are made, and an error
leaving it has the credentials masked and its vendor cause cut off. A sink's ``DeliveryReport`` (whose
``error`` becomes the reply's delivery error, the turn trace's and the connection's ``last_error``) is
masked the same way. Before a reply goes out, the sink checks (one cached read) that its connection
is still there and enabled (an environment-configured channel, the read-only connection ``default``,
always is): a turn that was running when an operator disabled or deleted the
connection (its token leaked, say) records its reply as not sent instead of sending it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from gateway.channel import (
    ChannelContext,
    Connection,
    DeliveryReport,
    MessageTemplate,
    ReplySink,
    SendWork,
    ServiceUnavailable,
    TurnWork,
    Work,
    masked_in_logs,
)

__all__ = ["MaskedSink", "masked_error", "masked_work", "vendor_boundary"]

log = logging.getLogger(__name__)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def masked_error(exc: BaseException, connection: Connection) -> BaseException | None:
    """``exc`` with the connection's credentials masked and no cause; None when none of its chain
    carries one (then it leaves as it is)."""
    if all(connection.redact(str(e)) == str(e) and connection.redact(repr(e.args)) == repr(e.args)
           for e in _chain(exc)):
        return None
    clean = connection.redact(str(exc))
    try:  # the same kind of error (a refusal stays a refusal), with the masked text
        masked = copy.copy(exc)
    except Exception:  # an exception that cannot be rebuilt from its arguments: one of ours instead
        return ServiceUnavailable(f"{type(exc).__name__}: {clean}")
    masked.args = (clean,)
    if hasattr(masked, "message"):
        masked.message = clean
    return masked


@asynccontextmanager
async def vendor_boundary(connection: Connection) -> AsyncIterator[None]:
    with masked_in_logs(connection.redact):
        try:
            yield
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            masked = masked_error(exc, connection)
            if masked is None:
                raise
            raise masked from None


def masked_report(report: DeliveryReport, connection: Connection) -> DeliveryReport:
    if report.error is None:
        return report
    return dataclasses.replace(report, error=connection.redact(report.error))


class MaskedSink:
    """A connection's reply sink behind its vendor boundary. What the sink can do is the inner one's:
    ``of`` picks the class with ``typing``, ``deliver_keyed`` and ``deliver_rated`` exactly when the inner sink has them
    (declared on the class: ``isinstance`` against a runtime protocol reads the class, not
    ``__getattr__``, from Python 3.12 on)."""

    def __init__(self, inner: ReplySink, connection: Connection, context: ChannelContext) -> None:
        self._inner, self._connection, self._context = inner, connection, context
        self.streaming = inner.streaming

    @classmethod
    def of(cls, inner: ReplySink, connection: Connection, context: ChannelContext) -> ReplySink:
        if isinstance(inner, MaskedSink):
            return inner
        features = tuple(callable(getattr(inner, name, None)) for name in ("typing", "deliver_keyed", "deliver_rated"))
        return _SINK_CLASSES[features](inner, connection, context)

    async def delta(self, text: str) -> None:
        async with vendor_boundary(self._connection):
            await self._inner.delta(text)

    async def deliver(self, text: str) -> DeliveryReport:
        return await self._delivered(self._inner.deliver, text)

    async def _withheld(self) -> DeliveryReport | None:
        """Why the reply must not go out: its connection was deleted or disabled while the turn ran."""
        store = self._context.connections
        if store is None or self._connection.read_only:  # the environment's channels: never disabled here
            return None
        current = await store.find(self._connection.id)
        if current is not None and current.enabled:
            return None
        how = "deleted" if current is None else "disabled"
        why = f"not sent: connection {self._connection.id} was {how} before the reply was ready"
        log.info("%s reply %s", self._connection.kind, why)
        return DeliveryReport(delivered=False, error=why, retryable=False)

    async def _delivered(self, send: Callable[..., Awaitable[DeliveryReport]], *args: Any) -> DeliveryReport:
        withheld = await self._withheld()
        if withheld is not None:
            return withheld
        async with vendor_boundary(self._connection):
            report = await send(*args)
        return masked_report(report, self._connection)

    async def say(self, text: str) -> None:
        async with vendor_boundary(self._connection):
            await self._inner.say(text)  # type: ignore[attr-defined]

    async def templates(self) -> list[MessageTemplate]:
        async with vendor_boundary(self._connection):
            return await self._inner.templates()  # type: ignore[attr-defined]

    async def send_template(self, template: MessageTemplate, stored_message_id: str) -> DeliveryReport:
        return await self._delivered(self._inner.send_template, template, stored_message_id)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:  # plain attributes (``channel``, ``turn_id``…) are the inner sink's
        return getattr(self._inner, name)


class _Typing(MaskedSink):
    @property
    def typing_interval_s(self) -> float:
        return self._inner.typing_interval_s  # type: ignore[attr-defined]

    async def typing(self) -> None:
        async with vendor_boundary(self._connection):
            await self._inner.typing()  # type: ignore[attr-defined]


class _Keyed(MaskedSink):
    async def deliver_keyed(self, text: str, key: str) -> DeliveryReport:
        return await self._delivered(self._inner.deliver_keyed, text, key)  # type: ignore[attr-defined]


class _Rated(MaskedSink):
    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport:
        return await self._delivered(self._inner.deliver_rated, text, message_id)  # type: ignore[attr-defined]


def _sink_class(typing: bool, keyed: bool, rated: bool) -> type[MaskedSink]:
    """The masked sink with exactly the inner sink's optional calls (the turn checks for them)."""
    bases = tuple(base for base, has in ((_Typing, typing), (_Keyed, keyed), (_Rated, rated)) if has)
    if not bases:
        return MaskedSink
    return bases[0] if len(bases) == 1 else type("".join(b.__name__ for b in bases) + "Sink", bases, {})


_SINK_CLASSES = {(t, k, r): _sink_class(t, k, r) for t in (False, True) for k in (False, True) for r in (False, True)}


def masked_work(work: Work | None, connection: Connection, context: ChannelContext) -> Work | None:
    """Accepted work whose sink and sends stay behind the connection's vendor boundary."""
    if isinstance(work, TurnWork):
        return TurnWork(work.turn, MaskedSink.of(work.sink, connection, context))
    if isinstance(work, SendWork):
        send = work.send

        async def guarded() -> None:
            async with vendor_boundary(connection):
                await send()

        return dataclasses.replace(work, send=guarded)
    return work
