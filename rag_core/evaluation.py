"""Retrieval evaluation on labelled queries: hit@1, hit@3, MRR@10, candidate hit@K, latency
and search-prompt size. ``python -m rag_core.evaluation --topics T --queries Q --strategy S``."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from qdrant_client import QdrantClient

from rag_core.encoders import DenseEncoder, EmbeddingProvider, build_dense_encoder
from rag_core.generation import StructuredGenerator
from rag_core.ingestion import import_file
from rag_core.knowledge_base import KnowledgeBase
from rag_core.retrieval import ChatTurn, SearchRequest, StrategyContext
from rag_core.strategies import LLM_STRATEGIES, build_strategy

CANDIDATE_K = 20


class QueryCase(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    history: list[str] = Field(default_factory=list)
    query: str
    gold: list[str]


class EvalReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    strategy: str
    topics: int
    queries: int
    dense_encoder: bool
    hit_at_1: float
    hit_at_3: float
    mrr_at_10: float
    candidate_k: int
    candidate_hit_at_k: float
    latency_p50_ms: float
    latency_p95_ms: float
    prompt_tokens_mean: float | None = None
    fallbacks: int = 0


class NoneSelector:
    """Stand-in for the search LLM in evaluation and benchmarks only: it answers "none", so
    prompt sizes can be measured without an external service."""

    async def structured_generation(self, prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"search_result": {f"article_id_{i}": "none" for i in (1, 2, 3)}}


def load_queries(path: Path) -> list[QueryCase]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [QueryCase.model_validate_json(line) for line in lines if line.strip()]


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _request(case: QueryCase, k: int) -> SearchRequest:
    return SearchRequest(query=case.query, history=[ChatTurn(role="user", text=t) for t in case.history], k=k)


async def evaluate_on(
    kb: KnowledgeBase,
    queries: Sequence[QueryCase],
    strategy: str,
    *,
    generator: StructuredGenerator | None = None,
    options: dict[str, dict[str, Any]] | None = None,
) -> EvalReport:
    """Run every query, one at a time after a warm-up, against an already indexed KB."""
    if generator is None and strategy in LLM_STRATEGIES:
        generator = NoneSelector()
    runner = build_strategy(strategy, StrategyContext(kb, generator, options or {}))
    if queries:
        await runner.search(_request(queries[0], 10))
    hit1 = hit3 = mrr = candidate_hits = fallbacks = 0.0
    latencies: list[float] = []
    tokens: list[int] = []
    for case in queries:
        started = time.perf_counter()
        result = await runner.search(_request(case, 10))
        latencies.append((time.perf_counter() - started) * 1000.0)
        gold = set(case.gold)
        ranks = [i for i, hit in enumerate(result.hits, start=1) if hit.topic.source in gold]
        if ranks:
            hit1 += ranks[0] <= 1
            hit3 += ranks[0] <= 3
            mrr += 1.0 / ranks[0] if ranks[0] <= 10 else 0.0
        candidate_hits += any(c.source in gold for c in result.candidates[:CANDIDATE_K])
        fallbacks += result.fell_back
        if result.prompt_tokens is not None:
            tokens.append(result.prompt_tokens)
    n = max(len(queries), 1)
    return EvalReport(
        strategy=strategy,
        topics=await kb.count(),
        queries=len(queries),
        dense_encoder=kb.dense_enabled,
        hit_at_1=round(hit1 / n, 4),
        hit_at_3=round(hit3 / n, 4),
        mrr_at_10=round(mrr / n, 4),
        candidate_k=CANDIDATE_K,
        candidate_hit_at_k=round(candidate_hits / n, 4),
        latency_p50_ms=round(_percentile(latencies, 0.5), 2) if latencies else 0.0,
        latency_p95_ms=round(_percentile(latencies, 0.95), 2) if latencies else 0.0,
        prompt_tokens_mean=round(statistics.fmean(tokens), 1) if tokens else None,
        fallbacks=int(fallbacks),
    )


async def index_topics(topics_path: Path, encoder: DenseEncoder | None) -> KnowledgeBase:
    """A fresh in-memory knowledge base holding the topics file."""
    kb = KnowledgeBase(QdrantClient(":memory:"), "eval", dense=encoder)
    report = await import_file(kb, topics_path)
    if report.errors:
        first = report.errors[0]
        raise ValueError(f"{topics_path}: line {first.line}: {first.message}")
    return kb


async def evaluate(
    topics_path: Path,
    queries_path: Path,
    strategy: str = "hybrid",
    *,
    encoder: DenseEncoder | None = None,
    generator: StructuredGenerator | None = None,
    options: dict[str, dict[str, Any]] | None = None,
    limit: int | None = None,
) -> EvalReport:
    kb = await index_topics(topics_path, encoder)
    queries = load_queries(queries_path)[:limit]
    return await evaluate_on(kb, queries, strategy, generator=generator, options=options)


def format_report(report: EvalReport) -> str:
    rows = [
        ("strategy", report.strategy),
        ("topics / queries", f"{report.topics} / {report.queries}"),
        ("dense encoder", "yes" if report.dense_encoder else "no (sparse-only)"),
        ("hit@1", f"{report.hit_at_1:.3f}"),
        ("hit@3", f"{report.hit_at_3:.3f}"),
        ("MRR@10", f"{report.mrr_at_10:.3f}"),
        (f"candidate hit@{report.candidate_k}", f"{report.candidate_hit_at_k:.3f}"),
        ("latency p50 / p95 ms", f"{report.latency_p50_ms:.1f} / {report.latency_p95_ms:.1f}"),
    ]
    if report.prompt_tokens_mean is not None:
        rows.append(("search prompt tokens (mean)", f"{report.prompt_tokens_mean:.0f}"))
        rows.append(("fallbacks", str(report.fallbacks)))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rag_core.evaluation")
    parser.add_argument("--topics", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--embeddings", choices=["fastembed", "openai", "none"], default="fastembed")
    parser.add_argument("--embedding-model", default=None)
    parser.add_argument("--embedding-model-path", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    provider: EmbeddingProvider = args.embeddings
    encoder = build_dense_encoder(provider, model=args.embedding_model, model_path=args.embedding_model_path)
    report = asyncio.run(evaluate(args.topics, args.queries, args.strategy, encoder=encoder, limit=args.limit))
    print(json.dumps(report.model_dump(), indent=2) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
