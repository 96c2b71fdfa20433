"""Every error leaves as JSON ``{"status", "error", "message"}``; never a traceback."""

from __future__ import annotations

import logging

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.core.errors import (
    BadRequest,
    ChannelDeliveryError,
    Conflict,
    Forbidden,
    GatewayError,
    InvalidInput,
    LLMError,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    TurnLockTimeout,
    Unauthorized,
    UnsupportedMediaType,
)

log = logging.getLogger(__name__)

_HTTP_KINDS = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
    422: "invalid_input", 429: "rate_limited", 503: "unavailable",
}


# Each domain error's HTTP status and the ``error`` of its JSON body; a subclass answers as its nearest
# listed ancestor (``OutboundRefused`` is an ``InvalidInput``), anything unlisted as a 500.
_DOMAIN: dict[type[GatewayError], tuple[int, str]] = {
    BadRequest: (400, "bad_request"),
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    NotFound: (404, "not_found"),
    Conflict: (409, "conflict"),
    PayloadTooLarge: (413, "payload_too_large"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    InvalidInput: (422, "invalid_input"),
    RateLimited: (429, "rate_limited"),
    LLMError: (502, "llm_error"),
    ChannelDeliveryError: (502, "delivery_failed"),
    ServiceUnavailable: (503, "unavailable"),
    TurnLockTimeout: (503, "busy"),
}


def domain_failure(exc: GatewayError) -> tuple[int, str, str]:
    for cls in type(exc).__mro__:
        if cls in _DOMAIN:
            status, kind = _DOMAIN[cls]
            return status, kind, exc.message
    log.error("unexpected %s: %s", type(exc).__name__, exc.message)
    return 500, "internal_error", "internal error; see the gateway log"


def redis_failure(exc: redis.RedisError) -> tuple[int, str, str]:
    """A Redis that is down or slow is the gateway's state being away: 503, say so, log one line."""
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        log.warning("Redis unavailable: %s: %s", type(exc).__name__, exc)
        return 503, "unavailable", f"Redis is unavailable ({type(exc).__name__}); try again shortly"
    log.error("Redis refused a command: %s: %s", type(exc).__name__, exc)
    return 500, "internal_error", "internal error; see the gateway log"


def failure(exc: Exception) -> tuple[int, str, str]:
    """Status, kind and message for any error (a socket's top level uses it too)."""
    if isinstance(exc, GatewayError):
        return domain_failure(exc)
    if isinstance(exc, redis.RedisError):
        return redis_failure(exc)
    return 500, "internal_error", "internal error; see the gateway log"


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"status": status, "error": kind, "message": message}, status_code=status)


def _describe(exc: RequestValidationError) -> tuple[int, str, str]:
    first = exc.errors()[0] if exc.errors() else {}
    if first.get("type") == "json_invalid":
        return 400, "bad_request", "request body is not valid JSON"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    message = first.get("msg", "invalid request")
    return 422, "invalid_input", f"{where}: {message}" if where else message


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        response = error_response(*domain_failure(exc))
        if isinstance(exc, RateLimited):
            response.headers["retry-after"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(*_describe(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = _HTTP_KINDS.get(exc.status_code, "error")
        return error_response(exc.status_code, kind, str(exc.detail))

    @app.exception_handler(redis.RedisError)
    async def _redis(request: Request, exc: redis.RedisError) -> JSONResponse:
        return error_response(*redis_failure(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal error; see the gateway log")
