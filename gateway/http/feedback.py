"""``POST /api/conversations/{id}/messages/{message_id}/feedback``: a 👍 / 👎 on a bot reply.

A channel's visitor rates the replies of their own conversations (the web chat: ``X-Chat-Session`` with
the session's bearer token, rate-limited with the chat's messages); the admin token rates any.
``POST /v1/feedback`` rates an agent API answer by its id (an invoke's ``id``, a non-streamed chat
completion's ``id``) with an API key that may call its agent (counted against the key's limit)."""

from __future__ import annotations

from typing import Literal, TypeVar

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, ValidationError

from gateway.agents.invoker import CHANNEL as API_CHANNEL
from gateway.core.errors import BadRequest, InvalidInput, NotFound
from gateway.http.auth import bearer_token, require_admin, services_of
from gateway.http.json_body import InvalidJSON, JSONBodyRoute, decode_json
from gateway.insight.feedback import Voter

router = APIRouter(route_class=JSONBodyRoute)
COMPLETION_PREFIX = "chatcmpl-"  # a chat completion's id is its turn's, so prefixed


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: str | None = Field(default=None, max_length=20_000)


class ResponseFeedbackIn(FeedbackIn):
    response_id: str = Field(min_length=1, max_length=128)


Body = TypeVar("Body", bound=FeedbackIn)


def feedback_body(raw: bytes, model: type[Body] = FeedbackIn) -> Body:
    try:
        return model.model_validate(decode_json(raw))
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
    "/api/conversations/{conversation_id}/messages/{message_id}/feedback",
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


@router.post("/v1/feedback", openapi_extra={"requestBody": {"required": True, "content": {
    "application/json": {"schema": ResponseFeedbackIn.model_json_schema()}}}})
async def rate_response(request: Request) -> dict:
    services = services_of(request)
    assert services.api_keys is not None and services.insight is not None
    record = await services.api_keys.identify(bearer_token(request))  # 401 before the body is read
    body = feedback_body(await request.body(), ResponseFeedbackIn)
    turn_id = body.response_id.removeprefix(COMPLETION_PREFIX)
    trace = await services.store.get_trace(turn_id) if turn_id.isalnum() else None
    agent_id = (trace.agent or "").partition("@")[0] if trace is not None else ""
    if (trace is None or trace.channel != API_CHANNEL or trace.agent_message_id is None
            or agent_id not in record.agents):
        raise NotFound(f"no answer {body.response_id!r} of an agent this key may call")
    await services.api_keys.admit(record, agent_id)  # one call of the key's per-minute limit
    vote = await services.insight.feedback.rate(trace.conversation_id, trace.agent_message_id,
                                                Voter(f"key:{record.id}"), body.rating, body.comment)
    return {"response_id": body.response_id, **vote.model_dump(mode="json", exclude={"dims"})}
