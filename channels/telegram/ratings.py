"""👍 / 👎 under the bot's replies: the inline keyboard, and the vote a press casts on the stored reply.

The keyboard rides on the reply's own ``sendMessage`` (its last part), its callback data naming the
stored reply (``fb:up:<message id>``). A press is recorded as the web chat's votes are (one per
Telegram user and reply, changeable), only for a reply of a conversation in the chat it was pressed
in; the keyboard then goes (``editMessageReplyMarkup``). Anything else is answered with a notice and
records nothing."""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from channels.errors import ChannelRejected
from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.telegram.api import call
from channels.telegram.buttons import answer
from channels.telegram.updates import CHANNEL, ButtonPress
from gateway.channel import Feedback, NotFound, Voter, scope_identity, scope_thread

__all__ = ["PREFIX", "NOT_HERE", "THANKS", "TelegramRatings", "keyboard"]

log = logging.getLogger(__name__)

PREFIX = "fb:"
THANKS = "Thanks for your feedback!"
NOT_HERE = "This message can't be rated here."


def keyboard(message_id: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(inline_keyboard=[[
        InlineKeyboardButton(text="👍", callback_data=f"{PREFIX}up:{message_id}"),
        InlineKeyboardButton(text="👎", callback_data=f"{PREFIX}down:{message_id}"),
    ]])


class TelegramRatings:
    """The ``fb:`` button handler."""

    def __init__(self, feedback: Feedback | None, policy: RetryPolicy) -> None:
        self.feedback = feedback
        self.policy = policy

    async def __call__(self, bot: Bot, press: ButtonPress, connection_id: str | None) -> None:
        rating, _, message_id = press.data.removeprefix(PREFIX).partition(":")
        recorded = False
        if rating in ("up", "down") and message_id and self.feedback is not None:
            identity, thread = press.identity, press.thread
            if connection_id is not None:
                identity, thread = scope_identity(identity, connection_id), scope_thread(thread, connection_id)
            try:
                await self.feedback.rate(None, message_id, Voter(identity, thread=thread, channel=CHANNEL), rating)
                recorded = True
            except NotFound:
                log.info("telegram: a rating press on %r, not a reply of this chat: nothing recorded", message_id)
        await answer(bot, press, THANKS if recorded else NOT_HERE, self.policy)
        if recorded and press.chat_id is not None and press.message_id is not None:
            try:
                await send_with_retry(lambda: call(bot.edit_message_reply_markup(
                    chat_id=press.chat_id, message_id=press.message_id, reply_markup=None), "editMessageReplyMarkup"),
                    self.policy, what="telegram editMessageReplyMarkup")
            except ChannelRejected as exc:  # e.g. "message is not modified": pressed twice, the keyboard is gone
                log.info("telegram: the rating keyboard stays: %s", exc.message)
