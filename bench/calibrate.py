"""Fit the score calibration in ``rag_core/calibration.py``: a logistic curve per retrieval leg, mapping the
leg's raw score of a result in the top 10 to the chance it is a gold topic, on both dev splits.

    python bench/calibrate.py [--datasets DIR] [--model-path DIR]

Queries are embedded as the gateway ships (int8 copy, fp32 documents). Prints the coefficients to paste
into ``rag_core/calibration.py`` and each curve's reliability (mean predicted vs observed rate per
predicted-score bucket) so a reader can check the fit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rag_core.calibration import FEATURES  # noqa: E402
from rag_core.encoders import FastEmbedEncoder, SplitEncoder, build_dense_encoder  # noqa: E402
from rag_core.evaluation import index_topics, load_queries  # noqa: E402
from rag_core.quantize import int8_copy  # noqa: E402
from rag_core.retrieval import ChatTurn, SearchRequest, StrategyContext  # noqa: E402
from rag_core.strategies import build_strategy  # noqa: E402

LEG_OF = {"bm25": "bm25", "dense": "dense", "hybrid": "fused"}


def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Logistic regression of y on one feature by Newton's method (with a tiny ridge for stability)."""
    a, b = 0.0, 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(a * x + b)))
        w = p * (1 - p) + 1e-9
        grad = np.array([np.sum((p - y) * x), np.sum(p - y)]) + 1e-6 * np.array([a, b])
        hess = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]]) + 1e-6 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        a, b = a - step[0], b - step[1]
        if np.max(np.abs(step)) < 1e-8:
            break
    return float(a), float(b)


def shipped_encoder(model_path: Path | None):
    """As the gateway embeds by default: documents fp32, queries through the int8 copy on one thread."""
    encoder = build_dense_encoder("fastembed", model_path=model_path)
    if not isinstance(encoder, FastEmbedEncoder):
        return encoder
    folder = int8_copy(*encoder.model_file(), Path(tempfile.gettempdir()) / "switchboard-bench-models")
    return SplitEncoder(encoder, FastEmbedEncoder(model_path=folder, threads=1))


async def main(datasets: Path, model_path: Path | None) -> None:
    encoder = shipped_encoder(model_path)
    samples: dict[str, tuple[list[float], list[float]]] = {leg: ([], []) for leg in LEG_OF.values()}
    for name in ("orsharc", "stackfaq"):
        kb = await index_topics(datasets / name / "topics.jsonl", encoder)
        queries = load_queries(datasets / name / "queries.dev.jsonl")
        for strategy, leg in LEG_OF.items():
            runner = build_strategy(strategy, StrategyContext(kb))
            xs, ys = samples[leg]
            for case in queries:
                request = SearchRequest(query=case.query, history=[ChatTurn(text=t) for t in case.history], k=10)
                for hit in (await runner.search(request)).hits:
                    xs.append(FEATURES[leg](hit.legs[leg]))
                    ys.append(float(hit.topic.source in case.gold))
    print("COEFFICIENTS = {")
    for leg, (xs, ys) in samples.items():
        a, b = fit(np.asarray(xs), np.asarray(ys))
        print(f'    "{leg}": ({a:.4f}, {b:.4f}),  # {len(xs)} results, {sum(ys):.0f} gold')
    print("}")
    for leg, (xs, ys) in samples.items():
        a, b = fit(np.asarray(xs), np.asarray(ys))
        p = 1 / (1 + np.exp(-(a * np.asarray(xs) + b)))
        y = np.asarray(ys)
        buckets = [(lo, lo + 0.2) for lo in (0.0, 0.2, 0.4, 0.6, 0.8)]
        cells = []
        for lo, hi in buckets:
            mask = (p >= lo) & (p < hi if hi < 1.0 else p <= 1.0)
            if mask.any():
                cells.append(
                    f"{lo:.1f}-{hi:.1f}: predicted {p[mask].mean():.2f} observed {y[mask].mean():.2f} (n={mask.sum()})"
                )
        loss = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        print(f"{leg}: " + "; ".join(cells) + f"; log-loss {loss:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--model-path", type=Path, default=ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2")
    args = parser.parse_args()
    asyncio.run(main(args.datasets, args.model_path if args.model_path.exists() else None))
