"""Named knowledge bases and documents through the admin API: files become linked chunk topics,
re-ingest is exact and incremental, bad files are refused or recorded, nothing is half-written."""

from __future__ import annotations

import asyncio

import httpx
import pytest

ADMIN = {"Authorization": "Bearer admin-secret"}

GUIDE = """# Harbor Bikes guide

## Opening hours

We open at nine every weekday and close at six. On Saturdays we open at ten.

## Rental prices

A city bike costs 15 euros per day. An e-bike costs 35 euros per day, helmet included.

## Repairs

Flat tyres are fixed while you wait. Bigger repairs take two working days.
"""


def _upload(server, name: str, data: bytes, **params) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/kb/documents", params=params, files={"file": (name, data)}, headers=ADMIN, timeout=30
    )


def _topics(server, kb: str = "main", label: str | None = None) -> list[dict]:
    params = {"kb": kb, "limit": 500, **({"label": label} if label else {})}
    resp = httpx.get(f"{server.url}/api/kb/topics", params=params, headers=ADMIN)
    assert resp.status_code == 200, resp.text
    return resp.json()["topics"]


def _search(server, query: str, **body) -> list[str]:
    resp = httpx.post(f"{server.url}/api/kb/search", json={"query": query, **body}, headers=ADMIN)
    assert resp.status_code == 200, resp.text
    return [hit["source"] for hit in resp.json()["results"]]


def test_a_markdown_file_becomes_linked_chunk_topics(gateway):
    resp = _upload(gateway, "guide.md", GUIDE.encode(), chunk_tokens=40, overlap_tokens=0)
    assert resp.status_code == 201, resp.text
    outcome = resp.json()["documents"][0]
    doc = outcome["document"]
    assert doc["status"] == "ready" and doc["format"] == "markdown" and doc["title"] == "Harbor Bikes guide"
    topics = {t["source"]: t for t in _topics(gateway, label=f"document:{doc['id']}")}
    assert doc["chunk_count"] == len(topics) == outcome["created"] == outcome["embedded"] >= 3
    first, last = f"doc:{doc['id']}#1", f"doc:{doc['id']}#{len(topics)}"
    assert topics[first]["prev_source"] is None and topics[first]["next_source"] == f"doc:{doc['id']}#2"
    assert topics[last]["next_source"] is None
    prices = next(t for t in topics.values() if "e-bike costs 35 euros" in t["summary"])
    assert prices["title"] == "Harbor Bikes guide › Rental prices"
    assert "Rental prices" in prices["facts"]
    assert set(prices["labels"]) >= {"rag_context", f"document:{doc['id']}"}
    assert _search(gateway, "how much is an e-bike per day")[0] == prices["source"]
    listed = httpx.get(f"{gateway.url}/api/kb/documents", headers=ADMIN).json()
    assert [d["name"] for d in listed["documents"]] == ["guide.md"]


def test_reingest_is_a_no_op_when_unchanged_and_embeds_only_what_changed(gateway):
    first = _upload(gateway, "guide.md", GUIDE.encode(), chunk_tokens=40, overlap_tokens=0).json()["documents"][0]
    doc_id = first["document"]["id"]
    again = _upload(gateway, "guide.md", GUIDE.encode(), chunk_tokens=40, overlap_tokens=0).json()["documents"][0]
    assert again["unchanged"] is True and again["embedded"] == 0

    edited = GUIDE.replace("Flat tyres are fixed while you wait.", "Flat tyres are fixed within the hour.")
    changed = _upload(gateway, "guide.md", edited.encode(), chunk_tokens=40, overlap_tokens=0).json()["documents"][0]
    assert changed["document"]["id"] == doc_id
    assert (changed["embedded"], changed["created"], changed["deleted"]) == (1, 0, 0)
    summaries = [t["summary"] for t in _topics(gateway, label=f"document:{doc_id}")]
    assert any("within the hour" in s for s in summaries) and not any("while you wait" in s for s in summaries)

    shorter = edited.split("## Repairs")[0]
    cut = _upload(gateway, "guide.md", shorter.encode(), chunk_tokens=40, overlap_tokens=0).json()["documents"][0]
    assert cut["embedded"] == 0 and cut["deleted"] >= 1
    remaining = _topics(gateway, label=f"document:{doc_id}")
    assert len(remaining) == cut["document"]["chunk_count"]
    assert not any("tyres" in t["summary"] for t in remaining)

    deleted = httpx.delete(f"{gateway.url}/api/kb/documents/{doc_id}", headers=ADMIN).json()
    assert deleted == {"deleted_topics": len(remaining)}
    assert _topics(gateway, label=f"document:{doc_id}") == []
    assert httpx.get(f"{gateway.url}/api/kb/documents/{doc_id}", headers=ADMIN).status_code == 404


