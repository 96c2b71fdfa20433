"""The Channels screen without a browser: admins only, CSRF checked, refused input shown with what
was typed (secrets not), outcomes from a fixed list."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.admin_ui.conftest import csrf_of, operator_client, sign_in
from tests.channels.connections_support import (  # noqa: F401  (fixtures)
    ADMIN,
    channels_console,
    telegram_only,
)
from tests.channels.mail_support import credentials, dovecot, mailbox, smtp  # noqa: F401  (fixtures)


@pytest.fixture
def console(channels_console):  # noqa: F811
    return channels_console


@pytest.fixture
def fake_telegram(telegram_only):  # noqa: F811
    return telegram_only


@pytest.fixture
def admin(console) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        sign_in(client)
        yield client


def test_an_operator_cannot_see_or_change_channels(admin, console):
    with operator_client(admin, console.url) as operator:
        assert operator.get("/admin/channels").status_code == 403
        csrf = csrf_of(operator.get("/admin").text)
        refused = operator.post("/admin/channels", data={"csrf_token": csrf, "kind": "telegram", "name": "x",
                                                         "bot_token": "1:abc"})
        assert refused.status_code == 403
    assert "Channels" in admin.get("/admin").text
    assert admin.get("/api/connections", headers=ADMIN).json()["connections"] == []


def test_a_form_without_its_csrf_token_changes_nothing(admin, fake_telegram):
    token = fake_telegram.add_bot(7500001, "csrf_bot")
    answer = admin.post("/admin/channels", data={"kind": "telegram", "name": "x", "bot_token": token})
    assert answer.status_code == 403 and "Form expired" in answer.text
    assert fake_telegram.recorder.calls == []
    assert admin.get("/api/connections", headers=ADMIN).json()["connections"] == []


def test_a_refused_token_is_shown_next_to_the_form_without_the_token(admin, fake_telegram):
    csrf = csrf_of(admin.get("/admin/channels").text)
    answer = admin.post("/admin/channels", data={"csrf_token": csrf, "kind": "telegram", "name": "Typo bot",
                                                 "bot_token": "123:not-a-real-token-abc", "agent": ""})
    assert answer.status_code == 422
    assert "Telegram refused the token" in answer.text and 'value="Typo bot"' in answer.text
    assert "not-a-real-token" not in answer.text
    assert admin.get("/admin/channels?done=%3Cb%3Eyou+were+hacked").text.count("you were hacked") == 0


def test_edit_keeps_the_stored_token_when_the_field_is_empty(admin, fake_telegram):
    token = fake_telegram.add_bot(7500002, "edit_bot")
    csrf = csrf_of(admin.get("/admin/channels").text)
    added = admin.post("/admin/channels", data={"csrf_token": csrf, "kind": "telegram", "name": "Before",
                                                "bot_token": token, "agent": ""})
    assert added.status_code == 303
    path = added.headers["location"].split("?")[0]
    saved = admin.post(path, data={"csrf_token": csrf, "action": "save", "name": "After", "agent": "",
                                   "bot_token": ""})
    assert saved.status_code == 303
    shown = admin.get(path).text
    assert "<h1>After</h1>" in shown and f"••••{token[-4:]}" in shown and token not in shown
    assert len(fake_telegram.recorder.received("getMe")) == 1  # nothing to verify again: same token


@pytest.mark.parametrize("token", ["not-a-token", "123:abc def", "12a:AAF-token_part"])
def test_a_malformed_token_is_shown_next_to_the_form_not_a_500(admin, fake_telegram, token):
    csrf = csrf_of(admin.get("/admin/channels").text)
    answer = admin.post("/admin/channels", data={"csrf_token": csrf, "kind": "telegram", "name": "Typo bot",
                                                 "bot_token": token, "agent": ""})
    assert answer.status_code == 422
    assert "credentials.bot_token: not a Telegram bot token" in answer.text and 'value="Typo bot"' in answer.text
    assert token not in answer.text and fake_telegram.recorder.calls == []
    assert admin.get("/api/connections", headers=ADMIN).json()["connections"] == []


def test_the_agent_choice_names_the_channels_agent_once(admin):
    made = admin.post("/v1/agents", headers=ADMIN, json={"name": "bookings", "displayName": "Bookings desk"})
    assert made.status_code == 201, made.text
    page = admin.get("/admin/channels").text
    select = page.split('name="agent"')[1].split("</select>")[0]
    choices = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select)
    assert choices == [("", "The channels' agent"), (made.json()["id"], "Bookings desk (bookings)")]


def test_a_mailbox_is_added_from_its_form_and_shown_without_a_webhook(admin, mailbox, smtp):  # noqa: F811
    screen = admin.get("/admin/channels").text
    assert "Add a Support mailbox (IMAP and SMTP)" in screen
    for field in ("imap_host", "imap_port", "smtp_host", "smtp_port", "username", "password", "address", "tls"):
        assert f'id="email-{field}"' in screen
    assert re.search(r'id="email-password" name="password" required autocomplete="off"\s+type="password"', screen)
    typed = credentials(mailbox, smtp)
    added = admin.post("/admin/channels", data={"csrf_token": csrf_of(screen), "kind": "email", "name": "Support",
                                                "agent": "", **typed}, follow_redirects=True)
    assert added.status_code == 200 and "Connection added." in added.text
    assert "No webhook: the gateway reads this mailbox over IMAP" in added.text
    assert typed["password"] not in added.text and "••••" + typed["password"][-4:] in added.text
    assert "none: its mailbox is read over IMAP" in admin.get("/admin/channels").text
