"""Inline keyboard presses (callback queries), handed to the handler their data's prefix names.

Each feature keeps its own prefix and handler (``fb:`` ratings); a press no handler claims is still
answered, with a short notice, so the user's button stops spinning."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiogram import Bot

from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.telegram.api import call
from channels.telegram.updates import ButtonPress, ChoicePress
from gateway.channel import ChannelDeliveryError

__all__ = ["ButtonHandler", "Buttons", "answer", "take_choice"]

log = logging.getLogger(__name__)

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


async def take_choice(bot: Bot, press: ChoicePress) -> None:
    """A reply's choice pressed: the press answered (Telegram shows a spinner until then) and the keyboard
    taken off the bot's message, so it is pressed once. Best effort: the press is the person's next message
    whatever happens here."""
    try:
        await call(bot.answer_callback_query(press.callback_id), "answerCallbackQuery")
        await call(bot.edit_message_reply_markup(chat_id=press.chat_id, message_id=press.message_id,
                                                 reply_markup=None), "editMessageReplyMarkup")
    except ChannelDeliveryError as exc:
        log.warning("telegram choice pressed (%s): %s", press.callback_id, exc)
