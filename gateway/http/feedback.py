"""``POST /api/conversations/{id}/messages/{message_id}/feedback``: a 👍 / 👎 on a bot reply.

A channel's visitor rates the replies of their own conversations (the web chat: ``X-Chat-Session`` with
the session's bearer token, rate-limited with the chat's messages); the admin token rates any."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, ValidationError

from gateway.core.errors import BadRequest, InvalidInput
from gateway.http.auth import require_admin, services_of
from gateway.http.json_body import InvalidJSON, JSONBodyRoute, decode_json
from gateway.insight.feedback import Voter

router = APIRouter(prefix="/api/conversations", route_class=JSONBodyRoute)


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: str | None = Field(default=None, max_length=20_000)


def feedback_body(raw: bytes) -> FeedbackIn:
    try:
        return FeedbackIn.model_validate(decode_json(raw))
    except InvalidJSON as exc:
        raise BadRequest(f"{exc.message}; nothing was stored") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidInput(f"{where}: {first['msg']}" if where else first["msg"]) from exc


async def voter_of(request: Request) -> Voter:
    """A channel's visitor (their own checks: token, rate limit), or else the admin."""
    for check in services_of(request).visitors:
        voter = await check(request)
        if voter is not None:
            return voter
    await require_admin(request)
    return Voter("admin")


@router.post(
    "/{conversation_id}/messages/{message_id}/feedback",
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": FeedbackIn.model_json_schema()}}}},
)
async def rate(conversation_id: str, message_id: str, request: Request) -> dict:
    voter = await voter_of(request)  # before the body is read: a stranger's request costs no parsing
    body = feedback_body(await request.body())
    insight = services_of(request).insight
    assert insight is not None
    vote = await insight.feedback.rate(conversation_id, message_id, voter, body.rating, body.comment)
    return vote.model_dump(mode="json", exclude={"dims"})
