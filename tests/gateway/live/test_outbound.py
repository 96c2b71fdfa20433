"""SSRF guard for webhook targets: forbidden address classes unless explicitly allowed."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.core.outbound import OutboundPolicy, OutboundRefused
from gateway.live.data_injection import STATUS
from gateway.services import Services


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/x", "loopback"),
        ("http://[::1]/x", "loopback"),
        ("http://localhost/x", "loopback"),
        ("http://10.1.2.3/x", "private"),
        ("http://192.168.0.10/x", "private"),
        ("http://172.16.5.5/x", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("http://169.254.10.10/x", "link-local"),
        ("http://[fe80::1]/x", "link-local"),
        ("http://[::ffff:127.0.0.1]/x", "loopback"),
        ("http://0.0.0.0/x", "unspecified"),
        ("file:///etc/passwd", "http(s)"),
        ("gopher://example.com/", "http(s)"),
    ],
)
async def test_forbidden_targets_are_refused(url, reason):
    with pytest.raises(OutboundRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
        await OutboundPolicy.parse("").check(url)


async def test_allow_list_takes_hosts_and_cidrs():
    policy = OutboundPolicy.parse("127.0.0.1, 10.0.0.0/8, inventory.internal")
    assert await policy.check("http://127.0.0.1:9000/data")
    assert await policy.check("http://10.20.30.40/data")
    assert await policy.check("https://inventory.internal/data") == []
    with pytest.raises(OutboundRefused):
        await policy.check("http://127.0.0.2/data")
    with pytest.raises(OutboundRefused, match="metadata"):
        await policy.check("http://169.254.169.254/")


async def test_fetch_to_a_refused_target_records_why_and_sends_nothing(live_settings, clock, data_source):
    strict = live_settings.model_copy(update={"outbound_allow_hosts": ""})  # the default: nothing private allowed
    services = Services.build(strict, run_worker=False, clock=clock)
    try:
        attrs = services.customer_attributes
        await attrs.set("project_attributes_setting_data_injection_is_enabled", True)
        await attrs.set("project_attributes_setting_data_injection_url", data_source.url)
        status = await services.live.data_injection.fetch("slot-1")
        assert status.startswith("failed at") and "loopback" in status
        assert await attrs.get(STATUS.name) == status
        assert data_source.requests == []
    finally:
        await services.aclose()


def test_a_checked_url_is_pinned_to_the_checked_address():
    from ipaddress import ip_address

    from gateway.core.outbound import pinned

    https = pinned("https://user:pw@data.example.com:8443/q?a=1", [ip_address("93.184.216.34")])
    assert https.url == "https://user:pw@93.184.216.34:8443/q?a=1"
    assert https.headers == {"Host": "data.example.com:8443"}
    assert https.extensions == {"sni_hostname": "data.example.com"}  # certificates are checked for the name
    v6 = pinned("http://data.example.com/q", [ip_address("2606:2800:220:1::1")])
    assert (v6.url, v6.headers, v6.extensions) == ("http://[2606:2800:220:1::1]/q", {"Host": "data.example.com"}, {})
    assert pinned("https://inventory.internal/d", []).url == "https://inventory.internal/d"


async def test_the_fetch_connects_to_the_address_it_checked(live_settings, clock, data_source):
    """DNS answered once, at the check: ``rebind.test`` resolved to the data source's loopback address
    then, and cannot be resolved at all afterwards (a rebinding server's later answer could be
    anything). The fetch must connect to the checked address, not look the name up again."""
    asked = []

    async def checked_once(host: str, port: int):
        asked.append(host)
        assert host == "rebind.test"
        return [ipaddress.ip_address("127.0.0.1")]

    allowing = live_settings.model_copy(update={"outbound_allow_hosts": "127.0.0.0/8"})
    services = Services.build(allowing, run_worker=False, clock=clock, resolver=checked_once)
    try:
        attrs = services.customer_attributes
        by_name = data_source.url.replace("127.0.0.1", "rebind.test")
        await attrs.set("project_attributes_setting_data_injection_is_enabled", True)
        await attrs.set("project_attributes_setting_data_injection_url", by_name)
        assert await services.live.data_injection.fetch("slot-2") == "ok"
        [request] = data_source.requests
        assert request["headers"]["host"] == by_name.split("/")[2]  # the source still sees its own name
        assert asked == ["rebind.test"]  # looked up once, by the check
    finally:
        await services.aclose()


async def test_data_injection_follows_redirects_only_where_the_guard_allows(live_settings, clock, data_source):
    allowing = live_settings.model_copy(update={"outbound_allow_hosts": "127.0.0.1"})
    services = Services.build(allowing, run_worker=False, clock=clock)
    try:
        attrs = services.customer_attributes
        await attrs.set("project_attributes_setting_data_injection_is_enabled", True)
        await attrs.set("project_attributes_setting_data_injection_url", data_source.url)
        await attrs.set("project_attributes_private_data_injection_payload", '{"q": "rooms"}')
        data_source.answer(status=307, location="/data")  # relative, same source
        assert await services.live.data_injection.fetch("s1") == "ok"
        assert [r["body"] for r in data_source.requests] == ['{"q": "rooms"}'] * 2  # 307: the POST again
        data_source.answer(status=302, location="http://169.254.169.254/latest/meta-data/")
        status = await services.live.data_injection.fetch("s2")
        assert status.startswith("failed at") and "cloud metadata address" in status
        assert len(data_source.requests) == 3  # nothing went to the metadata address
    finally:
        await services.aclose()
