"""API keys on a real gateway and Redis: shown once, stored hashed, scoped to agents, revocable,
rate-limited per key with ``Retry-After``; never interchangeable with the admin token."""

from __future__ import annotations

import hashlib

import redis

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent


def _bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _refused(answer, status: int, kind: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["status"] == status and answer.json()["error"] == kind
    assert set(answer.json()) == {"status", "error", "message"}


def _everything_stored(client: redis.Redis, namespace: str) -> bytes:
    """Every key name, field and value under the namespace, read by type (DUMP may compress)."""
    parts: list[bytes] = []
    for key in client.scan_iter(match=f"sb:{namespace}:*"):
        parts.append(key)
        kind = client.type(key)
        if kind == b"string":
            parts.append(client.get(key) or b"")
        elif kind == b"hash":
            parts.extend(b for pair in client.hgetall(key).items() for b in pair)
        elif kind == b"list":
            parts.extend(client.lrange(key, 0, -1))
        elif kind == b"set":
            parts.extend(client.smembers(key))
        elif kind == b"zset":
            parts.extend(client.zrange(key, 0, -1))
    return b"\n".join(parts)


def test_a_key_is_shown_once_and_stored_only_as_its_hash(api, settings, redis_url):
    agent = make_agent(api, "mine")
    created = api.post("/api/keys", headers=ADMIN, json={"name": "crm", "agents": [agent["id"]]})
    assert created.status_code == 201, created.text
    body = created.json()
    key = body["key"]
    assert key.startswith("sbk_") and len(key) > 40
    assert body["name"] == "crm" and body["agents"] == [agent["id"]]
    assert body["rate_limit_per_min"] == settings.api_key_rate_limit_per_min == 60

    [listed] = api.get("/api/keys", headers=ADMIN).json()["keys"]
    assert listed["id"] == body["id"] and "key" not in listed and key not in str(listed)
    stored = _everything_stored(redis.Redis.from_url(redis_url), settings.agent_id)
    assert key.encode() not in stored and key[4:].encode() not in stored
    assert hashlib.sha256(key.encode()).hexdigest().encode() in stored  # what is kept instead

    described = api.get(f"/v1/agents/{agent['id']}/versions/latest/describe", headers=_bearer(key))
    assert described.status_code == 200, described.text
    assert described.json() == {"agentId": agent["id"], "name": "mine", "versionId": agent["version_id"],
                                "createdAt": described.json()["createdAt"], "config": agent["config"]}


def test_missing_unknown_revoked_and_wrongly_scoped_keys_are_refused(api):
    mine, other = make_agent(api, "mine"), make_agent(api, "other")
    key = key_for(api, mine["id"])
    url = f"/v1/agents/{mine['id']}/versions/latest/describe"
    _refused(api.get(url), 401, "unauthorized")
    _refused(api.get(url, headers=_bearer("sbk_" + "x" * 43)), 401, "unauthorized")
    _refused(api.get(url, headers={"Authorization": f"Basic {key}"}), 401, "unauthorized")
    _refused(api.get(f"/v1/agents/{other['id']}/versions/latest/describe", headers=_bearer(key)), 403, "forbidden")
    invoke = api.post(f"/v1/agents/{other['id']}/versions/latest/invoke", headers=_bearer(key),
                      json={"messages": [{"role": "user", "content": "hi"}]})
    _refused(invoke, 403, "forbidden")  # invoke checks the key the same way
    # a key scoped to an agent still cannot see a version that does not exist
    _refused(api.get(f"/v1/agents/{mine['id']}/versions/nope/describe", headers=_bearer(key)), 404, "not_found")

    assert api.get(url, headers=_bearer(key)).status_code == 200
    [record] = api.get("/api/keys", headers=ADMIN).json()["keys"]
    assert api.delete(f"/api/keys/{record['id']}", headers=ADMIN).status_code == 204
    _refused(api.get(url, headers=_bearer(key)), 401, "unauthorized")
    assert api.get("/api/keys", headers=ADMIN).json()["keys"] == []
    _refused(api.delete(f"/api/keys/{record['id']}", headers=ADMIN), 404, "not_found")


def test_the_admin_token_is_not_a_caller_key_and_a_caller_key_is_not_admin(api):
    agent = make_agent(api)
    key = key_for(api, agent["id"])
    _refused(api.get(f"/v1/agents/{agent['id']}/versions/latest/describe", headers=ADMIN), 401, "unauthorized")
    _refused(api.get("/v1/agents", headers=_bearer(key)), 401, "unauthorized")
    _refused(api.get(f"/v1/agents/{agent['id']}/versions/latest", headers=_bearer(key)), 401, "unauthorized")
    _refused(api.patch(f"/v1/agents/{agent['id']}", headers=_bearer(key), json={"notes": "x"}), 401, "unauthorized")
    _refused(api.get("/api/keys", headers=_bearer(key)), 401, "unauthorized")
    _refused(api.post("/api/keys", headers=_bearer(key), json={"name": "me", "agents": [agent["id"]]}),
             401, "unauthorized")


def test_past_its_limit_a_key_gets_429_with_retry_after(api):
    agent = make_agent(api)
    limited_key, other_key = key_for(api, agent["id"], rate=2), key_for(api, agent["id"], rate=2)
    url = f"/v1/agents/{agent['id']}/versions/latest/describe"
    assert [api.get(url, headers=_bearer(limited_key)).status_code for _ in range(2)] == [200, 200]
    limited = api.get(url, headers=_bearer(limited_key))
    _refused(limited, 429, "rate_limited")
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert "calls with one API key: 2 per 60 s" in limited.json()["message"]
    assert api.get(url, headers=_bearer(other_key)).status_code == 200  # each key has its own count
    assert 'switchboard_rate_limited_total{limit="api-key"} 1.0' in api.get("/metrics").text


def test_key_requests_are_validated(api):
    agent = make_agent(api)
    cases = [
        ({"agents": [agent["id"]]}, "name: Field required"),
        ({"name": "a", "agents": []}, "agents: List should have at least 1 item after validation, not 0"),
        ({"name": "a", "agents": ["nope"]}, "agents: no agent 'nope'; GET /v1/agents lists them"),
        ({"name": "a", "agents": [agent["id"]], "rate_limit_per_min": 0},
         "rate_limit_per_min: Input should be greater than or equal to 1"),
        ({"name": "a", "agents": [agent["id"]], "rate_limit_per_min": "5"},
         "rate_limit_per_min: Input should be a valid integer"),
        ({"name": "a", "agents": [agent["id"]], "scopes": ["all"]}, "scopes: Extra inputs are not permitted"),
    ]
    for body, message in cases:
        answer = api.post("/api/keys", headers=ADMIN, json=body)
        assert answer.json() == {"status": 400, "error": "bad_request", "message": message}, body
    assert api.get("/api/keys", headers=ADMIN).json()["keys"] == []
