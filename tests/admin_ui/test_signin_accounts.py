"""One account, one spelling: the sign-in limit counts the account the password check resolves (no
padding or letter case makes a fresh count), an IPv6 client is counted by its /64, and every change to
an operator named in another letter case reaches that operator's sessions."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, csrf_of, operator_client, sign_in
from tests.admin_ui.test_signin import _burst
from tests.fakes.live_server import LiveServer


@pytest.fixture
def limited(settings):
    """A console behind a trusted proxy (so a test can name the client's address), 3 failures per
    account and per address."""
    configured = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                             "trusted_proxies": "127.0.0.1", "signin_failures_per_account": 3,
                                             "signin_failures_per_address": 3, "signin_window_s": 600})
    with LiveServer(create_app(configured)) as server:
        yield server


def test_a_padded_or_recased_name_counts_against_the_same_account(limited):
    for address in ("203.0.113.1", "203.0.113.2", "203.0.113.3"):  # the account's limit, from three addresses
        assert _burst(limited.url, "root", "wrong password!", 1, address) == [401]
    # Fresh addresses each time, so only the account's count can refuse these: every spelling of root
    # is root's count, even with the right password ...
    for n, name in enumerate(["  ROOT  ", "Root", "root\t", "\u00a0root"]):
        assert _burst(limited.url, name, PASSWORD, 1, f"198.51.100.{n + 10}") == [429], repr(name)
    # ... and a name padded past 64 characters (which used to be cut to "root" + spaces, a fresh count,
    # and then stripped to "root" for the password check) is no account at all: root's password is not
    # checked for it, so it cannot be guessed that way.
    padded = ["root" + " " * 60 + "tail", "root" + "\t" * 60 + "x", "root" + " \t" * 30 + "y"]
    for n, name in enumerate(padded):
        assert _burst(limited.url, name, PASSWORD, 1, f"198.51.100.{n + 20}") == [401], repr(name)


def test_names_that_are_no_account_never_reach_the_password_check_of_one(limited):
    # a name no account can have (too long once trimmed) is refused as a wrong password, never as root
    assert _burst(limited.url, "root" + " " * 60 + "root", PASSWORD, 1, "192.0.2.5") == [401]
    assert _burst(limited.url, "root", PASSWORD, 1, "192.0.2.5") == [303]


def test_an_ipv6_client_is_counted_by_its_64(limited):
    for host in ("1", "2", "3"):  # three accounts, three addresses of one /64
        assert _burst(limited.url, f"user{host}", "wrong password!", 1, f"2001:db8:5:7::{host}") == [401]
    blocked = _burst(limited.url, "root", PASSWORD, 1, "2001:db8:5:7:ffff:1:2:3")
    assert blocked == [429]  # another address of the same /64 waits, even with the right password
    assert _burst(limited.url, "root", PASSWORD, 1, "2001:db8:5:8::1") == [303]  # the next /64 is another client


def _operators_page(admin: httpx.Client) -> str:
    return admin.get("/admin/operators").text


@pytest.mark.parametrize("spelling", ["ALICE", "Alice", " alice "])
def test_a_password_reset_by_another_letter_case_signs_the_operator_out(console, admin, spelling):
    with operator_client(admin, console.url, "alice", "alice's first password") as alice:
        assert "alice (operator)" in alice.get("/admin").text
        answer = admin.post(f"/admin/operators/{spelling}", data={
            "csrf_token": csrf_of(_operators_page(admin)), "action": "password", "password": "alice's new password"})
        assert answer.status_code == 303
        signed_out = alice.get("/admin")
        assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/admin/login")
        assert "password alice" in admin.get(answer.headers["location"]).text  # the account's own name
    with httpx.Client(base_url=console.url, timeout=20) as again:
        assert sign_in(again, "alice", "alice's first password").status_code == 401
        assert sign_in(again, "alice", "alice's new password").status_code == 303


def test_removing_an_operator_by_another_letter_case_ends_its_sessions_in_redis(console, admin):
    with operator_client(admin, console.url, "alice", "alice's first password"):
        redis = console.services.redis_sync
        of_alice = console.services.store.key("console", "sessions-of", "alice")
        assert redis.scard(of_alice) == 1
        answer = admin.post("/admin/operators/ALICE", data={"csrf_token": csrf_of(_operators_page(admin)),
                                                            "action": "remove"})
        assert answer.status_code == 303
        assert redis.exists(of_alice) == 0  # nothing of alice's sessions is left behind
        assert "remove alice" in admin.get(answer.headers["location"]).text
    assert "alice" not in _operators_page(admin)


def test_a_role_change_by_another_letter_case_applies_to_the_account(console, admin):
    with operator_client(admin, console.url, "alice", "alice's first password") as alice:
        assert alice.get("/admin/operators").status_code == 403
        answer = admin.post("/admin/operators/ALICE", data={"csrf_token": csrf_of(_operators_page(admin)),
                                                            "action": "role", "role": "admin"})
        assert answer.status_code == 303 and "role alice" in admin.get(answer.headers["location"]).text
        assert "alice (admin)" in alice.get("/admin").text
