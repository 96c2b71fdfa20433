from __future__ import annotations

import pytest
from qdrant_client import QdrantClient

from rag_core import KnowledgeBase, KnowledgeBaseUnavailable, SparseEncoder, Topic, build_dense_encoder, open_qdrant
from rag_core.knowledge_base import SPARSE_VECTOR
from tests.rag_core.conftest import SMALL_KB, CountingEncoder


async def test_crud_and_paging(make_kb, encoder_kind):
    kb = make_kb(encoder_kind)
    report = await kb.upsert_many(SMALL_KB)
    assert sorted(report.created) == sorted(t.source for t in SMALL_KB)
    assert await kb.count() == 8 and await kb.count(label="rag_context") == 7
    assert (await kb.get("parking")).facts == SMALL_KB[3].facts
    assert await kb.get("nope") is None
    first = await kb.list(limit=5)
    second = await kb.list(limit=5, offset=first.next_offset)
    assert len(first.topics) == 5 and len(second.topics) == 3 and second.next_offset is None
    assert {t.source for t in first.topics + second.topics} == {t.source for t in SMALL_KB}
    assert await kb.delete("parking") is True
    assert await kb.delete("parking") is False
    assert await kb.get("parking") is None
    hits = await kb.search_sparse([("parking garage", 1.0)], 5)
    assert "parking" not in {h.topic.source for h in hits}


async def test_unchanged_topics_are_not_re_embedded(make_kb, minilm):
    counting = CountingEncoder(minilm)
    kb = make_kb(encoder=counting)
    await kb.upsert_many(SMALL_KB)
    assert len(counting.document_texts) == 7  # the staff-only topic carries no vectors
    again = await kb.upsert_many(SMALL_KB)
    assert again.embedded == 0 and len(again.unchanged) == 8
    assert len(counting.document_texts) == 7

    created = (await kb.get("hours")).created_at
    edited = SMALL_KB[0].model_copy(update={"summary": "Now open until 8pm."})
    touched = SMALL_KB[1].model_copy(update={"updated_at": SMALL_KB[7].updated_at})
    report = await kb.upsert_many([edited, touched])
    assert report.updated == ["hours", "refunds"] and report.embedded == 1
    assert counting.document_texts[7:] == [
        "Opening hours\nOpen Monday to Friday 9am to 6pm\nClosed on Sundays\nNow open until 8pm."
    ]
    assert (await kb.get("refunds")).updated_at == SMALL_KB[7].updated_at
    assert (await kb.get("hours")).created_at == created


async def test_local_snapshot_scores_exactly_like_qdrant(make_kb):
    kb = make_kb("none")
    await kb.upsert_many(SMALL_KB)
    encoder = SparseEncoder()
    for query in ["parking per hour", "dogs in the store", "gift cards refunds receipt", "gluten"]:
        ours = await kb.search_sparse([(query, 1.0)], 10)
        theirs = kb._client.query_points(
            kb.collection_name, query=encoder.encode_query([(query, 1.0)]), using=SPARSE_VECTOR, limit=10
        ).points
        assert [h.topic.source for h in ours] == [p.payload["source"] for p in theirs]
        assert [round(h.score, 4) for h in ours] == [round(p.score, 4) for p in theirs]


async def test_unreachable_qdrant_raises_knowledge_base_unavailable():
    kb = KnowledgeBase(QdrantClient(url="http://127.0.0.1:9", timeout=1, check_compatibility=False), "x")
    with pytest.raises(KnowledgeBaseUnavailable):
        await kb.ensure_collection()
    with pytest.raises(KnowledgeBaseUnavailable):
        await kb.ping()


async def test_missing_dense_model_degrades_to_sparse_only(tmp_path, caplog):
    assert build_dense_encoder("fastembed", model_path=tmp_path / "no-model") is None
    assert "running sparse-only" in caplog.text
    assert build_dense_encoder("none") is None


async def test_open_qdrant_local_path_persists(tmp_path):
    client = open_qdrant(None, tmp_path / "qdrant")
    kb = KnowledgeBase(client, "persist")
    await kb.upsert_many([Topic(source="a", title="Persisted")])
    client.close()
    reopened = KnowledgeBase(open_qdrant(None, tmp_path / "qdrant"), "persist")
    assert (await reopened.get("a")).title == "Persisted"
    assert open_qdrant(":memory:", tmp_path).init_options["location"] == ":memory:"


async def test_topics_are_deleted_by_label_and_by_source_list():
    kb = KnowledgeBase(QdrantClient(":memory:"))
    await kb.upsert_many([
        Topic(source=f"s{i}", title=f"topic {i}", labels=["rag_context", *(["odd"] * (i % 2))]) for i in range(10)
    ])
    assert sorted(await kb.sources_with_label("odd")) == ["s1", "s3", "s5", "s7", "s9"]
    assert await kb.delete_label("odd") == 5
    assert await kb.sources_with_label("odd") == []
    assert await kb.delete_many(["s0", "no-such-topic"]) == 1
    assert sorted(t.source for t in (await kb.list(limit=50)).topics) == ["s2", "s4", "s6", "s8"]
