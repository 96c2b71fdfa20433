"""One Bot API call through aiogram, its errors translated into the channel error tree."""

from __future__ import annotations

from aiogram.exceptions import TelegramAPIError, TelegramNetworkError, TelegramRetryAfter, TelegramServerError

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable

__all__ = ["call"]


async def call(coro, what: str):
    """Run one Bot API call, translating aiogram's errors into the channel error tree."""
    try:
        return await coro
    except TelegramRetryAfter as exc:
        raise ChannelRateLimited(f"telegram {what}: {exc.message}", retry_after_s=exc.retry_after) from exc
    except (TelegramServerError, TelegramNetworkError) as exc:
        raise ChannelUnavailable(f"telegram {what}: {type(exc).__name__}: {exc.message}") from exc
    except TelegramAPIError as exc:
        raise ChannelRejected(f"telegram {what}: {type(exc).__name__}: {exc.message}") from exc
