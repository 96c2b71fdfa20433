"""A fake Slack Web API at ``<base>/api/<method>``: auth.test (bolt calls it), chat.postMessage
(each answer's ``ts`` kept in ``sent_ts``) and chat.update.

Records every call with its parameters; scripted failures answer like Slack (429 with
``Retry-After`` and ``{"ok": false, "error": "ratelimited"}``, 5xx with ``{"ok": false}``; a scripted ``description``
is the ``error``, as a vendor that echoes what it was sent would answer).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.recording import Recorder

TEAM_ID = "T0TEST001"
BOT_USER_ID = "U0BOT0001"
BOT_ID = "B0BOT0001"
TOKEN = "xoxb-0000-fake-test-token"


@dataclass
class FakeSlack:
    token: str = TOKEN
    recorder: Recorder = field(default_factory=Recorder)
    url: str = ""
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    sent_ts: list[str] = field(default_factory=list)  # the ts chat.postMessage answered, in order
    files: dict[str, bytes] = field(default_factory=dict)  # issue 44: served at /files-pri/<id>/<name> (bot token)

    def posted(self, channel: str | None = None) -> list[dict]:
        return [c.params for c in self.recorder.received("chat.postMessage")
                if channel is None or c.params.get("channel") == channel]

    def sent_texts(self) -> list[str]:
        return [p["text"] for p in self.posted()]

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.get("/files-pri/{file_id}/{name}")
        async def download(file_id: str, name: str, request: Request):
            authorized = request.headers.get("authorization") == f"Bearer {fake.token}"
            fake.recorder.record("files-pri", {"file": file_id, "authorized": authorized}, 200 if authorized else 302)
            if not authorized or file_id not in fake.files:  # Slack sends a sign-in page, not the file
                return Response(b"<html>sign in</html>", media_type="text/html")
            return Response(fake.files[file_id], media_type="application/octet-stream")

        @app.post("/api/{method}")
        async def call(method: str, request: Request):
            if request.headers.get("content-type", "").startswith("application/json"):
                params = await request.json()
            else:
                params = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            if request.headers.get("authorization") != f"Bearer {fake.token}":
                fake.recorder.record(method, params, 200)
                return {"ok": False, "error": "invalid_auth"}
            failure = fake.recorder.next_failure(method)
            if failure is not None:
                fake.recorder.record(method, params, failure.status)
                headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                error = failure.description or ("ratelimited" if failure.status == 429 else "internal_error")
                return JSONResponse({"ok": False, "error": error}, failure.status, headers=headers)
            fake.recorder.record(method, params, 200)
            if method == "auth.test":
                return {"ok": True, "url": "https://test.slack.com/", "team": "Test", "user": "switchboard",
                        "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}
            if method == "chat.update":
                return {"ok": True, "channel": params["channel"], "ts": params["ts"], "text": params.get("text", "")}
            if method == "chat.postMessage":
                ts = f"{int(time.time())}.{next(fake._ids):06d}"
                fake.sent_ts.append(ts)
                return {"ok": True, "channel": params["channel"], "ts": ts,
                        "message": {"type": "message", "text": params.get("text", ""), "bot_id": BOT_ID, "ts": ts}}
            return {"ok": False, "error": "unknown_method"}

        return app
