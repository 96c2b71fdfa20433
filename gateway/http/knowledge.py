"""Knowledge-base admin API: topics CRUD, bulk import, and the production search path."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from gateway.core.errors import BadRequest, InvalidInput, NotFound, PayloadTooLarge, ServiceUnavailable
from gateway.http.auth import require_admin
from gateway.http.json_body import AdminRoute, decode_json, read_json
from gateway.http.responses import json_body, model_schema
from gateway.knowledge.demo import remove_demo
from gateway.knowledge.search import MAX_QUERY_CHARS
from gateway.services import Services
from rag_core.controls import CONTROL_FIELDS, RetrievalControls
from rag_core.errors import ExtractionFailed, KnowledgeBaseUnavailable, TopicValidationError
from rag_core.ingestion import ImportReport, import_topics
from rag_core.knowledge_base import MAIN_KB, KnowledgeBase
from rag_core.retrieval import ChatTurn, SearchResult
from rag_core.topic import Topic, parse_topic

router = APIRouter(prefix="/api/kb", route_class=AdminRoute)
IMPORT_PATH = "/api/kb/import"  # its body limit is SWITCHBOARD_MAX_IMPORT_BYTES (gateway.http.app)


class HistoryTurn(BaseModel):
    role: Literal["user", "agent"] = "user"
    text: str


class _SearchBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    history: list[str | HistoryTurn] = Field(default_factory=list)
    strategy: str | None = None
    k: int = Field(default=5, ge=1, le=50)
    conversation_meta: str = ""
    kbs: list[str] | None = None  # the knowledge bases to search; default: the agent's (all, unless configured)
    bypass_cache: bool = False  # the console's retrieval-test switch: the same as ``"semantic_cache": false``

    def controls(self) -> dict[str, Any]:
        chosen = {name: getattr(self, name) for name in CONTROL_FIELDS if getattr(self, name, None) is not None}
        if self.bypass_cache:
            if chosen.get("semantic_cache"):
                raise InvalidInput("bypass_cache: contradicts semantic_cache: true; give one of them")
            chosen["semantic_cache"] = False
        return chosen


def _optional(field: FieldInfo) -> Any:
    return (Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation) | None


# The search, plus every retrieval control (rag_core.controls) as an optional field of the same name and
# constraints; a control left out keeps the agent's setting, a bad one is a 422 naming it.
SearchIn = create_model(
    "SearchIn", __base__=_SearchBase,
    **{name: (_optional(field), None) for name, field in RetrievalControls.model_fields.items()},
)


def search_json(result: SearchResult) -> dict[str, Any]:
    """A search result as the API answers it (also the console's and the CLI's shape)."""
    return {
        "results": [
            {"source": h.topic.source, "title": h.topic.title, "score": round(h.score, 6), "legs": h.legs}
            for h in result.hits
        ],
        "strategy": result.strategy,
        "timings_ms": result.timings_ms,
        "cache": result.cache,
        "fallback": result.fallback_reason if result.fell_back else None,
        "prompt_tokens": result.prompt_tokens,
        "notes": result.notes,
        "left_out": result.left_out,
        "queries": result.queries,
    }


def _topic_json(topic: Topic) -> dict[str, Any]:
    return topic.model_dump(mode="json")


def _parse(data: Any, max_chars: int, source: str | None = None) -> Topic:
    if not isinstance(data, dict):
        raise InvalidInput("body: a topic must be a JSON object")
    if source is not None:
        if data.get("source", source) != source:
            raise InvalidInput(f"source: the body says {data['source']!r} but the path says {source!r}")
        data = {**data, "source": source}
    try:
        return parse_topic(data, max_chars=max_chars)
    except TopicValidationError as exc:
        raise InvalidInput(f"{exc.field}: {exc.message}") from exc


async def _base(services: Services, name: str) -> KnowledgeBase:
    return await kb_call(services.knowledge.bases.get(name))


async def kb_call(coro):
    try:
        return await coro
    except KnowledgeBaseUnavailable as exc:
        raise ServiceUnavailable(f"knowledge base unavailable: {exc}") from exc
    except ExtractionFailed as exc:  # a file whose text cannot be read (preview; an upload records it as failed)
        raise InvalidInput(f"file: {exc.reason}") from exc


@router.get("/topics")
async def list_topics(
    limit: int = 50, offset: str | None = None, label: str | None = None, kb: str = MAIN_KB,
    services: Services = Depends(require_admin),
) -> dict:
    if not 1 <= limit <= 500:
        raise InvalidInput("limit: must be between 1 and 500")
    base = await _base(services, kb)
    page = await kb_call(base.list(limit=limit, offset=offset, label=label))
    total = await kb_call(base.count(label=label))
    return {"topics": [_topic_json(t) for t in page.topics], "next_offset": page.next_offset, "total": total}


_TOPIC = model_schema(Topic)


@router.post("/topics", status_code=201,
             openapi_extra=json_body({"oneOf": [_TOPIC, {"type": "array", "items": _TOPIC}]}))
async def create_topics(request: Request, kb: str = MAIN_KB, services: Services = Depends(require_admin)) -> dict:
    """One topic object, or a list of them; every one is validated before any is written."""
    data = await read_json(request)
    items = data if isinstance(data, list) else [data]
    topics = []
    for index, item in enumerate(items):
        try:
            topics.append(_parse(item, services.settings.max_topic_chars))
        except InvalidInput as exc:
            raise InvalidInput(f"topic {index}: {exc.message}" if isinstance(data, list) else exc.message) from exc
    report = await kb_call((await _base(services, kb)).upsert_many(topics))
    return report.model_dump(mode="json")


@router.get("/topics/{source}")
async def get_topic(source: str, kb: str = MAIN_KB, services: Services = Depends(require_admin)) -> dict:
    topic = await kb_call((await _base(services, kb)).get(source))
    if topic is None:
        raise NotFound(f"no topic with source {source!r}")
    return _topic_json(topic)


@router.put("/topics/{source}", openapi_extra=json_body(_TOPIC))
async def put_topic(
    source: str, request: Request, kb: str = MAIN_KB, services: Services = Depends(require_admin)
) -> dict:
    base = await _base(services, kb)
    topic = _parse(await read_json(request), services.settings.max_topic_chars, source)
    report = await kb_call(base.upsert(topic))
    return {"topic": _topic_json(topic), **report.model_dump(mode="json")}


@router.delete("/topics/{source}", status_code=204)
async def delete_topic(source: str, kb: str = MAIN_KB, services: Services = Depends(require_admin)) -> Response:
    if not await kb_call((await _base(services, kb)).delete(source)):
        raise NotFound(f"no topic with source {source!r}")
    return Response(status_code=204)


@router.delete("/demo")
async def remove_demo_content(services: Services = Depends(require_admin)) -> dict:
    """Everything the demo put in: its topics, and the business name and hours it filled in while they are
    still the demo's (``gateway.knowledge.demo``)."""
    removal = await kb_call(remove_demo(services.knowledge, services.customer_attributes))
    return {"topics": removal.topics, "attributes": removal.attributes, "kept": removal.kept,
            "summary": removal.summary()}


