"""One bot's Discord Gateway session over a WebSocket (``websockets``), resumable from any replica.

Not ``discord.py``: its ``Client`` owns the session (its id and sequence live in the client object, a
resume from another process has no public way in), its REST base is one process-wide class attribute
(``Route.BASE``) where every connection here has the base of its settings, and it answers events in
callbacks on the spot, where our messages go into the durable inbox and are answered by its consumers.
The Gateway's part we need is small: HELLO → IDENTIFY (or RESUME) → READY / RESUMED → dispatches,
with heartbeats acknowledged in between; RECONNECT and INVALID_SESSION say how to come back.

The session id, the last sequence number and the resume URL live in Redis (``ResumeState``), the
sequence written after each dispatch is handled: a replica taking the connection over resumes where the
last holder stopped, and Discord replays what it missed (the inbox drops what was queued already).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from redis.asyncio import Redis
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

__all__ = ["INTENTS", "GatewayRefused", "GatewaySession", "ResumeState"]

log = logging.getLogger(__name__)

GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT = 1 << 9, 1 << 12, 1 << 15
INTENTS = GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 0, 1, 2, 6, 7, 9, 10, 11
# Close codes after which trying again cannot help: bad token, bad shard, intents not allowed for the bot
FATAL = {4004: "the bot token was refused", 4010: "invalid shard", 4011: "sharding required",
         4012: "invalid API version", 4013: "invalid intents",
         4014: "intents not allowed: turn on the Message Content intent in the developer portal"}
FRESH = frozenset({4007, 4009})  # invalid sequence, session timed out: identify again
STATE_TTL_S = 7 * 24 * 3600


class GatewayRefused(Exception):
    """Discord closed the Gateway for a reason another try cannot fix (``FATAL``)."""


@dataclass(frozen=True)
class Resume:
    session_id: str
    seq: int | None
    url: str | None
    user_id: str | None


class ResumeState:
    """A connection's Gateway session as Redis keeps it, for whichever replica holds the connection next."""

    def __init__(self, redis: Redis, key: str) -> None:
        self.redis, self.key = redis, key

    async def load(self) -> Resume | None:
        found = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                 for k, v in (await self.redis.hgetall(self.key)).items()}
        if not found.get("session_id"):
            return None
        seq = found.get("seq")
        return Resume(found["session_id"], int(seq) if seq else None, found.get("url") or None,
                      found.get("user_id") or None)

    async def ready(self, session_id: str, url: str | None, user_id: str, seq: int | None) -> None:
        fields = {"session_id": session_id, "url": url or "", "user_id": user_id, "seq": "" if seq is None else seq}
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.key).hset(self.key, mapping=fields).expire(self.key, STATE_TTL_S)
            await pipe.execute()

    async def advance(self, seq: int) -> None:
        await self.redis.hset(self.key, "seq", seq)

    async def clear(self) -> None:
        await self.redis.delete(self.key)


OnMessage = Callable[[dict[str, Any], str], Awaitable[None]]  # a MESSAGE_CREATE's data, the bot's user id


def _versioned(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", urlencode({"v": 10, "encoding": "json"}), ""))


class GatewaySession:
    def __init__(self, url: str, token: str, state: ResumeState, on_message: OnMessage, *,
                 backoff_s: float = 1.0) -> None:
        self.url, self.token, self.state, self.on_message = url, token, state, on_message
        self.backoff_s = backoff_s
        self.seq: int | None = None
        self.user_id: str | None = None
        self._acked = True

    async def run(self) -> None:
        """Hold the session until cancelled: reconnect (resuming) after every drop; ``GatewayRefused`` when
        Discord will not have the bot."""
        failures = 0
        while True:
            resume = await self.state.load()
            try:
                await self._connect(resume)
                failures = 0
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                if code in FATAL:
                    await self.state.clear()
                    raise GatewayRefused(f"Discord closed the Gateway ({code}): {FATAL[code]}") from None
                if code in FRESH:
                    await self.state.clear()
                log.info("discord gateway: connection closed (%s); resuming", code)
            except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
                failures += 1
                log.warning("discord gateway: could not connect (%s: %s)", type(exc).__name__, exc)
            await asyncio.sleep(min(self.backoff_s * 2 ** failures, 30.0) * random.uniform(0.8, 1.2))

    async def _connect(self, resume: Resume | None) -> None:
        url = resume.url if resume is not None and resume.url else self.url
        async with connect(_versioned(url), max_size=2**23, open_timeout=15) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if hello.get("op") != HELLO:
                log.warning("discord gateway: no HELLO first (op %s); reconnecting", hello.get("op"))
                return
            interval = float(hello["d"]["heartbeat_interval"]) / 1000
            if resume is not None:
                self.seq, self.user_id = resume.seq, resume.user_id
                await self._send(ws, RESUME, {"token": self.token, "session_id": resume.session_id, "seq": resume.seq})
            else:
                self.seq = None
                await self._send(ws, IDENTIFY, {"token": self.token, "intents": INTENTS, "properties": {
                    "os": "linux", "browser": "switchboard", "device": "switchboard"}})
            self._acked = True
            beating = asyncio.create_task(self._heartbeat(ws, interval), name="discord-heartbeat")
            try:
                async for raw in ws:
                    if not await self._handle(ws, json.loads(raw)):
                        await ws.close(4000, "reconnecting")  # not 1000: the session stays resumable
                        return
            except asyncio.CancelledError:  # stopped here (a lease handed over, a change): resumable elsewhere;
                # said outright, not left to how the client library closes on an exception (1011 today)
                await asyncio.wait_for(ws.close(4000, "handing over"), 2)
                raise
            finally:
                beating.cancel()
                await asyncio.gather(beating, return_exceptions=True)

    async def _handle(self, ws: ClientConnection, payload: dict[str, Any]) -> bool:
        """Handle one Gateway payload; False when Discord asks us to come back (RECONNECT, INVALID_SESSION)."""
        op = payload.get("op")
        if op == DISPATCH:
            await self._dispatch(payload.get("t"), payload.get("d") or {}, payload.get("s"))
        elif op == HEARTBEAT:
            await self._send(ws, HEARTBEAT, self.seq)
        elif op == HEARTBEAT_ACK:
            self._acked = True
        elif op == RECONNECT:
            return False
        elif op == INVALID_SESSION:
            if not payload.get("d"):  # not resumable: identify again, after the 1-5 s Discord asks for
                await self.state.clear()
                await asyncio.sleep(random.uniform(1, 5))
            return False
        return True

    async def _dispatch(self, event: str | None, data: dict[str, Any], seq: int | None) -> None:
        if event == "READY":
            self.user_id = str(data["user"]["id"])
            await self.state.ready(str(data["session_id"]), data.get("resume_gateway_url"), self.user_id, seq)
        elif event == "MESSAGE_CREATE" and self.user_id is not None:
            await self.on_message(data, self.user_id)
        if seq is not None:  # only once the event is handled: a drop before this replays it on resume
            self.seq = seq
            await self.state.advance(seq)

    async def _heartbeat(self, ws: ClientConnection, interval: float) -> None:
        await asyncio.sleep(interval * random.random())
        while True:
            if not self._acked:  # a zombie connection: drop it and resume
                log.warning("discord gateway: heartbeat not acknowledged; reconnecting")
                await ws.close(4000, "heartbeat not acknowledged")
                return
            self._acked = False
            await self._send(ws, HEARTBEAT, self.seq)
            await asyncio.sleep(interval)

    @staticmethod
    async def _send(ws: ClientConnection, op: int, data: Any) -> None:
        await ws.send(json.dumps({"op": op, "d": data}))
