"""OpenAPI tool sources, against a real FastAPI shop serving its own ``openapi.json`` on 127.0.0.1: the
chosen operations become tools whose arguments are the parameters and the JSON body (``$ref``s inlined);
a turn's call is one HTTP request with the source's headers and an ``Idempotency-Key``; a non-2xx
answer is an error result the model reads; refused input stores nothing; a document that is not
OpenAPI 3 is saved with the error in the status."""

from __future__ import annotations

import json

import httpx

from tests.fakes.shop_api import FakeShop
from tests.gateway.tools.conftest import ADMIN, SHOP_TOKEN, ask, trace_of
from tests.gateway.tools.test_tool_sources_api import _all_values
from tests.gateway.tools.test_tool_turns import _give_tools, _tool_messages


def _add_shop(client: httpx.Client, shop: FakeShop, *operations: str) -> httpx.Response:
    return client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "openapi", "name": "shop", "url": shop.url + "/openapi.json",
        "headers": {"Authorization": f"Bearer {SHOP_TOKEN}"}, "operations": list(operations)})


def test_the_chosen_operations_become_tools_with_their_parameters_and_body(client, shop, tool_settings):
    answer = _add_shop(client, shop, "getOrder", "refundOrder")

    assert answer.status_code == 201, answer.text
    source = answer.json()
    assert source["kind"] == "openapi" and source["operations"] == ["getOrder", "refundOrder"]
    assert source["status"]["last_error"] is None and source["status"]["connected_at"]
    assert source["headers"] == {"Authorization": "••••" + SHOP_TOKEN[-4:]}
    get, refund = source["tools"]
    assert get["name"] == "shop.getOrder" and get["description"] == "Look an order up by its number."
    assert get["inputSchema"]["required"] == ["order_id"]
    assert get["inputSchema"]["properties"]["verbose"]["type"] == "boolean"
    assert get["endpoint"] == {"method": "GET", "url": shop.url + "/orders/{order_id}",
                               "parameters": {"order_id": "path", "verbose": "query"}, "body": None}
    assert refund["name"] == "shop.refundOrder"
    assert set(refund["inputSchema"]["properties"]) == {"order_id", "x-channel", "body"}
    money = refund["inputSchema"]["properties"]["body"]
    assert money["properties"]["refund"]["properties"]["amount"]["type"] == "number"  # $ref in $ref inlined
    assert "$ref" not in json.dumps(refund["inputSchema"])
    assert sorted(refund["inputSchema"]["required"]) == ["body", "order_id"]
    assert shop.requests == []  # reading the document calls no operation
    assert SHOP_TOKEN not in answer.text
    assert SHOP_TOKEN not in _all_values(str(tool_settings.redis_url), tool_settings.agent_id)


def test_refused_input_stores_nothing(client, shop):
    unknown = _add_shop(client, shop, "getOrder", "cancelOrder")
    assert unknown.status_code == 422
    assert unknown.json()["message"] == "operations: the OpenAPI document has no operation 'cancelOrder'"
    none = _add_shop(client, shop)
    assert none.status_code == 422 and "name the OpenAPI operations" in none.json()["message"]
    stdio = client.post("/api/tool-sources", headers=ADMIN, json={"kind": "stdio", "name": "local",
                                                                  "url": "http://127.0.0.1/x", "command": "crm-mcp"})
    assert stdio.status_code == 422 and "never over HTTP" in stdio.json()["message"]
    stdio = client.post("/api/tool-sources", headers=ADMIN, json={"kind": "stdio", "name": "local",
                                                                  "url": "http://127.0.0.1/x"})
    assert stdio.status_code == 422 and "never over HTTP" in stdio.json()["message"]
    mcp_ops = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "mcp", "name": "crm", "url": shop.url + "/mcp", "operations": ["getOrder"]})
    assert mcp_ops.status_code == 422 and "only an OpenAPI source" in mcp_ops.json()["message"]
    assert client.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []


def test_a_document_that_is_not_openapi_is_saved_with_its_error(client, shop):
    not_openapi = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "openapi", "name": "shop", "url": shop.url + "/orders/4411",
        "headers": {"Authorization": f"Bearer {SHOP_TOKEN}"}, "operations": ["getOrder"]})
    assert not_openapi.status_code == 201, not_openapi.text
    assert not_openapi.json()["tools"] == []
    assert "not an OpenAPI 3 document (no 'openapi')" in not_openapi.json()["status"]["last_error"]
    refused = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "openapi", "name": "shop2", "url": shop.url + "/openapi.json", "operations": ["getOrder"]})
    assert refused.status_code == 201 and "HTTP 401" in refused.json()["status"]["last_error"]
    gone = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "openapi", "name": "gone", "url": "http://127.0.0.1:9/openapi.json", "operations": ["getOrder"]})
    assert gone.status_code == 201 and "connection failed" in gone.json()["status"]["last_error"]
    # pointing it at the document lists the tools
    fixed = client.patch(f"/api/tool-sources/{not_openapi.json()['id']}", headers=ADMIN,
                         json={"url": shop.url + "/openapi.json"})
    assert fixed.status_code == 200 and [t["name"] for t in fixed.json()["tools"]] == ["shop.getOrder"]
    assert fixed.json()["status"]["last_error"] is None


