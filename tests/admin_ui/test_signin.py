"""Signing in to the console and what protects it: cookie flags, one message for any wrong
credential, sign-in limits, CSRF on every state change, roles enforced on the server."""

from __future__ import annotations

import asyncio

import httpx

from tests.admin_ui.conftest import PASSWORD, csrf_of, sign_in


def _client(console) -> httpx.Client:
    return httpx.Client(base_url=console.url, timeout=20)


def test_pages_need_a_session_and_sign_in_returns_to_the_page(console):
    with _client(console) as client:
        first = client.get("/admin/operators")
        assert first.status_code == 303 and first.headers["location"] == "/admin/login?next=/admin/operators"
        form = client.get(first.headers["location"])
        assert 'for="username">Username<' in form.text and 'for="password">Password<' in form.text
        assert ">Sign in</button>" in form.text
        csp = form.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert form.headers["x-content-type-options"] == "nosniff"
        token = form.text.split('name="login_token" value="')[1].split('"')[0]
        done = client.post("/admin/login", data={"username": "root", "password": PASSWORD, "login_token": token,
                                                  "next": "/admin/operators"})
        assert done.status_code == 303 and done.headers["location"] == "/admin/operators"
        cookie = next(h for h in done.headers.get_list("set-cookie") if h.startswith("sb_console="))
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/admin" in cookie
        assert "Secure" not in cookie  # the public URL is http here; https makes it Secure
        page = client.get("/admin/operators")
        assert page.status_code == 200 and "root (admin)" in page.text


def test_a_wrong_password_or_username_says_only_that(console):
    with _client(console) as client:
        wrong_password = sign_in(client, "root", "not the password")
        unknown_user = sign_in(client, "nobody", "not the password")
        for resp in (wrong_password, unknown_user):
            assert resp.status_code == 401 and "Invalid username or password" in resp.text
            assert "sb_console=" not in resp.headers.get("set-cookie", "")
        assert 'value="nobody"' in unknown_user.text  # what was typed is kept


def test_failed_sign_ins_are_limited_per_account(console):
    limit = console.services.settings.signin_failures_per_account
    with _client(console) as client:
        for _ in range(limit):
            assert sign_in(client, "root", "wrong password!").status_code == 401
        blocked = sign_in(client, "root", PASSWORD)  # even the right password waits out the window
        assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 0
        assert "Too many failed sign-ins" in blocked.text


def test_sign_out_ends_the_session_everywhere_and_needs_the_csrf_token(console):
    with _client(console) as client:
        sign_in(client)
        overview = client.get("/admin")
        cookie = client.cookies.get("sb_console")
        assert client.post("/admin/logout").status_code == 403  # no CSRF token: refused, still signed in
        assert client.get("/admin").status_code == 200
        assert client.post("/admin/logout", data={"csrf_token": csrf_of(overview.text)}).status_code == 303
    with httpx.Client(base_url=console.url, cookies={"sb_console": cookie}) as replay:
        assert replay.get("/admin").status_code == 303  # the old cookie is dead on the server


def test_operators_are_managed_by_admins_only(console):
    with _client(console) as admin:
        sign_in(admin)
        csrf = csrf_of(admin.get("/admin/operators").text)
        short = admin.post("/admin/operators", data={"csrf_token": csrf, "username": "ann", "password": "short",
                                                      "role": "operator"})
        assert short.status_code == 422 and "password" in short.text and 'value="ann"' in short.text
        added = admin.post("/admin/operators", data={"csrf_token": csrf, "username": "ann",
                                                      "password": "ann's long password", "role": "operator"})
        assert added.status_code == 303
        no_csrf = admin.post("/admin/operators", data={"username": "eve", "password": "eve's long password"})
        assert no_csrf.status_code == 403
        last_admin = admin.post("/admin/operators/root", data={"csrf_token": csrf, "action": "role",
                                                                "role": "operator"})
        assert last_admin.status_code == 422 and "last admin" in last_admin.text
    with _client(console) as operator:
        assert sign_in(operator, "ann", "ann's long password").status_code == 303
        overview = operator.get("/admin")
        assert "ann (operator)" in overview.text and "/admin/operators" not in overview.text
        assert operator.get("/admin/operators").status_code == 403
        refused = operator.post("/admin/operators", data={"csrf_token": csrf_of(overview.text), "username": "eve",
                                                          "password": "eve's long password", "role": "admin"})
        assert refused.status_code == 403
    names = [op.username for op in asyncio.run(_all(console))]
    assert names == ["ann", "root"]


