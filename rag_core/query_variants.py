"""Rule-based query shaping, no language model: adaptive routing and heuristic query variants.

``route`` picks the leg that suits a query in well under a millisecond: identifiers and codes (order
numbers, SKUs, error codes, quoted strings) go to bm25, whose exact terms find them; a conceptual
question (how / why / what is ...) without such tokens goes to dense; everything else stays hybrid.
``variants`` are the multi-query fallback without an LLM; ``broader`` is corrective retrieval's retry.
"""

from __future__ import annotations

import re

from rag_core.retrieval import SearchRequest

_CODE = re.compile(r"(\"[^\"]{2,}\"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{3,}\b|\b\d{4,}\b)")
_CONCEPT = re.compile(r"^\s*(how|why|what|when|can|could|should|is|are|do|does|which|explain|tell me)\b", re.I)
_WORD = re.compile(r"[A-Za-z0-9']+")
_STOP = frozenset(
    "a an the and or but if of to in on at for with by from is are was were be been being do does did i me my "
    "we our you your he she it they them their this that these those what which who whom how why when where "
    "can could should would will shall may might must have has had not no yes please tell about there here "
    "so than too very just also any some all".split()
)


def route(query: str) -> str:
    """``bm25``, ``dense`` or ``hybrid`` for this query."""
    if _CODE.search(query):
        return "bm25"
    if _CONCEPT.match(query) and len(_WORD.findall(query)) >= 4:
        return "dense"
    return "hybrid"


def keywords(text: str) -> str:
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in _STOP)


def variants(request: SearchRequest) -> list[SearchRequest]:
    """The request as asked, its last message alone, and its content words alone (duplicates left out)."""
    out = [request]
    seen = {(request.query, len(request.history))}
    candidates = [request.model_copy(update={"history": []})]
    words = keywords(request.query)
    if words:
        candidates.append(request.model_copy(update={"query": words}))
    for candidate in candidates:
        key = (candidate.query, len(candidate.history))
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def broader(request: SearchRequest) -> SearchRequest:
    """Corrective retrieval's second try: the conversation's content words as one query, without the
    weighting that favours the last message."""
    joined = " ".join([*(turn.text for turn in request.history if turn.role == "user"), request.query])
    return request.model_copy(update={"query": keywords(joined) or request.query, "history": []})
