"""`switchboard kb ...` on its own data, and through a running gateway's admin API."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

MARKDOWN = "# Opening hours\n\n## Facts\n- open 9 to 5\n\nWe are open from 9 to 5,\nMonday to Friday.\n"


def _kb(settings, *args, public_url="http://127.0.0.1:9"):
    env = {**os.environ, "SWITCHBOARD_REDIS_URL": settings.redis_url, "SWITCHBOARD_AGENT_ID": settings.agent_id,
           "SWITCHBOARD_DATA_DIR": str(settings.data_dir), "SWITCHBOARD_EMBEDDINGS": "none",
           "SWITCHBOARD_PUBLIC_URL": public_url, "SWITCHBOARD_ADMIN_TOKEN": "admin-secret",
           "SWITCHBOARD_LOG_LEVEL": "WARNING"}
    env.pop("SWITCHBOARD_QDRANT_URL", None)
    return subprocess.run([sys.executable, "-m", "gateway", "kb", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_kb_commands_on_local_data(settings, tmp_path, monkeypatch, capsys):
    md = tmp_path / "handbook.md"
    md.write_text(MARKDOWN)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x", "title": "X", "body": "fine"}\n{"title": "no source"}\n')

    def kb(*args):
        return _kb_here(settings, monkeypatch, capsys, *args)

    assert "1 created" in kb("import", str(md))[1]
    code, _, err = kb("import", str(bad))
    assert code == 1 and "line 2: source" in err
    assert sorted(kb("list")[1].splitlines()) == ["opening-hours\tOpening hours\trag_context", "x\tX\trag_context"]
    assert kb("search", "when are you open", "--strategy", "bm25")[1].split("\t")[1] == "opening-hours"
    assert kb("delete", "x")[1].strip() == "deleted x"
    assert kb("delete", "x")[0] == 1


def test_kb_import_goes_through_a_running_gateway(gateway, settings, tmp_path):
    md = tmp_path / "handbook.md"
    md.write_text(MARKDOWN)
    done = _kb(settings, "import", str(md), public_url=gateway.url)
    assert done.returncode == 0, done.stderr
    topic = httpx.get(f"{gateway.url}/api/kb/topics/opening-hours",
                      headers={"Authorization": "Bearer admin-secret"}).json()
    assert topic["summary"] == "We are open from 9 to 5, Monday to Friday." and topic["facts"] == ["open 9 to 5"]


def _tree(root):
    (root / "manuals" / "old").mkdir(parents=True)
    (root / "manuals" / "guide.md").write_text("# Guide\n\n## Brakes\n\nSqueeze both brake levers gently.\n")
    (root / "manuals" / "old" / "notes.txt").write_text("The old shop opened in 1998.\n\nIt had three bikes.\n")
    (root / "manuals" / "photo.png").write_bytes(b"\x89PNG")
    return root / "manuals"


def _kb_here(settings, monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """``switchboard kb ...`` in this process (the subprocess tests above cover the entry point)."""
    from gateway.cli.main import main

    for name, value in {"REDIS_URL": settings.redis_url, "AGENT_ID": settings.agent_id, "EMBEDDINGS": "none",
                        "DATA_DIR": str(settings.data_dir), "PUBLIC_URL": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(f"SWITCHBOARD_{name}", value)
    monkeypatch.delenv("SWITCHBOARD_QDRANT_URL", raising=False)
    try:
        code = main(["kb", *args])
    except SystemExit as exc:
        code = 1
        print(exc, file=sys.stderr)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_kb_ingest_a_directory_then_list_describe_and_forget(settings, tmp_path, monkeypatch, capsys):
    folder = _tree(tmp_path)

    def kb(*args):
        return _kb_here(settings, monkeypatch, capsys, *args)

    code, out, err = kb("ingest", str(folder))
    assert code == 0, err
    assert "1 file(s): 1 ingested, 0 failed" in out
    code, out, _ = kb("ingest", str(folder), "--recursive", "--ext", ".md,.txt")
    assert "2 file(s): 2 ingested, 0 failed" in out and "unchanged guide.md" in out
    docs = [line.split("\t") for line in kb("documents")[1].splitlines()]
    assert sorted((d[3], d[1]) for d in docs) == [("guide.md", "ready"), ("old/notes.txt", "ready")]
    assert kb("search", "brake levers", "--strategy", "bm25")[1].split("\t")[1].startswith("doc:")
    assert kb("create", "archive", "--description", "old things")[0] == 0
    assert kb("ingest", str(folder / "old" / "notes.txt"), "--kb", "archive")[0] == 0
    assert [b.split("\t")[0] for b in kb("bases")[1].splitlines()] == ["main", "archive"]
    guide = next(d for d in docs if d[3] == "guide.md")
    assert kb("forget", guide[0])[1].strip() == f"deleted document {guide[0]} (1 topics)"
    assert "guide.md" not in kb("documents")[1]
    code, _, err = kb("ingest", str(tmp_path / "nope"))
    assert code == 1 and "no such file or directory" in err


def test_kb_ingest_through_a_running_gateway_reports_failures(gateway, settings, tmp_path):
    folder = _tree(tmp_path)
    (folder / "empty.md").write_text("\n\n")
    done = _kb(settings, "ingest", str(folder), public_url=gateway.url)
    assert done.returncode == 1
    assert "2 file(s): 1 ingested, 1 failed" in done.stdout and "FAILED empty.md" in done.stdout
    listed = httpx.get(f"{gateway.url}/api/kb/documents", headers={"Authorization": "Bearer admin-secret"}).json()
    assert sorted((d["name"], d["status"]) for d in listed["documents"]) == [("empty.md", "failed"),
                                                                             ("guide.md", "ready")]


def test_kb_crawl_here_fetches_the_site_into_documents(settings, tmp_path, monkeypatch, capsys):
    from tests.fakes.live_server import LiveServer
    from tests.fakes.website import Website

    site = Website()
    site.add("/", "<html><head><title>Shop</title></head><body><main><article><h1>Shop</h1><p>We sell and rent "
                  "bicycles by the harbour every day.</p><a href='/hours'>hours</a></article></main></body></html>")
    site.add("/hours", "Open every day from nine to six.", content_type="text/plain")
    monkeypatch.setenv("SWITCHBOARD_OUTBOUND_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("SWITCHBOARD_CRAWL_DELAY_S", "0")
    with LiveServer(site.app()) as server:
        code, out, err = _kb_here(settings, monkeypatch, capsys, "crawl", f"{server.url}/", "--max-pages", "5")
    assert code == 0, err
    assert "crawl done: 2 page(s), 2 changed" in out
    assert sorted(site.paths()) == ["/", "/hours", "/robots.txt", "/sitemap.xml"]
    docs = _kb_here(settings, monkeypatch, capsys, "documents")[1]
    assert f"{server.url}/hours" in docs and docs.count("\tready\t") == 2
    monkeypatch.setenv("SWITCHBOARD_OUTBOUND_ALLOW_HOSTS", "")
    code, out, _ = _kb_here(settings, monkeypatch, capsys, "crawl", f"{server.url}/")
    assert code == 1 and "loopback" in out
