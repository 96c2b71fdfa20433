"""``/api/conversations`` (admin): the conversation list with its filters, one conversation with its
messages, turn traces and handoff state, and the handoff itself — the same ``ConversationList`` and
``OperatorDesk`` the console's Conversations screen uses. The bearer token names no person, so a
handoff action names its ``operator``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from gateway.conversation.listing import MAX_OFFSET, STATUSES, Filters
from gateway.conversation.outcome_index import OUTCOMES
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute
from gateway.services import Services

router = APIRouter(prefix="/api/conversations", route_class=AdminRoute)


class OperatorAction(BaseModel):
    operator: str = Field(default="api", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")


class OperatorReply(OperatorAction):
    text: str = Field(min_length=1)


@router.get("")
async def list_conversations(channel: str = "", status: str = "", q: str = "",
                             offset: int = Query(0, ge=0, le=MAX_OFFSET),
                             outcome: str = Query("", pattern="^(|" + "|".join(OUTCOMES) + ")$"),
                             services: Services = Depends(require_admin)) -> dict:
    assert services.conversations is not None
    rows, more = await services.conversations.page(
        Filters.of({"channel": channel, "status": status, "q": q, "offset": str(offset), "outcome": outcome}))
    return {
        "conversations": [{
            "id": r.conversation.id, "channel": r.conversation.channel, "persona_id": r.conversation.persona_id,
            "persona": r.persona, "status": r.status, "operator": r.handoff.operator if r.handoff else None,
            "last_message": r.last or None, "started_at": r.conversation.started_at.isoformat(),
            "connection": r.conversation.connection,
        } for r in rows],
        "more": more, "statuses": sorted(STATUSES), "outcomes": list(OUTCOMES),
    }


@router.get("/{conversation_id}")
async def get_conversation(conversation_id: str, services: Services = Depends(require_admin)) -> dict:
    assert services.desk is not None
    conversation = await services.desk.conversation(conversation_id)
    handoff = await services.desk.state(conversation_id)
    return {
        "conversation": conversation.model_dump(mode="json"),
        "handoff": None if handoff is None else {
            "status": handoff.status, "operator": handoff.operator, "reason": handoff.reason,
            "summary": handoff.summary},
        "can_hand_off": services.desk.can_hand_off(conversation) is None,
        "messages": [m.model_dump(mode="json") for m in await services.store.conversation_messages(conversation_id)],
        "traces": [t.model_dump(mode="json") for t in await services.store.conversation_traces(conversation_id)],
    }


@router.post("/{conversation_id}/take-over")
async def take_over(conversation_id: str, body: OperatorAction, services: Services = Depends(require_admin)) -> dict:
    assert services.desk is not None
    await services.desk.take_over(conversation_id, body.operator)
    return {"conversation_id": conversation_id, "status": "human", "operator": body.operator}


@router.post("/{conversation_id}/reply")
async def reply(conversation_id: str, body: OperatorReply, services: Services = Depends(require_admin)) -> dict:
    assert services.desk is not None
    message = await services.desk.send(conversation_id, body.operator, body.text)
    return message.model_dump(mode="json")


@router.post("/{conversation_id}/hand-back")
async def hand_back(conversation_id: str, body: OperatorAction, services: Services = Depends(require_admin)) -> dict:
    assert services.desk is not None
    await services.desk.hand_back(conversation_id, body.operator)
    return {"conversation_id": conversation_id, "status": "bot"}
