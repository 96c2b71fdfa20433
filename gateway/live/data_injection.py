"""Data injection (the seed's CADataInjectionFlow): FetchData on a timer, RetrieveData on the answer.

FetchData POSTs ``project_attributes_private_data_injection_payload`` to
``project_attributes_setting_data_injection_url`` once per period. The answer — in the response, or
later through the signed feed callback ``POST /webhooks/feeds/data_injection`` when the source
answers 202 — is optionally summarized within a token budget and stored with its fetch time. A
failure keeps the last good data, is recorded in ``..._data_injection_status`` and the
``switchboard_job_failures{job="fetch_data"}`` metric, and is retried by RQ with backoff.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from gateway.conversation.attributes import AttributeSpec, CustomerAttributes
from gateway.core.clock import Clock, describe_age
from gateway.core.errors import GatewayError, LLMError
from gateway.core.metrics import Metrics
from gateway.core.models import ModelCallTrace, PromptMessage
from gateway.core.outbound import OutboundPolicy, OutboundRefused, shown
from gateway.core.outbound_client import FetchFailed, FetchLimits, GuardedClient
from gateway.core.settings import Settings
from gateway.live.budget import fit
from gateway.live.template_store import TemplateStore
from gateway.turn.llm import LLMClient, UsageRecorder
from rag_core.clean_text import scrub, scrub_deep

log = logging.getLogger(__name__)

CALLBACK_FEED = "data_injection"
_PERIOD = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def period_seconds(value: int | str) -> int:
    """``30``, ``"30"``, ``"30s"``, ``"5m"``, ``"1h"``, ``"1d"`` → seconds (at least 1)."""
    if isinstance(value, int):
        seconds = value
    else:
        match = _PERIOD.match(value.lower())
        if match is None:
            raise ValueError(f"{value!r} is not a period: use seconds or 30s / 5m / 1h")
        seconds = int(match[1]) * _UNITS[match[2]]
    if seconds < 1:
        raise ValueError("the period must be at least 1 second")
    return seconds


def _check_period(value: int | str) -> int | str:
    period_seconds(value)
    return value


def _check_url(value: str) -> str:
    if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


ENABLED = AttributeSpec(
    "project_attributes_setting_data_injection_is_enabled", bool, False, "run FetchData on its timer")
PERIOD = AttributeSpec(
    "project_attributes_setting_data_injection_update_period", int | str, "1h",
    "how often FetchData runs: seconds or 30s / 5m / 1h", check=_check_period)
NEEDS_SUMMARY = AttributeSpec(
    "project_attributes_setting_data_injection_needs_summary", bool, False,
    "summarize fetched data with the LLM before injecting it")
URL = AttributeSpec(
    "project_attributes_setting_data_injection_url", str, "", "where FetchData POSTs the payload",
    check=_check_url)
PAYLOAD = AttributeSpec(
    "project_attributes_private_data_injection_payload", str, "",
    "the body FetchData POSTs (sent as JSON when it parses as JSON)")
RETRIEVED = AttributeSpec(
    "project_attributes_private_data_injection_retrieved_data", str, "",
    "the most recently fetched and processed data", private=True)
FETCHED_AT = AttributeSpec(
    "project_attributes_private_data_injection_fetched_at", datetime | None, None,
    "when the retrieved data was fetched", private=True)
STATUS = AttributeSpec(
    "project_attributes_private_data_injection_status", str, "never fetched",
    "outcome of the last fetch", private=True)


class DataInjectionFailed(GatewayError):
    """A fetch failed; the job raises it so RQ retries it (the last good data stays)."""


class DataInjection:
    def __init__(
        self,
        attributes: CustomerAttributes,
        settings: Settings,
        llm: LLMClient | None,
        templates: TemplateStore,
        outbound: OutboundPolicy,
        metrics: Metrics,
        clock: Clock,
    ) -> None:
        self.attributes = attributes
        self.settings = settings
        self.llm = llm
        self.templates = templates
        self.outbound = outbound
        self.metrics = metrics
        self.clock = clock
        self.record_usage: UsageRecorder | None = None  # the summary's model call, counted (set by the services)

    async def period(self) -> int | None:
        """Seconds between fetches, or ``None`` while disabled or without a URL."""
        values = await self.attributes.all()
        if not values[ENABLED.name] or not values[URL.name]:
            return None
        return period_seconds(values[PERIOD.name])

    async def fetch(self, slot: str = "") -> str:
        """FetchData: POST the payload, then RetrieveData on the answer. Returns the new status."""
        values = await self.attributes.all()
        url, payload = values[URL.name], values[PAYLOAD.name]
        if not values[ENABLED.name] or not url:
            return "disabled"
        try:
            json.loads(payload)
            content_type = "application/json"
        except ValueError:
            content_type = "text/plain; charset=utf-8"
        headers = {"Content-Type": content_type}
        if slot:
            headers["Idempotency-Key"] = slot
        started = self.clock.now()
        # RQ retries a failed fetch with backoff (and the last good data stays): one try here
        limits = FetchLimits(timeout_s=self.settings.data_injection_timeout_s,
                             max_bytes=self.settings.data_injection_max_bytes, retries=0,
                             max_ratio=self.settings.outbound_max_compression_ratio)
        client = GuardedClient(self.outbound, limits, user_agent="Switchboard/1.0 (data injection)",
                             subject="the answer")
        try:
            resp = await client.request("POST", url, content=payload.encode(), headers=headers)
        except OutboundRefused as exc:
            # Configuration, not a transient failure: visible, not retried.
            await self._failed(exc.message)
            return await self.attributes.get(STATUS.name)
        except FetchFailed as exc:
            await self._failed(f"HTTP {exc.status} from the data source" if exc.status else
                               f"request failed: {exc.reason}")
            raise DataInjectionFailed(f"FetchData to {shown(url)} failed: {exc.reason}") from exc
        finally:
            await client.aclose()
        if resp.status == 202:
            await self.attributes.set(STATUS.name, f"waiting for callback since {started.isoformat()}")
            return await self.attributes.get(STATUS.name)
        if resp.status >= 300:
            await self._failed(f"HTTP {resp.status} from the data source")
            raise DataInjectionFailed(f"FetchData to {shown(url)} answered HTTP {resp.status}")
        return await self.retrieve(_decode(resp.body, resp.content_type), started)

    async def retrieve(self, data: Any, fetched_at: datetime | None = None) -> str:
        """RetrieveData: extract, optionally summarize, fit the budget, store with the fetch time."""
        text = _extract(data)
        status = "ok"
        budget = self.settings.data_injection_max_tokens
        if await self.attributes.get(NEEDS_SUMMARY.name):
            if self.llm is None:
                status = "ok (not summarized: no language model configured)"
            else:
                prompt = await self.templates.render("data_summary", data=text, max_tokens=budget)
                try:
                    done = await self.llm.complete([PromptMessage(role="system", content=prompt)])
                except LLMError as exc:
                    await self._failed(f"summary failed: {exc.message}")
                    raise DataInjectionFailed("summarizing fetched data failed") from exc
                text = done.text.strip()
                if self.record_usage is not None:  # the fetch job's call: counted with no agent or channel
                    await self.record_usage(None, None, None, [ModelCallTrace(
                        kind="data_summary", model=self.llm.model, prompt_tokens=done.usage.prompt_tokens,
                        completion_tokens=done.usage.completion_tokens)])
        await self.attributes.set(RETRIEVED.name, fit(text, budget).text)
        await self.attributes.set(FETCHED_AT.name, fetched_at or self.clock.now())
        await self.attributes.set(STATUS.name, status)
        return status

    async def _failed(self, reason: str) -> None:
        self.metrics.job_failures.labels("fetch_data").inc()
        log.warning("data injection failed: %s", reason)
        await self.attributes.set(STATUS.name, f"failed at {self.clock.now().isoformat()}: {reason}")

    async def section(self, values: dict[str, Any] | None = None) -> str:
        """The retrieved data as a prompt section labelled with its age, or ``""``. ``values``: the
        customer attributes when the caller has just read them."""
        if values is None:
            values = await self.attributes.all()
        data, fetched = values[RETRIEVED.name], values[FETCHED_AT.name]
        if not data:
            return ""
        fetched_at = FETCHED_AT.validate(fetched)
        age = describe_age(fetched_at, self.clock.now()) if fetched_at else "unknown"
        stamp = f' fetched_at="{fetched_at.isoformat()}"' if fetched_at else ""
        return f'<ExternalData updated="{age}"{stamp}>\n{data}\n</ExternalData>'


def _decode(body: bytes, content_type: str) -> Any:
    """The data source's answer as data; text that is not valid Unicode is repaired, never refused."""
    text = body.decode("utf-8", errors="replace")
    if "json" in content_type:
        try:
            return scrub_deep(json.loads(text))
        except (ValueError, RecursionError):  # not JSON after all, or nested past the parser's depth
            return scrub(text)
    return text


def _extract(data: Any) -> str:
    if isinstance(data, str):
        return data.strip()
    if isinstance(data, dict) and isinstance(data.get("text"), str):
        return data["text"].strip()
    if isinstance(data, dict) and "data" in data:
        data = data["data"]
        if isinstance(data, str):
            return data.strip()
    return json.dumps(data, ensure_ascii=False, indent=2)
