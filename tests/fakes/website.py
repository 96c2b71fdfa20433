"""A small website for crawl tests: pages by path (a body, a status sequence, a redirect, a content
type), recording every request with its Host header, served by a real server on loopback."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Page:
    body: bytes | str = b""
    content_type: str = "text/html; charset=utf-8"
    statuses: list[int] = field(default_factory=lambda: [200])  # one per request; the last one repeats
    location: str | None = None
    set_cookie: str | None = None
    encoding: str | None = None  # Content-Encoding the body is already in (a bomb from tests.fakes.bombs)


@dataclass
class Website:
    pages: dict[str, Page] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (host header, path)
    cookies: list[str] = field(default_factory=list)  # the Cookie header of every request that had one
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, path: str, body: bytes | str = b"", **kwargs) -> None:
        self.pages[path] = Page(body=body, **kwargs)

    def paths(self) -> list[str]:
        return [path for _, path in self.requests]

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            path = request.url.path
            with self._lock:
                self.requests.append((request.headers.get("host", ""), path))
                if "cookie" in request.headers:
                    self.cookies.append(request.headers["cookie"])
                page = self.pages.get(path)
                if page is None:
                    return Response("not found", status_code=404, media_type="text/plain")
                status = page.statuses.pop(0) if len(page.statuses) > 1 else page.statuses[0]
            headers = {"location": page.location} if page.location else {}
            if page.set_cookie:
                headers["set-cookie"] = page.set_cookie
            if page.encoding:
                headers["content-encoding"] = page.encoding
            body = page.body.encode() if isinstance(page.body, str) else page.body
            return Response(body, status_code=status, headers=headers, media_type=page.content_type)

        return Starlette(routes=[Route("/{path:path}", serve, methods=["GET", "HEAD", "POST"])])
