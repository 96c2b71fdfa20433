"""A fake Meta Graph API at ``<base>/v21.0``: the account check, sends, typing and message templates.

Tokens are given per account with ``add_account`` (a WhatsApp phone number id, a page id, an Instagram
user id); ``GET /{id}`` with another token is refused as Graph refuses it (``OAuthException``, code
190). ``POST /{phone_number_id}/messages`` sends WhatsApp messages (a ``status: read`` body is the
read receipt with typing indicator, recorded as ``typing``), ``POST /me/messages`` Messenger and
Instagram ones (a ``sender_action`` body is recorded as ``typing``). A free-form WhatsApp message to a
number in ``outside_window`` is refused with 131047 as Meta refuses it; a template goes through.
``GET /{waba_id}/message_templates`` lists ``templates``; ``GET /{media id}`` answers a WhatsApp media
item of ``media`` with its URL (``/media-download/{id}``, fetched with any account's token). Every call is
recorded with its JSON body and the path; scripted failures answer in Graph's error shape (a scripted
``description`` is the error's ``message``, as a vendor that echoes what it was sent would answer).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.fakes.recording import Recorder

VERSION = "v21.0"


def _error(message: str, code: int, status: int, *, details: str | None = None) -> JSONResponse:
    error = {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "AbCdEfGh123"}
    if details:
        error["error_data"] = {"details": details}
    return JSONResponse({"error": error}, status)


@dataclass
class Account:
    token: str
    fields: dict
    kind: str  # whatsapp | page | instagram


@dataclass
class FakeGraph:
    recorder: Recorder = field(default_factory=Recorder)
    url: str = ""
    accounts: dict[str, Account] = field(default_factory=dict)  # account id -> its token and fields
    outside_window: set[str] = field(default_factory=set)  # WhatsApp numbers past their 24 hours
    templates: dict[str, list[dict]] = field(default_factory=dict)  # waba id -> its templates
    # issue 44: WhatsApp media (media id -> bytes, type): ``GET /{media id}`` gives its URL, fetched with a token
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def base(self) -> str:
        return f"{self.url}/{VERSION}"

    def add_account(self, account_id: str, token: str, kind: str, **fields) -> None:
        self.accounts[account_id] = Account(token, {"id": account_id, **fields}, kind)

    def reset(self) -> None:
        self.recorder.reset()
        self.accounts.clear()
        self.outside_window.clear()
        self.media.clear()
        self.templates.clear()

    def sent(self, method: str = "messages") -> list[dict]:
        return [c.params for c in self.recorder.received(method)]

    def sent_texts(self, to: str | None = None) -> list[str]:
        texts = []
        for p in self.sent():
            recipient = p.get("to") or (p.get("recipient") or {}).get("id")
            text = (p.get("text") or {}).get("body") or (p.get("message") or {}).get("text")
            if text is not None and (to is None or recipient == to):
                texts.append(text)
        return texts

    def _token(self, request: Request) -> str:
        return request.headers.get("authorization", "").removeprefix("Bearer ")

    def _account_of_token(self, token: str, kind: str | None = None) -> Account | None:
        return next((a for a in self.accounts.values() if a.token == token and (kind is None or a.kind == kind)),
                    None)

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        def failed(method: str, params: dict) -> JSONResponse | None:
            failure = fake.recorder.next_failure(method)
            if failure is None:
                return None
            fake.recorder.record(method, params, failure.status)
            code = 80007 if failure.status == 429 else 2 if failure.status >= 500 else 100
            answer = _error(failure.description or "An unexpected error has occurred.", code, failure.status)
            if failure.retry_after is not None:
                answer.headers["Retry-After"] = str(failure.retry_after)
            return answer

        @app.get(f"/{VERSION}/{{account_id}}/message_templates")
        async def templates(account_id: str, request: Request):
            params = {"_path": f"{account_id}/message_templates", **dict(request.query_params)}
            if fake._account_of_token(fake._token(request)) is None:
                fake.recorder.record("message_templates", params, 400)
                return _error("Invalid OAuth access token - Cannot parse access token", 190, 400)
            if (answer := failed("message_templates", params)) is not None:
                return answer
            fake.recorder.record("message_templates", params, 200)
            listed = [t for t in fake.templates.get(account_id, [])
                      if request.query_params.get("status") in (None, t["status"])]
            return {"data": listed, "paging": {"cursors": {"before": "MAZDZD", "after": "MAZDZD"}}}

        @app.get("/media-download/{media_id}")
        async def download(media_id: str, request: Request):
            authorized = fake._account_of_token(fake._token(request)) is not None
            fake.recorder.record("media-download", {"_path": media_id}, 200 if authorized else 401)
            if not authorized or media_id not in fake.media:
                return _error("Invalid OAuth access token - Cannot parse access token", 190, 401)
            data, content_type = fake.media[media_id]
            return Response(data, media_type=content_type)

        @app.get(f"/{VERSION}/{{account_id}}")
        async def account(account_id: str, request: Request):
            params = {"_path": account_id, **dict(request.query_params)}
            if account_id in fake.media and fake._account_of_token(fake._token(request)) is not None:
                fake.recorder.record("media", params, 200)
                data, content_type = fake.media[account_id]
                return {"messaging_product": "whatsapp", "url": f"{fake.url}/media-download/{account_id}",
                        "mime_type": content_type, "sha256": "0", "file_size": len(data), "id": account_id}
            known = fake.accounts.get(account_id)
            if known is None or known.token != fake._token(request):
                fake.recorder.record("account", params, 400)
                return _error("Invalid OAuth access token - Cannot parse access token", 190, 400)
            if (answer := failed("account", params)) is not None:
                return answer
            fake.recorder.record("account", params, 200)
            wanted = request.query_params.get("fields", "").split(",")
            return {k: v for k, v in known.fields.items() if k == "id" or k in wanted}

        @app.post(f"/{VERSION}/{{account_id}}/messages")
        async def send(account_id: str, request: Request):
            params = {"_path": f"{account_id}/messages", **await request.json()}
            token = fake._token(request)
            if account_id == "me":
                known = fake._account_of_token(token, "page") or fake._account_of_token(token, "instagram")
            else:
                known = fake.accounts.get(account_id)
                known = known if known is not None and known.token == token else None
            method = "typing" if "sender_action" in params or params.get("status") == "read" else (
                "templates_sent" if params.get("type") == "template" else "messages")
            if known is None:
                fake.recorder.record(method, params, 400)
                return _error("Invalid OAuth access token - Cannot parse access token", 190, 400)
            if (answer := failed(method, params)) is not None:
                return answer
            if method == "messages" and params.get("to") in fake.outside_window:
                fake.recorder.record(method, params, 400)
                return _error("Re-engagement message", 131047, 400, details=(
                    "Message failed to send because more than 24 hours have passed since the customer last "
                    "replied to this number."))
            fake.recorder.record(method, params, 200)
            if method == "typing":
                return {"success": True}
            n = next(fake._ids)
            if known.kind == "whatsapp":
                return {"messaging_product": "whatsapp", "contacts": [{"input": params.get("to"),
                                                                       "wa_id": params.get("to")}],
                        "messages": [{"id": f"wamid.FAKE{n:08d}"}]}
            return {"recipient_id": (params.get("recipient") or {}).get("id"), "message_id": f"m_FAKE{n:08d}"}

        return app