def test_a_web_chat_turn_calls_the_api_once_with_an_idempotency_key(client, shop, fake_openai, tool_settings):
    _add_shop(client, shop, "getOrder", "refundOrder")
    _give_tools(client, tool_settings.agent_id, "shop.*")
    fake_openai.echo_tool_results = True
    fake_openai.script_tool_calls(
        ("shop__refundOrder", {"order_id": "4411", "x-channel": "web",
                               "body": {"currency": "EUR", "refund": {"amount": 12.5, "reason": "late"}}}),
        ("shop__getOrder", {"order_id": "9999"}))

    answer = ask(client, "Refund 12.50 on order 4411 and where is 9999?")

    turn = answer["turn_id"]
    refund, missing = sorted(shop.requests, key=lambda r: r["method"], reverse=True)
    assert len(shop.requests) == 2
    assert refund == {"method": "POST", "path": "/orders/4411/refunds", "query": {},
                      "idempotency_key": f"{turn}:0", "authorization": f"Bearer {SHOP_TOKEN}",
                      "body": {"currency": "EUR", "refund": {"amount": 12.5, "reason": "late"}}}
    assert missing["path"] == "/orders/9999" and missing["idempotency_key"] == f"{turn}:1"
    refunded, not_found = _tool_messages(fake_openai.chat_requests()[1])
    assert json.loads(refunded["content"]) == {"refund": "RF-4411", "amount": 12.5, "currency": "EUR",
                                               "channel": "web"}
    error = json.loads(not_found["content"])["error"]
    assert error == f'GET {shop.url}/orders/9999 answered HTTP 404: {{"detail":"no order 9999"}}'
    assert answer["reply"]["text"].startswith("From the tools: {\"refund\":\"RF-4411\"")
    first, second = trace_of(client, turn)["tool_calls"]
    assert first["name"] == "shop.refundOrder" and first["result"].startswith('{"refund":"RF-4411"')
    assert second["name"] == "shop.getOrder" and second["error"] == error and second["result"] is None


def test_trying_a_tool_calls_it_and_masks_the_sources_secrets(client, shop):
    source = _add_shop(client, shop, "getOrder", "whoAmI").json()

    tried = client.post(f"/api/tool-sources/{source['id']}/tools/shop.getOrder/try", headers=ADMIN,
                        json={"arguments": {"order_id": "4412", "verbose": True}})
    assert tried.status_code == 200, tried.text
    assert json.loads(tried.json()["result"]) == {"order": "4412", "status": "packed", "carrier": "DHL"}
    assert tried.json()["error"] is None and tried.json()["ms"] > 0
    [request] = shop.requests
    assert request["query"] == {"verbose": "true"} and request["idempotency_key"].startswith("try:")

    echoed = client.post(f"/api/tool-sources/{source['id']}/tools/shop.whoAmI/try", headers=ADMIN, json={})
    assert json.loads(echoed.json()["result"])["authorization"].endswith("••••" + SHOP_TOKEN[-4:])
    assert SHOP_TOKEN not in echoed.text

    extra = client.post(f"/api/tool-sources/{source['id']}/tools/shop.getOrder/try", headers=ADMIN,
                        json={"arguments": {"order_id": "4411", "colour": "red"}})
    assert extra.json()["error"] == "unknown argument 'colour'; this operation takes 'order_id', 'verbose'"
    unknown = client.post(f"/api/tool-sources/{source['id']}/tools/shop.refundOrder/try", headers=ADMIN, json={})
    assert unknown.status_code == 404 and "no tool 'shop.refundOrder'" in unknown.json()["message"]
    assert client.post(f"/api/tool-sources/{source['id']}/tools/shop.getOrder/try",
                       json={"arguments": {"order_id": "4411"}}).status_code == 401
    assert len(shop.requests) == 2  # the refused tries called nothing


def test_a_document_in_yaml_is_read_as_its_json_twin(client, shop):
    from_json = _add_shop(client, shop, "getOrder", "refundOrder").json()
    from_yaml = client.post("/api/tool-sources", headers=ADMIN, json={
        "kind": "openapi", "name": "shopyaml", "url": shop.url + "/openapi.yaml",
        "headers": {"Authorization": f"Bearer {SHOP_TOKEN}"}, "operations": ["getOrder", "refundOrder"]})
    assert from_yaml.status_code == 201 and from_yaml.json()["status"]["last_error"] is None, from_yaml.text
    assert [{**t, "name": t["name"].partition(".")[2]} for t in from_yaml.json()["tools"]] == \
        [{**t, "name": t["name"].partition(".")[2]} for t in from_json["tools"]]
