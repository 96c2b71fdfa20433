"""Document ingestion benchmark, on the shipped defaults (fastembed all-MiniLM-L6-v2 embeddings on,
recursive chunking): both ../shared/datasets corpora rendered as one Markdown document per topic,
plus a generated 300-page PDF, ingested through the same path as the API and the CLI.

Prints documents/s, chunks/s, the embedding share of the time, peak RSS, the re-ingest time of the
unchanged corpus (and its ratio to the first ingest), and retrieval quality on both dev splits when
the topics arrive as documents instead of JSONL (the same strategies, the same run).

    python bench/ingest.py [--datasets DIR] [--model-path DIR] [--limit N] [--pdf-pages N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.core.settings import Settings  # noqa: E402
from gateway.knowledge.search import Knowledge  # noqa: E402
from rag_core.document import chunk_source, document_id  # noqa: E402
from rag_core.encoders import DenseEncoder  # noqa: E402
from rag_core.evaluation import QueryCase, evaluate_on, index_topics, load_queries  # noqa: E402

DATASETS = ("orsharc", "stackfaq")
STRATEGIES = ("bm25", "dense", "hybrid")


class TimedEncoder:
    """Counts the time spent embedding documents (the benchmark's instrument, not a stand-in)."""

    def __init__(self, inner: DenseEncoder) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def signature(self) -> str:
        return self.inner.signature

    async def dimension(self) -> int:
        return await self.inner.dimension()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return await self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_queries(texts)


def render_markdown(topic: dict) -> str:
    facts = "".join(f"- {fact}\n" for fact in topic.get("facts", []))
    return f"# {topic['title']}\n\n{facts}\n{topic.get('body', topic.get('summary', ''))}\n"


def document_name(source: str) -> str:
    return source.replace(":", "_") + ".md"


def make_pdf(path: Path, pages: int, paragraphs: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    for page in range(pages):
        pdf.add_page()
        pdf.set_font("helvetica", style="B", size=14)
        pdf.cell(0, 10, f"Section {page + 1}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("helvetica", size=10)
        for i in range(4):
            text = paragraphs[(page * 4 + i) % len(paragraphs)]
            pdf.multi_cell(0, 5, text.encode("latin-1", "replace").decode("latin-1"))
            pdf.ln(2)
    pdf.output(str(path))


async def ingest_all(knowledge: Knowledge, kb: str, files: list[tuple[str, bytes]]) -> tuple[float, int, int]:
    started = time.perf_counter()
    chunks = failed = 0
    for name, data in files:
        outcome = await knowledge.documents.ingest(kb, name, data, origin="path")
        chunks += outcome.document.chunk_count
        failed += outcome.document.status == "failed"
    return time.perf_counter() - started, chunks, failed


def gold_as_chunks(queries: list[QueryCase], kb: str, chunk_counts: dict[str, int]) -> list[QueryCase]:
    """The same queries with each gold topic replaced by every chunk of the document it became."""
    out = []
    for case in queries:
        gold = []
        for source in case.gold:
            doc = document_id(kb, document_name(source))
            gold += [chunk_source(doc, n) for n in range(1, chunk_counts.get(doc, 0) + 1)]
        out.append(case.model_copy(update={"gold": gold}))
    return out


async def run(datasets: Path, model_path: Path | None, limit: int | None, pdf_pages: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            _env_file=None, qdrant_url=":memory:", data_dir=Path(tmp), embeddings="fastembed",
            embedding_model_path=model_path,
        )
        knowledge = Knowledge(settings, None)
        knowledge.open()
        encoder = knowledge.bases._dense  # the one model every knowledge base shares
        if encoder is None:
            raise SystemExit("the embedding model did not load; pass --model-path")
        timed = TimedEncoder(encoder)
        knowledge.bases._dense = timed
        print(f"embedding model: {knowledge.bases.embedding_model}; chunking: {knowledge.bases.default_chunking}")

        corpus: dict[str, list[tuple[str, bytes]]] = {}
        topics_by_set: dict[str, list[dict]] = {}
        for name in DATASETS:
            lines = (datasets / name / "topics.jsonl").read_text(encoding="utf-8").splitlines()
            topics_by_set[name] = [json.loads(line) for line in lines if line.strip()]
            corpus[name] = [(document_name(t["source"]), render_markdown(t).encode()) for t in topics_by_set[name]]
        pdf_path = Path(tmp) / "handbook.pdf"
        make_pdf(pdf_path, pdf_pages, [t.get("body", "") for t in topics_by_set["orsharc"] if t.get("body")])
        pdf = [("handbook.pdf", pdf_path.read_bytes())]

        for name in DATASETS:
            await knowledge.bases.create(name)
        await knowledge.bases.create("pdf")
        plan = [*((name, corpus[name]) for name in DATASETS), ("pdf", pdf)]
        documents = sum(len(files) for _, files in plan)

        print(f"\nfirst ingest: {documents} documents ({', '.join(f'{k} {len(v)}' for k, v in plan)})")
        total_s = total_chunks = total_failed = 0.0
        per_kb: dict[str, tuple[float, int]] = {}
        for kb, files in plan:
            seconds, chunks, failed = await ingest_all(knowledge, kb, files)
            per_kb[kb] = (seconds, chunks)
            total_s += seconds
            total_chunks += chunks
            total_failed += failed
            print(f"  {kb:<9} {len(files):>5} docs {chunks:>6} chunks {seconds:>7.1f} s "
                  f"{len(files) / seconds:>7.1f} docs/s {chunks / seconds:>7.1f} chunks/s")
        print(f"  total     {documents:>5} docs {int(total_chunks):>6} chunks {total_s:>7.1f} s "
              f"{documents / total_s:>7.1f} docs/s {total_chunks / total_s:>7.1f} chunks/s; failed {int(total_failed)}")
        share = timed.seconds / total_s
        print(f"  embedding: {timed.seconds:.1f} s for {timed.texts} chunks = {share:.0%} of the time")
        pdf_s, pdf_chunks = per_kb["pdf"]
        print(f"  the {pdf_pages}-page PDF: {pdf_chunks} chunks in {pdf_s:.1f} s")

        embedded_before = timed.texts
        started = time.perf_counter()
        for kb, files in plan:
            await ingest_all(knowledge, kb, files)
        again = time.perf_counter() - started
        print(f"\nre-ingest of the unchanged corpus: {again:.2f} s = {again / total_s:.1%} of the first ingest "
              f"({timed.texts - embedded_before} chunks embedded; target < 5%)")
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS: {peak_mb:.0f} MB")

        print("\nretrieval on the dev splits: the same topics imported as JSONL vs ingested as documents")
        print(f"{'dataset':<10} {'strategy':<8} {'via':<10} {'hit@1':>6} {'hit@3':>6} {'MRR@10':>7} {'p50 ms':>7}")
        for name in DATASETS:
            queries = load_queries(datasets / name / "queries.dev.jsonl")[:limit]
            jsonl_kb = await index_topics(datasets / name / "topics.jsonl", encoder)
            doc_kb = knowledge.bases.instance(name)
            counts = {r.id: r.chunk_count for r in await knowledge.bases.documents.in_kb(name)}
            doc_queries = gold_as_chunks(queries, name, counts)
            for strategy in STRATEGIES:
                for via, kb, cases in (("jsonl", jsonl_kb, queries), ("documents", doc_kb, doc_queries)):
                    report = await evaluate_on(kb, cases, strategy)
                    print(f"{name:<10} {strategy:<8} {via:<10} {report.hit_at_1:>6.3f} {report.hit_at_3:>6.3f} "
                          f"{report.mrr_at_10:>7.3f} {report.latency_p50_ms:>7.1f}", flush=True)
        knowledge.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_datasets = Path(os.environ.get("SWITCHBOARD_DATASETS", ROOT.parent / "shared" / "datasets"))
    default_model = os.environ.get("SWITCHBOARD_EMBEDDING_MODEL_PATH") or str(
        ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2"
    )
    parser.add_argument("--datasets", type=Path, default=default_datasets)
    parser.add_argument("--model-path", type=Path, default=Path(default_model))
    parser.add_argument("--limit", type=int, default=None, help="queries per dataset (default: all)")
    parser.add_argument("--pdf-pages", type=int, default=300)
    args = parser.parse_args()
    model_path = args.model_path if args.model_path.exists() else None
    asyncio.run(run(args.datasets, model_path, args.limit, args.pdf_pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
