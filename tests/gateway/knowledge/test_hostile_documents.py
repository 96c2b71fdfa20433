"""Hostile documents through the admin API: a zip bomb is refused before it is parsed, a document
over its time budget is stopped (its process is gone), and no chunk outgrows the cap."""

from __future__ import annotations

import io
import socket
import time
import zipfile

import httpx
import psutil
import pytest

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
_DOCX_PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName='
        '"/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.'
        'document.main+xml"/></Types>'),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
        '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
        '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'),
}
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx(text: str) -> bytes:
    """A minimal real DOCX whose body is one paragraph of ``text``."""
    body = f'<w:document xmlns:w="{_W}"><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, part in {**_DOCX_PARTS, "word/document.xml": body}.items():
            archive.writestr(name, part)
    return out.getvalue()


def _upload(server, name: str, data: bytes) -> dict:
    resp = httpx.post(f"{server.url}/api/kb/documents", files={"file": (name, data)}, headers=ADMIN, timeout=60)
    assert resp.status_code in (201, 422), resp.text
    return resp.json()["documents"][0]["document"]


def test_a_docx_zip_bomb_is_refused_before_it_is_parsed(gateway):
    bomb = docx("Bikes " * 5_000_000)  # 30 MB of XML in ~50 KB
    assert len(bomb) < 200_000
    started = time.monotonic()
    doc = _upload(gateway, "bomb.docx", bomb)
    assert doc["status"] == "failed" and doc["chunk_count"] == 0
    assert doc["error"].startswith("the DOCX member 'word/document.xml' unpacks ")
    assert "a zip bomb?" in doc["error"] and "SWITCHBOARD_EXTRACT_MAX_ZIP_RATIO" in doc["error"]
    assert time.monotonic() - started < 10
    ordinary = _upload(gateway, "guide.docx", docx("We open at nine. " * 50))
    assert ordinary["status"] == "ready" and ordinary["chunk_count"] >= 1


def test_one_million_character_token_previews_as_capped_chunks(gateway):
    text = "Opening hours are nine to six.\n\n" + "q" * 1_000_000 + "\n\nThe end."
    resp = httpx.post(f"{gateway.url}/api/kb/documents/preview", files={"file": ("long.txt", text.encode())},
                      headers=ADMIN, timeout=60)
    assert resp.status_code == 200, resp.text
    chunks = [c["summary"] for c in resp.json()["chunks"]]
    assert len(chunks) >= 1_000_000 // 1024
    assert max(len(c) for c in chunks) <= 1024  # 256 tokens (the default) of ~4 characters
    assert sum(c.count("q") for c in chunks) == 1_000_000  # split, nothing dropped
    assert chunks[0].startswith("Opening hours") and chunks[-1].endswith("The end.")


@pytest.fixture
def tight_gateway(settings):
    tight = settings.model_copy(update={"extract_timeout_s": 0.01})
    with LiveServer(create_app(tight)) as server:
        yield server


def _extractors() -> list[psutil.Process]:
    """Children of this test process that are extracting (the forkserver's forks)."""
    me = psutil.Process()
    return [p for p in me.children(recursive=True) if p.ppid() != me.pid and _runs_python(p, me)]


def _runs_python(process: psutil.Process, me: psutil.Process) -> bool:
    """A fork of this Python (not another test's server in this worker, such as Dovecot's helpers)."""
    try:
        return process.exe() == me.exe()
    except psutil.Error:  # gone meanwhile
        return False


def test_a_document_over_its_time_budget_is_stopped_and_recorded(tight_gateway):
    doc = _upload(tight_gateway, "slow.txt", b"Some words about bikes. " * 20_000)
    assert doc["status"] == "failed"
    assert doc["error"] == ("reading the document took longer than 0.01 s (SWITCHBOARD_EXTRACT_TIMEOUT_S); "
                            "it was stopped")
    deadline = time.monotonic() + 5
    while _extractors() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _extractors() == []  # the work stopped with its process, nothing left running


def _multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "switchboardtestboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_client_that_leaves_stops_the_extraction(gateway):
    rows = "name,price,note\n" + "".join(f"item{i},{i},a note on item {i}\n" for i in range(300_000))
    body, content_type = _multipart("catalogue.csv", rows.encode())  # ~15 MB: seconds of work
    head = (f"POST /api/kb/documents/preview HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-secret\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", gateway.port)) as client:
        client.sendall(head + body)
        deadline = time.monotonic() + 10
        while not _extractors() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _extractors(), "the extraction did not start in a child process"
    left = time.monotonic()  # the client has gone
    while _extractors() and time.monotonic() - left < 5:
        time.sleep(0.02)
    assert _extractors() == []
    assert time.monotonic() - left < 1.5  # stopped when the client left, not when the work would have ended


@pytest.fixture
def small_gateway(settings):
    with LiveServer(create_app(settings.model_copy(update={"extract_max_memory_mb": 128}))) as server:
        yield server


def test_a_document_over_its_memory_budget_fails_with_the_reason(small_gateway):
    before = psutil.Process().memory_info().rss  # this test process runs the gateway (and holds the upload)
    doc = _upload(small_gateway, "huge.txt", b"Some words about bikes. " * 2_000_000)  # 48 MB of text
    assert doc["status"] == "failed"
    assert doc["error"] == ("the document needs more than 128 MB to read (SWITCHBOARD_EXTRACT_MAX_MEMORY_MB); "
                            "it was stopped")
    # The gateway did not grow to read it: only the upload's own copies, far below what reading it took.
    assert psutil.Process().memory_info().rss - before < 512 * 1024**2
