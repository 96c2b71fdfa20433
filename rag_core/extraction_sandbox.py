"""Extracting and chunking one document in a child process with budgets, so a hostile file (a zip
bomb, a pathological PDF, 10 MB of text) costs the gateway neither memory nor its event loop's CPU.

The child has an address-space limit (``RLIMIT_AS``) and a CPU-time limit, runs at a lower priority
than the gateway (``nice``), and is killed when the wall-clock budget runs out or the caller is
cancelled (a client that left, a SIGTERM): the work really stops, no thread is left behind. Children
fork from a ``forkserver`` that preloaded the parsers, so one costs milliseconds, not an interpreter
start. At most ``concurrency`` children run at once per process."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from rag_core.chunking import MAX_CHUNK_CHARS, Chunk, ChunkingOptions, chunk_document
from rag_core.errors import ExtractionFailed
from rag_core.extract import ExtractedDocument, ZipLimits, extract

_NICE = 10
_PRELOAD = ["rag_core.extraction_sandbox"]


@dataclass(frozen=True)
class ExtractBudget:
    timeout_s: float = 120.0
    max_memory_mb: int = 1024
    max_chunk_chars: int = MAX_CHUNK_CHARS
    zip_limits: ZipLimits = field(default_factory=ZipLimits)
    concurrency: int = 2


@dataclass(frozen=True)
class Prepared:
    document: ExtractedDocument
    chunks: list[Chunk]


@dataclass(frozen=True)
class _Job:
    data: bytes
    name: str
    fmt: str
    row_template: str | None
    options: ChunkingOptions
    budget: ExtractBudget


def _prepare(job: _Job) -> Prepared:
    document = extract(job.data, job.name, fmt=job.fmt, row_template=job.row_template,
                       zip_limits=job.budget.zip_limits)
    return Prepared(document, chunk_document(document, job.options, job.budget.max_chunk_chars))


def _child(conn: Connection, job: _Job) -> None:
    limit = job.budget.max_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu = int(job.budget.timeout_s) + 5  # the parent kills it first; this stops it should the parent be gone
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    os.nice(_NICE)
    try:
        result: tuple[str, object] = ("ok", _prepare(job))
    except ExtractionFailed as exc:
        result = ("failed", exc.reason)
    except MemoryError:
        result = ("failed", f"the document needs more than {job.budget.max_memory_mb} MB to read "
                            "(SWITCHBOARD_EXTRACT_MAX_MEMORY_MB); it was stopped")
    del job
    try:
        conn.send(result)
    except MemoryError:
        conn.send(("failed", "the document's text is too large to hand back within the memory budget"))
    finally:
        conn.close()


def _context() -> multiprocessing.context.BaseContext:
    try:
        context = multiprocessing.get_context("forkserver")
    except ValueError:  # no forkserver on this platform
        return multiprocessing.get_context("spawn")
    context.set_forkserver_preload(_PRELOAD)
    return context


class ExtractionSandbox:
    def __init__(self, budget: ExtractBudget | None = None) -> None:
        self.budget = budget or ExtractBudget()
        self._slots: asyncio.Semaphore | None = None

    async def prepare(
        self, data: bytes, name: str, fmt: str, row_template: str | None, options: ChunkingOptions,
    ) -> Prepared:
        """The document and its chunks; ``ExtractionFailed`` with the reason, a budget's included."""
        job = _Job(data, name, fmt, row_template, options, self.budget)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.budget.concurrency)
        async with self._slots:
            return await self._run(job)

    async def _run(self, job: _Job) -> Prepared:
        context = _context()
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(sender, job), daemon=True, name="switchboard-extract")
        # Started in a thread (the document is written to the child through a pipe), and waited for even
        # when the caller is cancelled meanwhile: a process that starts after its caller left is never killed.
        starting = asyncio.ensure_future(asyncio.to_thread(process.start))
        try:
            await asyncio.shield(starting)
            sender.close()
            async with asyncio.timeout(self.budget.timeout_s):
                outcome = await asyncio.to_thread(_receive, receiver)
        except TimeoutError:
            raise ExtractionFailed(
                f"reading the document took longer than {self.budget.timeout_s:g} s "
                "(SWITCHBOARD_EXTRACT_TIMEOUT_S); it was stopped") from None
        finally:
            await _stop(process, starting, sender, receiver)
        if outcome is None:
            raise ExtractionFailed(_died(process.exitcode, self.budget))
        kind, value = outcome
        if kind == "failed":
            assert isinstance(value, str)
            raise ExtractionFailed(value)
        assert isinstance(value, Prepared)
        return value


async def _stop(process: BaseProcess, starting: asyncio.Future[None], sender: Connection,
                receiver: Connection) -> None:
    """Kill the child if it still runs (the receiving thread then sees the pipe close and ends)."""
    try:
        await asyncio.shield(starting)
    except Exception:  # it never started: nothing to stop, nobody reads the pipe
        receiver.close()
        return
    finally:
        sender.close()  # the child has its copy
    if process.is_alive():
        process.kill()
    await asyncio.shield(asyncio.to_thread(process.join, 5))


def _receive(conn: Connection) -> tuple[str, object] | None:
    """The child's answer, ``None`` when it died first. Closes ``conn``: only this thread reads it."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None
    finally:
        conn.close()


def _died(code: int | None, budget: ExtractBudget) -> str:
    if code is not None and code < 0 and -code in (9, 24):  # SIGKILL (an OOM killer), SIGXCPU
        return (f"reading the document went over its budget ({budget.max_memory_mb} MB, "
                f"{budget.timeout_s:g} s of CPU); it was stopped")
    return f"reading the document stopped the process reading it (exit code {code})"
