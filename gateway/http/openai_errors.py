"""Errors on the OpenAI-compatible paths in OpenAI's own shape, so OpenAI clients show our message.

``{"error": {"message", "type", "param", "code"}}``: the ``openai`` SDK puts ``message`` into the
exception's text and ``error`` into ``e.body``; litellm and LangChain do the same. The status is the
one our other paths answer. ``OpenAIRoute`` answers every error of its routes this way, including
the unexpected ones (logged, a 500 that keeps the connection open).
"""

from __future__ import annotations

import logging

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from gateway.core.errors import BadRequest, NotFound, RateLimited
from gateway.http.errors import failure
from gateway.http.json_body import Handler, JSONBodyRoute
from gateway.http.responses import CALLER
from gateway.turn.llm import LLMUnreachable

__all__ = ["ERRORS", "FieldRefused", "ModelNotFound", "OpenAIErrorBody", "OpenAIRoute", "error_body", "openai_error"]

log = logging.getLogger(__name__)

_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error", 500: "server_error",
          502: "upstream_error", 503: "service_unavailable"}


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    error: OpenAIError


# The OpenAPI document's error answers of these routes: the agent API's statuses, OpenAI's body.
ERRORS = {status: {**entry, "model": OpenAIErrorBody} for status, entry in CALLER.items()}


class FieldRefused(BadRequest):
    """A request field we refuse (400); ``param`` names it, as OpenAI's errors do."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class ModelNotFound(NotFound):
    def __init__(self, model: str) -> None:
        super().__init__(f"no agent named {model!r} for this API key; GET /v1/models lists the agents it may call")
        self.param = "model"


def error_body(exc: Exception) -> tuple[int, dict]:
    """The status and ``{"error": {...}}`` for ``exc`` (a stream's error event carries the same)."""
    if isinstance(exc, HTTPException):
        status, code, message = exc.status_code, "error", str(exc.detail)
    elif isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        status, code, message = 422, "invalid_input", str(first.get("msg", "invalid request"))
    else:
        status, code, message = failure(exc)
        if status == 500:
            log.error("unexpected error on an OpenAI-compatible path", exc_info=exc)
    if isinstance(exc, ModelNotFound):
        code = "model_not_found"
    elif isinstance(exc, LLMUnreachable):
        code = "upstream_refused"
    return status, {"error": {"message": message, "type": _TYPES.get(status, "invalid_request_error"),
                              "param": getattr(exc, "param", None), "code": code}}


def openai_error(exc: Exception) -> JSONResponse:
    status, body = error_body(exc)
    response = JSONResponse(body, status_code=status)
    if isinstance(exc, RateLimited):
        response.headers["retry-after"] = str(exc.retry_after_s)
    if isinstance(exc, LLMUnreachable):
        response.headers["x-should-retry"] = "false"  # OpenAI's SDKs would retry a 502 twice, with back-off
    return response


class OpenAIRoute(JSONBodyRoute):
    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # the top of the request: every error answers in OpenAI's shape
                return openai_error(exc)

        return route_handler
