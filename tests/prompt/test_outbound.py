"""SSRF guard for webhook targets: forbidden address classes unless explicitly allowed."""

from __future__ import annotations

import pytest

from gateway.data_injection import STATUS
from gateway.outbound import OutboundPolicy, OutboundRefused


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


async def test_fetch_to_a_refused_target_records_why_and_sends_nothing(services, data_source):
    attrs = services.customer_attributes
    services.live.data_injection.outbound = OutboundPolicy.parse("")  # the default: nothing private allowed
    await attrs.set("project_attributes_setting_data_injection_is_enabled", True)
    await attrs.set("project_attributes_setting_data_injection_url", data_source.url)
    status = await services.live.data_injection.fetch("slot-1")
    assert status.startswith("failed at") and "loopback" in status
    assert await attrs.get(STATUS.name) == status
    assert data_source.requests == []
