"""Telegram bots added as connections: one aiogram ``Bot`` per connection, its own webhook secret.

The webhook at ``/channels/telegram/{id}/webhook`` checks the secret the gateway gave Telegram in
``setWebhook`` for that bot, then queues the update as the environment bot's webhook does. Verifying
a connection calls ``getMe`` (a refused token is a 422, nothing stored) and ``setWebhook``;
deleting it calls ``deleteWebhook``. Every bot talks to ``SWITCHBOARD_TELEGRAM_API_BASE``.
"""

from __future__ import annotations

import hmac
import logging

from aiogram import Bot
from aiogram.client.default import DefaultBotProperties
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramAPIError, TelegramNetworkError, TelegramRetryAfter, TelegramServerError
from aiogram.types import Message, Update, User
from fastapi import Request, Response
from pydantic import ValidationError

from channels.connections import NotedRatedSink
from channels.delivery import reject_unverified
from channels.errors import ChannelRejected
from channels.outbound_retry import RetryPolicy
from channels.telegram.adapter import ALLOWED_UPDATES, CAPABILITIES, SECRET_HEADER, TelegramSink, _call
from channels.telegram.buttons import Buttons, take_choice
from channels.telegram.media import media_work, without_media
from channels.telegram.ratings import PREFIX as RATING_PREFIX
from channels.telegram.ratings import TelegramRatings
from channels.telegram.updates import (
    CHANNEL,
    ButtonPress,
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
    Connection,
    CredentialsRefused,
    Delivery,
    DeliveryRejected,
    EndReason,
    SendWork,
    TurnWork,
    VendorUnreachable,
    Work,
    delivery_id,
    order_key,
    scope_identity,
    scope_thread,
    scoped,
)

__all__ = ["TelegramConnections", "build_connections"]

log = logging.getLogger(__name__)


class ConnectionTelegramSink(NotedRatedSink, TelegramSink):
    """A connection bot's replies; each outcome goes into the connection's status."""

    def __init__(self, bot: Bot, target, policy: RetryPolicy, context: ChannelContext, connection: Connection) -> None:
        super().__init__(bot, target, policy, buttons=context.settings.feedback_buttons)
        self.context = context
        self.connection = connection


