"""Ingestion job records in Redis: counters that concurrent tasks add to, problems capped with a count."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from gateway.conversation.store import RedisStore
from gateway.core.errors import NotFound
from gateway.knowledge.ingest_jobs import MAX_PROBLEMS, IngestJobs


@pytest.fixture
async def jobs(redis_url, agent_id):
    redis = Redis.from_url(redis_url)
    yield IngestJobs(RedisStore(redis, agent_id))
    await redis.aclose()


async def test_counters_add_up_across_concurrent_reports_and_problems_are_capped(jobs):
    job = await jobs.create("crawl", "main", total=3)
    await asyncio.gather(*(jobs.advance(job.id, done=1, pages_fetched=2, errors=i % 2) for i in range(50)))
    for i in range(MAX_PROBLEMS + 7):
        await jobs.problem(job.id, f"page {i} failed")
    finished = await jobs.finish(job.id, "done", "all sites crawled", topics_created=4)
    assert (finished.done, finished.pages_fetched, finished.errors) == (50, 100, 25)
    assert finished.problems[0] == "page 0 failed" and len(finished.problems) == MAX_PROBLEMS
    assert finished.problems_dropped == 7
    assert (finished.status, finished.message, finished.topics_created, finished.total) == (
        "done", "all sites crawled", 4, 3)
    assert finished.finished_at is not None


async def test_recent_lists_newest_first_by_kind_and_unknown_jobs_are_not_found(jobs):
    first = await jobs.create("documents")
    second = await jobs.create("crawl")
    third = await jobs.create("documents")
    assert [j.id for j in await jobs.recent()] == [third.id, second.id, first.id]
    assert [j.id for j in await jobs.recent(kind="documents")] == [third.id, first.id]
    assert await jobs.get("nope") is None
    with pytest.raises(NotFound):
        await jobs.update("nope", status="done")
