"""Telegram on aiogram 3: webhook (secret-token header) or long polling, HTML replies, typing action.

The webhook verifies ``X-Telegram-Bot-Api-Secret-Token`` in constant time, checks the body is an
``Update``, queues it in the inbox (deduplicated on ``update_id``, ordered per chat) and answers
200 at once; a redelivered ``update_id`` gets 200 and nothing else. A turn consumer hands the
update back to ``accept``. Polled updates (local use) take the same ``accept`` in the poller's
order. Replies are HTML (escaped, 4,096 characters after escaping) split into numbered parts.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable

from aiogram import Bot
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters, Update, User
from fastapi import APIRouter, Request, Response
from pydantic import ValidationError

from channels import webhook_docs
from channels.connection_capabilities import TELEGRAM
from channels.delivery import deliver_parts, deliver_rated_parts, reject_unverified, run_work, turn_runner
from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.render import html_to_text, render
from channels.telegram.api import call as _call
from channels.telegram.buttons import Buttons, take_choice
from channels.telegram.media import media_work, without_media
from channels.telegram.ratings import PREFIX as RATING_PREFIX
from channels.telegram.ratings import TelegramRatings, keyboard
from channels.telegram.updates import (
    CHANNEL,
    CHOICE_PREFIX,
    ButtonPress,
    ChatTarget,
    ChatText,
    ChoicePress,
    Ignored,
    MediaMessage,
    StartCommand,
    Unsupported,
    chat_key,
    read_update,
    target_of,
)
from gateway.channel import (
    BadRequest,
    ChannelContext,
    ChannelDeliveryError,
    Delivery,
    DeliveryRejected,
    DeliveryReport,
    EndReason,
    SendWork,
    ServiceUnavailable,
    TurnWork,
    Work,
)

__all__ = ["TelegramAdapter", "TelegramSink", "build"]

log = logging.getLogger(__name__)
WEBHOOK_PATH = "/channels/telegram/webhook"
# what the OpenAPI document says this vendor sends here (the routes read raw bodies)
WEBHOOKS = {WEBHOOK_PATH: webhook_docs.TELEGRAM_UPDATE}
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
CAPABILITIES = TELEGRAM
UNPARSABLE = "can't parse entities"  # Telegram's 400 for HTML it cannot read


class TelegramSink:
    streaming = False
    channel = CHANNEL
    typing_interval_s = 4.5  # Telegram shows the action for about 5 s

    def __init__(self, bot: Bot, target: ChatTarget, policy: RetryPolicy, buttons: bool = False) -> None:
        self.bot = bot
        self.target = target
        self.policy = policy
        self.buttons = buttons  # 👍 / 👎 under a turn's reply (SWITCHBOARD_FEEDBACK_BUTTONS)
        self.keyboard: InlineKeyboardMarkup | None = None
        # SWITCHBOARD_VOICE_REPLY (issue 44): a voice note's reply is also spoken, after its text is delivered
        self.voice_reply: Callable[[str], Awaitable[None]] | None = None

    def offer(self, choices: list[str]) -> None:
        """The reply's answers as an inline keyboard (a proposed action's Yes / No): a press is the person's
        next message (``updates.ChoicePress``)."""
        self.keyboard = InlineKeyboardMarkup(inline_keyboard=[
            [InlineKeyboardButton(text=c, callback_data=f"{CHOICE_PREFIX}{c}"[:64]) for c in choices]])

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def typing(self) -> None:
        await _call(self.bot.send_chat_action(self.target.chat_id, "typing",
                                              message_thread_id=self.target.thread_id), "sendChatAction")

    async def _send(self, part: str, rates: str | None = None) -> str:
        reply = None
        if self.target.reply_to is not None:
            reply = ReplyParameters(message_id=self.target.reply_to, allow_sending_without_reply=True)
        # a proposed action's choices, else (on the reply's last part) the rating buttons
        keys = self.keyboard if self.keyboard is not None else keyboard(rates) if rates is not None else None

        def send(text: str, **markup):
            return _call(self.bot.send_message(self.target.chat_id, text, message_thread_id=self.target.thread_id,
                                               reply_parameters=reply, reply_markup=keys, **markup), "sendMessage")

        try:
            sent = await send(part)
        except ChannelRejected as exc:
            if UNPARSABLE not in exc.message.lower():
                raise
            # Telegram refused the markup: the words still matter more than the formatting.
            log.warning("telegram refused a reply's HTML (%s); sending it as plain text", exc.message)
            sent = await send(html_to_text(part), parse_mode=None)
        return str(sent.message_id)

    async def deliver(self, text: str) -> DeliveryReport:
        report = await deliver_parts(render(text, CAPABILITIES), self._send, self.policy, what="telegram sendMessage")
        return await self._spoken(text, report)

    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport:
        """The reply with the rating keyboard under its last part (when buttons are on)."""
        if not self.buttons:
            return await self.deliver(text)
        report = await deliver_rated_parts(render(text, CAPABILITIES), self._send, self.policy,
                                           what="telegram sendMessage", message_id=message_id)
        return await self._spoken(text, report)

    async def _spoken(self, text: str, report: DeliveryReport) -> DeliveryReport:
        if self.voice_reply is not None and report.delivered:
            await self.voice_reply(text)  # never raises: the text reply is what counts
        return report

    async def say(self, text: str) -> None:
        """A canned answer outside a turn; raises if it finally fails (the runner logs it)."""
        report = await self.deliver(text)
        if not report.delivered:
            raise ChannelDeliveryError(report.error or "telegram send failed")


class TelegramAdapter:
    name = CHANNEL
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext, bot: Bot) -> None:
        self.context = context
        self.settings = context.settings
        self.bot = bot
        self.policy = RetryPolicy.from_settings(context.settings)
        self.runner = turn_runner(context)
        self.buttons = Buttons(self.policy)
        self.buttons.add(RATING_PREFIX, TelegramRatings(context.feedback, self.policy))
        self._me: User | None = None
        self._poller: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        if self.settings.telegram_mode == "polling":
            await send_with_retry(lambda: _call(self.bot.delete_webhook(), "deleteWebhook"), self.policy)
            self._poller = asyncio.create_task(self._poll(), name="telegram polling")
        elif self.settings.telegram_register_webhook:
            await self._register_webhook()

    async def stop(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        await self.runner.drain()  # in-flight replies still need the HTTP session below
        await self.bot.session.close()

    async def _register_webhook(self) -> None:
        secret = self.settings.telegram_webhook_secret
        url = self.settings.public_url.rstrip("/") + WEBHOOK_PATH
        try:
            await send_with_retry(
                lambda: _call(self.bot.set_webhook(
                    url, secret_token=secret.get_secret_value() if secret else None,
                    allowed_updates=ALLOWED_UPDATES,
                ), "setWebhook"),
                self.policy, what="telegram setWebhook",
            )
        except ChannelDeliveryError as exc:  # the gateway still serves other channels
            log.error("could not register the Telegram webhook at %s: %s", url, exc.message)
            return
        log.info("telegram webhook registered at %s", url)

    async def me(self) -> User:
        if self._me is None:
            try:
                self._me = await send_with_retry(lambda: _call(self.bot.me(), "getMe"), self.policy, what="getMe")
            except ChannelDeliveryError as exc:
                raise ServiceUnavailable(f"telegram getMe failed: {exc.message}") from exc
        return self._me

    # -- inbound -------------------------------------------------------------------------------
    def verify(self, request: Request) -> None:
        secret = self.settings.telegram_webhook_secret
        given = request.headers.get(SECRET_HEADER, "")
        if secret is None or not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            reject_unverified(self.context, CHANNEL, f"missing or wrong {SECRET_HEADER}")

    async def webhook(self, request: Request) -> Response:
        self.verify(request)
        body = await request.body()
        try:
            update = Update.model_validate_json(body)
        except ValidationError as exc:
            raise BadRequest("body is not a Telegram Update") from exc
        await self.context.ack_delivery(CHANNEL, str(update.update_id), chat_key(update), body)
        return Response(b'{"ok":true}', media_type="application/json")

    # -- a turn consumer hands queued updates back here ----------------------------------------
    def _update(self, delivery: Delivery) -> Update:
        try:
            return Update.model_validate_json(delivery.body, context={"bot": self.bot})
        except ValidationError as exc:
            raise DeliveryRejected(f"not a Telegram Update: {exc.error_count()} validation error(s)") from exc

    async def accept(self, delivery: Delivery) -> Work | None:
        return await self.accept_update(self._update(delivery), delivery_id=delivery.id)

    def sink_for(self, delivery: Delivery) -> TelegramSink:
        update = self._update(delivery)
        msg = update.message
        if msg is None and update.callback_query is not None and isinstance(update.callback_query.message, Message):
            msg = update.callback_query.message  # a button press: the reply goes to that chat
        if msg is None:
            raise DeliveryRejected("a Telegram update without a message has no reply target")
        return self._sink(target_of(msg))

    def _sink(self, target: ChatTarget) -> TelegramSink:
        return TelegramSink(self.bot, target, self.policy, buttons=self.settings.feedback_buttons)

    async def accept_update(self, update: Update, *, delivery_id: str | None = None) -> Work | None:
        event = read_update(update, await self.me())
        if isinstance(event, Ignored):
            log.debug("telegram update %s ignored: %s", update.update_id, event.reason)
            return None
        if isinstance(event, ChoicePress):
            await take_choice(self.bot, event)
        if isinstance(event, MediaMessage):
            if self.context.media is not None:
                return await media_work(self.context, self.bot, event, self._sink(event.target),
                                        api_base=self.settings.telegram_api_base, delivery_id=delivery_id)
            event = without_media(event)
        if isinstance(event, ChatText):
            turn = await self.context.pipeline.accept(event.inbound, delivery_id=delivery_id)
            return None if turn is None else TurnWork(turn, self._sink(event.target))
        if not await self.context.store.claim_once("update", CHANNEL, str(update.update_id)):
            self.context.metrics.duplicates.labels(CHANNEL).inc()
            return None
        if isinstance(event, ButtonPress):
            return SendWork(lambda: self.buttons.press(self.bot, event), what=f"telegram button {update.update_id}")
        if isinstance(event, StartCommand):
            await self._restart(event)
            text = self.settings.channel_welcome_message
        else:
            assert isinstance(event, Unsupported)
            text = self.settings.channel_unsupported_message
        sink = TelegramSink(self.bot, event.target, self.policy)
        return SendWork(lambda: sink.say(text), what=f"telegram canned reply to update {update.update_id}")

    async def _restart(self, event: StartCommand) -> None:
        """``/start`` ends the chat's current conversation; the next message begins a fresh one."""
        store = self.context.store
        persona = await store.resolve_persona(event.identity, event.display_name)
        current = await store.active_conversation(persona.id, CHANNEL, event.thread)
        if current is not None:
            await self.context.sessions.end(current, EndReason.RESTART)

    async def _poll(self) -> None:
        offset: int | None = None
        failures = 0
        while True:
            try:
                updates = await _call(self.bot.get_updates(offset=offset, timeout=25, request_timeout=35,
                                                           allowed_updates=ALLOWED_UPDATES), "getUpdates")
                failures = 0
            except (ChannelRateLimited, ChannelUnavailable) as exc:
                failures += 1
                wait = self.policy.delay(min(failures, 6), exc)
                log.warning("telegram polling failed: %s; again in %.1fs", exc.message, wait)
                await asyncio.sleep(wait)
                continue
            for update in updates:
                offset = update.update_id + 1
                try:
                    run_work(self.runner, await self.accept_update(update))
                except Exception:  # the top of a polled delivery: log it and go on with the next
                    log.exception("telegram update %s failed", update.update_id)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_route(WEBHOOK_PATH, self.webhook, methods=["POST"], include_in_schema=False)  # a plain webhook route
        return router


def make_bot(context: ChannelContext) -> Bot | None:
    token = context.settings.telegram_bot_token
    if token is None:
        return None
    session = AiohttpSession(api=TelegramAPIServer.from_base(context.settings.telegram_api_base))
    return Bot(token.get_secret_value(), session=session, default=DefaultBotProperties(parse_mode="HTML"))


def build(context: ChannelContext) -> TelegramAdapter | None:
    bot = make_bot(context)
    if bot is None:
        return None
    if context.settings.telegram_mode == "webhook" and context.settings.telegram_webhook_secret is None:
        log.warning("telegram webhook mode needs SWITCHBOARD_TELEGRAM_WEBHOOK_SECRET; every update will be refused")
    return TelegramAdapter(context, bot)
