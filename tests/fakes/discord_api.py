"""A fake Discord: the REST API at ``<url>/api/v10`` and the Gateway WebSocket at ``<url>/gateway``.

REST: ``GET /users/@me`` with ``Authorization: Bot <token>`` (another token: 401 as Discord answers it),
``PUT /applications/{id}/commands`` (an unknown application: 404 ``Unknown Application``), ``GET
/gateway/bot``, ``GET /channels/{id}`` (its ``type`` from ``channel_types``, a text channel by default),
typing, messages, threads opened on a message (a second time: 400, code 160004), and an interaction's
``@original`` edit and follow-ups. Every call is recorded under a method name (``create message``,
``typing``, ``start thread``, ``edit original``, ``follow-up``, ``users/@me``, ``commands``); scripted
failures answer in Discord's error shape (a 429 with ``retry_after`` in the body and ``Retry-After``).

Gateway: HELLO on connect; IDENTIFY → READY with a new session (an unknown token: close 4004); RESUME
of a known session → the events after the sequence given (``replay_overlap`` more: as if the client's
saved sequence lagged), then RESUMED; an unknown session, a token no longer known, or a session the
client closed with 1000 or 1001 (Discord ends a session so closed) → INVALID_SESSION. Heartbeats are
counted and acknowledged (unless ``ack_heartbeats`` is off). A test injects events with ``dispatch``
(kept in the session, sent when a socket is open: missed ones are replayed on resume), drops the
connection with ``drop`` (holding new ones until ``reopen``) and asks for a reconnect (``ask_reconnect``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response

from tests.fakes.recording import Recorder

TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfAkEx.discord-bot-token-for-tests-0001"
BOT_ID = "1100000000000000001"
APPLICATION_ID = "1100000000000000002"
BOT_NAME = "bikeshop-bot"
USER_ID, USER_NAME = "2200000000000000001", "ada"
GUILD_ID, CHANNEL_ID, DM_CHANNEL_ID = "3300000000000000001", "3300000000000000002", "3300000000000000003"
_KEY = Ed25519PrivateKey.generate()
PUBLIC_KEY = _KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
_ids = itertools.count(int(time.time() * 1000) << 22)


def snowflake() -> str:
    return str(next(_ids))


def signed_headers(body: bytes, *, key: Ed25519PrivateKey = _KEY) -> dict[str, str]:
    """Headers as Discord signs an interaction: Ed25519 over the timestamp and the raw body."""
    timestamp = str(int(time.time()))
    signature = key.sign(timestamp.encode() + body).hex()
    return {"X-Signature-Ed25519": signature, "X-Signature-Timestamp": timestamp, "Content-Type": "application/json"}


def _author(user_id: str = USER_ID, name: str = USER_NAME, *, bot: bool = False) -> dict:
    user = {"id": user_id, "username": name, "global_name": name.capitalize(), "discriminator": "0", "avatar": None}
    return {**user, "bot": True} if bot else user


def message(text: str, *, channel_id: str = DM_CHANNEL_ID, guild_id: str | None = None, mentions_bot: bool = False,
            reply_to_bot: bool = False, author: dict | None = None, message_id: str | None = None) -> dict:
    """A ``MESSAGE_CREATE``'s data as Discord sends it (a DM unless ``guild_id``)."""
    mid = message_id or snowflake()
    mentions = [_author(BOT_ID, BOT_NAME, bot=True)] if mentions_bot else []
    content = f"<@{BOT_ID}> {text}" if mentions_bot else text
    data: dict[str, Any] = {
        "id": mid, "channel_id": channel_id, "type": 19 if reply_to_bot else 0, "content": content,
        "author": author or _author(), "mentions": mentions, "mention_roles": [], "mention_everyone": False,
        "attachments": [], "embeds": [], "timestamp": "2026-11-27T06:00:00.000000+00:00", "edited_timestamp": None,
        "tts": False, "pinned": False, "flags": 0, "components": []}
    if guild_id is not None:
        data["guild_id"] = guild_id
        data["member"] = {"roles": [], "joined_at": "2026-01-01T00:00:00.000000+00:00", "deaf": False, "mute": False}
    if reply_to_bot:
        earlier = snowflake()
        data["message_reference"] = {"type": 0, "message_id": earlier, "channel_id": channel_id, "guild_id": guild_id}
        data["referenced_message"] = {"id": earlier, "channel_id": channel_id, "content": "An earlier answer",
                                      "author": _author(BOT_ID, BOT_NAME, bot=True), "mentions": [], "type": 0}
    return data


