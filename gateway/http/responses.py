"""What the OpenAPI document says each route can answer besides its success: one error body
(``{"status", "error", "message"}``, see ``gateway.http.errors``) under the statuses a kind of
route can give. Routers are included with one of the sets below rather than each route listing
its errors by hand; the 422 named here replaces FastAPI's ``HTTPValidationError``, which the API
never sends."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = [
    "ADMIN", "CALLER", "ERROR_JSON", "ErrorBody", "PUBLIC", "WEBHOOK", "error_responses", "json_body", "model_schema",
    "webhook_operation",
]


class ErrorBody(BaseModel):
    status: int
    error: str
    message: str


_WHY = {
    400: "The body is not valid JSON, or not the shape this route takes",
    401: "Missing or wrong credentials (bearer token, API key, session token or signature)",
    403: "The credentials do not allow this (disabled API, key not scoped to the agent, stale signature)",
    404: "Nothing by that id or name",
    409: "Conflicts with the current state (exists already, taken over, still being answered)",
    413: "The request body is larger than this route accepts",
    415: "The upload's file type is not supported",
    422: "A field is out of range or of the wrong kind",
    429: "Too many requests; retry after the number of seconds in Retry-After",
    502: "The LLM or a vendor API failed",
    503: "Redis, the knowledge base or the queue is unavailable; try again shortly",
}
# The error body as OpenAPI content, for responses that also answer another media type (console pages).
ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` entries: the error body under each status (429 with Retry-After)."""
    return {status: _error(status) for status in statuses}


def _error(status: int) -> dict[str, Any]:
    return {"model": ErrorBody, "description": _WHY[status], **({"headers": _RETRY_AFTER} if status == 429 else {})}


# Admin routes (``/api/...``, the admin side of ``/v1/agents``): bearer token, then the route's work.
ADMIN = error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503)
# The agent API's callers (API key): the turn can also fail at the LLM.
CALLER = error_responses(400, 401, 403, 404, 409, 413, 422, 429, 502, 503)
# Web chat and other routes without admin credentials.
PUBLIC = error_responses(400, 401, 404, 409, 413, 422, 429, 502, 503)
# Vendor webhooks and data feeds: signed requests.
WEBHOOK = error_responses(400, 401, 403, 404, 413, 415, 422, 429, 503)


def webhook_operation(summary: str, *, body: dict[str, Any], headers: dict[str, str],
                      answers: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI operation for a vendor webhook (a plain route FastAPI cannot describe itself).

    ``body`` maps media type to schema, ``headers`` names the signature headers, ``answers`` the
    success responses; the error answers are ``WEBHOOK``'s."""
    errors = {
        str(status): {**{k: v for k, v in entry.items() if k != "model"}, "content": ERROR_JSON}
        for status, entry in WEBHOOK.items()
    }
    return {
        "summary": summary,
        "parameters": [
            {"name": name, "in": "header", "required": False, "description": why, "schema": {"type": "string"}}
            for name, why in headers.items()
        ],
        "requestBody": {"required": True, "content": {media: {"schema": schema} for media, schema in body.items()}},
        "responses": {**answers, **errors},
    }


def json_body(schema: type[BaseModel] | dict[str, Any], *, media_type: str = "application/json") -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its body itself (``read_json``): what it expects."""
    if isinstance(schema, type):
        schema = model_schema(schema)
    return {"requestBody": {"required": True, "content": {media_type: {"schema": schema}}}}


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema (by alias) with its ``$defs`` written in place (the document has no ``#/$defs``)."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {key: walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(schema)
