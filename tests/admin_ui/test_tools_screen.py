"""The Tools screen without a browser: admins only, CSRF checked, refused input shown next to the form
with what was typed (the header's value not), the outbound guard applied to the URL."""

from __future__ import annotations

import re

from tests.admin_ui.conftest import csrf_of, operator_client
from tests.gateway.tools.conftest import ADMIN, SHOP_TOKEN, shop  # noqa: F401  (fixture)


def _alert(html: str) -> str:
    return re.search(r'role="alert">([^<]*)<', html).group(1)


def test_an_operator_cannot_see_or_change_tools(admin, console):
    with operator_client(admin, console.url) as operator:
        assert "Not allowed" in operator.get("/admin/tools").text
        assert operator.get("/admin/tools").status_code == 403
        csrf = csrf_of(operator.get("/admin").text)
        added = operator.post("/admin/tools", data={"csrf_token": csrf, "kind": "mcp", "name": "crm",
                                                    "url": "http://127.0.0.1:9/mcp"})
        assert added.status_code == 403
        assert "Tools" not in operator.get("/admin").text.split("<main>")[0]  # not in an operator's navigation
    assert "/admin/tools" in admin.get("/admin").text.split("<main>")[0]
    assert admin.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []


def test_refused_input_is_shown_and_nothing_is_fetched(admin, console, shop):  # noqa: F811
    page = admin.get("/admin/tools").text
    assert admin.post("/admin/tools", data={"csrf_token": "forged", "kind": "openapi", "name": "shop"}
                      ).status_code == 403
    refused = admin.post("/admin/tools", data={
        "csrf_token": csrf_of(page), "kind": "openapi", "name": "Shop!", "url": f"{shop.url}/openapi.json",
        "operations": "getOrder", "header_name": "Authorization", "header_value": f"Bearer {SHOP_TOKEN}"})
    assert refused.status_code == 422
    assert "name: lower-case letters" in _alert(refused.text) and 'value="Shop!"' in refused.text
    assert SHOP_TOKEN not in refused.text
    # this console allows no loopback host: the outbound guard refuses the URL before anything is fetched
    guarded = admin.post("/admin/tools", data={
        "csrf_token": csrf_of(page), "kind": "openapi", "name": "shop", "url": f"{shop.url}/openapi.json",
        "operations": "getOrder", "header_name": "Authorization", "header_value": f"Bearer {SHOP_TOKEN}"})
    assert guarded.status_code == 422
    assert "a loopback address; allow it in SWITCHBOARD_OUTBOUND_ALLOW_HOSTS" in _alert(guarded.text)
    assert admin.get("/api/tool-sources", headers=ADMIN).json()["tool_sources"] == []
    assert shop.requests == []
