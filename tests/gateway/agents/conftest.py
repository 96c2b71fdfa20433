"""An agent API server with two topics, and helpers to make agents and API keys."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

ADMIN = {"Authorization": "Bearer admin-secret"}
TOPICS = [
    {"source": "tandem", "title": "Tandem rental", "facts": ["50 euros a day"],
     "summary": "Tandems cost 50 euros a day."},
    {"source": "hours", "title": "Opening hours", "facts": ["9 to 5"], "summary": "We open 9:00-17:00."},
]


@pytest.fixture
def api(gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=20) as client:
        for topic in TOPICS:
            assert client.post("/api/kb/topics", json=topic, headers=ADMIN).status_code == 201
        yield client


def make_agent(api: httpx.Client, name: str = "helper", **config) -> dict:
    answer = api.post("/v1/agents", headers=ADMIN, json={
        "name": name, "displayName": "Helper", "description": "answers", "config": {"limit": 2, **config}})
    assert answer.status_code == 201, answer.text
    return answer.json()


def key_for(api: httpx.Client, *agents: str, rate: int | None = None) -> str:
    body = {"name": "caller", "agents": list(agents), **({"rate_limit_per_min": rate} if rate else {})}
    answer = api.post("/api/keys", headers=ADMIN, json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["key"]
