"""Hostile intake against a real gateway process: what a compression bomb or a huge document costs it.

Starts `python -m gateway serve` (embedded Redis, local Qdrant, fastembed embeddings unless
--no-embeddings) from --code (default: this checkout; point it at an older checkout for "before"
numbers), an instant LLM, and a local bomb server, then runs, one at a time:

  crawl-gzip   a crawl of a page that is ~1/1000 its size on the wire (gzip)
  inject-gzip  a data-injection source answering the same way
  docx-xml     a DOCX upload whose word/document.xml is --docx-mb MB (a few hundred KB zipped)
  txt-10mb     a --txt-mb MB .txt upload, with web-chat turns running during it

and prints, for each: the gateway's peak RSS over its RSS before, /healthz latency (p99, max) while
it ran, how long it took and what the gateway said (the stored status or error). For txt-10mb also a
chat turn's idle p99, p99 during the ingest, their ratio and the gateway's CPU ms per idle turn.

    python bench/hostile_intake.py [--code DIR] [--bomb-mb 200] [--docx-mb 100] [--txt-mb 10]
        [--give-up-s 90] [--no-embeddings] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import free_port, wait_http  # noqa: E402

ADMIN = {"Authorization": "Bearer bench-admin"}
MODEL = Path("/work/shared/models/all-MiniLM-L6-v2")
ATTR = "project_attributes_{}_data_injection_{}"


def gzip_bomb(prefix: bytes, fill: bytes, size: int, suffix: bytes) -> bytes:
    """``prefix`` + ``size`` bytes of ``fill`` + ``suffix``, gzip-compressed block by block."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = fill * (1024 * 1024 // len(fill))
    parts, left = [packer.compress(prefix)], size
    while left > 0:
        piece = block[:left]
        parts.append(packer.compress(piece))
        left -= len(piece)
    parts += [packer.compress(suffix), packer.flush()]
    return b"".join(parts)


