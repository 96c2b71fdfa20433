"""FetchData / RetrieveData on a real RQ worker with its scheduler, against a fake data source."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from rq import Retry

from gateway.core.models import utcnow
from gateway.jobs.registry import run_job
from gateway.live.context import FETCH_DATA_JOB
from gateway.live.data_injection import FETCHED_AT, RETRIEVED, STATUS, period_seconds
from tests.gateway.live.conftest import eventually

ENABLED = "project_attributes_setting_data_injection_is_enabled"
PERIOD = "project_attributes_setting_data_injection_update_period"
URL = "project_attributes_setting_data_injection_url"
PAYLOAD = "project_attributes_private_data_injection_payload"
SUMMARY = "project_attributes_setting_data_injection_needs_summary"


async def _configure(services, source, period="1s", **extra):
    attrs = services.customer_attributes
    await attrs.set(URL, source.url)
    await attrs.set(PAYLOAD, json.dumps({"query": "availability", "hotel": 7}))
    await attrs.set(PERIOD, period)
    for name, value in extra.items():
        await attrs.set(name, value)
    await attrs.set(ENABLED, True)  # the schedule follows through the AttributeChanged event


def test_period_parsing():
    assert [period_seconds(v) for v in (30, "30", "30s", "5m", "1h", "2d", " 10 S ")] == [
        30, 30, 30, 300, 3600, 172800, 10]


async def test_fetch_runs_on_the_timer_and_the_data_reaches_the_prompt(worker_services, data_source):
    services = worker_services
    await _configure(services, data_source)
    await eventually(lambda: len(data_source.requests) >= 2, timeout_s=8)
    first = data_source.requests[0]
    assert json.loads(first["body"]) == {"query": "availability", "hotel": 7}
    assert first["headers"]["content-type"] == "application/json"
    assert first["headers"]["idempotency-key"].startswith("on1s-")
    attrs = services.customer_attributes
    assert await attrs.get(RETRIEVED.name) == "Rooms free tonight: 3"
    assert await attrs.get(STATUS.name) == "ok"
    fetched = FETCHED_AT.validate(await attrs.get(FETCHED_AT.name))
    assert abs((datetime.now(UTC) - fetched).total_seconds()) < 5
    preview = await services.pipeline.preview(await services.store.resolve_persona("web:x"), "hi")
    assert '<ExternalData updated="just now"' in preview.messages[0].content
    assert "Rooms free tonight: 3" in preview.messages[0].content


async def test_exactly_one_fetch_per_period_with_two_workers(worker_services, live_settings, data_source):
    from gateway.jobs.worker import InProcessWorker
    from gateway.services import Services

    services = worker_services
    second = Services.build(live_settings, run_worker=False)
    second_worker = InProcessWorker(second.redis_sync, live_settings)
    second_worker.start()
    try:
        await _configure(services, data_source)
        await second.live.start()  # a second replica scheduling the same timers on its start
        await asyncio.sleep(4.5)
        keys = [r["headers"]["idempotency-key"] for r in data_source.requests]
        assert len(keys) >= 3
        assert len(keys) == len(set(keys)), keys  # no period fetched twice
        claimed = await services.redis.keys(services.store.key("timer", "fetch_data", "on1s-*"))
        assert set(keys) <= {k.decode().rsplit(":", 1)[1] for k in claimed}  # each fetch won its slot's claim
    finally:
        await asyncio.to_thread(second_worker.stop)
        await second.aclose()


async def test_changing_the_period_takes_effect_without_a_restart(worker_services, data_source):
    services = worker_services
    await _configure(services, data_source, period="1h")
    await asyncio.sleep(1.5)
    assert data_source.requests == []  # the first 1h slot is far away
    await services.customer_attributes.set(PERIOD, "1s")
    await eventually(lambda: len(data_source.requests) >= 2, timeout_s=6)
    assert all(r["headers"]["idempotency-key"].startswith("on1s-") for r in data_source.requests)
    await services.customer_attributes.set(ENABLED, False)
    await asyncio.sleep(1.2)
    count = len(data_source.requests)
    await asyncio.sleep(2)
    assert len(data_source.requests) == count  # disabled: no more fetches


async def test_failure_keeps_last_good_data_is_visible_and_retried(worker_services, data_source):
    services = worker_services
    attrs = services.customer_attributes
    await attrs.set(RETRIEVED.name, "Last good: 5 rooms")
    data_source.answer(status=500, json={"error": "down"})
    data_source.answer(status=503, json={"error": "still down"})
    data_source.default.json = {"text": "Recovered: 2 rooms"}
    await _configure(services, data_source, period="1h")
    await asyncio.to_thread(services.queues["jobs"].enqueue, run_job, services.settings.agent_id, FETCH_DATA_JOB,
                            "manual", retry=Retry(max=2, interval=[1, 1]))
    await eventually(lambda: len(data_source.requests) >= 1)
    status = await eventually(lambda: _status_after(attrs, "failed"), timeout_s=5)
    assert "HTTP 500" in status
    assert await attrs.get(RETRIEVED.name) == "Last good: 5 rooms"
    await eventually(lambda: len(data_source.requests) == 3, timeout_s=10)
    await eventually(lambda: _status_after(attrs, "ok"), timeout_s=5)
    assert await attrs.get(RETRIEVED.name) == "Recovered: 2 rooms"
    failures = services.metrics.registry.get_sample_value("switchboard_job_failures_total", {"job": "fetch_data"})
    assert failures == 2
    assert [r["headers"]["idempotency-key"] for r in data_source.requests] == ["manual"] * 3


async def _status_after(attrs, prefix):
    status = await attrs.get(STATUS.name)
    return status if status.startswith(prefix) else None


async def test_summary_uses_the_llm_within_a_budget(services, data_source, fake_openai):
    fake_openai.script_reply("3 rooms free tonight; sea view from 180 EUR.")
    await _configure(services, data_source, period="1h", **{SUMMARY: "True"})
    data_source.default.json = {"data": {"rooms": [{"n": 12, "view": "sea", "price": 180}] * 3}}
    status = await services.live.data_injection.fetch("s1")
    assert status == "ok"
    assert await services.customer_attributes.get(RETRIEVED.name) == "3 rooms free tonight; sea view from 180 EUR."
    sent = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "Stay under 1500 tokens" in sent and '"price": 180' in sent
    # the summary's model call (the fetch job's, outside any turn) is counted in insight's tokens
    today = utcnow().date()
    [day] = await services.insight.counters.read(today, today, (None, None, None))
    summary = "3 rooms free tonight; sea view from 180 EUR."
    assert (day.counts["prompt"], day.counts["completion"]) == (11, len(summary) // 4)


async def test_summary_without_an_llm_is_skipped_not_faked(live_settings, clock, data_source):
    from gateway.services import Services

    settings = live_settings.model_copy(update={"llm_api_key": None, "llm_base_url": "https://api.openai.com/v1"})
    services = Services.build(settings, run_worker=False, clock=clock)
    try:
        await _configure(services, data_source, period="1h", **{SUMMARY: True})
        status = await services.live.data_injection.fetch("s1")
        assert status == "ok (not summarized: no language model configured)"
        assert await services.customer_attributes.get(RETRIEVED.name) == "Rooms free tonight: 3"
    finally:
        await services.aclose()


async def test_oversized_data_is_cut_to_the_budget(services, data_source):
    services.settings.data_injection_max_tokens = 50
    data_source.default.json = {"text": "\n".join(f"Line {i} of the price list" for i in range(100))}
    await _configure(services, data_source, period="1h")
    await services.live.data_injection.fetch("s1")
    stored = await services.customer_attributes.get(RETRIEVED.name)
    assert stored.startswith("Line 0 of the price list\n") and "[... cut:" in stored
    assert len(stored) <= 200


def test_accepted_fetch_is_completed_by_the_signed_callback(live_gateway, admin, clock, data_source):
    import httpx

    from tests.gateway.live.conftest import feed_body, signed_headers

    data_source.default.status = 202
    data_source.default.json = {"queued": True}
    for name, value in [(URL, data_source.url), (PAYLOAD, "plain text query"), (ENABLED, True), (PERIOD, "1h")]:
        assert admin.put(f"/api/attributes/{name}", json={"value": value}).status_code == 200
    # The job function itself, as a worker in the gateway's process would run it.
    status = run_job(live_gateway.services.settings.agent_id, FETCH_DATA_JOB, "s1")
    assert status.startswith("waiting for callback since")
    assert data_source.requests[0]["headers"]["content-type"].startswith("text/plain")
    body = feed_body(data={"rooms_free": 4})
    resp = httpx.post(f"{live_gateway.url}/webhooks/feeds/data_injection", content=body,
                      headers=signed_headers(body, at=clock.now().timestamp()))
    assert resp.json() == {"feed": "data_injection", "scope": "data_injection", "status": "ok"}
    retrieved = admin.get(f"/api/attributes/{RETRIEVED.name}").json()["value"]
    assert retrieved == '{\n  "rooms_free": 4\n}'
    assert admin.get(f"/api/attributes/{STATUS.name}").json()["value"] == "ok"
