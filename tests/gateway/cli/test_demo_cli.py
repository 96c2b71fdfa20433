"""`switchboard demo remove` takes out everything the demo put in — its topics, the business name and the
opening hours it filled in — and leaves the business's own topics and values."""

from __future__ import annotations

import sys

import httpx

from gateway.cli.main import main
from gateway.http.app import create_app
from gateway.knowledge.demo import demo_sources
from tests.fakes.live_server import LiveServer

OWN = "# Pottery classes\n\nWheel-throwing classes run on Tuesdays at 18:00.\n"
ADMIN = {"Authorization": "Bearer admin-secret"}


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


def _system_prompt(settings) -> str:
    """The system prompt a web-chat turn would get now, from a gateway started on ``settings``."""
    with LiveServer(create_app(settings)) as server:
        preview = httpx.post(f"{server.url}/api/prompt/preview", headers=ADMIN, timeout=20,
                             json={"text": "When are you open on Saturday?"}).json()
    return preview["messages"][0]["content"]


def _calendar(prompt: str) -> str:
    return prompt.split("<ConvoAgentCalendar>")[1].split("</ConvoAgentCalendar>")[0]


def test_demo_remove_keeps_the_businesss_own_topics(settings, monkeypatch, capsys, tmp_path):
    local = settings.model_copy(update={"qdrant_url": None, "demo": True})
    with LiveServer(create_app(local)):
        pass  # `make run`: the demo is loaded into the empty knowledge base at start
    (tmp_path / "own.md").write_text(OWN)
    assert _cli(settings, monkeypatch, capsys, "kb", "import", str(tmp_path / "own.md"))[0] == 0

    code, out = _cli(settings, monkeypatch, capsys, "demo", "remove")
    assert code == 0
    assert out.strip() == (f"removed {len(demo_sources())} demo topic(s) and the demo's business name and "
                           "business hours")
    listed = _cli(settings, monkeypatch, capsys, "kb", "list")[1].splitlines()
    assert [line.split("\t")[0] for line in listed] == ["pottery-classes"]
    assert _cli(settings, monkeypatch, capsys, "demo", "remove")[1].strip() == "nothing of the demo left to remove"


def test_after_demo_remove_the_prompt_names_no_demo_business_and_no_demo_hours(settings, monkeypatch, capsys):
    local = settings.model_copy(update={"qdrant_url": None, "demo": True})
    before = _system_prompt(local)
    assert before.splitlines()[0].startswith("You are Switchboard, the AI assistant of Harbor Bikes.")
    assert "open 09:00-18:00" in _calendar(before)

    assert _cli(settings, monkeypatch, capsys, "demo", "remove")[0] == 0  # no gateway running: on the data dir

    # `make run` again (still --demo): the removed demo stays out, its knowledge base now empty.
    after = _system_prompt(local)
    assert after.splitlines()[0].startswith("You are Switchboard, an AI assistant. You talk")
    assert "Harbor Bikes" not in after
    calendar = _calendar(after)
    assert "today " in calendar and "open" not in calendar and "closed" not in calendar
    assert "No additional information" in after  # no demo topic answers any more
