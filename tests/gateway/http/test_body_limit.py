"""The app-wide body limit refuses before reading, and admin routes check the token before the body."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from gateway.http.app import create_app
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
FIFTY_MB = 50 * 1024 * 1024


def _raw_request(
    url: str, path: str, headers: dict[str, str], body: bytes, *, method: str = "POST", timeout: float = 3.0
) -> tuple[int, dict]:
    """Send the request line, the headers and only ``body`` (whatever Content-Length says), then read the
    answer: a server that waited for the declared body would time out here."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        sock.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    status_line, rest = data.split(b"\r\n", 1)
    return int(status_line.split()[1]), json.loads(rest.split(b"\r\n\r\n", 1)[1])


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.mark.parametrize(
    ("path", "token"),
    [
        ("/api/kb/search", "Bearer wrong"),
        ("/api/kb/topics", None),
        ("/api/prompt/preview", "Bearer wrong"),
        ("/api/templates/system", "Bearer wrong"),
        ("/api/attributes/project_attributes_setting_timezone", None),
        ("/api/chat/sessions/nope/messages", "Bearer wrong"),
    ],
)
def test_a_declared_50mb_body_is_413_at_once_without_being_read(gateway, path, token):
    headers = {"Content-Type": "application/json", "Content-Length": str(FIFTY_MB)}
    if token:
        headers["Authorization"] = token
    started = time.monotonic()
    status, body = _raw_request(gateway.url, path, headers, b'{"query": "')  # 11 of 52,428,800 bytes
    assert (status, body["error"]) == (413, "payload_too_large")
    assert body["message"] == "request body is larger than 1048576 bytes"
    assert time.monotonic() - started < 2


def test_admin_routes_check_the_token_before_reading_the_body(gateway):
    """Under the limit, a caller without the token still costs no body read: 401 at once."""
    routes = [("POST", "/api/kb/search"), ("POST", "/api/kb/topics"), ("PUT", "/api/kb/topics/x"),
              ("POST", "/api/kb/import?format=jsonl"), ("POST", "/api/prompt/preview"),
              ("PUT", "/api/personas/p/sections/x"), ("PUT", "/api/attributes/project_attributes_setting_timezone")]
    for method, path in routes:
        headers = {"Content-Type": "application/json", "Content-Length": "900000", "Authorization": "Bearer wrong"}
        status, body = _raw_request(gateway.url, path, headers, b'{"text": "', method=method)
        assert (status, body["error"], body["message"]) == (401, "unauthorized", "wrong admin token")


def _chunked(total: int, piece: int = 64 * 1024):
    sent = 0
    while sent < total:
        yield b"x" * min(piece, total - sent)
        sent += piece


def test_a_chunked_body_is_cut_off_at_the_limit(gateway):
    with httpx.Client(base_url=gateway.url, headers=ADMIN, timeout=10) as client:
        body = iter([b'[{"source": "big", "title": "Big", "summary": "', *_chunked(2 * 1024 * 1024), b'"}]'])
        resp = client.post("/api/kb/topics", content=body, headers={"Content-Type": "application/json"})
        assert resp.request.headers.get("transfer-encoding") == "chunked"
        assert (resp.status_code, resp.json()["error"]) == (413, "payload_too_large")
        assert client.get("/api/kb/topics").json()["total"] == 0
        # under the limit, chunked is fine
        small = iter([b'{"source": "small", "title": "Small", ', b'"summary": "fits"}'])
        assert client.post("/api/kb/topics", content=small).json()["created"] == ["small"]


def test_import_has_its_own_larger_limit(settings):
    app = create_app(settings.model_copy(update={"max_body_bytes": 64 * 1024, "max_import_bytes": 512 * 1024}))
    lines = [json.dumps({"source": f"t{i}", "title": f"Topic {i}", "body": "words " * 150}) for i in range(300)]
    jsonl = "\n".join(lines).encode()
    assert 64 * 1024 < len(jsonl) < 512 * 1024
    with LiveServer(app) as server, httpx.Client(base_url=server.url, headers=ADMIN, timeout=60) as client:
        report = client.post("/api/kb/import", params={"format": "jsonl"}, content=jsonl).json()
        assert len(report["created"]) == 300 and report["errors"] == []
        too_big = client.post("/api/kb/topics", content=jsonl, headers={"Content-Type": "application/json"})
        assert too_big.status_code == 413 and too_big.json()["message"].endswith("65536 bytes")
        status, body = _raw_request(server.url, "/api/kb/import?format=jsonl",
                                    {**ADMIN, "Content-Length": str(FIFTY_MB)}, b'{"source"')
        assert (status, body["message"]) == (413, "request body is larger than 524288 bytes")
        assert client.get("/api/kb/topics").json()["total"] == 300


def test_a_50mb_body_with_a_wrong_token_costs_no_memory(gateway):
    process = psutil.Process()
    piece = memoryview(b"x" * (256 * 1024))
    before = process.memory_info().rss
    parts = urlsplit(gateway.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(f"POST /api/kb/search HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer wrong\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {FIFTY_MB}\r\n\r\n".encode())
        try:
            for _ in range(FIFTY_MB // len(piece)):
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway answered and hung up instead of reading it all: what we want
    grown = process.memory_info().rss - before
    assert grown < 20 * 1024 * 1024, f"RSS grew by {grown / 1e6:.0f} MB"
