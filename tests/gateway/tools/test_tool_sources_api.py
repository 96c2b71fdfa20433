"""/api/tool-sources: a source is listed from its MCP server on save; an unreachable or non-MCP URL
is saved with the error in its status (never a 500); refused input stores nothing; the headers are
sealed in Redis and masked in every answer; the outbound guard applies to the URL."""

from __future__ import annotations

import redis

from tests.gateway.tools.conftest import ADMIN, TOKEN, add_crm


def _all_values(redis_url: str, agent_id: str) -> str:
    r = redis.Redis.from_url(redis_url)
    out = []
    for key in r.scan_iter(match=f"sb:{agent_id}:*"):
        kind = r.type(key).decode()
        if kind == "string":
            out.append(r.get(key))
        elif kind == "hash":
            out += [*r.hkeys(key), *r.hvals(key)]
        elif kind == "set":
            out += list(r.smembers(key))
    r.close()
    return "\n".join(v.decode(errors="replace") for v in out)


def test_a_source_lists_its_tools_and_never_shows_its_token(client, mcp_server, tool_settings):
    source = add_crm(client, mcp_server.url)
    assert source["name"] == "crm" and source["kind"] == "mcp" and source["url"] == mcp_server.url
    assert {t["name"] for t in source["tools"]} == {"crm.book_table", "crm.lookup_order", "crm.order_history",
                                                     "crm.order_dump"}
    book = next(t for t in source["tools"] if t["name"] == "crm.book_table")
    assert book["description"] == "Book a table at the restaurant for a party on a day."
    assert set(book["inputSchema"]["properties"]) == {"party_size", "day"}
    assert source["status"]["connected_at"] and source["status"]["last_error"] is None
    assert source["headers"] == {"Authorization": "••••" + TOKEN[-4:]}

    answers = [client.get("/api/tool-sources", headers=ADMIN), client.get(f"/api/tool-sources/{source['id']}",
                                                                          headers=ADMIN),
               client.post(f"/api/tool-sources/{source['id']}/refresh", headers=ADMIN)]
    assert [s["id"] for s in answers[0].json()["tool_sources"]] == [source["id"]]
    assert answers[2].json()["tools"] == source["tools"]
    for answer in answers:
        assert TOKEN not in answer.text and TOKEN[:-4] not in answer.text
    assert TOKEN not in _all_values(str(tool_settings.redis_url), tool_settings.agent_id)
    assert source["id"] in _all_values(str(tool_settings.redis_url), tool_settings.agent_id)
    # no tools were called: listing is initialize + tools/list only
    assert mcp_server.calls == []


def test_an_unreachable_or_refusing_server_is_saved_with_its_error(client, mcp_server):
    wrong = client.post("/api/tool-sources", headers=ADMIN, json={
        "name": "crm", "url": mcp_server.url, "headers": {"Authorization": "Bearer wrong-token-000"}})
    assert wrong.status_code == 201, wrong.text
    assert wrong.json()["tools"] == [] and "HTTP 401" in wrong.json()["status"]["last_error"]
    assert "wrong-token-000" not in wrong.text
    gone = client.post("/api/tool-sources", headers=ADMIN, json={"name": "gone", "url": "http://127.0.0.1:9/mcp"})
    assert gone.status_code == 201 and "cannot be reached" in gone.json()["status"]["last_error"]
    # fixing the header lists the tools
    fixed = client.patch(f"/api/tool-sources/{wrong.json()['id']}", headers=ADMIN,
                         json={"headers": {"Authorization": f"Bearer {TOKEN}"}})
    assert fixed.status_code == 200 and fixed.json()["status"]["last_error"] is None
    assert len(fixed.json()["tools"]) == 4
    assert client.delete(f"/api/tool-sources/{gone.json()['id']}", headers=ADMIN).status_code == 204
    assert [s["name"] for s in client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"]] == ["crm"]
    assert client.get(f"/api/tool-sources/{gone.json()['id']}", headers=ADMIN).status_code == 404


def test_refused_input_stores_nothing(client, mcp_server, tool_settings):
    cases = [
        ({"kind": "soap", "name": "shop", "url": mcp_server.url}, "kind: unknown kind 'soap'"),
        ({"name": "Bad.Name", "url": mcp_server.url}, "name: lower-case letters"),
        ({"name": "meta", "url": "http://169.254.169.254/mcp"}, "outbound URL host '169.254.169.254'"),
        ({"name": "local", "url": "http://10.0.0.7/mcp"}, "outbound URL host '10.0.0.7' resolves to 10.0.0.7, "
                                                          "a private address"),
        ({"name": "x", "url": "ftp://127.0.0.1/mcp"}, "outbound URL must be http(s)"),
        ({"url": mcp_server.url}, "name: Field required"),
    ]
    for body, message in cases:
        answer = client.post("/api/tool-sources", headers=ADMIN, json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["message"].startswith(message), answer.json()
    assert client.post("/api/tool-sources", json={"name": "x", "url": mcp_server.url}).status_code == 401
    add_crm(client, mcp_server.url)
    twice = client.post("/api/tool-sources", headers=ADMIN, json={"name": "crm", "url": mcp_server.url})
    assert twice.status_code == 409 and "crm.*" in twice.json()["message"]
    assert len(client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"]) == 1


def test_loopback_is_refused_unless_allowed(settings, mcp_server):
    """Without SWITCHBOARD_OUTBOUND_ALLOW_HOSTS the test server (loopback) is refused, nothing stored."""
    import httpx
    from cryptography.fernet import Fernet
    from pydantic import SecretStr

    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    plain = settings.model_copy(update={"secret_key": SecretStr(Fernet.generate_key().decode())})
    with LiveServer(create_app(plain)) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        answer = client.post("/api/tool-sources", headers=ADMIN, json={"name": "crm", "url": mcp_server.url})
        assert answer.status_code == 422 and "a loopback address" in answer.json()["message"]
        assert "SWITCHBOARD_OUTBOUND_ALLOW_HOSTS" in answer.json()["message"]
        assert client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []


def test_headers_need_the_secret_key(settings, mcp_server):
    import httpx

    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    keyless = settings.model_copy(update={"outbound_allow_hosts": "127.0.0.1"})
    with LiveServer(create_app(keyless)) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        answer = client.post("/api/tool-sources", headers=ADMIN, json={
            "name": "crm", "url": mcp_server.url, "headers": {"Authorization": f"Bearer {TOKEN}"}})
        assert answer.status_code == 422 and "SWITCHBOARD_SECRET_KEY" in answer.json()["message"]
        assert client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []


def test_a_server_answering_malformed_json_rpc_is_saved_with_that_error_at_once(client):
    import time

    from tests.fakes.live_server import LiveServer
    from tests.fakes.mcp_server import malformed_app

    with LiveServer(malformed_app()) as broken:
        started = time.monotonic()
        answer = client.post("/api/tool-sources", headers=ADMIN, json={"name": "broken", "url": broken.url + "/mcp"})
        took = time.monotonic() - started
    assert answer.status_code == 201, answer.text
    assert answer.json()["tools"] == []
    assert answer.json()["status"]["last_error"] == (f"{broken.url}/mcp answered something that is not MCP's "
                                                     "JSON-RPC (ValidationError)")
    assert took < 5  # not waited on until the listing's time limit (10 s)