@router.post("/import", openapi_extra=json_body({"type": "string"}, media_type="text/plain"))
async def import_file(
    request: Request, format: Literal["jsonl", "markdown"], kb: str = MAIN_KB,
    services: Services = Depends(require_admin),
) -> dict:
    """Bulk import (JSONL in the datasets' topic format, or Markdown with one topic per H1).

    Bad lines are reported by number and skipped; the good ones are imported. JSONL lines obey the
    rules of a JSON request body; a topic over SWITCHBOARD_MAX_TOPIC_CHARS is a bad line. The body
    limit (SWITCHBOARD_MAX_IMPORT_BYTES) is enforced before the body is read."""
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{body[exc.start]:02x} at offset {exc.start}"
        raise BadRequest(f"import file is not UTF-8 text ({where})") from None
    report: ImportReport = await kb_call(import_topics(
        await _base(services, kb), text, format,
        loads=partial(decode_json, where="topic"), max_topic_chars=services.settings.max_topic_chars,
    ))
    return report.model_dump(mode="json")


@router.get("/cache")
async def cache_stats(services: Services = Depends(require_admin)) -> dict:
    """The semantic cache: entries, and lookups by outcome (hit, miss, stale, error) with the hit rate."""
    cache = services.knowledge.cache
    if cache is None:
        return {"enabled": False}
    return {"enabled": services.knowledge.controls.semantic_cache, **await cache.stats()}


@router.delete("/cache")
async def clear_cache(services: Services = Depends(require_admin)) -> dict:
    cache = services.knowledge.cache
    return {"cleared": await cache.clear() if cache is not None else 0}


@router.post("/search")
async def search(body: SearchIn, services: Services = Depends(require_admin)) -> dict:  # type: ignore[valid-type]
    if not body.query.strip():
        raise InvalidInput("query: must not be empty")
    if len(body.query) > MAX_QUERY_CHARS:
        raise PayloadTooLarge(f"query is {len(body.query)} characters; the limit is {MAX_QUERY_CHARS}")
    history = [
        ChatTurn(role="user", text=h) if isinstance(h, str) else ChatTurn(role=h.role, text=h.text)
        for h in body.history
    ]
    result = await kb_call(
        services.knowledge.search(
            body.query, history, strategy=body.strategy, k=body.k, conversation_meta=body.conversation_meta,
            kbs=body.kbs, controls=body.controls(),
        )
    )
    return search_json(result)
