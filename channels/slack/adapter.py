"""Slack on slack-bolt (FastAPI adapter): app mentions answered in their thread, and direct messages.

The signing secret and the 5-minute timestamp window are checked first (missing or garbled
signature headers are 401 like a wrong signature); a signed body that is not UTF-8 or not clean
JSON (``gateway.http.json_body``) is 400. A message or mention
event is queued in the inbox (deduplicated on ``event_id``, which every ``X-Slack-Retry-Num``
redelivery repeats, ordered per channel and thread) and acknowledged at once, well inside Slack's
3 seconds; everything else (``url_verification``) goes to bolt's FastAPI handler. A turn consumer
dispatches the queued event through bolt, whose listeners persist the message and hand back the
turn. The pipeline also claims ``channel:ts``, so an ``app_mention`` and a ``message`` event for
the same message make one turn. A press of a reply's choice button (a proposed action's Yes / No,
``channels.slack.choices``) is queued the same way and read as the person's next message.
"""

from __future__ import annotations

import json
import logging
import re
from urllib.parse import parse_qsl

import aiohttp
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from channels import webhook_docs
from channels.connection_capabilities import SLACK
from channels.delivery import deliver_parts, deliver_rated_parts, reject_unverified, turn_runner
from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from channels.media_answer import media_turn_work
from channels.outbound_retry import RetryPolicy
from channels.render import render
from channels.slack.choices import ChoicePress, choice_blocks, take_choice
from channels.slack.files import SlackFile, media_sources
from channels.slack.ratings import ACTION_PREFIX, RatingPress, SlackRatings, rated_blocks
from gateway.channel import (
    BadRequest,
    ChannelContext,
    Connection,
    Delivery,
    DeliveryRejected,
    DeliveryReport,
    InboundMessage,
    InvalidJSON,
    TurnWork,
    Work,
    decode_json,
    delivery_id,
    order_key,
    scoped,
)

__all__ = ["SlackAdapter", "SlackEvent", "SlackSink", "build"]

