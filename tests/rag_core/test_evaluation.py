from __future__ import annotations

import json

from rag_core.evaluation import evaluate, format_report, main
from rag_core.tokenizer import term_id, tokenize
from tests.rag_core.conftest import SMALL_KB

QUERIES = [
    {"id": "q1", "history": [], "query": "Can I bring my dog?", "gold": ["pets"]},
    {"id": "q2", "history": ["I am driving to you."], "query": "Is there a parking garage?", "gold": ["parking"]},
    {"id": "q3", "history": [], "query": "Do gift cards expire?", "gold": ["gift-cards"]},
]


def write_dataset(tmp_path):
    topics = tmp_path / "topics.jsonl"
    rows = [{**t.model_dump(mode="json", exclude={"summary", "created_at"}), "body": t.summary} for t in SMALL_KB]
    topics.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in QUERIES) + "\n")
    return topics, queries


async def test_evaluate_reports_hits_candidates_latency_and_prompt_tokens(tmp_path, minilm):
    topics, queries = write_dataset(tmp_path)
    report = await evaluate(topics, queries, "hybrid", encoder=minilm)
    assert (report.queries, report.hit_at_1, report.hit_at_3, report.mrr_at_10) == (3, 1.0, 1.0, 1.0)
    assert report.candidate_hit_at_k == 1.0 and report.latency_p50_ms > 0
    assert report.prompt_tokens_mean is None
    text = format_report(report)
    assert "hit@1" in text and "1.000" in text.splitlines()[3]

    llm = await evaluate(topics, queries, "llm_select", encoder=None)
    narrowed = await evaluate(topics, queries, "hybrid_llm", encoder=None)
    assert llm.prompt_tokens_mean > narrowed.prompt_tokens_mean > 0
    # the stub search LLM answers "none": each query falls back to the hybrid ranking's best, and says so
    assert llm.hit_at_1 == 1.0 and llm.fallbacks == 3
    assert "search prompt tokens (mean)" in format_report(llm)


def test_cli_prints_json(tmp_path, capsys):
    topics, queries = write_dataset(tmp_path)
    argv = ["--topics", str(topics), "--queries", str(queries), "--strategy", "bm25", "--embeddings", "none"]
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["strategy"] == "bm25" and printed["hit_at_1"] == 1.0


def test_tokenizer_stems_drops_stop_words_and_ids_are_stable():
    assert tokenize("The Dogs are RUNNING to the parking-garage!") == ["dog", "run", "park", "garag"]
    assert term_id("dog") == term_id("dog") != term_id("dogs")
    assert 0 <= term_id("garag") < 2**32