def test_a_moved_chunk_keeps_its_vectors(gateway):
    _upload(gateway, "guide.md", GUIDE.encode(), chunk_tokens=40, overlap_tokens=0)
    intro = "# Harbor Bikes guide\n\n## Welcome\n\nWelcome to the harbour's friendliest bike shop.\n\n"
    moved = intro + GUIDE.split("\n", 2)[2]
    outcome = _upload(gateway, "guide.md", moved.encode(), chunk_tokens=40, overlap_tokens=0).json()["documents"][0]
    # Every old section moved one chunk down: only the new one is embedded.
    assert outcome["embedded"] == 1


def test_unsupported_and_oversized_uploads_are_refused_and_store_nothing(gateway):
    resp = _upload(gateway, "photo.png", b"\x89PNG\r\n\x1a\n")
    assert resp.status_code == 415
    assert "supported" in resp.json()["message"] and ".pdf" in resp.json()["message"]
    big = b"word " * (gateway.services.settings.max_upload_mb * 1024 * 1024 // 5 + 20_000)
    resp = _upload(gateway, "big.txt", big)
    assert resp.status_code == 413
    assert httpx.get(f"{gateway.url}/api/kb/documents", headers=ADMIN).json()["documents"] == []
    assert _topics(gateway) == []


def test_a_corrupt_version_is_recorded_as_failed_and_keeps_the_previous_chunks(gateway):
    good = _upload(gateway, "guide.md", GUIDE.encode()).json()["documents"][0]["document"]
    before = _topics(gateway, label=f"document:{good['id']}")
    resp = _upload(gateway, "guide.md", b"   \n\n")  # a version with no text at all
    assert resp.status_code == 422
    failed = resp.json()["documents"][0]["document"]
    assert failed["id"] == good["id"] and failed["status"] == "failed" and failed["error"]
    assert _topics(gateway, label=f"document:{good['id']}") == before


async def test_two_ingests_of_one_document_at_once_leave_exactly_one_version(gateway):
    variants = [GUIDE, GUIDE.replace("## Repairs", "## Service").replace("Flat tyres", "Punctures")]
    async with httpx.AsyncClient(base_url=gateway.url, headers=ADMIN, timeout=30) as client:
        answers = await asyncio.gather(*(
            client.post("/api/kb/documents", files={"file": ("guide.md", v.encode())},
                        params={"chunk_tokens": 40, "overlap_tokens": 0})
            for v in variants for _ in range(3)
        ))
        assert all(a.status_code == 201 for a in answers)
        doc_id = answers[0].json()["documents"][0]["document"]["id"]
        listed = await client.get("/api/kb/topics", params={"label": f"document:{doc_id}", "limit": 500})
        topics = listed.json()["topics"]
        record = (await client.get(f"/api/kb/documents/{doc_id}")).json()
    assert len(topics) == record["chunk_count"]
    assert sorted(t["source"] for t in topics) == [f"doc:{doc_id}#{n}" for n in range(1, len(topics) + 1)]
    texts = " ".join(t["summary"] + " " + " ".join(t["facts"]) for t in topics)
    assert ("Punctures" in texts) != ("Flat tyres" in texts)  # one version, not a mix


def test_knowledge_bases_are_created_described_searched_and_deleted(gateway):
    resp = httpx.post(f"{gateway.url}/api/kb/bases", json={"name": "workshop", "description": "repairs"},
                      headers=ADMIN)
    assert resp.status_code == 201, resp.text
    assert resp.json()["collection"].endswith("__workshop") and resp.json()["topics"] == 0
    again = httpx.post(f"{gateway.url}/api/kb/bases", json={"name": "workshop"}, headers=ADMIN)
    assert again.status_code == 409
    bad = httpx.post(f"{gateway.url}/api/kb/bases", json={"name": "Bad Name!"}, headers=ADMIN)
    assert bad.status_code == 422 and "name" in bad.json()["message"]

    _upload(gateway, "guide.md", GUIDE.encode(), chunk_tokens=40, overlap_tokens=0)
    repairs = b"# Workshop\n\nWe true wheels and replace chains. A chain replacement costs 25 euros.\n"
    uploaded = _upload(gateway, "workshop.md", repairs, kb="workshop")
    assert uploaded.status_code == 201
    chain = f"doc:{uploaded.json()['documents'][0]['document']['id']}#1"
    described = httpx.get(f"{gateway.url}/api/kb/bases/workshop", headers=ADMIN).json()
    assert (described["documents"], described["documents_by_status"]) == (1, {"ready": 1})
    assert described["topics"] == described["retrieval_topics"] == 1 and described["last_sync"]
    names = [b["name"] for b in httpx.get(f"{gateway.url}/api/kb/bases", headers=ADMIN).json()["bases"]]
    assert names == ["main", "workshop"]

    assert chain in _search(gateway, "chain replacement price", k=10)  # all knowledge bases, fused
    assert chain not in _search(gateway, "chain replacement price", k=10, kbs=["main"])
    assert _search(gateway, "chain replacement price", kbs=["workshop"]) == [chain]
    unknown = httpx.post(f"{gateway.url}/api/kb/search", json={"query": "x", "kbs": ["nope"]}, headers=ADMIN)
    assert unknown.status_code == 422 and "nope" in unknown.json()["message"]

    assert httpx.delete(f"{gateway.url}/api/kb/bases/main", headers=ADMIN).status_code == 409
    assert httpx.delete(f"{gateway.url}/api/kb/bases/workshop", headers=ADMIN).status_code == 204
    assert httpx.get(f"{gateway.url}/api/kb/bases/workshop", headers=ADMIN).status_code == 404
    assert httpx.get(f"{gateway.url}/api/kb/documents", params={"kb": "workshop"}, headers=ADMIN).status_code == 404
    assert chain not in _search(gateway, "chain replacement price", k=10)


def test_preview_returns_chunks_and_stores_nothing(gateway):
    resp = httpx.post(f"{gateway.url}/api/kb/documents/preview", params={"chunk_tokens": 40, "overlap_tokens": 0},
                      files={"file": ("guide.md", GUIDE.encode())}, headers=ADMIN)
    assert resp.status_code == 200, resp.text
    chunks = resp.json()["chunks"]
    assert len(chunks) >= 3 and any(c["title"].endswith("› Repairs") for c in chunks)
    assert _topics(gateway) == []
    assert httpx.get(f"{gateway.url}/api/kb/documents", headers=ADMIN).json()["documents"] == []


@pytest.mark.parametrize("chunking", ["paragraph", "sentence", "fixed"])
def test_a_knowledge_base_chunking_default_applies_and_reingest_uses_a_new_one(gateway, chunking):
    created = httpx.post(f"{gateway.url}/api/kb/bases", headers=ADMIN,
                         json={"name": "docs",
                               "chunking": {"strategy": chunking, "chunk_tokens": 48, "overlap_tokens": 8}})
    assert created.status_code == 201 and created.json()["chunking"]["strategy"] == chunking
    doc = _upload(gateway, "guide.md", GUIDE.encode(), kb="docs").json()["documents"][0]["document"]
    redone = httpx.post(f"{gateway.url}/api/kb/documents/{doc['id']}/reingest", params={"chunk_tokens": 512},
                        headers=ADMIN).json()
    assert redone["document"]["chunk_count"] <= doc["chunk_count"] and not redone["unchanged"]


def test_a_scanned_pdf_is_recorded_as_failed_with_the_reason_and_adds_nothing(gateway):
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(2):
        pdf.add_page()
        pdf.rect(20, 20, 120, 80, style="F")  # an image of a page, no text layer
    resp = _upload(gateway, "scan.pdf", bytes(pdf.output()))
    assert resp.status_code == 422
    doc = resp.json()["documents"][0]["document"]
    assert doc["status"] == "failed" and "no text layer (2 page(s)" in doc["error"]
    assert "scan.pdf" in resp.json()["message"]
    assert _topics(gateway) == []
    job = httpx.get(f"{gateway.url}/api/kb/jobs/{resp.json()['job']}", headers=ADMIN).json()
    assert (job["status"], job["done"], job["errors"]) == ("failed", 1, 1) and "no text layer" in job["problems"][0]


def test_preview_of_an_unreadable_pdf_is_the_same_422_as_its_upload(gateway):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 120, 80, style="F")  # no text layer
    for name, data in (("scan.pdf", bytes(pdf.output())), ("notes.pdf", b"just text, not a PDF")):
        preview = httpx.post(f"{gateway.url}/api/kb/documents/preview", files={"file": (name, data)}, headers=ADMIN)
        upload = _upload(gateway, name, data)
        assert preview.status_code == upload.status_code == 422, preview.text
        reason = upload.json()["documents"][0]["document"]["error"]
        assert preview.json()["error"] == "invalid_input" and reason in preview.json()["message"]
    assert "no text layer" in httpx.post(f"{gateway.url}/api/kb/documents/preview", headers=ADMIN,
                                         files={"file": ("scan.pdf", bytes(pdf.output()))}).json()["message"]