def ask(question: str, *, interaction_id: str | None = None, channel_id: str = CHANNEL_ID,
        guild_id: str | None = GUILD_ID) -> dict:
    """An ``/ask`` interaction (type 2) as Discord posts it to the Interactions endpoint."""
    user = _author()
    interaction: dict[str, Any] = {
        "id": interaction_id or snowflake(), "application_id": APPLICATION_ID, "type": 2, "version": 1,
        "token": "aW50ZXJhY3Rpb246" + snowflake() + "-interaction-token", "channel_id": channel_id,
        "data": {"id": snowflake(), "name": "ask", "type": 1,
                 "options": [{"name": "question", "type": 3, "value": question}]},
        "locale": "en-US", "app_permissions": "0", "entitlements": []}
    if guild_id is not None:
        interaction["guild_id"] = guild_id
        interaction["member"] = {"user": user, "roles": [], "permissions": "0"}
    else:
        interaction["user"] = user
    return interaction


def post_interaction(client, path: str, interaction: dict, *, signed: bool = True):
    body = json.dumps(interaction).encode()
    headers = signed_headers(body) if signed else signed_headers(body, key=Ed25519PrivateKey.generate())
    return client.post(path, content=body, headers=headers)


@dataclass
class Session:
    id: str
    events: list[tuple[int, str, dict]] = field(default_factory=list)
    socket: WebSocket | None = None


