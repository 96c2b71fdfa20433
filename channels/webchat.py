"""Web chat: REST and WebSocket endpoints, the standalone ``/chat`` page and the embeddable widget."""

from __future__ import annotations

import json
import logging
import uuid
from importlib import resources

from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, ValidationError

from channels.webchat_sessions import WebSession, WebSessions
from gateway.api.auth import bearer_token
from gateway.channel import Capabilities, DeliveryReport
from gateway.errors import Conflict, GatewayError, InvalidInput, PayloadTooLarge
from gateway.models import InboundMessage
from gateway.pipeline import TurnOutcome
from gateway.services import Services

log = logging.getLogger(__name__)
CHANNEL = "webchat"


class ChatMessageIn(BaseModel):
    text: str
    client_message_id: str | None = Field(default=None, max_length=128)


def _static(name: str) -> str:
    return resources.files("channels.static").joinpath(name).read_text(encoding="utf-8")


class _CollectingSink:
    """REST: the reply is the HTTP response, so delivery is collecting it."""

    streaming = False
    channel = CHANNEL

    def __init__(self) -> None:
        self.text: str | None = None

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        pass

    async def deliver(self, text: str) -> DeliveryReport:
        self.text = text
        return DeliveryReport(delivered=True)


class _SocketSink:
    streaming = True
    channel = CHANNEL

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws

    async def delta(self, text: str) -> None:
        await self.ws.send_json({"type": "delta", "text": text})

    async def deliver(self, text: str) -> DeliveryReport:
        return DeliveryReport(delivered=True)  # the final frame follows with the turn id


def _outcome_json(outcome: TurnOutcome) -> dict:
    msg = outcome.agent_message
    return {
        "reply": {"text": outcome.reply.text, "message_id": msg.id, "created_at": msg.created_at.isoformat()},
        "sources": [
            {"source": h.source, "title": h.title, "score": round(h.score, 4)} for h in outcome.turn.hits
        ],
        "turn_id": outcome.turn.trace.turn_id,
    }


class WebChatAdapter:
    name = CHANNEL
    capabilities = Capabilities(max_length=100_000, markup="markdown", streaming=True, typing=True)

    def __init__(self, services: Services) -> None:
        self.services = services
        self.sessions = WebSessions(services.store)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def validate_text(self, text: str) -> str:
        if not text.strip():
            raise InvalidInput("text: must not be empty")
        limit = self.services.settings.max_message_chars
        if len(text) > limit:
            raise PayloadTooLarge(f"text is {len(text)} characters; the limit is {limit}")
        return text

    def inbound(self, session: WebSession, body: ChatMessageIn) -> InboundMessage:
        return InboundMessage(
            channel=CHANNEL,
            external_user_id=session.id,
            external_message_id=body.client_message_id or uuid.uuid4().hex,
            identity=session.identity,
            text=self.validate_text(body.text),
            thread=session.id,
        )

    async def post_message(self, session: WebSession, body: ChatMessageIn) -> dict:
        sink = _CollectingSink()
        outcome = await self.services.pipeline.handle(self.inbound(session, body), sink)
        if outcome is None:
            raise Conflict("this message id was already received; its reply is in the transcript")
        return _outcome_json(outcome)

    async def transcript(self, session: WebSession) -> dict:
        messages = await self.services.store.persona_messages(session.persona_id, newest=500)
        return {
            "session_id": session.id,
            "messages": [
                {
                    "id": m.id,
                    "role": m.role.value,
                    "text": m.text,
                    "created_at": m.created_at.isoformat(),
                    "turn_id": m.turn_id,
                }
                for m in messages
            ],
        }

    async def socket(self, ws: WebSocket, session_id: str) -> None:
        try:
            session = await self.sessions.authenticate(session_id, ws.query_params.get("token"))
        except GatewayError as exc:
            await ws.close(code=4401 if exc.status == 401 else 4404, reason=exc.message)
            return
        await ws.accept()
        while True:
            try:
                raw = await ws.receive_text()
            except WebSocketDisconnect:
                return
            try:
                body = ChatMessageIn.model_validate(json.loads(raw))
                turn = await self.services.pipeline.accept(self.inbound(session, body))
                if turn is None:
                    raise Conflict("this message id was already received")
                outcome = await self.services.pipeline.run(turn, _SocketSink(ws))
                await ws.send_json({"type": "message", **_outcome_json(outcome)})
            except (json.JSONDecodeError, ValidationError):
                await ws.send_json(
                    {"type": "error", "status": 400, "error": "bad_request",
                     "message": 'send JSON like {"text": "..."}'}
                )
            except GatewayError as exc:
                await ws.send_json(
                    {"type": "error", "status": exc.status, "error": exc.kind, "message": exc.message}
                )
            except WebSocketDisconnect:
                return

    def router(self) -> APIRouter:
        router = APIRouter()
        adapter = self

        @router.post("/api/chat/sessions", status_code=201)
        async def create_session() -> dict:
            session, token = await adapter.sessions.create()
            return {"session_id": session.id, "token": token, "persona_id": session.persona_id}

        @router.post("/api/chat/sessions/{session_id}/messages")
        async def post_message(session_id: str, body: ChatMessageIn, request: Request) -> dict:
            session = await adapter.sessions.authenticate(session_id, bearer_token(request))
            return await adapter.post_message(session, body)

        @router.get("/api/chat/sessions/{session_id}/messages")
        async def get_messages(session_id: str, request: Request) -> dict:
            session = await adapter.sessions.authenticate(session_id, bearer_token(request))
            return await adapter.transcript(session)

        @router.websocket("/api/chat/sessions/{session_id}/ws")
        async def chat_socket(ws: WebSocket, session_id: str) -> None:
            await adapter.socket(ws, session_id)

        @router.get("/chat", response_class=HTMLResponse)
        async def chat_page(request: Request) -> HTMLResponse:
            return HTMLResponse(_static("chat.html"))

        @router.get("/widget.js")
        async def widget() -> Response:
            return Response(
                _static("widget.js"),
                media_type="application/javascript",
                headers={"Cache-Control": "public, max-age=300"},
            )

        return router


def build(services: Services) -> WebChatAdapter:
    return WebChatAdapter(services)


__all__ = ["WebChatAdapter", "build"]
