"""`switchboard demo remove` takes the demo's topics out and leaves the business's own."""

from __future__ import annotations

import sys

from gateway.cli.main import main
from gateway.knowledge.demo import demo_sources

OWN = "# Pottery classes\n\nWheel-throwing classes run on Tuesdays at 18:00.\n"


def _cli(settings, monkeypatch, capsys, *args) -> tuple[int, str]:
    for name, value in {"REDIS_URL": settings.redis_url, "AGENT_ID": settings.agent_id, "EMBEDDINGS": "none",
                        "DATA_DIR": str(settings.data_dir), "PUBLIC_URL": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(f"SWITCHBOARD_{name}", value)
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = 1
        print(exc, file=sys.stderr)
    return code, capsys.readouterr().out


def test_demo_remove_keeps_the_businesss_own_topics(settings, monkeypatch, capsys, tmp_path):
    from gateway.knowledge.demo import load_demo_knowledge
    from gateway.knowledge.search import Knowledge

    local = settings.model_copy(update={"qdrant_url": None})
    knowledge = Knowledge(local, None)
    try:
        import asyncio

        asyncio.run(load_demo_knowledge(knowledge))
    finally:
        knowledge.close()
    (tmp_path / "own.md").write_text(OWN)
    assert _cli(settings, monkeypatch, capsys, "kb", "import", str(tmp_path / "own.md"))[0] == 0

    code, out = _cli(settings, monkeypatch, capsys, "demo", "remove")
    assert code == 0 and out.strip() == f"removed {len(demo_sources())} demo topic(s)"
    listed = _cli(settings, monkeypatch, capsys, "kb", "list")[1].splitlines()
    assert [line.split("\t")[0] for line in listed] == ["pottery-classes"]
    assert _cli(settings, monkeypatch, capsys, "demo", "remove")[1].strip() == "no demo topics to remove"
