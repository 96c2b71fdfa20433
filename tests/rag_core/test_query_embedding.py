"""Cheaper query embeddings: concurrent queries in one call, an int8 copy of the model, split encoders."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

import pytest

from rag_core.encoders import FastEmbedEncoder, QueryVectorCache, SplitEncoder
from rag_core.quantize import int8_copy
from rag_core.query_batching import BatchingQueries
from rag_core.query_shape import QueryShape
from rag_core.retrieval import ChatTurn, SearchRequest
from tests.rag_core.conftest import MODEL_PATH, CountingEncoder


class SlowCounting:
    """A stand-in encoder (the thing under test is the batching around it) that records each call."""

    signature = "counting:3"

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    async def dimension(self) -> int:
        return 3

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.embed_queries(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        await asyncio.sleep(0.02)
        if self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return [[float(len(t)), 1.0, 0.0] for t in texts]


async def test_a_lone_query_goes_at_once_and_concurrent_ones_share_a_call():
    inner = SlowCounting()
    batching = BatchingQueries(inner)
    assert await batching.embed_queries(["one"]) == [[3.0, 1.0, 0.0]]
    assert inner.calls == [["one"]]
    answers = await asyncio.gather(*(batching.embed_queries([f"q{i}", "shared"]) for i in range(10)))
    assert [a[0][0] for a in answers] == [2.0] * 10 and all(a[1] == [6.0, 1.0, 0.0] for a in answers)
    # The ten that arrived together went in one call, "shared" embedded once.
    assert len(inner.calls) == 2 and inner.calls[1].count("shared") == 1 and len(inner.calls[1]) == 11
    first = asyncio.create_task(batching.embed_queries(["alone"]))
    await asyncio.sleep(0.005)  # its call is running: the next ones wait for it, then go together
    later = await asyncio.gather(*(batching.embed_queries([f"late{i}"]) for i in range(5)))
    assert await first == [[5.0, 1.0, 0.0]] and len(later) == 5
    assert inner.calls[2:] == [["alone"], [f"late{i}" for i in range(5)]]


async def test_a_failing_batch_fails_its_callers_and_the_next_batch_still_runs():
    inner = SlowCounting(fail_on="bad")
    batching = BatchingQueries(inner)
    first = asyncio.create_task(batching.embed_queries(["ok"]))
    await asyncio.sleep(0)
    results = await asyncio.gather(batching.embed_queries(["bad"]), batching.embed_queries(["fine"]),
                                   return_exceptions=True)
    assert await first == [[2.0, 1.0, 0.0]]
    assert isinstance(results[0], RuntimeError) and isinstance(results[1], RuntimeError)  # same batch
    assert await batching.embed_queries(["after"]) == [[5.0, 1.0, 0.0]]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


QUANTIZE_LOG = _Recorder()


@pytest.fixture(scope="module")
def int8_folder(tmp_path_factory):
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(QUANTIZE_LOG)
    try:
        return int8_copy(MODEL_PATH, "model.onnx", tmp_path_factory.mktemp("models"))
    finally:
        root.removeHandler(QUANTIZE_LOG)
        root.setLevel(level)


def test_making_the_int8_copy_logs_one_line_not_onnxruntimes_forty(int8_folder):
    messages = [record.getMessage() for record in QUANTIZE_LOG.records]
    assert [m for m in messages if "pre-processing" in m or "Quantization parameters" in m] == []
    assert [m for m in messages if m.startswith("quantizing ")] != []


async def test_the_int8_copy_is_made_once_smaller_and_close_to_fp32(int8_folder, minilm):
    assert int8_copy(MODEL_PATH, "model.onnx", int8_folder.parent) == int8_folder  # cached: not made again
    assert (int8_folder / "model.onnx").stat().st_size < (MODEL_PATH / "model.onnx").stat().st_size / 3
    assert (int8_folder / "tokenizer.json").exists()
    int8 = FastEmbedEncoder(model_path=int8_folder, threads=1)
    texts = ["how much is an e-bike for a day", "Can I claim housing benefit while studying?"]
    for fp32_vector, int8_vector in zip(await minilm.embed_queries(texts), await int8.embed_queries(texts),
                                        strict=True):
        assert 0.93 < _cosine(fp32_vector, int8_vector) < 0.9999
    split = SplitEncoder(minilm, int8)
    assert split.signature == minilm.signature  # stored vectors stay fp32's
    assert await split.embed_documents(texts[:1]) == await minilm.embed_documents(texts[:1])
    assert await split.embed_queries(texts[:1]) == await int8.embed_queries(texts[:1])


async def test_a_turn_embeds_only_its_new_message_and_one_history_message_weighs_half(minilm):
    counting = CountingEncoder(minilm)
    encoder, shape = QueryVectorCache(counting), QueryShape()
    said = ["I live in Wales and rent a flat.", "I am a student.", "Can I get housing benefit?"]
    history: list[ChatTurn] = []
    vectors = []
    for text in said:  # each turn's request carries the earlier user messages (and the replies)
        request = SearchRequest(query=text, history=history)
        vectors.append(shape.dense_vector(await encoder.embed_queries(shape.dense_texts(request))))
        history = [*history, ChatTurn(role="user", text=text), ChatTurn(role="agent", text="(a reply)")]
    assert counting.query_texts == said  # the history came from the cache, the replies were not embedded
    # One history message: the last message plus half of that message's vector, as one unit vector.
    first, second = await minilm.embed_queries(said[:2])
    expected = [q + 0.5 * h for q, h in zip(second, first, strict=True)]
    assert _cosine(vectors[1], expected) > 0.99999 and abs(math.hypot(*vectors[1]) - 1) < 1e-9
    # Two: the history's direction is its messages' vectors summed; it still weighs half the last one's.
    a, b, c = await minilm.embed_queries(said)
    history_sum = [x + y for x, y in zip(a, b, strict=True)]
    scale = 0.5 / math.hypot(*history_sum)
    assert _cosine(vectors[2], [q + scale * h for q, h in zip(c, history_sum, strict=True)]) > 0.99999
