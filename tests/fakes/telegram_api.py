"""A fake Telegram Bot API: ``/bot<token>/<method>`` as aiogram's ``TelegramAPIServer.from_base`` calls it.

Hosts several bots (``add_bot``: token → id, username; the ``TOKEN`` bot always), each call
recorded with the bot's username under ``_bot``. Answers getMe, sendMessage (kept in ``sent``), sendChatAction,
setWebhook, deleteWebhook, answerCallbackQuery, editMessageReplyMarkup, getUpdates (long polling
over updates pushed with ``push_update``) and getFile, serving ``files`` at ``/file/bot<token>/<path>``; scripted
failures answer the way Telegram does (``{"ok": false, "error_code", "description", "parameters": {"retry_after"}}``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.fakes.recording import Recorder

BOT_ID = 7000001
BOT_USERNAME = "switchboard_test_bot"
TOKEN = f"{BOT_ID}:AAF-fake-token-for-tests_0123456789abc"


@dataclass
class FakeTelegram:
    token: str = TOKEN
    recorder: Recorder = field(default_factory=Recorder)
    updates: list[dict] = field(default_factory=list)
    url: str = ""
    # A crash point: a sendMessage is recorded (the user has it) but answered only this much later,
    # so a test can stop the sending consumer between the send and its record.
    answer_sends_after_s: float = 0.0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    bots: dict[str, tuple[int, str]] = field(default_factory=dict)  # more bots: token -> (id, username)
    sent: list[dict] = field(default_factory=list)  # the Messages sendMessage answered, with their reply_markup
    # media (issue 44): files getFile knows (file_id -> bytes), served at /file/bot<token>/<path> as the Bot
    # API serves them; ``served`` counts the bytes each download actually sent
    files: dict[str, bytes] = field(default_factory=dict)
    served: list[tuple[str, int]] = field(default_factory=list)
    unsized: set[str] = field(default_factory=set)  # files served without a Content-Length (chunked)

    def add_bot(self, bot_id: int, username: str) -> str:
        """Another bot this fake answers for; its token."""
        token = f"{bot_id}:AAF-fake-{username}-token_0123456789abcdef"
        self.bots[token] = (bot_id, username)
        return token

    def sent_by(self, username: str) -> list[str]:
        return [c.params["text"] for c in self.recorder.received("sendMessage") if c.params.get("_bot") == username]

    def push_update(self, update: dict) -> None:
        self.updates.append(update)

    def sent_texts(self, chat_id: int | None = None) -> list[str]:
        return [c.params["text"] for c in self.recorder.received("sendMessage")
                if chat_id is None or int(c.params["chat_id"]) == chat_id]

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.post("/bot{token}/{method}")
        async def call(token: str, method: str, request: Request):
            form = await request.form()
            params = {k: v for k, v in form.items() if isinstance(v, str)}
            bot = (BOT_ID, BOT_USERNAME) if token == fake.token else fake.bots.get(token)
            if bot is None:
                fake.recorder.record(method, params, 401)
                return JSONResponse({"ok": False, "error_code": 401, "description": "Unauthorized"}, 401)
            failure = fake.recorder.next_failure(method)
            if failure is not None:
                fake.recorder.record(method, params, failure.status)
                body = {"ok": False, "error_code": failure.status,
                        "description": failure.description or "Scripted failure"}
                if failure.retry_after is not None:
                    body["description"] = f"Too Many Requests: retry after {failure.retry_after}"
                    body["parameters"] = {"retry_after": failure.retry_after}
                return JSONResponse(body, failure.status)
            result = await fake._answer(method, params, bot)
            fake.recorder.record(method, {**params, "_bot": bot[1]}, 200)
            if method == "sendMessage" and fake.answer_sends_after_s:
                await asyncio.sleep(fake.answer_sends_after_s)
            return {"ok": True, "result": result}

        @app.get("/file/bot{token}/{path:path}")
        async def download(token: str, path: str):
            file_id = path.removeprefix("media/")
            if token != fake.token and token not in fake.bots or file_id not in fake.files:
                return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)
            data = fake.files[file_id]
            fake.served.append((file_id, 0))
            at = len(fake.served) - 1

            async def body():
                step = 256 * 1024
                for i in range(0, len(data), step):
                    fake.served[at] = (file_id, fake.served[at][1] + len(data[i:i + step]))
                    yield data[i:i + step]
                    await asyncio.sleep(0.002)  # a reader that stopped is noticed: the rest is never sent

            sized = {} if file_id in fake.unsized else {"content-length": str(len(data))}
            return StreamingResponse(body(), headers=sized, media_type="application/octet-stream")

        return app

    async def _answer(self, method: str, params: dict, bot: tuple[int, str]):
        if method == "getMe":
            return {"id": bot[0], "is_bot": True, "first_name": "Switchboard", "username": bot[1]}
        if method == "sendMessage":
            chat_id = int(params["chat_id"])
            message = {"message_id": next(self._ids), "date": int(time.time()),
                       "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
                       "from": {"id": bot[0], "is_bot": True, "first_name": "Switchboard"},
                       "text": params["text"]}
            if params.get("reply_markup"):
                message["reply_markup"] = json.loads(params["reply_markup"])
            self.sent.append(message)
            return message
        if method == "getUpdates":
            offset = int(params.get("offset") or 0)
            deadline = time.monotonic() + min(float(params.get("timeout") or 0), 1.0)
            while True:
                ready = [u for u in self.updates if u["update_id"] >= offset]
                if ready or time.monotonic() >= deadline:
                    return ready
                await asyncio.sleep(0.02)
        if method == "sendVoice":  # the voice file itself is a multipart upload: not kept
            chat_id = int(params["chat_id"])
            return {"message_id": next(self._ids), "date": int(time.time()), "chat": {"id": chat_id, "type": "private"},
                    "from": {"id": bot[0], "is_bot": True, "first_name": "Switchboard"},
                    "voice": {"file_id": f"reply-{chat_id}", "file_unique_id": "r1", "duration": 1}}
        if method == "getFile":
            file_id = params["file_id"]
            if file_id not in self.files:
                return {"file_id": file_id, "file_unique_id": f"u-{file_id}"}  # no path: too big for the Bot API
            return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(self.files[file_id]),
                    "file_path": f"media/{file_id}"}
        if method in ("sendChatAction", "setWebhook", "deleteWebhook"):
            return True
        return json.loads("true")
