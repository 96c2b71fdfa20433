"""Security headers on every response. Everywhere: ``nosniff`` and a referrer policy. On an HTML page
that did not set a Content-Security-Policy of its own (the console and the chat page set theirs): a
strict one and no framing; the API docs get one that lets their CDN scripts run. A page that sets its
own policy keeps its framing rule (``frame-ancestors``), so no ``X-Frame-Options`` is added to it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

EVERY_RESPONSE = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "strict-origin-when-cross-origin",
}
HTML_PAGE = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "x-frame-options": "DENY",
}
# FastAPI's Swagger UI and ReDoc pages load from jsDelivr and start with an inline script.
API_DOCS_PAGE = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
        "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
        "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
        "https://cdn.redoc.ly; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
}
API_DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})


def chat_page_policy(frame_origins: list[str]) -> str:
    """The chat page's CSP: scripts only from here; inline styles (the widget injects its stylesheet);
    framed only by the widget's configured origins (any when ``["*"]``)."""
    ancestors = "*" if frame_origins == ["*"] else " ".join(frame_origins)
    return (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        f"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}"
    )


class SecurityHeaders:
    """Pure ASGI, outermost: errors, redirects and every plug-in's pages included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.decode("latin-1").lower(): v for k, v in headers}
                wanted = dict(EVERY_RESPONSE)
                html = present.get("content-type", b"").lower().startswith(b"text/html")
                if html and "content-security-policy" not in present:
                    wanted.update(API_DOCS_PAGE if path in API_DOCS_PATHS else HTML_PAGE)
                headers += [(k.encode(), v.encode()) for k, v in wanted.items() if k not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