@dataclass
class FakeDiscord:
    recorder: Recorder = field(default_factory=Recorder)
    url: str = ""
    tokens: dict[str, dict] = field(default_factory=dict)  # bot token -> its user
    applications: set[str] = field(default_factory=set)
    channel_types: dict[str, int] = field(default_factory=dict)
    heartbeat_interval_ms: int = 41_250
    ack_heartbeats: bool = True  # False: a zombie connection, as the client must detect it
    heartbeats: int = 0
    replay_overlap: int = 0
    identifies: list[dict] = field(default_factory=list)
    resumes: list[dict] = field(default_factory=list)
    sessions: dict[str, Session] = field(default_factory=dict)
    connects: int = 0
    _current: str | None = None
    _threads: set[str] = field(default_factory=set)
    _open: bool = True
    _loop: asyncio.AbstractEventLoop | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base(self) -> str:
        return f"{self.url}/api/v10"

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/gateway"

    def add_bot(self, token: str = TOKEN, application_id: str = APPLICATION_ID) -> None:
        self.tokens[token] = _author(BOT_ID, BOT_NAME, bot=True)
        self.applications.add(application_id)

    def reset(self) -> None:
        self.drop()
        with self._lock:
            self.recorder.reset()
            self.tokens.clear()
            self.applications.clear()
            self.channel_types.clear()
            self.identifies.clear()
            self.resumes.clear()
            self.sessions.clear()
            self._threads.clear()
            self._current = None
            self.connects = 0
            self.replay_overlap = 0
            self.heartbeat_interval_ms = 41_250
            self.ack_heartbeats = True
            self.heartbeats = 0
            self._open = True

    # -- what a test reads -----------------------------------------------------------------------
    def sent(self, method: str = "create message") -> list[dict]:
        return [c.params for c in self.recorder.received(method)]

    def sent_texts(self, method: str = "create message") -> list[str]:
        return [p["content"] for p in self.sent(method)]

    def open_sockets(self) -> int:
        return sum(1 for s in list(self.sessions.values()) if s.socket is not None)

    # -- what a test does to the Gateway ----------------------------------------------------------
    def dispatch(self, event: str, data: dict) -> int:
        """An event in the current session (sent now when its socket is open); its sequence number."""
        with self._lock:
            assert self._current is not None, "no session: nothing identified yet"
            session = self.sessions[self._current]
            seq = len(session.events) + 2  # READY was 1
            session.events.append((seq, event, data))
            socket = session.socket
        if socket is not None and self._loop is not None:
            payload = {"op": 0, "t": event, "s": seq, "d": data}
            asyncio.run_coroutine_threadsafe(self._send(socket, payload), self._loop).result(5)
        return seq

    def drop(self, *, hold: bool = False) -> None:
        """Close the open Gateway sockets (4000, resumable); with ``hold``, new ones wait until ``reopen``."""
        self._open = not hold
        for session in list(self.sessions.values()):
            socket, session.socket = session.socket, None
            if socket is not None and self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._close(socket), self._loop).result(5)

    def ask_reconnect(self) -> None:
        """Op 7 RECONNECT on the open sockets, as Discord asks a client to come back (and resume)."""
        for session in list(self.sessions.values()):
            if session.socket is not None and self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._send(session.socket, {"op": 7, "d": None}), self._loop).result(5)

    def reopen(self) -> None:
        self._open = True

    @staticmethod
    async def _send(socket: WebSocket, payload: dict) -> None:
        try:
            await socket.send_json(payload)
        except (RuntimeError, WebSocketDisconnect):
            pass

    @staticmethod
    async def _close(socket: WebSocket) -> None:
        try:
            await socket.close(code=4000)
        except RuntimeError:
            pass

    # -- the server --------------------------------------------------------------------------------
    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self
        api = "/api/v10"

        def bot(request: Request) -> dict | None:
            return fake.tokens.get(request.headers.get("authorization", "").removeprefix("Bot "))

        def refused(method: str, params: dict, status: int, message_text: str, code: int) -> JSONResponse:
            fake.recorder.record(method, params, status)
            return JSONResponse({"message": message_text, "code": code}, status)

        def failed(method: str, params: dict) -> JSONResponse | None:
            failure = fake.recorder.next_failure(method)
            if failure is None:
                return None
            fake.recorder.record(method, params, failure.status)
            if failure.status == 429:
                after = failure.retry_after or 0
                answer = JSONResponse({"message": "You are being rate limited.", "retry_after": after,
                                       "global": False}, 429)
                answer.headers["Retry-After"] = str(after)
                return answer
            return JSONResponse({"message": failure.description or "Internal Server Error", "code": 0},
                                failure.status)

        async def sent_by_bot(method: str, request: Request, params: dict, answer: dict | None):
            if bot(request) is None:
                return refused(method, params, 401, "401: Unauthorized", 0)
            if (failure := failed(method, params)) is not None:
                return failure
            fake.recorder.record(method, params, 200)
            return Response(status_code=204) if answer is None else answer

        @app.get(f"{api}/users/@me")
        async def me(request: Request):
            return await sent_by_bot("users/@me", request, {}, bot(request))

        @app.put(f"{api}/applications/{{application_id}}/commands")
        async def commands(application_id: str, request: Request):
            params = {"_application": application_id, "commands": await request.json()}
            if bot(request) is not None and application_id not in fake.applications:
                return refused("commands", params, 404, "Unknown Application", 10002)
            return await sent_by_bot("commands", request, params, params["commands"])

        @app.get(f"{api}/gateway/bot")
        async def gateway_bot(request: Request):
            return await sent_by_bot("gateway/bot", request, {}, {"url": fake.gateway_url, "shards": 1})

        @app.get(f"{api}/channels/{{channel_id}}")
        async def channel(channel_id: str, request: Request):
            kind = fake.channel_types.get(channel_id, 11 if channel_id in fake._threads else 0)
            return await sent_by_bot("channel", request, {"_channel": channel_id}, {"id": channel_id, "type": kind})

        @app.post(f"{api}/channels/{{channel_id}}/typing")
        async def typing(channel_id: str, request: Request):
            return await sent_by_bot("typing", request, {"_channel": channel_id}, None)

        @app.post(f"{api}/channels/{{channel_id}}/messages")
        async def create(channel_id: str, request: Request):
            params = {"_channel": channel_id, **await request.json()}
            return await sent_by_bot("create message", request, params,
                                     {"id": snowflake(), "channel_id": channel_id, "content": params.get("content"),
                                      "author": _author(BOT_ID, BOT_NAME, bot=True)})

        @app.post(f"{api}/channels/{{channel_id}}/messages/{{message_id}}/threads")
        async def thread(channel_id: str, message_id: str, request: Request):
            params = {"_channel": channel_id, "_message": message_id, **await request.json()}
            if bot(request) is not None and message_id in fake._threads:
                return refused("start thread", params, 400, "A thread has already been created for this message",
                               160004)
            answer = await sent_by_bot("start thread", request, params, {
                "id": message_id, "type": 11, "parent_id": channel_id, "guild_id": GUILD_ID, "name": params["name"]})
            if isinstance(answer, dict):
                fake._threads.add(message_id)
            return answer

        async def interaction_reply(method: str, application_id: str, token: str, request: Request):
            params = {"_application": application_id, "_token": token, **await request.json()}
            if (failure := failed(method, params)) is not None:
                return failure
            fake.recorder.record(method, params, 200)
            return {"id": snowflake(), "content": params.get("content")}

        @app.patch(f"{api}/webhooks/{{application_id}}/{{token}}/messages/@original")
        async def edit_original(application_id: str, token: str, request: Request):
            return await interaction_reply("edit original", application_id, token, request)

        @app.post(f"{api}/webhooks/{{application_id}}/{{token}}")
        async def follow_up(application_id: str, token: str, request: Request):
            return await interaction_reply("follow-up", application_id, token, request)

        @app.websocket("/gateway")
        async def gateway(socket: WebSocket):
            await fake._serve(socket)

        return app

    async def _serve(self, socket: WebSocket) -> None:
        self._loop = asyncio.get_running_loop()
        while not self._open:  # noqa: ASYNC110 - held by ``drop(hold=True)``, set from the test's thread
            await asyncio.sleep(0.02)
        await socket.accept()
        with self._lock:
            self.connects += 1
        await socket.send_json({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}})
        session: Session | None = None
        try:
            while True:
                payload = await socket.receive_json()
                op, data = payload.get("op"), payload.get("d")
                if op == 1:
                    self.heartbeats += 1
                    if self.ack_heartbeats:
                        await socket.send_json({"op": 11})
                elif op == 2:
                    session = await self._identify(socket, data)
                    if session is None:
                        return
                elif op == 6:
                    session = await self._resume(socket, data)
        except WebSocketDisconnect as closed:
            if session is not None and closed.code in (1000, 1001):  # as Discord: a clean close ends the session
                self.sessions.pop(session.id, None)
        finally:
            if session is not None and session.socket is socket:
                session.socket = None

    async def _identify(self, socket: WebSocket, data: dict) -> Session | None:
        user = self.tokens.get(data.get("token", ""))
        self.identifies.append({k: v for k, v in data.items() if k != "token"})
        if user is None:
            await socket.close(code=4004)
            return None
        with self._lock:
            session = Session(id=f"session-{snowflake()}", socket=socket)
            self.sessions[session.id] = session
            self._current = session.id
        await socket.send_json({"op": 0, "t": "READY", "s": 1, "d": {
            "v": 10, "user": user, "session_id": session.id, "resume_gateway_url": self.gateway_url,
            "guilds": [{"id": GUILD_ID, "unavailable": True}], "application": {"id": APPLICATION_ID, "flags": 0}}})
        return session

    async def _resume(self, socket: WebSocket, data: dict) -> Session | None:
        self.resumes.append({k: v for k, v in data.items() if k != "token"})
        session = self.sessions.get(data.get("session_id", ""))
        if session is None or data.get("token") not in self.tokens:
            await socket.send_json({"op": 9, "d": False})
            return None
        after = (data.get("seq") or 0) - self.replay_overlap
        with self._lock:
            missed = [e for e in session.events if e[0] > after]
            session.socket = socket
        for seq, event, payload in missed:
            await socket.send_json({"op": 0, "t": event, "s": seq, "d": payload})
        await socket.send_json({"op": 0, "t": "RESUMED", "s": None, "d": {}})
        return session
