"""Inline keyboard presses (callback queries), handed to the handler their data's prefix names.

Each feature keeps its own prefix and handler (``fb:`` ratings); a press no handler claims is still
answered, with a short notice, so the user's button stops spinning."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram import Bot

from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.telegram.api import call
from channels.telegram.updates import ButtonPress

__all__ = ["ButtonHandler", "Buttons", "answer"]

UNKNOWN_BUTTON = "This button no longer does anything."

# (the bot that sent the keyboard, the press, the connection id — None: the environment's bot)
ButtonHandler = Callable[[Bot, ButtonPress, str | None], Awaitable[None]]


async def answer(bot: Bot, press: ButtonPress, text: str, policy: RetryPolicy) -> None:
    """``answerCallbackQuery``: the notice the presser sees, and the end of the button's spinner."""
    await send_with_retry(lambda: call(bot.answer_callback_query(press.query_id, text=text), "answerCallbackQuery"),
                          policy, what="telegram answerCallbackQuery")


class Buttons:
    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.handlers: dict[str, ButtonHandler] = {}

    def add(self, prefix: str, handler: ButtonHandler) -> None:
        self.handlers[prefix] = handler

    async def press(self, bot: Bot, press: ButtonPress, connection_id: str | None = None) -> None:
        for prefix, handler in self.handlers.items():
            if press.data.startswith(prefix):
                await handler(bot, press, connection_id)
                return
        await answer(bot, press, UNKNOWN_BUTTON, self.policy)
