"""Rerankers: the http client against a real local rerank server, and fastembed's cross-encoder API on
a cross-encoder built offline from the MiniLM model on disk."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rag_core.errors import RagError, RerankerUnavailable
from rag_core.rerankers import (
    FastembedReranker,
    HttpReranker,
    Reranker,
    RerankScore,
    build_reranker,
    sigmoid,
)
from tests.fakes.live_server import free_port
from tests.fakes.rerank_server import FakeRerankServer, overlap

MODEL_PATH = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2"
KEY = "sk-rerank-0123456789secret"
QUERY = "how do I reset my password"
DOCUMENTS = [
    "Opening hours are nine to five on weekdays.",
    "To reset your password open settings.",
    "Password rules: twelve characters at least.",
    "How do I reset my password? Use the reset link we email you.",
]


async def rerank_with(fake: FakeRerankServer, top_n: int = 3, documents: list[str] = DOCUMENTS,
                      **options) -> list[RerankScore]:
    reranker = HttpReranker(fake.url, **options)
    try:
        return await reranker.rerank(QUERY, documents, top_n)
    finally:
        await reranker.aclose()


async def test_sends_query_documents_top_n_model_and_bearer_key(rerank_server):
    await rerank_with(rerank_server, top_n=2, api_key=KEY, model="bge-reranker-v2-m3")

    [received] = rerank_server.received
    assert received.body == {"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "model": "bge-reranker-v2-m3"}
    assert received.authorization == f"Bearer {KEY}"


async def test_sends_no_model_and_no_authorization_when_none_is_set(rerank_server):
    await rerank_with(rerank_server)

    [received] = rerank_server.received
    assert set(received.body) == {"query", "documents", "top_n"}
    assert received.authorization is None


async def test_answers_best_first_cut_to_top_n_with_the_servers_scores(rerank_server):
    scores = await rerank_with(rerank_server, top_n=2)

    assert [s.index for s in scores] == [3, 1]
    assert [s.score for s in scores] == [overlap(QUERY, DOCUMENTS[3]), overlap(QUERY, DOCUMENTS[1])]
    assert scores[0].score == 1.0


async def test_top_n_above_the_document_count_asks_for_every_document(rerank_server):
    scores = await rerank_with(rerank_server, top_n=50)

    assert rerank_server.received[0].top_n == len(DOCUMENTS)
    assert [s.index for s in scores] == [3, 1, 2, 0]


async def test_a_server_that_ignores_top_n_and_answers_in_input_order_is_sorted_and_cut(rerank_server):
    rerank_server.ignore_top_n = True

    scores = await rerank_with(rerank_server, top_n=2)

    assert [s.index for s in scores] == [3, 1]


async def test_document_objects_in_the_answer_are_accepted(rerank_server):
    rerank_server.return_documents = True

    scores = await rerank_with(rerank_server, top_n=1)

    assert scores == [RerankScore(index=3, score=1.0)]


async def test_logits_go_through_a_sigmoid_keeping_the_order(rerank_server):
    rerank_server.mode = "logits"

    scores = await rerank_with(rerank_server, top_n=4)

    assert [s.index for s in scores] == [3, 1, 2, 0]
    expected = [sigmoid(8.0 * overlap(QUERY, DOCUMENTS[s.index]) - 4.0) for s in scores]
    assert [s.score for s in scores] == pytest.approx(expected)
    assert all(0.0 < s.score < 1.0 for s in scores)


async def test_no_documents_means_no_request(rerank_server):
    assert await rerank_with(rerank_server, documents=[]) == []
    assert rerank_server.received == []


@pytest.mark.parametrize(("mode", "cause"), [
    ("http_500", "answered HTTP 500"),
    ("malformed_json", "malformed body"),
    ("out_of_range_index", "index 4 for 4 documents"),
    ("duplicate_index", "twice"),
])
async def test_a_failing_server_raises_reranker_unavailable_naming_the_cause(rerank_server, mode, cause):
    rerank_server.mode = mode

    with pytest.raises(RerankerUnavailable, match=cause) as raised:
        await rerank_with(rerank_server, api_key=KEY)

    assert isinstance(raised.value, RagError)
    assert KEY not in str(raised.value)


async def test_a_slow_server_times_out_within_the_timeout(rerank_server):
    rerank_server.mode = "slow"
    started = time.monotonic()

    with pytest.raises(RerankerUnavailable, match=r"timed out after 0.3 s"):
        await rerank_with(rerank_server, timeout_s=0.3)

    assert time.monotonic() - started < 1.0
    assert len(rerank_server.received) == 1


@pytest.mark.parametrize("sent_key", [None, "sk-wrong-key-that-the-server-echoes"])
async def test_a_refused_key_is_unavailable_and_never_in_the_message(rerank_server, sent_key):
    rerank_server.api_key = KEY

    with pytest.raises(RerankerUnavailable, match="HTTP 401") as raised:
        await rerank_with(rerank_server, api_key=sent_key)

    assert rerank_server.received[0].authorization == (f"Bearer {sent_key}" if sent_key else None)
    if sent_key:
        assert sent_key not in str(raised.value)


async def test_the_right_key_is_accepted(rerank_server):
    rerank_server.api_key = KEY

    scores = await rerank_with(rerank_server, api_key=KEY, top_n=1)

    assert scores[0].index == 3


async def test_an_unreachable_server_is_unavailable():
    reranker = HttpReranker(f"http://127.0.0.1:{free_port()}", api_key=KEY, timeout_s=2)
    started = time.monotonic()

    with pytest.raises(RerankerUnavailable, match="could not be reached") as raised:
        await reranker.rerank(QUERY, DOCUMENTS, 3)

    await reranker.aclose()
    assert KEY not in str(raised.value)
    assert time.monotonic() - started < 2


async def test_build_reranker_none_and_http(rerank_server):
    assert build_reranker("none") is None
    reranker = build_reranker("http", base_url=rerank_server.url + "/", model="m")

    assert isinstance(reranker, Reranker)
    assert reranker.name == "http:m"
    assert (await reranker.rerank(QUERY, DOCUMENTS, 1))[0].index == 3
    await reranker.aclose()
    with pytest.raises(ValueError, match="unknown reranker"):
        build_reranker("cohere")  # type: ignore[arg-type]


def test_a_missing_model_folder_is_unavailable(tmp_path):
    with pytest.raises(RerankerUnavailable, match="does not exist"):
        build_reranker("fastembed", model_path=tmp_path / "absent")


def test_a_model_name_fastembed_does_not_know_is_unavailable():
    with pytest.raises(RerankerUnavailable, match="no/such-reranker"):
        FastembedReranker(model="no/such-reranker")


def test_a_bi_encoder_folder_is_refused_at_load():
    with pytest.raises(RerankerUnavailable, match="not a working cross-encoder"):
        FastembedReranker(model_path=MODEL_PATH)


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory) -> Path:
    pytest.importorskip("onnx", reason="no cross-encoder can be downloaded here, and building one offline "
                                       "from the MiniLM bi-encoder needs the onnx package (a dev dependency)")
    from tests.fakes.cross_encoder_model import build_pair_cross_encoder

    return build_pair_cross_encoder(MODEL_PATH, tmp_path_factory.mktemp("cross-encoder"))


async def test_fastembed_cross_encoder_ranks_the_answer_first(cross_encoder_dir):
    reranker = build_reranker("fastembed", model_path=cross_encoder_dir, model="pair-minilm")
    documents = ["Paris is the capital of France.", "Bananas are rich in potassium.",
                 "We email a reset link; it lets you choose a new password.", "Our office opens at nine."]

    scores = await reranker.rerank("I forgot my password, how do I reset it?", documents, 2)

    assert reranker.name == "fastembed:pair-minilm"
    assert scores[0].index == 2
    assert len(scores) == 2
    assert scores[0].score > scores[1].score
    assert all(0.0 <= s.score <= 1.0 for s in scores)


async def test_fastembed_finds_the_model_in_an_onnx_subfolder(cross_encoder_dir, tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").symlink_to(cross_encoder_dir / "model.onnx")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        (tmp_path / name).symlink_to(cross_encoder_dir / name)

    reranker = FastembedReranker(model_path=tmp_path)
    scores = await reranker.rerank("capital of France", ["Bananas are yellow.", "Paris is in France."], 5)

    assert [s.index for s in scores] == [1, 0]
