"""Web chat: REST and WebSocket endpoints, the standalone ``/chat`` page and the embeddable widget."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from importlib import resources

from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, ValidationError

from channels.webchat.sessions import WebSession, WebSessions
from channels.webchat.turns import TurnState, WebTurns
from channels.webchat.voice import VOICE_PATH, answer_recording
from gateway.channel import (
    BadRequest,
    Capabilities,
    ChannelContext,
    Conflict,
    DeliveryReport,
    GatewayError,
    InboundMessage,
    InvalidInput,
    InvalidJSON,
    JSONBodyRoute,
    Message,
    PayloadTooLarge,
    RateLimited,
    Role,
    ToolEvent,
    TranscriptSink,
    Turn,
    TurnOutcome,
    Unauthorized,
    Voter,
    bearer_token,
    chat_page_policy,
    client_address,
    decode_json,
    failure,
)

log = logging.getLogger(__name__)
CHANNEL = "webchat"
SESSION_HEADER = "x-chat-session"  # names the visitor's session on routes outside /api/chat (feedback)


class ChatMessageIn(BaseModel):
    text: str
    client_message_id: str | None = Field(default=None, max_length=128)


def _static(name: str) -> str:
    return resources.files("channels.webchat.static").joinpath(name).read_text(encoding="utf-8")


class _CollectingSink:
    """REST: the reply is the HTTP response, so delivery is collecting it. A client that disconnected before
    then left mid-answer (``gone``: the request's ``is_disconnected``); the reply is stored all the same."""

    streaming = False
    channel = CHANNEL

    def __init__(self, gone: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.text: str | None = None
        self.gone = gone

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        pass

    async def deliver(self, text: str) -> DeliveryReport:
        self.text = text
        return DeliveryReport(delivered=True, left=bool(self.gone and await self.gone()))


class _SocketSink:
    streaming = True
    channel = CHANNEL

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.left = False  # the page went away mid-stream: the reply is finished and stored all the same

    async def delta(self, text: str) -> None:
        if self.left:
            return
        try:
            await self.ws.send_json({"type": "delta", "text": text})
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.left = True

    async def tool_event(self, event: ToolEvent) -> None:
        """While a tool runs the page shows what the agent is doing (``progress``; ``text`` null: done)."""
        text = f"Checking {event.name}\u2026" if event.kind == "call" else None
        await self.ws.send_json({"type": "progress", "tool": event.name, "text": text})

    async def deliver(self, text: str) -> DeliveryReport:
        # the final frame follows with the turn id; a visitor who left finds the reply in the transcript
        return DeliveryReport(delivered=True, left=self.left)


def _frame(raw: str) -> ChatMessageIn:
    """A client's socket frame; only a frame that is not a message is blamed on the client."""
    try:
        return ChatMessageIn.model_validate(decode_json(raw, where="frame"))
    except InvalidJSON as exc:
        raise BadRequest(f'{exc.message}; send JSON like {{"text": "..."}}') from exc
    except ValidationError as exc:
        raise BadRequest('send JSON like {"text": "..."}') from exc


def _message_body(raw: bytes) -> ChatMessageIn:
    """The body of ``POST .../messages``, read only after the session token was checked."""
    try:
        data = decode_json(raw)
    except InvalidJSON as exc:
        raise BadRequest(f"{exc.message}; nothing was stored") from exc
    try:
        return ChatMessageIn.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidInput(f"{where}: {first['msg']}" if where else first["msg"]) from exc


async def _send_error(ws: WebSocket, status: int, kind: str, message: str, retry_after: int | None = None) -> None:
    frame = {"type": "error", "status": status, "error": kind, "message": message}
    if retry_after is not None:
        frame["retry_after"] = retry_after
    with suppress(WebSocketDisconnect, RuntimeError):
        await ws.send_json(frame)


def sources_json(message: Message) -> list[dict]:
    """The knowledge a reply was given, as stored on it: ``n`` is its ``[n]`` in the text."""
    return [s.model_dump(mode="json") for s in message.sources]


def visitor_message_json(m: Message) -> dict | None:
    """A stored message as the visitor's page shows it; None for console notes meant for operators only."""
    if m.role is Role.SYSTEM and not m.notice:
        return None
    row = {"id": m.id, "role": "notice" if m.role is Role.SYSTEM else m.role.value,
           "text": m.notice if m.role is Role.SYSTEM else m.text, "created_at": m.created_at.isoformat(),
           "turn_id": m.turn_id, "sources": sources_json(m), "conversation_id": m.conversation_id}
    if m.author:
        row["author"] = m.author  # an operator's name on their reply
    return row


def _outcome_json(outcome: TurnOutcome) -> dict:
    msg = outcome.agent_message
    if msg is None:  # handed off to a person: their reply arrives as an "operator" frame / in the transcript
        return {"reply": None, "handed_off": True, "sources": [], "turn_id": outcome.turn.trace.turn_id}
    return {
        "reply": {"text": outcome.reply.text, "message_id": msg.id, "created_at": msg.created_at.isoformat(),
                  "conversation_id": msg.conversation_id, "choices": outcome.reply.choices},
        "sources": sources_json(msg),
        "turn_id": outcome.turn.trace.turn_id,
    }


class WebChatAdapter:
    name = CHANNEL
    capabilities = Capabilities(max_length=100_000, markup="markdown", streaming=True, typing=True,
                                citations="structured")

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.sessions = WebSessions(context.store, context.settings.webchat_idle_ttl_s)
        assert context.rate_limits is not None
        self.limits = context.rate_limits
        self.turns = WebTurns(context.store, lease_s=context.settings.turn_lock_lease_s)
        self._sweeper: asyncio.Task[None] | None = None
        context.direct_sinks[CHANNEL] = lambda conversation: TranscriptSink(CHANNEL)
        context.visitors.append(self.visitor)  # a visitor rates the replies of their own conversations

    async def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep(), name="web-chat orphan sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with suppress(asyncio.CancelledError):
                await self._sweeper

    def validate_text(self, text: str) -> str:
        if not text.strip():
            raise InvalidInput("text: must not be empty")
        limit = self.context.settings.max_message_chars
        if len(text) > limit:
            raise PayloadTooLarge(f"text is {len(text)} characters; the limit is {limit}")
        return text

    def inbound(self, session: WebSession, body: ChatMessageIn) -> InboundMessage:
        return InboundMessage(
            channel=CHANNEL,
            external_user_id=session.id,
            # A client's message ids are its own: session A's "msg-1" is not session B's.
            external_message_id=f"{session.id}:{body.client_message_id or uuid.uuid4().hex}",
            identity=session.identity,
            text=self.validate_text(body.text),
            thread=session.id,
        )

    async def answer(self, session: WebSession, body: ChatMessageIn, sink) -> dict:
        """Accept and answer one message; a resent ``client_message_id`` resumes its turn if it was cut."""
        inbound = self.inbound(session, body)
        key = inbound.external_message_id
        # The accepted turn is kept (to answer it if this process dies) in the turn's opening round trip.
        turn = await self.context.pipeline.accept(
            inbound, opening=lambda pipe, accepted: self.turns.save_into(pipe, key, accepted))
        if turn is None:
            return await self._resent(key, sink)
        # The persona's keys (some new with this message) start their idle time again in the turn's last
        # round trip, after its writes.
        turn.closing.append(lambda pipe: self.sessions.touch_into(pipe, session))
        return await self._run(key, turn, sink)

    async def _run(self, key: str, turn: Turn, sink) -> dict:
        async with self.turns.leased(key, turn):
            outcome = await self.context.pipeline.run(turn, sink)
        return _outcome_json(outcome)

    async def _resent(self, key: str, sink) -> dict:
        state = await self.turns.state(key)
        if state is TurnState.ORPHANED:
            turn = await self.turns.take_over(key)
            if turn is not None:  # its process went away mid-turn: answer it here, without storing it again
                log.warning("resuming web-chat turn %s on its resend", turn.trace.turn_id)
                return await self._run(key, turn, sink)
            state = TurnState.RUNNING
        if state is TurnState.RUNNING:
            raise Conflict("this message is still being answered; its reply will appear in the transcript")
        raise Conflict("this message id was already received and answered; its reply is in the transcript")

    async def authenticate(self, session_id: str, token: str | None, address: str | None = None) -> WebSession:
        """The session a token opens; a missing or wrong token is refused and counted like a bad signature.
        With ``address``, one more message from it in the session, counted in the same round trip
        (``limit_message``)."""
        also = None
        if address is not None:
            def also(pipe, who: str):
                return self.limits.queue_webchat_message(pipe, address, who)
        try:
            return await self.sessions.authenticate(session_id, token, also)
        except Unauthorized:
            self.context.metrics.rejected.labels(CHANNEL, "token").inc()
            raise

    async def visitor(self, request: Request) -> Voter | None:
        """The visitor of the session named by ``X-Chat-Session`` (its bearer token checked, the vote counted
        with the session's messages against the chat's rate limits); None without the header."""
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return None
        session = await self.authenticate(session_id, bearer_token(request), client_address(request))
        return Voter(session.identity, session.persona_id)

    async def limit_message(self, session: WebSession, address: str) -> None:
        """One more message from ``address`` in ``session``, or 429 past either limit."""
        await self.limits.take_webchat_message(address, session.limit_key)

    async def post_message(self, session: WebSession, body: ChatMessageIn,
                           gone: Callable[[], Awaitable[bool]] | None = None) -> dict:
        """Answer a ``POST``ed message; ``gone``: whether its client has disconnected (then: abandoned)."""
        return await self.answer(session, body, _CollectingSink(gone))

    async def _sweep(self) -> None:
        """Answer turns whose process died (their replies then show in the transcript)."""
        interval = max(0.2, self.turns.lease_ms / 2000)
        while True:
            await asyncio.sleep(interval)
            try:
                orphans = await self.turns.take_orphans(8)
            except Exception as exc:  # Redis away: the next sweep tries again
                log.warning("web-chat orphan sweep failed: %s", exc)
                continue
            for key, turn in orphans:
                log.warning("resuming web-chat turn %s: its process went away", turn.trace.turn_id)
                self.context.turns.spawn(self._resume(key, turn), what=f"resumed web-chat turn {key}")

    async def _resume(self, key: str, turn: Turn) -> None:
        async with self.turns.leased(key, turn):
            if await self.context.turns.run_turn(turn, _CollectingSink()) is None:
                raise RuntimeError(f"resumed web-chat turn {turn.trace.turn_id} failed again")

    async def transcript(self, session: WebSession) -> dict:
        await self.sessions.touch(session)
        messages = await self.context.store.persona_messages(session.persona_id, newest=500)
        return {
            "session_id": session.id,
            "messages": [row for m in messages if (row := visitor_message_json(m)) is not None],
        }

    async def socket(self, ws: WebSocket, session_id: str) -> None:
        try:
            session = await self.sessions.authenticate(session_id, ws.query_params.get("token"))
        except GatewayError as exc:
            await ws.close(code=4401 if isinstance(exc, Unauthorized) else 4404, reason=exc.message)
            return
        await ws.accept()
        relay = asyncio.create_task(self._relay_operator(ws, session), name="web-chat operator relay")
        try:
            await self._serve_socket(ws, session, client_address(ws))
        finally:
            relay.cancel()
            with suppress(asyncio.CancelledError):
                await relay

    async def _relay_operator(self, ws: WebSocket, session: WebSession) -> None:
        """While the page is open, an operator's replies to this visitor, and the notes that a person
        joined or left, reach it at once."""
        async with self.context.live.listen() as events:
            while True:
                event = await events.get()
                if event.get("channel") != CHANNEL or event.get("persona_id") != session.persona_id:
                    continue
                reply = event.get("role") == Role.OPERATOR.value and event.get("delivery") == "pending"
                if not reply and event.get("role") != Role.SYSTEM.value:
                    continue
                message = await self.context.store.get_message(event["message_id"])
                row = visitor_message_json(message) if message is not None else None
                if row is None:
                    continue
                with suppress(WebSocketDisconnect, RuntimeError):
                    await ws.send_json({"type": "operator" if reply else "notice", "message": row})

    async def _serve_socket(self, ws: WebSocket, session: WebSession, address: str) -> None:
        while True:
            try:
                raw = await ws.receive_text()
            except WebSocketDisconnect:
                return
            try:
                await self.limit_message(session, address)
                body = _frame(raw)
                outcome = await self.answer(session, body, _SocketSink(ws))
                await ws.send_json({"type": "message", **outcome})
            except RateLimited as exc:
                await _send_error(ws, *failure(exc), retry_after=exc.retry_after_s)
            except GatewayError as exc:
                await _send_error(ws, *failure(exc))
            except WebSocketDisconnect:
                return
            except Exception as exc:  # the top of a socket request: log it, tell the client, keep the socket
                status, kind, message = failure(exc)
                if status == 500:
                    log.exception("web-chat socket message failed")
                await _send_error(ws, status, kind, message)

    def router(self) -> APIRouter:
        router = APIRouter(route_class=JSONBodyRoute)
        adapter = self

        @router.post("/api/chat/sessions", status_code=201)
        async def create_session(request: Request) -> dict:
            await adapter.limits.webchat_sessions.take(client_address(request))
            session, token = await adapter.sessions.create()
            return {"session_id": session.id, "token": token, "persona_id": session.persona_id}

        @router.post(
            "/api/chat/sessions/{session_id}/messages",
            openapi_extra={"requestBody": {"required": True, "content": {
                "application/json": {"schema": ChatMessageIn.model_json_schema()}}}},
        )
        async def post_message(session_id: str, request: Request) -> dict:
            # The token is checked before the body is read: a stranger's request costs no parsing.
            session = await adapter.authenticate(session_id, bearer_token(request), client_address(request))
            return await adapter.post_message(session, _message_body(await request.body()), request.is_disconnected)

        @router.post(VOICE_PATH, openapi_extra={"requestBody": {"required": True, "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
        async def post_voice(session_id: str, request: Request) -> dict:
            """A recording from the widget's microphone (issue 44): transcribed, then answered."""
            session = await adapter.authenticate(session_id, bearer_token(request), client_address(request))
            sink = _CollectingSink()
            return await answer_recording(adapter.context, session, await request.body(), sink, CHANNEL,
                                          lambda key, turn: adapter._run(key, turn, sink), adapter.turns.save_into)

        @router.get("/api/chat/sessions/{session_id}/messages")
        async def get_messages(session_id: str, request: Request) -> dict:
            session = await adapter.authenticate(session_id, bearer_token(request))
            return await adapter.transcript(session)

        @router.websocket("/api/chat/sessions/{session_id}/ws")
        async def chat_socket(ws: WebSocket, session_id: str) -> None:
            await adapter.socket(ws, session_id)

        @router.get("/chat", response_class=HTMLResponse)
        async def chat_page(request: Request) -> HTMLResponse:
            frame_origins = self.context.settings.widget_origin_list
            return HTMLResponse(_static("chat.html"),
                                headers={"Content-Security-Policy": chat_page_policy(frame_origins)})

        @router.get("/widget.js", response_class=JavaScriptResponse)
        async def widget() -> Response:
            return JavaScriptResponse(_static("widget.js"), headers={"Cache-Control": "public, max-age=300"})

        # the site's icon, for the chat page and the console alike (a browser asks the root for it)
        @router.get("/favicon.svg", include_in_schema=False)
        async def favicon_svg() -> Response:
            return Response(_static("favicon.svg"), media_type="image/svg+xml", headers=ICON_CACHE)

        @router.get("/favicon.ico", include_in_schema=False)
        async def favicon_ico() -> Response:
            icon = resources.files("channels.webchat.static").joinpath("favicon.ico").read_bytes()
            return Response(icon, media_type="image/x-icon", headers=ICON_CACHE)

        return router


ICON_CACHE = {"Cache-Control": "public, max-age=86400"}


class JavaScriptResponse(Response):
    media_type = "application/javascript"


def build(context: ChannelContext) -> WebChatAdapter:
    return WebChatAdapter(context)


__all__ = ["WebChatAdapter", "build"]