def docx_bomb(xml_mb: int) -> bytes:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    run = "<w:p><w:r><w:t>" + "Bikes by the harbour. " * 40 + "</w:t></w:r></w:p>"
    body = run * (xml_mb * 1024 * 1024 // len(run))
    parts = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships'
        '+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        "_rels/.rels": '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        "word/document.xml": f'<w:document xmlns:w="{w}"><w:body>{body}</w:body></w:document>',
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, part in parts.items():
            archive.writestr(name, part)
    return out.getvalue()


def text_document(mb: int) -> bytes:
    words = [f"w{i:04d}" for i in range(4000)]
    lines, size, i = [], 0, 0
    while size < mb * 1024 * 1024:
        sentence = " ".join(words[(i * 7 + k) % 4000] for k in range(14)).capitalize() + "."
        line = sentence + (" " + sentence) * 4 + "\n\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


class BombServer(ThreadingHTTPServer):
    page: bytes = b""
    data: bytes = b""


class _Handler(BaseHTTPRequestHandler):
    server: BombServer

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/robots.txt":
            self.send_response(404)
            self.end_headers()
            return
        self._send(self.server.page, "text/html; charset=utf-8")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send(self.server.data, "application/json")

    def log_message(self, *args) -> None:
        pass


@dataclass
class Sampler:
    """RSS of the gateway and /healthz latency, sampled every 100 ms while a scenario runs."""

    proc: psutil.Process
    url: str
    rss: list[int] = field(default_factory=list)
    health_ms: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _rss(self) -> None:
        while not self._stop.is_set():
            try:
                self.rss.append(self.proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.1)

    def _health(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    client.get(f"{self.url}/healthz")
                except httpx.HTTPError:
                    pass
                self.health_ms.append((time.perf_counter() - started) * 1000)
                time.sleep(0.1)

    def __enter__(self) -> Sampler:
        self._threads = [threading.Thread(target=self._rss, daemon=True),
                         threading.Thread(target=self._health, daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(65)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def until(predicate: Callable[[], object], give_up_s: float) -> object:
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    return None


@dataclass
class Outcome:
    name: str
    seconds: float
    said: str
    rss_before: int
    rss_peak: int
    health_p99: float
    health_max: float


def measure(name: str, gw: psutil.Process, url: str, run: Callable[[], str]) -> Outcome:
    before = gw.memory_info().rss
    started = time.monotonic()
    with Sampler(gw, url) as sampler:
        said = run()
    took = time.monotonic() - started
    return Outcome(name, took, said, before, max(sampler.rss, default=before), pct(sampler.health_ms, 99),
                   max(sampler.health_ms, default=float("nan")))


def crawl_scenario(client: httpx.Client, bombs: BombServer, give_up_s: float) -> str:
    job = client.post("/api/kb/crawl", json={"url": f"http://127.0.0.1:{bombs.server_port}/", "max_pages": 1}).json()
    done = until(lambda: (j := client.get(f"/api/kb/jobs/{job['id']}").json())["status"] in ("done", "failed")
                 and j, give_up_s)
    docs = client.get("/api/kb/documents", params={"origin": "website"}).json().get("documents", [])
    page = "; ".join(f"page {d['status']} size {d['size']}" + (f" ({d['error']})" if d.get("error") else "")
                     for d in docs)
    if not done:
        return f"job still running after {give_up_s:.0f} s; {page}"
    return f"job {done['status']}: {done.get('message')}; problems {done.get('problems')}; {page}"[:400]


def inject_scenario(client: httpx.Client, bombs: BombServer, give_up_s: float) -> str:
    status = ATTR.format("private", "status")
    for name, value in ((ATTR.format("setting", "url"), f"http://127.0.0.1:{bombs.server_port}/data"),
                        (ATTR.format("private", "payload"), '{"q": 1}'),
                        (ATTR.format("setting", "update_period"), "2s"),
                        (ATTR.format("setting", "is_enabled"), True)):
        client.put(f"/api/attributes/{name}", json={"value": value}).raise_for_status()
    initial = client.get(f"/api/attributes/{status}").json().get("value")
    said = until(lambda: (v := client.get(f"/api/attributes/{status}").json().get("value")) != initial and v,
                 give_up_s)
    client.put(f"/api/attributes/{ATTR.format('setting', 'is_enabled')}", json={"value": False})
    return str(said or f"no status after {give_up_s:.0f} s")[:400]


def upload_scenario(client: httpx.Client, name: str, data: bytes, give_up_s: float) -> str:
    try:
        resp = client.post("/api/kb/documents", files={"file": (name, data)}, timeout=give_up_s)
    except httpx.TimeoutException:
        return f"no answer after {give_up_s:.0f} s (still processing)"
    doc = resp.json()["documents"][0]["document"]
    return f"HTTP {resp.status_code}, {doc['status']}, {doc['chunk_count']} chunks, size {doc['size']}" + (
        f": {doc['error']}" if doc.get("error") else "")


def chat_turns(url: str, stop: threading.Event | None, count: int | None) -> list[float]:
    with httpx.Client(base_url=url, timeout=120) as client:
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        times: list[float] = []
        i = 0
        while (stop is None or not stop.is_set()) and (count is None or i < count):
            started = time.perf_counter()
            client.post(path, json={"text": f"When do you open on day {i}?"}, headers=auth).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
            i += 1
            time.sleep(0.05)
        return times


def txt_scenario(url: str, gw: psutil.Process, data: bytes, give_up_s: float) -> tuple[str, str]:
    """Turns before (the knowledge base already holding a 1 MB document, so a turn really searches),
    during the upload of ``data``, and after it."""
    with httpx.Client(base_url=url, headers=ADMIN, timeout=give_up_s) as client:
        upload_scenario(client, "warm-up.txt", text_document(1).replace(b"w0", b"v0"), give_up_s)
    chat_turns(url, None, 5)
    cpu = gw.cpu_times()
    idle = chat_turns(url, None, 60)
    spent = gw.cpu_times()
    cpu_ms = ((spent.user + spent.system) - (cpu.user + cpu.system)) * 1000 / len(idle)
    stop = threading.Event()
    during: list[float] = []
    worker = threading.Thread(target=lambda: during.extend(chat_turns(url, stop, None)), daemon=True)
    with httpx.Client(base_url=url, headers=ADMIN) as client:
        worker.start()
        said = upload_scenario(client, "big.txt", data, give_up_s)
        stop.set()
        worker.join(120)
    after = chat_turns(url, None, 60)
    p_idle, p_during, p_after = pct(idle, 99), pct(during, 99), pct(after, 99)
    return said, (f"chat turn p99: idle {p_idle:.0f} ms, during the ingest {p_during:.0f} ms ({len(during)} turns), "
                  f"idle after it {p_after:.0f} ms; ratio during/idle {p_during / p_idle:.2f} "
                  f"(during/after {p_during / p_after:.2f}); p50 {statistics.median(idle):.0f} / "
                  f"{statistics.median(during) if during else float('nan'):.0f} / {statistics.median(after):.0f} ms; "
                  f"gateway CPU per idle turn {cpu_ms:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose gateway runs (before/after)")
    parser.add_argument("--bomb-mb", type=int, default=200, help="decoded size of the crawl / injection bombs")
    parser.add_argument("--docx-mb", type=int, default=100)
    parser.add_argument("--txt-mb", type=int, default=10)
    parser.add_argument("--give-up-s", type=float, default=90.0)
    parser.add_argument("--no-embeddings", action="store_true")
    parser.add_argument("--only", default="crawl-gzip,inject-gzip,docx-xml,txt-10mb")
    args = parser.parse_args()
    only = set(args.only.split(","))

    bombs = BombServer(("127.0.0.1", free_port()), _Handler)
    size = args.bomb_mb * 1024 * 1024
    bombs.page = gzip_bomb(b"<html><body><main><p>Bikes by the harbour.</p>", b" ", size, b"</main></body></html>")
    bombs.data = gzip_bomb(b'{"text": "', b"a", size, b'"}')
    threading.Thread(target=bombs.serve_forever, daemon=True).start()
    llm_port, port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(args.code), "SWITCHBOARD_DATA_DIR": f"{tmp}/data",
               "SWITCHBOARD_ADMIN_TOKEN": "bench-admin", "SWITCHBOARD_OUTBOUND_ALLOW_HOSTS": "127.0.0.1",
               "SWITCHBOARD_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1", "SWITCHBOARD_LLM_API_KEY": "sk-bench",
               "SWITCHBOARD_LOG_LEVEL": "WARNING", "SWITCHBOARD_CRAWL_DELAY_S": "0",
               "SWITCHBOARD_WEBCHAT_MESSAGES_PER_ADDRESS": "0", "SWITCHBOARD_WEBCHAT_MESSAGES_PER_SESSION": "0",
               **({"SWITCHBOARD_EMBEDDINGS": "none"} if args.no_embeddings else
                  {"SWITCHBOARD_EMBEDDINGS": "fastembed", "SWITCHBOARD_EMBEDDING_MODEL_PATH": str(MODEL)})}
        llm = subprocess.Popen([sys.executable, str(ROOT / "bench/instant_llm.py"), str(llm_port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        gateway = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", str(port)], cwd=tmp, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(f"{url}/healthz")
            gw = psutil.Process(gateway.pid)
            print(f"code: {args.code}  bombs: {args.bomb_mb} MB decoded ({len(bombs.page)} B page, "
                  f"{len(bombs.data)} B data)  embeddings: {'off' if args.no_embeddings else 'on'}")
            outcomes, notes = [], []
            with httpx.Client(base_url=url, headers=ADMIN, timeout=args.give_up_s + 30) as client:
                if "crawl-gzip" in only:
                    outcomes.append(measure("crawl-gzip", gw, url,
                                            lambda: crawl_scenario(client, bombs, args.give_up_s)))
                if "inject-gzip" in only:
                    outcomes.append(measure("inject-gzip", gw, url,
                                            lambda: inject_scenario(client, bombs, args.give_up_s)))
                if "docx-xml" in only:
                    docx = docx_bomb(args.docx_mb)
                    notes.append(f"docx-xml: {len(docx)} B zipped, {args.docx_mb} MB of XML")
                    outcomes.append(measure("docx-xml", gw, url,
                                            lambda: upload_scenario(client, "bomb.docx", docx, args.give_up_s)))
            if "txt-10mb" in only:
                data = text_document(args.txt_mb)
                chat: list[str] = []
                outcomes.append(measure("txt-10mb", gw, url, lambda: (r := txt_scenario(
                    url, gw, data, args.give_up_s * 10)) and (chat.append(r[1]) or r[0])))
                notes += [f"txt-10mb: {chat[0]}" if chat else "txt-10mb: no chat numbers"]
        finally:
            for proc in (gateway, llm):
                try:
                    os.killpg(proc.pid, 9) if proc is gateway else proc.kill()
                except ProcessLookupError:
                    pass
                proc.wait(10)
    mb = 1024 * 1024
    print(f"{'scenario':<12} {'seconds':>8} {'RSS before':>11} {'RSS peak':>9} {'+RSS':>7} "
          f"{'healthz p99':>12} {'max':>8}")
    for o in outcomes:
        print(f"{o.name:<12} {o.seconds:>8.1f} {o.rss_before / mb:>9.0f}MB {o.rss_peak / mb:>7.0f}MB "
              f"{(o.rss_peak - o.rss_before) / mb:>5.0f}MB {o.health_p99:>10.0f}ms {o.health_max:>6.0f}ms")
    for o in outcomes:
        print(f"  {o.name}: {o.said}")
    for note in notes:
        print(f"  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
