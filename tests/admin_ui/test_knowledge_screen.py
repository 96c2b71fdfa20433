"""The Knowledge screen's topics, documents, pasted text and website imports over HTTP — the same
services as the JSON API, with an RQ worker running the ingestion jobs — and operators refused on
every change."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.admin_ui.conftest import csrf_of, operator_client, sign_in
from tests.fakes.live_server import LiveServer
from tests.fakes.website import Website

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def root(worker_console) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=worker_console.url, timeout=30) as client:
        sign_in(client)
        yield client


def topic_form(client: httpx.Client, **fields) -> dict:
    page = client.get("/admin/knowledge/topics/new").text
    return {"csrf_token": csrf_of(page), "kb": "main", "creating": "1", "source": "", "title": "", "facts": "",
            "summary": "", "labels": "rag_context", **fields}


def edit_form(client: httpx.Client, source: str) -> dict:
    page = client.get("/admin/knowledge/topics/edit", params={"source": source}).text
    version = re.search(r'name="version" value="([0-9a-f]+)"', page).group(1)
    return {"csrf_token": csrf_of(page), "kb": "main", "creating": "0", "version": version, "source": source}


def test_new_topic_search_label_filter_edit_stale_edit_and_delete(root):
    made = root.post("/admin/knowledge/topics/save", data=topic_form(
        root, source="tandems", title="Tandem rental", facts="50 euros a day\nhelmets included",
        summary="Tandems cost 50 euros per day.", labels="rag_context, bikes"))
    assert made.status_code == 303
    root.post("/admin/knowledge/topics/save", data=topic_form(
        root, source="internal-note", title="Staff rota", summary="Who works when.", labels="internal"))
    table = root.get("/admin/knowledge/topics").text
    assert "Tandem rental" in table and "Staff rota" in table
    found = root.get("/admin/knowledge/topics", params={"q": "tandem price per day"}).text
    assert "Tandem rental" in found and "Staff rota" not in found and "<th>Score</th>" in found
    labelled = root.get("/admin/knowledge/topics", params={"label": "internal"}).text
    assert "Staff rota" in labelled and "Tandem rental" not in labelled

    duplicate = root.post("/admin/knowledge/topics/save", data=topic_form(root, source="tandems", title="Again"))
    assert duplicate.status_code == 409 and "already exists" in duplicate.text
    empty = root.post("/admin/knowledge/topics/save", data=topic_form(root, source="x", title=" ",
                                                                        summary="kept text"))
    assert empty.status_code == 422 and "Title:" in empty.text and "kept text" in empty.text

    opened = edit_form(root, "tandems")
    root.put("/api/kb/topics/tandems", headers=ADMIN, json={"title": "Tandems (by the API)", "summary": "API."})
    stale = root.post("/admin/knowledge/topics/save", data={**opened, "title": "Mine", "summary": "mine"})
    assert stale.status_code == 409 and "since you opened it" in stale.text and "Mine" in stale.text
    assert root.get("/api/kb/topics/tandems", headers=ADMIN).json()["title"] == "Tandems (by the API)"
    fresh = edit_form(root, "tandems")
    saved = root.post("/admin/knowledge/topics/save", data={**fresh, "title": "Tandems", "summary": "50 a day.",
                                                            "facts": "", "labels": "rag_context"})
    assert saved.status_code == 303
    assert root.get("/api/kb/topics/tandems", headers=ADMIN).json()["summary"] == "50 a day."

    csrf = csrf_of(root.get("/admin/knowledge/topics").text)
    root.post("/admin/knowledge/topics/delete", data={"csrf_token": csrf, "kb": "main", "source": "tandems"})
    assert root.get("/api/kb/topics/tandems", headers=ADMIN).status_code == 404


def test_documents_reingest_and_delete(root):
    csrf = csrf_of(root.get("/admin/knowledge").text)
    root.post("/admin/knowledge/upload", data={"csrf_token": csrf, "kb": "main"},
              files=[("files", ("guide.md", b"# Guide\n\n## Prices\n\nA day costs 35 euros.\n"))])
    [doc] = root.get("/api/kb/documents", headers=ADMIN).json()["documents"]
    again = root.post(f"/admin/knowledge/documents/{doc['id']}/reingest", data={"csrf_token": csrf})
    assert again.status_code == 303 and "re-ingested" in root.get(again.headers["location"]).text
    gone = root.post(f"/admin/knowledge/documents/{doc['id']}/delete", data={"csrf_token": csrf})
    assert gone.status_code == 303
    assert root.get("/api/kb/documents", headers=ADMIN).json()["documents"] == []


def test_an_action_on_an_unknown_document_or_an_unknown_action_says_why_on_the_page(root):
    csrf = csrf_of(root.get("/admin/knowledge").text)
    missing = root.post("/admin/knowledge/documents/nope/delete", data={"csrf_token": csrf})
    assert missing.status_code == 422 and "no document with id &#39;nope&#39;" in missing.text
    root.post("/admin/knowledge/upload", data={"csrf_token": csrf, "kb": "main"},
              files=[("files", ("guide.md", b"# Guide\n\nA day costs 35 euros.\n"))])
    [doc] = root.get("/api/kb/documents", headers=ADMIN).json()["documents"]
    odd = root.post(f"/admin/knowledge/documents/{doc['id']}/shred", data={"csrf_token": csrf})
    assert odd.status_code == 404 and "No action &#39;shred&#39;" in odd.text
    assert [d["id"] for d in root.get("/api/kb/documents", headers=ADMIN).json()["documents"]] == [doc["id"]]


def wait_for_jobs(client: httpx.Client, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = client.get("/admin/knowledge/jobs", params={"fragment": "rows"}).text
        if 'data-status="queued"' not in rows and 'data-status="running"' not in rows:
            return rows
        time.sleep(0.2)
    raise AssertionError("the jobs did not finish")


def test_pasted_text_and_a_website_become_topics_through_jobs(root, worker_console):
    website = Website()
    website.add("/help/", "<html><body><main><h1>Help</h1><p>Winter storage costs 60 euros for the season, "
                          "November to March, serviced and dry.</p><a href='/help/returns'>Returns</a>"
                          "</main></body></html>", content_type="text/html")
    website.add("/help/returns", "<html><body><main><h1>Returns</h1><p>Return a rented bike by 18:00 or pay "
                                 "a late fee of 10 euros.</p></main></body></html>", content_type="text/html")
    with LiveServer(website.app()) as site:
        csrf = csrf_of(root.get("/admin/knowledge").text)
        text = "# Gift cards\n\nGift cards come in 25, 50 and 100 euros and never expire.\n"
        assert root.post("/admin/knowledge/append", data={"csrf_token": csrf, "text": text}).status_code == 303
        crawl = root.post("/admin/knowledge/crawl", data={"csrf_token": csrf, "kb": "main", "url": site.url + "/help/",
                                                          "max_depth": "2", "max_pages": "5"})
        assert crawl.status_code == 303 and "/admin/knowledge/jobs?job=" in crawl.headers["location"]
        rows = wait_for_jobs(root)
    assert rows.count('data-status="done"') == 2, rows
    assert "1 of 1 site(s) · 2 pages fetched" in rows  # sites done of sites, not pages of sites
    # Each job shows when it started and finished; its id is cut short (the whole id on hover), so it fits one line.
    started = r'<td class="nowrap">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<br><span class="muted">done '
    assert len(re.findall(started, rows)) == 2
    assert len(re.findall(r'<td class="nowrap"><code title="[0-9a-f-]+">[0-9a-f-]{8}</code></td>', rows)) == 2, rows
    found = root.get("/admin/knowledge/topics", params={"q": "gift cards"}).text
    assert "Gift cards" in found
    crawled = root.get("/admin/knowledge/topics", params={"q": "winter storage season"}).text
    first = re.search(r'<table aria-label="Topics">.*?<tbody>\s*<tr><td><a [^>]*>([^<]+)</a>', crawled, re.S).group(1)
    assert first.startswith("Help")  # the crawled page's chunk, titled by the page
    bad = root.post("/admin/knowledge/crawl", data={"csrf_token": csrf, "url": "not a url", "max_pages": "5"})
    assert bad.status_code == 422 and "not a url" in bad.text


def test_operators_read_knowledge_but_every_change_is_refused(root, worker_console):
    with operator_client(root, worker_console.url) as olga:
        page = olga.get("/admin/knowledge/topics").text
        assert "New topic" not in page
        csrf = csrf_of(page)
        for path, data in (
            ("/admin/knowledge/topics/save", {"creating": "1", "source": "x", "title": "Hijack"}),
            ("/admin/knowledge/topics/delete", {"source": "x"}),
            ("/admin/knowledge/append", {"text": "hijack"}),
            ("/admin/knowledge/crawl", {"url": "http://127.0.0.1:9/"}),
            ("/admin/knowledge/documents/abc/delete", {}),
            ("/admin/knowledge/documents/abc/reingest", {}),
        ):
            assert olga.post(path, data={"csrf_token": csrf, "kb": "main", **data}).status_code == 403, path
    assert root.get("/api/kb/topics/x", headers=ADMIN).status_code == 404
    assert "hijack" not in root.get("/admin/knowledge/jobs").text


def test_recent_live_retrievals_show_real_turns(root):
    session = root.post("/api/chat/sessions").json()
    root.post(f"/api/chat/sessions/{session['session_id']}/messages", json={"text": "do you store bikes in winter?"},
              headers={"Authorization": f"Bearer {session['token']}"})
    page = root.get("/admin/knowledge", params={"tab": "test"}).text
    when = r'<td class="nowrap">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td><td>webchat</td>'
    assert re.search(when, page)  # a date people read, not Unix time
    recent = re.search(r'<table aria-label="Recent live retrievals">(.*?)</table>', page, re.S).group(1)
    assert "do you store bikes in winter?" in recent and "webchat" in recent
