"""A fake Twilio REST API: ``/2010-04-01/Accounts/<sid>/Messages.json`` with HTTP basic auth.

Answers ``GET /Accounts/<sid>.json`` for the account and any added with ``add_account``; a
create to a WhatsApp recipient in ``outside_window`` is refused with error 63016 as Twilio refuses
a free-form message outside the 24-hour window. Records every message create; scripted failures
answer like Twilio (JSON error body with ``code``/``message``/``status``, ``Retry-After`` on 429).
A create repeating an earlier one's ``I-Twilio-Idempotency-Token`` is answered with the earlier
message and sends nothing, as Twilio does. ``media`` is served at a message's media URL, with basic auth.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.recording import Recorder

ACCOUNT_SID = "AC" + "0" * 31 + "1"
AUTH_TOKEN = "fake-twilio-auth-token-0123456789"
FROM_NUMBER = "+15550001111"


@dataclass
class FakeTwilio:
    account_sid: str = ACCOUNT_SID
    auth_token: str = AUTH_TOKEN
    recorder: Recorder = field(default_factory=Recorder)
    url: str = ""
    tokens: list[str | None] = field(default_factory=list)  # each create's idempotency token, repeats included
    # A crash point: a create is recorded (the SMS is sent) but answered only this much later.
    answer_creates_after_s: float = 0.0
    _by_token: dict[str, dict] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    accounts: dict[str, str] = field(default_factory=dict)  # more accounts: sid -> auth token
    outside_window: set[str] = field(default_factory=set)  # whatsapp:+… recipients past their 24 hours
    # media (issue 44): what ``/Accounts/<sid>/Messages/<MM…>/Media/<ME…>`` serves (media sid -> bytes, type)
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    def add_account(self, sid: str, token: str) -> None:
        self.accounts[sid] = token

    def _authorized(self, sid: str, request: Request) -> bool:
        token = self.auth_token if sid == self.account_sid else self.accounts.get(sid)
        expected = "Basic " + base64.b64encode(f"{sid}:{token}".encode()).decode()
        return token is not None and request.headers.get("authorization") == expected

    def messages(self, to: str | None = None) -> list[dict]:
        return [c.params for c in self.recorder.received("Messages")
                if to is None or c.params.get("To") == to]

    def sent_texts(self, to: str | None = None) -> list[str]:
        return [p["Body"] for p in self.messages(to)]

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.get("/2010-04-01/Accounts/{sid}.json")
        async def fetch_account(sid: str, request: Request):
            if not fake._authorized(sid, request):
                fake.recorder.record("Accounts", {"sid": sid}, 401)
                return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
            failure = fake.recorder.next_failure("Accounts")
            if failure is not None:
                fake.recorder.record("Accounts", {"sid": sid}, failure.status)
                return JSONResponse({"code": 20500, "message": failure.description or "Scripted failure",
                                     "status": failure.status}, failure.status)
            fake.recorder.record("Accounts", {"sid": sid}, 200)
            return {"sid": sid, "friendly_name": f"Account {sid[-4:]}", "status": "active", "type": "Full"}

        @app.get("/2010-04-01/Accounts/{sid}/Messages/{message_sid}/Media/{media_sid}")
        async def fetch_media(sid: str, message_sid: str, media_sid: str, request: Request):
            if not fake._authorized(sid, request):
                fake.recorder.record("Media", {"sid": media_sid}, 401)
                return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
            if media_sid not in fake.media:
                fake.recorder.record("Media", {"sid": media_sid}, 404)
                return JSONResponse({"code": 20404, "message": "Not found", "status": 404}, 404)
            fake.recorder.record("Media", {"sid": media_sid}, 200)
            data, content_type = fake.media[media_sid]
            return Response(data, media_type=content_type)

        @app.post("/2010-04-01/Accounts/{sid}/Messages.json")
        async def create_message(sid: str, request: Request):
            params = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            if not fake._authorized(sid, request):
                fake.recorder.record("Messages", params, 401)
                return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
            if params.get("To") in fake.outside_window:
                fake.recorder.record("Messages", params, 400)
                return JSONResponse({"code": 63016, "status": 400, "message": (
                    "Failed to send freeform message because you are outside the allowed window. "
                    "If you are using WhatsApp, please use a Message Template."),
                    "more_info": "https://www.twilio.com/docs/errors/63016"}, 400)
            failure = fake.recorder.next_failure("Messages")
            if failure is not None:
                fake.recorder.record("Messages", params, failure.status)
                headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                code = 20429 if failure.status == 429 else 20500
                return JSONResponse({"code": code, "message": failure.description or "Scripted failure",
                                     "status": failure.status,
                                     "more_info": f"https://www.twilio.com/docs/errors/{code}"},
                                    failure.status, headers=headers)
            token = request.headers.get("I-Twilio-Idempotency-Token")
            fake.tokens.append(token)
            if token is not None and token in fake._by_token:
                return JSONResponse(fake._by_token[token], 201)
            fake.recorder.record("Messages", params, 201)
            msid = f"SM{next(fake._ids):032x}"
            created = {
                "sid": msid, "account_sid": sid, "to": params.get("To"), "from": params.get("From"),
                "body": params.get("Body"), "status": "queued", "num_segments": "1", "direction": "outbound-api",
                "api_version": "2010-04-01", "uri": f"/2010-04-01/Accounts/{sid}/Messages/{msid}.json",
            }
            if token is not None:
                fake._by_token[token] = created
            if fake.answer_creates_after_s:
                await asyncio.sleep(fake.answer_creates_after_s)
            return JSONResponse(created, 201)

        return app
