"""The HTTP reranker goes out through the gateway's guarded transport: its configured host (loopback
here, as a TEI or Infinity server next to the gateway often is) is reached without allow-listing it."""

from __future__ import annotations

import httpx

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer
from tests.gateway.http.test_search_controls_api import ADMIN, TOPICS
from tests.rag_core.conftest import MODEL_PATH


def test_the_http_reranker_reaches_its_configured_host_through_the_guard(settings, rerank_server):
    configured = settings.model_copy(update={
        "embeddings": "fastembed", "embedding_model_path": MODEL_PATH, "reranker": "http",
        "reranker_base_url": rerank_server.url, "outbound_allow_hosts": "",
    })
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, headers=ADMIN,
                                                                     timeout=30) as client:
        assert client.post("/api/kb/topics", json=TOPICS).status_code == 201
        answer = client.post("/api/kb/search", json={"query": "How much is an e-bike?", "strategy": "hybrid",
                                                     "semantic_cache": False}).json()
    assert [r.query for r in rerank_server.received] == ["How much is an e-bike?"]
    assert answer["results"][0]["source"] == "rent"