log = logging.getLogger(__name__)
CHANNEL = "slack"
EVENTS_PATH = "/channels/slack/events"
# what the OpenAPI document says this vendor sends here (the routes read raw bodies)
WEBHOOKS = {EVENTS_PATH: webhook_docs.SLACK_EVENTS}
CAPABILITIES = SLACK
_MENTION = re.compile(r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>")
QUEUED_EVENTS = ("app_mention", "message")
_WORK = "switchboard_work"
_ERROR = "switchboard_error"
_DELIVERY = "switchboard_delivery_id"  # the inbox entry being accepted


class SlackEvent(BaseModel):
    """The fields of a Slack ``message`` / ``app_mention`` event the gateway uses."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: str
    channel: str
    ts: str
    user: str | None = None
    text: str = ""
    team: str | None = None
    channel_type: str | None = None
    thread_ts: str | None = None
    subtype: str | None = None
    bot_id: str | None = None
    files: list[SlackFile] = Field(default_factory=list)  # issue 44: audio clips, images, documents

    @property
    def from_person(self) -> bool:
        return self.user is not None and self.bot_id is None and self.subtype in (None, "file_share")

    @property
    def reply_ts(self) -> str | None:
        """The thread a reply goes to: a mention is answered in its thread (a new one if top-level)."""
        return self.thread_ts or self.ts if self.type == "app_mention" else self.thread_ts

    def plain_text(self) -> str:
        text = _MENTION.sub("", self.text)
        return " ".join(text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").split())


class SlackSink:
    streaming = False
    channel = CHANNEL

    def __init__(self, client: AsyncWebClient, channel_id: str, thread_ts: str | None, policy: RetryPolicy,
                 buttons: bool = False) -> None:
        self.client = client
        self.channel_id = channel_id
        self.thread_ts = thread_ts
        self.policy = policy
        self.buttons = buttons  # 👍 / 👎 under a turn's reply (SWITCHBOARD_FEEDBACK_BUTTONS)
        self.choices: list[str] = []

    def offer(self, choices: list[str]) -> None:
        """The reply's answers as buttons under its last part (a proposed action's Yes / No), in place of the
        rating buttons: a press is the person's next message (``channels.slack.choices``)."""
        self.choices = list(choices)

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def _send(self, part: str, rates: str | None = None) -> str:
        blocks = rated_blocks(part, rates) if rates is not None else None
        return await self._post(part, blocks)

    async def _offer(self, part: str, last: str | None) -> str:
        return await self._post(part, choice_blocks(part, self.choices) if last is not None else None)

    async def _post(self, part: str, blocks: list[dict] | None) -> str:
        try:
            resp = await self.client.chat_postMessage(
                channel=self.channel_id, text=part, thread_ts=self.thread_ts, mrkdwn=True, unfurl_links=False,
                blocks=blocks,
            )
        except SlackApiError as exc:
            status, error = exc.response.status_code, exc.response.get("error", "unknown")
            if status == 429 or error == "ratelimited":
                after = exc.response.headers.get("Retry-After")
                raise ChannelRateLimited(f"slack chat.postMessage: {error}",
                                         retry_after_s=float(after) if after else None) from exc
            if status >= 500:
                raise ChannelUnavailable(f"slack chat.postMessage: HTTP {status} {error}") from exc
            raise ChannelRejected(f"slack chat.postMessage: {error}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelUnavailable(f"slack chat.postMessage: {type(exc).__name__}: {exc}") from exc
        return str(resp.get("ts"))

    async def deliver(self, text: str) -> DeliveryReport:
        if self.choices:  # the buttons go under the last part
            return await deliver_rated_parts(render(text, CAPABILITIES), self._offer, self.policy,
                                             what="slack chat.postMessage", message_id="")
        return await deliver_parts(render(text, CAPABILITIES), self._send, self.policy, what="slack chat.postMessage")

    async def deliver_rated(self, text: str, message_id: str) -> DeliveryReport:
        """The reply with the rating buttons under its last part (when buttons are on; a reply's choices
        take their place)."""
        if not self.buttons or self.choices:
            return await self.deliver(text)
        return await deliver_rated_parts(render(text, CAPABILITIES), self._send, self.policy,
                                         what="slack chat.postMessage", message_id=message_id)


class SlackAdapter:
    name = CHANNEL
    capabilities = CAPABILITIES

    def __init__(self, context: ChannelContext, client: AsyncWebClient, signing_secret: str,
                 connection: Connection | None = None) -> None:
        self.context = context
        self.client = client
        self.connection = connection  # a channel connection's app (its ids, customers and agent); None: the env's
        self.policy = RetryPolicy.from_settings(context.settings)
        self.runner = turn_runner(context)
        self.verifier = SignatureVerifier(signing_secret)
        # Listeners run inside dispatch (process_before_response) so the consumer gets their turn back.
        # Queued events were verified when they arrived, possibly longer ago than bolt's 5-minute window.
        self.app = AsyncApp(client=client, signing_secret=signing_secret, process_before_response=True,
                            request_verification_enabled=False, logger=logging.getLogger("slack_bolt"))
        self.app.event("app_mention")(self.on_mention)
        self.app.event("message")(self.on_message)
        self.ratings = SlackRatings(context.feedback, client, connection)
        self.app.action(re.compile(f"^{ACTION_PREFIX}"))(self.on_rate)
        self.handler = AsyncSlackRequestHandler(self.app)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self.runner.drain()

    async def events(self, request: Request) -> Response:
        timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        # The SDK's verifier calls int(timestamp): check the headers' shape before reading the body.
        if not timestamp.isascii() or not timestamp.isdigit() or not signature.startswith("v0="):
            reject_unverified(self.context, CHANNEL, "missing or malformed Slack signature headers")
        body = await request.body()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Slack sends UTF-8, and its SDK cannot even check a signature over anything else.
            self.context.metrics.rejected.labels(CHANNEL, "validation").inc()
            raise BadRequest(f"body: not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset {exc.start})") from None
        if not self.verifier.is_valid(text, timestamp, signature):
            reject_unverified(self.context, CHANNEL, "invalid Slack signature or stale timestamp")
        try:
            envelope = _signed_payload(text, request.headers.get("content-type"))
        except BadRequest:
            self.context.metrics.rejected.labels(CHANNEL, "validation").inc()
            raise
        if not envelope and (press := _choice_press(text)) is not None:
            return await self._queue_choice(press, text)
        event = envelope.get("event") if envelope and envelope.get("type") == "event_callback" else None
        if not isinstance(event, dict) or event.get("type") not in QUEUED_EVENTS:
            return await self.handler.handle(request)  # url_verification, other events: bolt answers
        event_id = envelope.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            raise BadRequest("Slack event_callback without an event_id")
        order = f"{event.get('channel')}:{event.get('thread_ts') or ''}"
        if self.connection is not None:
            event_id, order = delivery_id(self.connection.id, event_id), order_key(self.connection.id, order)
        await self.context.ack_delivery(CHANNEL, event_id, order, body)
        return Response(status_code=200)

    async def _queue_choice(self, payload: dict, text: str) -> Response:
        """A choice pressed: queued like a message, once per proposal (its message's ``ts``), ordered in its chat."""
        press = ChoicePress.parse(payload)
        if press is None:
            log.info("slack: a choice press without the fields it needs; ignored")
            return Response(status_code=200)
        dedup, order = f"choice:{press.channel}:{press.message_ts}", f"{press.channel}:{press.thread_ts or ''}"
        if self.connection is not None:
            dedup, order = delivery_id(self.connection.id, dedup), order_key(self.connection.id, order)
        await self.context.ack_delivery(CHANNEL, dedup, order, json.dumps(payload).encode())
        return Response(status_code=200)

    # -- a turn consumer hands queued events back here -----------------------------------------
    async def accept(self, delivery: Delivery) -> Work | None:
        queued = _json_object(delivery.body.encode())
        if queued.get("type") == "block_actions":
            return await self._accept_choice(queued, delivery.id)
        request = AsyncBoltRequest(body=delivery.body, headers={"content-type": "application/json"})
        request.context[_DELIVERY] = delivery.id  # read back by the listener: the message's claim owner
        response = await self.app.async_dispatch(request)
        if (error := request.context.get(_ERROR)) is not None:
            raise error  # a listener failed (Redis?): the consumer retries the delivery
        if response.status == 404:  # no listener wants it: nothing to answer
            log.debug("slack delivery %s matched no listener", delivery.dedup_id)
            return None
        if response.status >= 400:  # authorisation (auth.test) failed, or bolt itself: try again later
            raise ChannelUnavailable(f"bolt could not process the event: HTTP {response.status} {response.body[:200]}")
        return request.context.get(_WORK)

    def sink_for(self, delivery: Delivery) -> SlackSink:
        queued = _json_object(delivery.body.encode())
        if (press := ChoicePress.parse(queued)) is not None:
            return self._sink(press.channel, press.thread_ts)
        event = queued.get("event") or {}
        try:
            parsed = SlackEvent.model_validate(event)
        except ValidationError as exc:
            raise DeliveryRejected("a queued Slack event without the fields of a message") from exc
        return self._sink(parsed.channel, parsed.reply_ts)

    def _sink(self, channel: str, reply_ts: str | None) -> SlackSink:
        return SlackSink(self.client, channel, reply_ts, self.policy, buttons=self.context.settings.feedback_buttons)

    async def on_rate(self, ack, body: dict) -> None:
        """A press on a rating button: acknowledged at once (Slack waits 3 s at most), recorded after."""
        await ack()
        press = RatingPress.parse(body)
        if press is None:
            log.info("slack: a rating press without the fields it needs; ignored")
            return
        self.runner.spawn(self.ratings.record(press), what=f"slack rating of {press.message_id}")

    # bolt injects listener arguments by parameter name
    async def on_mention(self, body: dict, event: dict, context: dict) -> None:
        await self._listen(body, event, context, mention=True)

    async def on_message(self, body: dict, event: dict, context: dict) -> None:
        await self._listen(body, event, context, mention=False)

    async def _listen(self, body: dict, raw: dict, context: dict, *, mention: bool) -> None:
        try:
            context[_WORK] = await self._accept(body, raw, mention=mention, delivery_id=context.get(_DELIVERY))
        except Exception as exc:  # handed to the consumer: bolt would only log it
            context[_ERROR] = exc

    async def _accept(self, body: dict, raw: dict, *, mention: bool, delivery_id: str | None) -> Work | None:
        try:
            event = SlackEvent.model_validate(raw)
        except ValidationError:
            log.info("slack event %s without the fields of a message; ignored", body.get("event_id"))
            return None
        if not event.from_person or (not mention and event.channel_type != "im"):
            return None  # bots (ourselves included), edits and channel chatter without a mention
        text = event.plain_text()
        readable = [f for f in event.files if f.kind is not None]
        if not text and not (readable and self.context.media is not None):
            return None
        team = event.team or body.get("team_id") or "-"
        reply_ts = event.reply_ts
        thread = f"{event.channel}:{reply_ts}" if reply_ts else event.channel
        inbound = InboundMessage(
            channel=CHANNEL,
            external_user_id=f"{team}/{event.user}",
            # channel:ts names the message itself, so an app_mention and a message event for the
            # same message, and every redelivery of either, collapse into one turn
            external_message_id=f"{event.channel}:{event.ts}",
            identity=f"slack:{team}/{event.user}",
            text=text,
            thread=thread,
            attachments=tuple(f.attachment() for f in event.files),
        )
        if self.connection is not None:
            inbound = scoped(inbound, self.connection)
        if readable and self.context.media is not None:
            sources = media_sources(readable, self.client.token or "", self.context.settings.slack_api_base)
            outcome = await self.context.media.accept(inbound, sources, delivery_id=delivery_id)
            return await media_turn_work(self.context, outcome, self._sink(event.channel, reply_ts), CHANNEL,
                                         ("msg", inbound.external_message_id), f"slack media answer {event.ts}")
        turn = await self.context.pipeline.accept(inbound, delivery_id=delivery_id)
        return None if turn is None else TurnWork(turn, self._sink(event.channel, reply_ts))

    async def _accept_choice(self, payload: dict, delivery_id: str | None) -> TurnWork | None:
        """A queued choice press: the buttons taken off its message, the choice the person's next message in
        the conversation of that message's chat or thread."""
        press = ChoicePress.parse(payload)
        if press is None:
            return None
        await take_choice(self.client, press)
        inbound = InboundMessage(
            channel=CHANNEL,
            external_user_id=f"{press.team}/{press.user}",
            external_message_id=f"{press.channel}:{press.message_ts}:choice",  # one turn per proposal
            identity=f"slack:{press.team}/{press.user}",
            text=press.choice,
            thread=f"{press.channel}:{press.thread_ts}" if press.thread_ts else press.channel,
        )
        if self.connection is not None:
            inbound = scoped(inbound, self.connection)
        turn = await self.context.pipeline.accept(inbound, delivery_id=delivery_id)
        return None if turn is None else TurnWork(turn, self._sink(press.channel, press.thread_ts))

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_route(EVENTS_PATH, self.events, methods=["POST"], include_in_schema=False)  # a plain webhook route
        return router


def _json_object(body: bytes) -> dict:
    try:
        value = json.loads(body)
    except ValueError:  # form-encoded payloads (interactivity) are bolt's
        return {}
    return value if isinstance(value, dict) else {}


def _form_payload(text: str) -> str | None:
    return dict(parse_qsl(text, keep_blank_values=True)).get("payload") if "payload" in text else None


def _choice_press(text: str) -> dict | None:
    """A form-encoded interaction that presses one of a reply's choices (checked and decoded already)."""
    payload = _form_payload(text)
    value = json.loads(payload) if payload else None
    return value if isinstance(value, dict) and ChoicePress.parse(value) is not None else None


def _signed_payload(text: str, content_type: str | None) -> dict:
    """A verified body decoded under the API's JSON rules, the way bolt will read it (JSON, or a
    form whose ``payload`` field is JSON), so bolt and the queued turn only ever see what decodes
    cleanly. Slack signed it, but a malformed body is still refused (400), never a 500."""
    try:
        if (content_type or "").split(";")[0].strip() == "application/json" or text.startswith("{"):
            value, where = decode_json(text), "body"
        elif (payload := _form_payload(text)) is not None:
            value, where = decode_json(payload, where="body.payload"), "body.payload"
            value = {} if isinstance(value, dict) else value  # interactivity: bolt's business
        else:
            return {}
        if not isinstance(value, dict):
            raise BadRequest(f"{where}: a Slack payload is a JSON object")
        return value
    except InvalidJSON as exc:
        raise BadRequest(exc.message) from None


def build(context: ChannelContext) -> SlackAdapter | None:
    settings = context.settings
    if settings.slack_bot_token is None or settings.slack_signing_secret is None:
        return None
    client = AsyncWebClient(token=settings.slack_bot_token.get_secret_value(), base_url=settings.slack_api_base)
    return SlackAdapter(context, client, settings.slack_signing_secret.get_secret_value())
