"""Progress and outcome of long ingestion work (an upload of many files, a website crawl, a bulk
text append), in Redis so every replica and worker reports into one record and the API, the CLI
and the console read the same numbers. Records are kept 7 days."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from gateway.conversation.store import RedisStore
from gateway.core.errors import NotFound

JobKind = Literal["documents", "crawl", "append_text", "append_websites"]
JobStatus = Literal["queued", "running", "done", "failed"]
KEEP_S = 7 * 24 * 3600
MAX_PROBLEMS = 100
INTERRUPTED = "interrupted: the process running it stopped (a restart?) before it finished; start it again"
_COUNTERS = ("done", "errors", "pages_fetched", "pages_queued")
_FIELDS = ("kind", "kb", "status", "total", "message", "created_at", "updated_at", "finished_at",
           "topics_created", "topics_updated", "topics_deleted", "problems_dropped", "result")


def _now() -> datetime:
    return datetime.now(UTC)


class IngestJob(BaseModel):
    id: str
    kind: JobKind
    kb: str = "main"
    status: JobStatus = "queued"
    total: int | None = None
    done: int = 0
    errors: int = 0
    pages_fetched: int = 0
    pages_queued: int = 0
    topics_created: int = 0
    topics_updated: int = 0
    topics_deleted: int = 0
    problems: list[str] = Field(default_factory=list)
    problems_dropped: int = 0
    message: str | None = None
    result: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=_now)
    updated_at: datetime = Field(default_factory=_now)
    finished_at: datetime | None = None


class IngestJobs:
    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._redis = store.redis
        self._index = store.key("ingest", "jobs")

    def _key(self, job_id: str, *part: str) -> str:
        return self._store.key("ingest", "job", job_id, *part)

    async def create(self, kind: JobKind, kb: str = "main", total: int | None = None) -> IngestJob:
        job = IngestJob(id=secrets.token_hex(8), kind=kind, kb=kb, total=total)
        now = job.created_at.timestamp()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._key(job.id), mapping=self._encode(job.model_dump(mode="json")))
            pipe.expire(self._key(job.id), KEEP_S)
            pipe.zadd(self._index, {job.id: now})
            pipe.zremrangebyscore(self._index, 0, now - KEEP_S)
            await pipe.execute()
        return job

    @staticmethod
    def _encode(data: dict[str, Any]) -> dict[str, str]:
        return {k: json.dumps(data[k]) for k in (*_FIELDS, *_COUNTERS) if k in data}

    async def _exists(self, job_id: str) -> None:
        if not await self._redis.exists(self._key(job_id)):
            raise NotFound(f"no ingestion job {job_id!r}")

    async def update(self, job_id: str, **changes: Any) -> IngestJob:
        await self._exists(job_id)
        fields = IngestJob.model_validate({"id": job_id, "kind": "documents", **changes}).model_dump(mode="json")
        encoded = self._encode({k: fields[k] for k in changes} | {"updated_at": _now().isoformat()})
        await self._redis.hset(self._key(job_id), mapping=encoded)
        job = await self.get(job_id)
        assert job is not None
        return job

    async def advance(self, job_id: str, *, done: int = 0, errors: int = 0, pages_fetched: int = 0,
                      pages_queued: int = 0) -> None:
        """Add to the counters (atomic increments: concurrent tasks may report at once)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            for name, value in (("done", done), ("errors", errors), ("pages_fetched", pages_fetched),
                                ("pages_queued", pages_queued)):
                if value:
                    pipe.hincrby(self._key(job_id), name, value)
            pipe.hset(self._key(job_id), "updated_at", json.dumps(_now().isoformat()))
            await pipe.execute()

    async def problem(self, job_id: str, text: str) -> None:
        key = self._key(job_id, "problems")
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, text[:2000])
            pipe.llen(key)
            pipe.expire(key, KEEP_S)
            _, length, _ = await pipe.execute()
        if length > MAX_PROBLEMS:  # keep the first ones (usually the cause), count the rest
            await self._redis.rpop(key)
            await self._redis.hincrby(self._key(job_id), "problems_dropped", 1)

    async def finish(self, job_id: str, status: JobStatus, message: str | None = None, **counts: Any) -> IngestJob:
        return await self.update(job_id, **{"finished_at": _now(), **counts, "status": status, "message": message})

    async def get(self, job_id: str) -> IngestJob | None:
        raw = await self._redis.hgetall(self._key(job_id))
        if not raw:
            return None
        data = {k.decode(): json.loads(v) for k, v in raw.items()}
        problems = [p.decode() for p in await self._redis.lrange(self._key(job_id, "problems"), 0, -1)]
        return IngestJob.model_validate({**data, "id": job_id, "problems": problems})

    async def fail_interrupted(self, stale_before: datetime | None) -> list[IngestJob]:
        """Mark jobs left ``running`` by a process that stopped as failed: all of them (``None``: this
        process is the only one running jobs) or those without progress since ``stale_before``. Queued
        jobs stay queued: their RQ job runs when a worker is back."""
        failed = []
        for job in await self.recent(limit=500):
            if job.status == "running" and (stale_before is None or job.updated_at < stale_before):
                failed.append(await self.finish(job.id, "failed", INTERRUPTED))
        return failed

    async def recent(self, limit: int = 50, kind: JobKind | None = None) -> list[IngestJob]:
        ids = [i.decode() for i in await self._redis.zrevrange(self._index, 0, 499)]
        jobs = []
        for job_id in ids:
            job = await self.get(job_id)
            if job is not None and (kind is None or job.kind == kind):
                jobs.append(job)
                if len(jobs) >= limit:
                    break
        return jobs


class JobReport:
    """One job's progress as a crawl or an upload reports it."""

    def __init__(self, jobs: IngestJobs, job_id: str) -> None:
        self._jobs = jobs
        self.job_id = job_id

    async def advance(self, *, done: int = 0, errors: int = 0, pages_fetched: int = 0, pages_queued: int = 0) -> None:
        await self._jobs.advance(
            self.job_id, done=done, errors=errors, pages_fetched=pages_fetched, pages_queued=pages_queued
        )

    async def problem(self, text: str) -> None:
        await self._jobs.problem(self.job_id, text)
