"""A fake external data source for FetchData: records every request, answers what the test scripted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response


@dataclass
class Answer:
    status: int = 200
    json: object | None = None
    text: str | None = None
    delay_s: float = 0.0
    location: str | None = None  # a redirect's target
    body: bytes | None = None  # sent as it is, as JSON, in ``encoding`` (a bomb from tests.fakes.bombs)
    encoding: str | None = None


@dataclass
class DataSource:
    requests: list[dict] = field(default_factory=list)
    script: deque[Answer] = field(default_factory=deque)
    default: Answer = field(default_factory=lambda: Answer(json={"text": "Rooms free tonight: 3"}))
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, **kwargs) -> None:
        self.script.append(Answer(**kwargs))

    def app(self) -> FastAPI:
        app = FastAPI()
        source = self

        @app.post("/data")
        async def data(request: Request):
            body = await request.body()
            with source._lock:
                source.requests.append({
                    "body": body.decode(), "headers": dict(request.headers), "at": time.time(),
                })
                step = source.script.popleft() if source.script else source.default
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
            headers = {"Location": step.location} if step.location else None
            if step.body is not None:
                encoded = {**(headers or {}), **({"Content-Encoding": step.encoding} if step.encoding else {})}
                return Response(step.body, status_code=step.status, headers=encoded, media_type="application/json")
            if step.text is not None:
                return PlainTextResponse(step.text, status_code=step.status, headers=headers)
            return JSONResponse(step.json, status_code=step.status, headers=headers)

        return app