async def _all(console):
    from redis.asyncio import Redis

    from gateway.conversation.operators import Operators
    from gateway.conversation.store import RedisStore

    redis = Redis.from_url(console.services.settings.redis_url)
    try:
        return await Operators(RedisStore(redis, console.services.settings.agent_id)).all()
    finally:
        await redis.aclose()


def test_switchboard_admin_create_user_makes_an_account_that_can_sign_in(console, monkeypatch, capsys):
    import io

    from gateway.cli.main import main

    settings = console.services.settings
    monkeypatch.setenv("SWITCHBOARD_REDIS_URL", settings.redis_url)
    monkeypatch.setenv("SWITCHBOARD_AGENT_ID", settings.agent_id)
    monkeypatch.setattr("sys.stdin", io.StringIO("bob's long password\n"))
    assert main(["admin", "create-user", "Bob", "--role", "operator", "--password-stdin"]) == 0
    assert capsys.readouterr().out.strip() == "created operator bob"
    monkeypatch.setattr("sys.stdin", io.StringIO("another long password\n"))
    assert main(["admin", "create-user", "bob", "--password-stdin"]) == 1
    assert "already exists" in capsys.readouterr().err
    with _client(console) as client:
        assert sign_in(client, "bob", "bob's long password").status_code == 303


def test_failed_sign_ins_are_limited_per_address_on_every_replica(settings):
    from pydantic import SecretStr

    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "signin_failures_per_address": 3, "signin_window_s": 60})
    with LiveServer(create_app(configured)) as one, LiveServer(create_app(configured)) as two, \
            httpx.Client(base_url=one.url, timeout=20) as a, httpx.Client(base_url=two.url, timeout=20) as b:
        assert [sign_in(a, name, "wrong password!").status_code for name in ("ann", "bob")] == [401, 401]
        assert sign_in(b, "cid", "wrong password!").status_code == 401  # three accounts, one address
        blocked = sign_in(b, "root", PASSWORD)
        assert blocked.status_code == 429 and 1 <= int(blocked.headers["retry-after"]) <= 60
        assert "Too many failed sign-ins. Try again in" in blocked.text and 'value="root"' in blocked.text
        assert 'switchboard_rate_limited_total{limit="signin-address"} 1.0' in b.get("/metrics").text


def _burst(url: str, username: str, password: str, count: int, address: str) -> list[int]:
    """``count`` sign-ins at once from ``address`` (X-Forwarded-For through a trusted proxy)."""
    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=url, timeout=60,
                                     limits=httpx.Limits(max_connections=count)) as client:
            form = await client.get("/admin/login")
            token = form.text.split('name="login_token" value="')[1].split('"')[0]
            headers = {"cookie": f"sb_console_login={token}", "x-forwarded-for": address}
            client.cookies.clear()  # each answer sets a new form cookie: send the first one explicitly

            async def one() -> int:
                answer = await client.post("/admin/login", headers=headers, data={
                    "username": username, "password": password, "login_token": token, "next": "/admin"})
                return answer.status_code

            return list(await asyncio.gather(*(one() for _ in range(count))))
    return asyncio.run(run())


def test_a_burst_of_wrong_passwords_checks_at_most_the_limit_and_the_admin_still_signs_in(settings):
    from pydantic import SecretStr

    from gateway.http.app import create_app
    from tests.fakes.live_server import LiveServer

    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "trusted_proxies": "127.0.0.1", "signin_failures_per_account": 5,
                                             "signin_failures_per_address": 1000, "signin_window_s": 600})
    with LiveServer(create_app(configured)) as server:
        assert _burst(server.url, "root", PASSWORD, 1, "198.51.100.7") == [303]  # the admin's usual address
        for count, attacker in ((40, "203.0.113.5"), (200, "203.0.113.6")):
            answers = _burst(server.url, "root", "wrong password!", count, attacker)
            # Only the account's first five attempts reach argon2; the rest never check a password.
            assert answers.count(401) == (5 if count == 40 else 0)
            assert answers.count(429) == count - answers.count(401)
        assert _burst(server.url, "root", PASSWORD, 1, "192.0.2.99") == [429]  # a new address waits
        assert _burst(server.url, "root", PASSWORD, 1, "198.51.100.7") == [303]  # the known one signs in
        assert _burst(server.url, "root", "wrong password!", 1, "198.51.100.7") == [401]  # ... only rightly
