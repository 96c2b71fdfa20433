"""Agents and their immutable versions over the admin API of a real gateway on a real Redis:
camelCase in and out, the seed's defaults, versions per change, ``latest``, pinned versions,
delete, and the error shape of every refusal."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import redis

from tests.gateway.agents.conftest import ADMIN

SEED_DEFAULTS = {
    "knowledgeBases": [], "labels": ["rag_context"], "limit": 50, "hybridSearch": True, "adjacentChunkRange": 0,
    "adjacentChunkMerge": False, "rerankerTopN": 13, "enableHallucinationCheck": False,
    "enableMultihopQueryRefinement": False, "llmModelId": None, "guardrails": [], "retrievalMode": "inline",
}


def _create(api, **body) -> dict:
    answer = api.post("/v1/agents", headers=ADMIN, json={"name": "docs", **body})
    assert answer.status_code == 201, answer.text
    return answer.json()


def _error(answer, status: int, kind: str, message: str | None = None) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"status", "error", "message"} and body["status"] == status and body["error"] == kind
    if message is not None:
        assert body["message"] == message


def test_create_answers_the_definition_in_camel_case_with_the_seed_defaults(api):
    created = _create(api, displayName="Document Helper", agentType="rag", notes="for HR",
                      config={"inferenceConfig": {"maxTokens": 4000}, "adjacentChunkRange": 1})
    assert created["id"] and created["name"] == "docs" and created["version_id"] == created["latestVersionId"]
    assert created["displayName"] == "Document Helper" and created["notes"] == "for HR"
    config = created["config"]
    assert {k: config[k] for k in SEED_DEFAULTS} == {**SEED_DEFAULTS, "adjacentChunkRange": 1}
    assert config["inferenceConfig"] == {"maxTokens": 4000, "temperature": 0.7, "maxRetries": 2}
    assert "{context_str}" in config["systemPrompt"] and "{query_str}" in config["systemPrompt"]
    assert "_" not in "".join([*created, *config, *config["inferenceConfig"]]).replace("version_id", "")
    fetched = api.get(f"/v1/agents/{created['id']}", headers=ADMIN).json()
    assert fetched == {k: v for k, v in created.items() if k != "version_id"}
    listed = api.get("/v1/agents", headers=ADMIN).json()["agents"]
    assert fetched in listed


def test_every_change_is_a_new_version_and_a_pinned_version_keeps_its_config(api):
    agent = _create(api, config={"limit": 2})
    first = agent["version_id"]
    patched = api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={
        "description": "v2", "config": {"limit": 4, "inferenceConfig": {"temperature": 0.1}}})
    assert patched.status_code == 200, patched.text
    second = patched.json()
    assert second["version_id"] != first and second["description"] == "v2"
    assert second["config"]["limit"] == 4 and second["config"]["hybridSearch"] is True  # the rest is kept
    assert second["config"]["inferenceConfig"] == {"maxTokens": 1024, "temperature": 0.1, "maxRetries": 2}

    base = f"/v1/agents/{agent['id']}/versions"
    pinned = api.get(f"{base}/{first}", headers=ADMIN).json()
    latest = api.get(f"{base}/latest", headers=ADMIN).json()
    assert pinned["versionId"] == first and pinned["agentId"] == agent["id"]
    assert pinned["definition"]["config"]["limit"] == 2 and pinned["definition"]["description"] == ""
    assert latest["versionId"] == second["version_id"] and latest["definition"]["config"]["limit"] == 4
    assert [v["versionId"] for v in api.get(base, headers=ADMIN).json()["versions"]] == [second["version_id"], first]

    same = api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"limit": 4}})
    assert same.json()["version_id"] == second["version_id"]  # nothing changed: no new version
    assert len(api.get(base, headers=ADMIN).json()["versions"]) == 2


def test_delete_removes_the_agent_its_versions_and_its_name(api, settings, redis_url):
    agent = _create(api)
    patched = api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"notes": "changed"}).json()
    assert api.delete(f"/v1/agents/{agent['id']}", headers=ADMIN).status_code == 204
    for version in (agent["version_id"], patched["version_id"]):
        _error(api.get(f"/v1/agents/{agent['id']}/versions/{version}", headers=ADMIN), 404, "not_found")
    _error(api.get(f"/v1/agents/{agent['id']}", headers=ADMIN), 404, "not_found")
    client = redis.Redis.from_url(redis_url)
    left = [k.decode() for k in client.scan_iter(match=f"sb:{settings.agent_id}:agent*")]
    assert not [k for k in left if agent["id"] in k or patched["version_id"] in k or agent["version_id"] in k]
    assert _create(api)["id"] != agent["id"]  # the name is free again


def test_refusals_have_the_error_shape(api, settings):
    agent = _create(api)
    _error(api.post("/v1/agents", headers=ADMIN, json={"name": "docs"}), 409, "conflict")
    other = _create(api, name="other")
    _error(api.patch(f"/v1/agents/{other['id']}", headers=ADMIN, json={"name": "docs"}), 409, "conflict")

    no_slots = "Answer {query_str} please"
    _error(api.post("/v1/agents", headers=ADMIN, json={"name": "x", "config": {"systemPrompt": no_slots}}),
           400, "bad_request", "config.systemPrompt: must contain {context_str}")
    _error(api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"config": {"systemPrompt": "none"}}),
           400, "bad_request", "config.systemPrompt: must contain {context_str} and {query_str}")
    _error(api.post("/v1/agents", headers=ADMIN, json={"name": "y", "config": {"limit": 0}}), 400, "bad_request",
           "config.limit: Input should be greater than or equal to 1")
    _error(api.post("/v1/agents", headers=ADMIN, json={"name": "z", "config": {"retrievalMode": "magic"}}),
           400, "bad_request")
    _error(api.post("/v1/agents", headers=ADMIN, json={"name": "Not A Slug"}), 400, "bad_request")
    unknown = api.post("/v1/agents", headers=ADMIN, json={"name": "w", "config": {"hxqlQuery": "SELECT"}})
    _error(unknown, 400, "bad_request")
    assert unknown.json()["message"].startswith("config.hxqlQuery:")
    _error(api.patch(f"/v1/agents/{agent['id']}", headers=ADMIN, json={"id": "mine"}), 400, "bad_request",
           "id: cannot be changed")
    assert len(api.get(f"/v1/agents/{agent['id']}/versions", headers=ADMIN).json()["versions"]) == 1

    _error(api.get("/v1/agents/nope", headers=ADMIN), 404, "not_found")
    _error(api.patch("/v1/agents/nope", headers=ADMIN, json={"notes": "x"}), 404, "not_found")
    _error(api.delete("/v1/agents/nope", headers=ADMIN), 404, "not_found")
    _error(api.get("/v1/agents/nope/versions", headers=ADMIN), 404, "not_found")
    _error(api.get("/v1/agents/nope/versions/latest", headers=ADMIN), 404, "not_found")
    _error(api.get(f"/v1/agents/{agent['id']}/versions/nope", headers=ADMIN), 404, "not_found")
    # a version id of another agent is not this agent's
    _error(api.get(f"/v1/agents/{agent['id']}/versions/{other['version_id']}", headers=ADMIN), 404, "not_found")
    # the channels' agent answers on every channel: changed, never deleted
    _error(api.delete(f"/v1/agents/{settings.agent_id}", headers=ADMIN), 409, "conflict")


def test_concurrent_changes_never_lose_one_that_was_answered_200(api):
    agent = _create(api)
    changes = [{"limit": 7}, {"rerankerTopN": 7}, {"adjacentChunkRange": 3}, {"adjacentChunkMerge": True},
               {"hybridSearch": False}, {"enableHallucinationCheck": True}, {"enableMultihopQueryRefinement": True},
               {"guardrails": ["pii-redaction"]}, {"labels": ["faq"]}, {"knowledgeBases": ["main"]}]
    url = f"{str(api.base_url).rstrip('/')}/v1/agents/{agent['id']}"

    def patch(change: dict) -> httpx.Response:
        return httpx.patch(url, headers=ADMIN, json={"config": change}, timeout=20)

    with ThreadPoolExecutor(len(changes)) as pool:
        answers = list(pool.map(patch, changes))
    assert {a.status_code for a in answers} <= {200, 409} and 200 in {a.status_code for a in answers}
    for answer in answers:
        if answer.status_code == 409:
            assert answer.json()["error"] == "conflict"
    applied = [c for c, a in zip(changes, answers, strict=True) if a.status_code == 200]
    final = api.get(f"/v1/agents/{agent['id']}", headers=ADMIN).json()["config"]
    assert [c for c in applied if {k: final[k] for k in c} != c] == []  # every 200 is in the latest version
    versions = api.get(f"/v1/agents/{agent['id']}/versions", headers=ADMIN).json()["versions"]
    assert len(versions) == 1 + len(applied)
