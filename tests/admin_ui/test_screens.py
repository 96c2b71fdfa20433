"""Knowledge and inbox screens over HTTP: the same services as the JSON API, roles on the server."""

from __future__ import annotations

import asyncio
import re

import httpx

from tests.admin_ui.conftest import csrf_of, quiet_console, sign_in  # noqa: F401  (the quiet_console fixture)

GUIDE = b"# Harbor Bikes guide\n\n## Prices\n\nAn e-bike costs 35 euros a day.\n\n## Hours\n\nOpen nine to six.\n"


class _Admin(httpx.Client):
    def __enter__(self):
        client = super().__enter__()
        sign_in(client)
        return client


def _admin(console) -> httpx.Client:
    return _Admin(base_url=console.url, timeout=30)


def test_upload_files_then_see_them_and_find_them_with_the_retrieval_test(console):
    with _admin(console) as client:
        csrf = csrf_of(client.get("/admin/knowledge").text)
        files = [("files", ("guide.md", GUIDE)), ("files", ("photo.png", b"\x89PNG")), ("files", ("empty.txt", b" "))]
        uploaded = client.post("/admin/knowledge/upload", data={"csrf_token": csrf, "kb": "main"}, files=files)
        assert uploaded.status_code == 422  # some files failed; each row says what happened
        rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"\w*\">(\w+)</td><td>([^<]*)</td></tr>", uploaded.text)
        assert [(name, status) for name, status, _ in rows] == [
            ("guide.md", "ready"), ("photo.png", "refused"), ("empty.txt", "failed")]
        assert "unsupported file type" in rows[1][2] and "no text" in rows[2][2]
        assert ">guide.md<" in client.get("/admin/knowledge").text

        found = client.post("/admin/knowledge/search", data={"csrf_token": csrf, "query": "e-bike price per day",
                                                              "strategy": "bm25", "k": "3"})
        assert found.status_code == 200
        results = re.search(r'<table aria-label="Results">(.*?)</table>', found.text, re.S).group(1)
        assert results.index("Harbor Bikes guide › Prices") < results.index("Harbor Bikes guide › Hours")
        assert "<th>BM25</th>" in results  # each leg's own score beside the fused one
        bad = client.post("/admin/knowledge/search", data={"csrf_token": csrf, "query": "x", "k": "500"})
        assert bad.status_code == 422 and "k: a whole number" in bad.text and 'value="x"' in bad.text
        wrong = client.post("/admin/knowledge/search", data={"csrf_token": csrf, "query": "e-bike price per day",
                                                              "relevance_threshold": "1.5"})
        assert wrong.status_code == 422 and "relevance_threshold" in wrong.text and 'value="1.5"' in wrong.text
        strict = client.post("/admin/knowledge/search", data={
            "csrf_token": csrf, "query": "e-bike price per day", "strategy": "bm25", "relevance_threshold": "0.99"})
        assert "No result." in strict.text and "removed all" in strict.text
        assert "Left out by relevance_threshold" in strict.text


def test_operators_read_the_knowledge_base_but_cannot_upload(console):
    with _admin(console) as admin:
        csrf = csrf_of(admin.get("/admin/operators").text)
        admin.post("/admin/operators", data={"csrf_token": csrf, "username": "ann",
                                             "password": "ann's long password", "role": "operator"})
    with httpx.Client(base_url=console.url, timeout=30) as operator:
        sign_in(operator, "ann", "ann's long password")
        page = operator.get("/admin/knowledge")
        assert page.status_code == 200 and "Only admins change the knowledge base." in page.text
        refused = operator.post("/admin/knowledge/upload", data={"csrf_token": csrf_of(page.text)},
                                files=[("files", ("guide.md", GUIDE))])
        assert refused.status_code == 403
        assert "guide.md" not in operator.get("/admin/knowledge").text


def test_a_dead_letter_is_shown_with_its_reason_and_retried(quiet_console):  # noqa: F811
    from gateway.inbox.delivery import Delivery

    console = quiet_console
    services = console.services

    async def park() -> str:
        from redis.asyncio import Redis

        from gateway.conversation.store import RedisStore
        from gateway.inbox.stream import Inbox

        redis = Redis.from_url(services.settings.redis_url)
        inbox = Inbox(redis, RedisStore(redis, services.settings.agent_id))
        await inbox.push("telegram", "u-1", "chat-1", '{"update_id": 1}')
        await inbox.ensure_group()
        [delivery] = await inbox.read("test", 1, 100)
        await inbox.dead_letter(Delivery(**{**delivery.__dict__, "attempts": 5}), "the bot token was revoked")
        await redis.aclose()
        return delivery.id

    asyncio.run(park())
    with _admin(console) as client:
        page = client.get("/admin/inbox")
        assert "the bot token was revoked" in page.text and "<td>telegram</td>" in page.text
        dead_id = re.search(r'action="/admin/inbox/dead/([^/]+)/retry"', page.text).group(1)
        done = client.post(f"/admin/inbox/dead/{dead_id}/retry", data={"csrf_token": csrf_of(page.text)})
        assert done.status_code == 303
        after = client.get(done.headers["location"])
        assert f"requeued {dead_id}" in after.text and "the bot token was revoked" not in after.text
