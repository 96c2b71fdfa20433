"""Customer attributes through the admin API: typed validation, refusal with the reason, old value kept."""

from __future__ import annotations

import pytest

TZ = "project_attributes_setting_timezone"
PERIOD = "project_attributes_setting_data_injection_update_period"


def test_typed_values_round_trip(admin):
    assert admin.get(f"/api/attributes/{TZ}").json()["value"] == "UTC"
    assert admin.put(f"/api/attributes/{TZ}", json={"value": "Asia/Tokyo"}).json()["value"] == "Asia/Tokyo"
    enabled = admin.put("/api/attributes/project_attributes_setting_data_injection_is_enabled",
                        json={"value": "True"})
    assert enabled.json()["value"] is True  # the seed's "True" strings are accepted as booleans
    for period in (45, "30s", "5m", "1h"):
        assert admin.put(f"/api/attributes/{PERIOD}", json={"value": period}).json()["value"] == period
    closed = admin.put("/api/attributes/project_attributes_setting_closed_dates",
                       json={"value": {"2026-12-25": "Christmas"}})
    assert closed.json()["value"] == {"2026-12-25": "Christmas"}
    listed = {a["name"]: a for a in admin.get("/api/attributes").json()["attributes"]}
    assert listed[TZ]["value"] == "Asia/Tokyo" and listed[PERIOD]["value"] == "1h"


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        (TZ, "Mars/Olympus_Mons", "not an IANA time zone"),
        (PERIOD, "5 minutes", "not a period"),
        (PERIOD, 0, "at least 1 second"),
        ("project_attributes_setting_data_injection_url", "ftp://example.com/x", "not an http(s) URL"),
        ("project_attributes_setting_business_hours", {"mon": "17:00-09:00"}, "opening span"),
        ("project_attributes_setting_business_hours", {"funday": "09:00-17:00"}, "not a weekday"),
        ("project_attributes_setting_closed_dates", {"christmas": "x"}, "date"),
        ("project_attributes_setting_data_injection_is_enabled", "perhaps", "boolean"),
    ],
)
def test_bad_values_are_refused_with_the_reason_and_the_old_value_stays(admin, name, value, reason):
    before = admin.get(f"/api/attributes/{name}").json()["value"]
    resp = admin.put(f"/api/attributes/{name}", json={"value": value})
    body = resp.json()
    assert (resp.status_code, body["error"]) == (422, "invalid_input")
    assert name in body["message"] and reason in body["message"], body["message"]
    assert admin.get(f"/api/attributes/{name}").json()["value"] == before


def test_private_and_unknown_attributes(admin):
    private = admin.put("/api/attributes/project_attributes_private_data_injection_retrieved_data",
                        json={"value": "forged"})
    assert (private.status_code, private.json()["error"]) == (403, "forbidden")
    assert admin.get("/api/attributes/project_attributes_private_data_injection_retrieved_data").json()["value"] == ""
    assert admin.get("/api/attributes/no_such_thing").status_code == 404
    assert admin.put("/api/attributes/no_such_thing", json={"value": 1}).status_code == 404
    assert admin.put(f"/api/attributes/{TZ}", json={}).status_code == 422
