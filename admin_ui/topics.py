"""Knowledge → Topics: one knowledge base's topics a page at a time (Qdrant's scroll, never all of
them), a text search (the BM25 leg of the production search) and a label filter; "New topic", edit
and delete — validated by ``rag_core.topic.parse_topic`` like ``POST/PUT /api/kb/topics``. An edit
carries the fingerprint of the topic as it was opened: a save after someone else's change is refused
instead of overwriting it. Admins change; operators read."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.notices import notice
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf, signed_in
from gateway.core.errors import GatewayError
from rag_core.controls import RetrievalControls
from rag_core.errors import RagError, TopicValidationError
from rag_core.knowledge_base import MAIN_KB, KnowledgeBase
from rag_core.topic import Topic, parse_topic

# Finding topics by their words: no threshold, caps or cache from the agent's retrieval controls.
TOPIC_SEARCH = RetrievalControls(semantic_cache=False)

router = APIRouter(prefix=f"{PREFIX}/knowledge/topics")
GAP_QUESTIONS = 5  # questions a gap pre-fills a new topic with
PAGE_SIZE = 50
FIELDS = ("source", "title", "facts", "summary", "labels")


def fingerprint(topic: Topic) -> str:
    return hashlib.sha256(topic.model_dump_json().encode()).hexdigest()[:16]


async def _base(signed: Signed, kb: str) -> KnowledgeBase:
    return await signed.services.knowledge.bases.get(kb)


@router.get("")
async def topics(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    params = request.query_params
    kb, text, label = params.get("kb", MAIN_KB), params.get("q", "").strip(), params.get("label", "").strip()
    cursor = params.get("after") or None
    rows: list[tuple[Topic, float | None]] = []
    next_cursor, total, problem = None, None, None
    try:
        base = await _base(signed, kb)
        if text:  # ranked by the BM25 leg: the words a search box means
            found = await signed.services.knowledge.search(text, strategy="bm25", k=PAGE_SIZE, kbs=[kb],
                                                           controls=TOPIC_SEARCH)
            rows = [(hit.topic, hit.score) for hit in found.hits if not label or label in hit.topic.labels]
        else:
            listed = await base.list(limit=PAGE_SIZE, offset=cursor, label=label or None)
            rows, next_cursor = [(t, None) for t in listed.topics], listed.next_offset
        # A labelled count scans every topic in Qdrant's local mode: only the unfiltered total is shown.
        total = None if label else await base.count()
    except (GatewayError, RagError) as exc:
        problem = f"The knowledge base cannot be read: {exc}"
    return page(request, "topics.html", signed, kb=kb, text=text, label=label, rows=rows, total=total,
                next_cursor=next_cursor, problem=problem, done=params.get("done"))


def _form_topic(form, source: str | None = None) -> tuple[dict, dict]:
    typed = {k: str(form.get(k, "")) for k in FIELDS}
    data = {
        "source": source or typed["source"].strip(), "title": typed["title"], "summary": typed["summary"].strip(),
        "facts": [line for line in typed["facts"].splitlines() if line.strip()],
        "labels": [x.strip() for x in typed["labels"].replace("\n", ",").split(",") if x.strip()],
    }
    return typed, data


def _editor(request: Request, signed: Signed, kb: str, typed: dict, status_code: int = 200, **context) -> Response:
    return page(request, "topic_edit.html", signed, status_code, kb=kb, typed=typed, **context)


@router.get("/new")
async def new_topic(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    # from a knowledge gap on the Insights screen: the questions customers asked, the most asked the title
    asked = [q.strip()[:300] for q in request.query_params.getlist("asked")[:GAP_QUESTIONS] if q.strip()]
    typed = {"source": "", "title": asked[0] if asked else "", "facts": "", "summary": "", "labels": "rag_context"}
    return _editor(request, signed, request.query_params.get("kb", MAIN_KB), typed, creating=True, asked=asked)


@router.get("/edit")
async def edit_topic(request: Request, signed: Signed = Depends(signed_in)) -> Response:
    kb, source = request.query_params.get("kb", MAIN_KB), request.query_params.get("source", "")
    topic = await (await _base(signed, kb)).get(source)
    if topic is None:
        return page(request, "message.html", signed, 404, heading="No such topic",
                    message=f"No topic {source!r} in {kb!r}; someone may have deleted it.",
                    back=f"{PREFIX}/knowledge/topics?kb={quote(kb)}")
    typed = {"source": topic.source, "title": topic.title, "facts": "\n".join(topic.facts), "summary": topic.summary,
             "labels": ", ".join(topic.labels)}
    return _editor(request, signed, kb, typed, creating=False, version=fingerprint(topic), topic=topic)


@router.post("/save")
async def save_topic(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kb, creating = str(form.get("kb", MAIN_KB)), form.get("creating") == "1"
    version = str(form.get("version", ""))
    typed, data = _form_topic(form, None if creating else str(form.get("source", "")))
    base = await _base(signed, kb)
    current = await base.get(data["source"]) if data["source"] else None
    if creating and current is not None:
        return _editor(request, signed, kb, typed, 409, creating=True, field="source",
                       error=f"Source: {data['source']!r} already exists; choose another or edit that topic")
    if not creating and (current is None or fingerprint(current) != version):
        what = "deleted" if current is None else "changed"
        return _editor(request, signed, kb, typed, 409, creating=False, version=version, field="topic",
                       error=f"Someone {what} this topic since you opened it; your text is kept below. "
                             "Open it again to see theirs before saving.")
    try:
        topic = parse_topic({**data, **({"created_at": current.created_at} if current else {})},
                            max_chars=signed.services.settings.max_topic_chars)
    except TopicValidationError as exc:
        field = exc.field.split(".")[0]
        return _editor(request, signed, kb, typed, 422, creating=creating, version=version, field=field,
                       error=f"{field.capitalize()}: {exc.message}")
    await base.upsert(topic)
    return RedirectResponse(f"{PREFIX}/knowledge/topics?kb={quote(kb)}&done={notice(signed, 'saved ' + topic.source)}",
                            status_code=303)


@router.post("/delete")
async def delete_topic(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kb, source = str(form.get("kb", MAIN_KB)), str(form.get("source", ""))
    deleted = await (await _base(signed, kb)).delete(source)
    done = f"deleted {source}" if deleted else f"{source} was already gone"
    return RedirectResponse(f"{PREFIX}/knowledge/topics?kb={quote(kb)}&done={notice(signed, done)}", status_code=303)