class TelegramConnections:
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.policy = RetryPolicy.from_settings(context.settings)
        self.buttons = Buttons(self.policy)
        self.buttons.add(RATING_PREFIX, TelegramRatings(context.feedback, self.policy))
        self._bots: dict[str, tuple[str, Bot]] = {}  # connection id -> (its token, its bot)
        self._me: dict[str, User] = {}
        self._retired: list[Bot] = []  # bots whose token changed: their sessions close with the process

    def _new_bot(self, token: str) -> Bot:
        session = AiohttpSession(api=TelegramAPIServer.from_base(self.context.settings.telegram_api_base))
        return Bot(token, session=session, default=DefaultBotProperties(parse_mode="HTML"))

    def bot(self, connection: Connection) -> Bot:
        token = connection.secret("bot_token")
        known = self._bots.get(connection.id)
        if known is not None and known[0] == token:
            return known[1]
        if known is not None:
            self._retired.append(known[1])
            self._me.pop(connection.id, None)
        bot = self._new_bot(token)
        self._bots[connection.id] = (token, bot)
        return bot

    async def stop(self) -> None:
        for bot in [b for _, b in self._bots.values()] + self._retired:
            await bot.session.close()

    async def _me_of(self, connection: Connection) -> User:
        if connection.id not in self._me:
            self._me[connection.id] = await _call(self.bot(connection).me(), "getMe")
        return self._me[connection.id]

    # -- inbound -------------------------------------------------------------------------------
    async def webhook(self, request: Request, connection: Connection) -> Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), connection.secret("webhook_secret").encode()):
            reject_unverified(self.context, CHANNEL, f"missing or wrong {SECRET_HEADER}")
        body = await request.body()
        try:
            update = Update.model_validate_json(body)
        except ValidationError as exc:
            raise BadRequest("body is not a Telegram Update") from exc
        await self.context.ack_delivery(CHANNEL, delivery_id(connection.id, str(update.update_id)),
                                        order_key(connection.id, chat_key(update)), body)
        return Response(b'{"ok":true}', media_type="application/json")

    def _update(self, delivery: Delivery, bot: Bot) -> Update:
        try:
            return Update.model_validate_json(delivery.body, context={"bot": bot})
        except ValidationError as exc:
            raise DeliveryRejected(f"not a Telegram Update: {exc.error_count()} validation error(s)") from exc

    async def accept(self, delivery: Delivery, connection: Connection) -> Work | None:
        bot = self.bot(connection)
        update = self._update(delivery, bot)
        event = read_update(update, await self._me_of(connection))
        if isinstance(event, Ignored):
            return None
        if isinstance(event, ChoicePress):
            await take_choice(bot, event)
        if isinstance(event, MediaMessage):
            if self.context.media is not None:
                sink = ConnectionTelegramSink(bot, event.target, self.policy, self.context, connection)
                return await media_work(self.context, bot, event, sink, delivery_id=delivery.id,
                                        api_base=self.context.settings.telegram_api_base,
                                        inbound=scoped(event.inbound, connection), claim_id=delivery.dedup_id)
            event = without_media(event)
        if isinstance(event, ChatText):
            turn = await self.context.pipeline.accept(scoped(event.inbound, connection), delivery_id=delivery.id)
            sink = ConnectionTelegramSink(bot, event.target, self.policy, self.context, connection)
            return None if turn is None else TurnWork(turn, sink)
        if not await self.context.store.claim_once("update", CHANNEL, delivery.dedup_id):
            return None
        if isinstance(event, ButtonPress):
            return SendWork(lambda: self.buttons.press(bot, event, connection.id),
                            what=f"telegram button ({connection.id})")
        if isinstance(event, StartCommand):
            store = self.context.store
            persona = await store.resolve_persona(scope_identity(event.identity, connection.id), event.display_name)
            current = await store.active_conversation(persona.id, CHANNEL, scope_thread(event.thread, connection.id))
            if current is not None:
                await self.context.sessions.end(current, EndReason.RESTART)
            text = self.context.settings.channel_welcome_message
        else:
            assert isinstance(event, Unsupported)
            text = self.context.settings.channel_unsupported_message
        sink = ConnectionTelegramSink(bot, event.target, self.policy, self.context, connection)
        return SendWork(lambda: sink.say(text), what=f"telegram canned reply ({connection.id})")

    def sink_for(self, delivery: Delivery, connection: Connection) -> ConnectionTelegramSink:
        bot = self.bot(connection)
        update = self._update(delivery, bot)
        msg = update.message
        if msg is None and update.callback_query is not None and isinstance(update.callback_query.message, Message):
            msg = update.callback_query.message  # a choice pressed: the reply goes to that chat
        if msg is None:
            raise DeliveryRejected("a Telegram update without a message has no reply target")
        return ConnectionTelegramSink(bot, target_of(msg), self.policy, self.context, connection)

    # -- the vendor check ----------------------------------------------------------------------
    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        bot = self._new_bot(connection.secret("bot_token"))
        try:
            try:
                me = await bot.get_me()
            except (TelegramServerError, TelegramNetworkError, TelegramRetryAfter) as exc:
                raise VendorUnreachable(f"Telegram getMe: {type(exc).__name__}: {exc.message}") from exc
            except TelegramAPIError:  # 401 Unauthorized, 404 Not Found: the token is not a bot's
                raise CredentialsRefused("credentials.bot_token: Telegram refused the token") from None
            try:
                await _call(bot.set_webhook(webhook_url, secret_token=connection.secret("webhook_secret"),
                                            allowed_updates=ALLOWED_UPDATES), "setWebhook")
            except ChannelRejected as exc:  # e.g. a URL Telegram will not call (not HTTPS)
                raise VendorUnreachable(f"Telegram refused the webhook URL: {exc.message}") from exc
            except ChannelDeliveryError as exc:
                raise VendorUnreachable(exc.message) from exc
        finally:
            await bot.session.close()
        self._me[connection.id] = me
        return f"@{me.username}" if me.username else me.full_name

    async def forget(self, connection: Connection) -> None:
        bot = self._bots.pop(connection.id, (None, None))[1] or self._new_bot(connection.secret("bot_token"))
        try:
            await _call(bot.delete_webhook(), "deleteWebhook")
        finally:
            await bot.session.close()


def build_connections(context: ChannelContext) -> TelegramConnections:
    return TelegramConnections(context)
