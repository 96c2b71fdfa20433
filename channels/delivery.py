"""Sending a rendered reply part by part, and refusing unverified webhooks — shared by every vendor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn

from channels.errors import ChannelRateLimited, ChannelUnavailable
from channels.outbound_retry import RetryPolicy, send_with_retry
from gateway.channel import (
    ChannelContext,
    ChannelDeliveryError,
    DeliveryReport,
    Forbidden,
    SendWork,
    TurnRunner,
    TurnWork,
    Unauthorized,
    Work,
)

__all__ = ["deliver_parts", "deliver_rated_parts", "reject_unverified", "run_work", "turn_runner"]

ChannelRetryable = (ChannelRateLimited, ChannelUnavailable)


async def deliver_parts(
    parts: Sequence[str], send: Callable[..., Awaitable[str]], policy: RetryPolicy, *, what: str,
    key: str | None = None,
) -> DeliveryReport:
    """Send every part in order (each with retries); stop at the first part that finally fails. With
    ``key`` (a vendor idempotency key), part ``i`` is sent as ``send(part, f"{key}:{i}")`` on every try."""
    sent: list[str] = []
    for i, part in enumerate(parts, 1):
        args = (part,) if key is None else (part, f"{key}:{i}")
        try:
            sent.append(await send_with_retry(lambda args=args: send(*args), policy, what=f"{what} part {i}"))
        except ChannelDeliveryError as exc:
            where = f"part {i}/{len(parts)}: " if len(parts) > 1 else ""
            gave_up = f" (gave up after {policy.tries} tries)" if isinstance(exc, ChannelRetryable) else ""
            return DeliveryReport(
                delivered=False, parts=len(parts), external_ids=tuple(sent), error=f"{where}{exc.message}{gave_up}",
                retryable=isinstance(exc, ChannelRetryable),
            )
    return DeliveryReport(delivered=True, parts=len(parts), external_ids=tuple(sent))


async def deliver_rated_parts(
    parts: Sequence[str], send: Callable[[str, str | None], Awaitable[str]], policy: RetryPolicy, *, what: str,
    message_id: str,
) -> DeliveryReport:
    """``deliver_parts``, the last part sent as ``send(part, message_id)`` (with the buttons that rate the
    stored reply ``message_id``), the others as ``send(part, None)``."""
    marked = [(part, message_id if i == len(parts) else None) for i, part in enumerate(parts, 1)]

    def send_marked(item: tuple[str, str | None]) -> Awaitable[str]:
        return send(*item)

    return await deliver_parts(marked, send_marked, policy, what=what)


def reject_unverified(context: ChannelContext, channel: str, why: str, *, status: int = 401) -> NoReturn:
    """Count the refusal and answer 401/403 before anything is parsed or stored."""
    context.metrics.rejected.labels(channel, "signature").inc()
    raise (Forbidden if status == 403 else Unauthorized)(why)


def turn_runner(context: ChannelContext) -> TurnRunner:
    if context.turns is None:
        raise RuntimeError("ChannelContext.turns is not set: build context with ChannelContext.build")
    return context.turns


def run_work(runner: TurnRunner, work: Work | None) -> None:
    """Run accepted work in the background, outside the inbox (polled updates)."""
    if isinstance(work, TurnWork):
        runner.schedule(work.turn, work.sink)
    elif isinstance(work, SendWork):
        runner.spawn(work.send(), what=work.what)
