"""A small server speaking the common ``POST /rerank`` protocol (Cohere, Jina, TEI, vLLM, Infinity).

It scores by term overlap (the share of the query's words a document contains), records every
request it received (``received``), and can be switched into the failures real servers show
(``mode``), or made to require an API key (``api_key``: any other request gets a 401 that echoes the
key it was sent, as some servers do)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

Mode = Literal["ok", "slow", "http_500", "malformed_json", "out_of_range_index", "duplicate_index", "logits"]


@dataclass(frozen=True)
class ReceivedRerank:
    body: dict
    authorization: str | None

    @property
    def query(self) -> str:
        return self.body["query"]

    @property
    def documents(self) -> list[str]:
        return self.body["documents"]

    @property
    def top_n(self) -> int | None:
        return self.body.get("top_n")

    @property
    def model(self) -> str | None:
        return self.body.get("model")


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def overlap(query: str, document: str) -> float:
    asked = words(query)
    return len(asked & words(document)) / len(asked) if asked else 0.0


@dataclass
class FakeRerankServer:
    mode: Mode = "ok"
    api_key: str | None = None
    slow_s: float = 3.0
    return_documents: bool = False  # echo each document as {"text": ...}, as Cohere and Jina can
    ignore_top_n: bool = False  # answer every document in input order, as a server without top_n does
    url: str = ""  # set once a live server runs it
    received: list[ReceivedRerank] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.post("/rerank")
        async def rerank(request: Request):
            body = await request.json()
            authorization = request.headers.get("authorization")
            fake.received.append(ReceivedRerank(body, authorization))
            if fake.api_key is not None and authorization != f"Bearer {fake.api_key}":
                sent = (authorization or "").removeprefix("Bearer ")
                return JSONResponse({"error": f"invalid api key {sent!r}"}, status_code=401)
            return await fake._answer(body)

        return app

    async def _answer(self, body: dict) -> Response:
        if self.mode == "slow":
            await asyncio.sleep(self.slow_s)
        if self.mode == "http_500":
            return JSONResponse({"error": "model worker crashed"}, status_code=500)
        if self.mode == "malformed_json":
            return Response('{"results": [{"index": 0, "relevance_score": 0.9}', media_type="application/json")
        documents: list[str] = body["documents"]
        scores = [overlap(body["query"], document) for document in documents]
        if self.mode == "logits":
            scores = [8.0 * score - 4.0 for score in scores]
        if self.ignore_top_n:
            order = list(range(len(documents)))
        else:
            order = sorted(range(len(documents)), key=lambda i: -scores[i])[: body.get("top_n") or len(documents)]
        results = [{"index": i, "relevance_score": scores[i]} for i in order]
        if self.return_documents:
            for result in results:
                result["document"] = {"text": documents[result["index"]]}
        if self.mode == "out_of_range_index":
            results[0]["index"] = len(documents)
        if self.mode == "duplicate_index" and len(results) > 1:
            results[1]["index"] = results[0]["index"]
        return JSONResponse({"id": "rerank-fake", "results": results, "meta": {"billed_units": {"search_units": 1}}})
