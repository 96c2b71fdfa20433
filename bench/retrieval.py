"""Retrieval benchmark: every non-LLM strategy on both dev splits, then search-prompt size of
llm_select vs hybrid_llm on a 300-topic pool. Prints a table.

    python bench/retrieval.py [--datasets DIR] [--model-path DIR] [--limit N]

Datasets default to ``$SWITCHBOARD_DATASETS`` or ``../shared/datasets``; the embedding model to
``$SWITCHBOARD_EMBEDDING_MODEL_PATH`` or ``../shared/models/all-MiniLM-L6-v2`` when present.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_core.encoders import build_dense_encoder  # noqa: E402
from rag_core.evaluation import EvalReport, evaluate_on, index_topics, load_queries  # noqa: E402

DATASETS = ("orsharc", "stackfaq")
NON_LLM = ("bm25", "dense", "hybrid")
LLM = ("llm_select", "hybrid_llm")
POOL_SIZE = 300


def _row(dataset: str, report: EvalReport) -> str:
    tokens = f"{report.prompt_tokens_mean:>8.0f}" if report.prompt_tokens_mean is not None else " " * 8
    return (
        f"{dataset:<10} {report.strategy:<11} {report.topics:>6} {report.queries:>6} "
        f"{report.hit_at_1:>6.3f} {report.hit_at_3:>6.3f} {report.mrr_at_10:>7.3f} "
        f"{report.candidate_hit_at_k:>7.3f} {report.latency_p50_ms:>7.1f} {report.latency_p95_ms:>7.1f} {tokens}"
    )


HEADER = (
    f"{'dataset':<10} {'strategy':<11} {'topics':>6} {'queries':>6} {'hit@1':>6} {'hit@3':>6} "
    f"{'MRR@10':>7} {'cand@20':>7} {'p50 ms':>7} {'p95 ms':>7} {'tokens':>8}"
)


async def run(datasets: Path, model_path: Path | None, limit: int | None) -> None:
    encoder = build_dense_encoder("fastembed", model_path=model_path)
    print(f"dense encoder: {'all-MiniLM-L6-v2 @ ' + str(model_path) if encoder else 'none (sparse-only)'}")
    print(HEADER)
    for name in DATASETS:
        started = time.perf_counter()
        kb = await index_topics(datasets / name / "topics.jsonl", encoder)
        indexed = time.perf_counter() - started
        queries = load_queries(datasets / name / "queries.dev.jsonl")[:limit]
        for strategy in NON_LLM:
            print(_row(name, await evaluate_on(kb, queries, strategy)), flush=True)
        print(f"{'':<10} (indexing {await kb.count()} topics took {indexed:.1f} s)")

    # 300-topic pool: the first 300 OR-ShARC topics and the dev queries answered inside it.
    lines = (datasets / "orsharc" / "topics.jsonl").read_text(encoding="utf-8").splitlines()[:POOL_SIZE]
    with tempfile.TemporaryDirectory() as tmp:
        pool_file = Path(tmp) / "topics300.jsonl"
        pool_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        kb = await index_topics(pool_file, encoder)
    sources = {topic.source for topic in await kb.rag_pool(POOL_SIZE)}
    queries = [q for q in load_queries(datasets / "orsharc" / "queries.dev.jsonl") if set(q.gold) & sources]
    queries = queries[: limit or 200]
    tokens: dict[str, float] = {}
    for strategy in LLM:
        report = await evaluate_on(kb, queries, strategy)
        tokens[strategy] = report.prompt_tokens_mean or 0.0
        print(_row("orsharc300", report), flush=True)
    ratio = tokens["hybrid_llm"] / tokens["llm_select"] if tokens["llm_select"] else float("nan")
    print(
        f"search prompt tokens on a {POOL_SIZE}-topic pool: llm_select {tokens['llm_select']:.0f}, "
        f"hybrid_llm {tokens['hybrid_llm']:.0f} ({ratio:.1%} of llm_select)"
    )
    print("(LLM rows use a stub search LLM answering 'none': token counts only, hit rates are not meaningful)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_datasets = Path(os.environ.get("SWITCHBOARD_DATASETS", ROOT.parent / "shared" / "datasets"))
    default_model = os.environ.get("SWITCHBOARD_EMBEDDING_MODEL_PATH") or str(
        ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
    )
    parser.add_argument("--datasets", type=Path, default=default_datasets)
    parser.add_argument("--model-path", type=Path, default=Path(default_model))
    parser.add_argument("--limit", type=int, default=None, help="queries per dataset (default: all)")
    args = parser.parse_args()
    model_path = args.model_path if args.model_path.exists() else None
    asyncio.run(run(args.datasets, model_path, args.limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
