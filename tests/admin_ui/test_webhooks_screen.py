"""Event webhooks from the Insights screen: an admin adds an endpoint (its gateway-made secret shown once,
in the form's answer), sees its delivery log fill as an event fails to reach a receiver that is down,
and deletes it; what the guard or the form refuses is said next to the form."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, csrf_of, sign_in
from tests.channels.conftest import wait_until
from tests.fakes.live_server import LiveServer, free_port
from tests.gateway.insight.test_insights_api import ADMIN, Visitor


@pytest.fixture
def admin(settings) -> Iterator[httpx.Client]:
    tuned = settings.model_copy(update={"admin_password": SecretStr(PASSWORD), "admin_user": "root",
                                        "outbound_allow_hosts": "127.0.0.1", "webhook_backoff_first_s": 0.2,
                                        "webhook_backoff_max_s": 1.0, "webhook_timeout_s": 2.0,
                                        "secret_key": SecretStr(Fernet.generate_key().decode())})
    with LiveServer(create_app(tuned)) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        sign_in(client)
        yield client


def test_an_admin_adds_a_webhook_sees_its_delivery_log_and_deletes_it(admin, fake_openai):
    screen = admin.get("/admin/insights").text
    assert 'action="/admin/insights/webhooks"' in screen and "No webhooks yet." in screen
    assert '<input type="checkbox" name="events" value="message.feedback">' in screen
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there: every delivery fails
    form = {"csrf_token": csrf_of(screen), "url": url, "events": ["message.feedback", "conversation.resolved"],
            "description": "CRM"}
    forged = admin.post("/admin/insights/webhooks", data={**form, "csrf_token": "forged"})
    assert forged.status_code in (400, 403)
    assert admin.get("/api/webhooks", headers=ADMIN).json()["webhooks"] == []

    added = admin.post("/admin/insights/webhooks", data=form)
    assert added.status_code == 201, added.text
    secret = re.search(r"<code data-new-secret>([^<]+)</code>", added.text).group(1)
    [hook] = admin.get("/api/webhooks", headers=ADMIN).json()["webhooks"]
    assert (hook["url"], hook["events"], hook["description"]) == (url, ["message.feedback", "conversation.resolved"],
                                                                   "CRM")
    assert secret.startswith("whsec_") and hook["secret"] == f"{secret[:6]}…{secret[-4:]}"
    assert f'data-webhook="{hook["id"]}"' in added.text
    later = admin.get("/admin/insights").text
    assert secret not in later and "data-new-secret" not in later  # shown once

    own = admin.post("/admin/insights/webhooks", data={**form, "secret": "my own secret of 24 chars"})
    assert own.status_code == 201 and "data-new-secret" not in own.text  # the admin's own secret: not echoed
    refused = admin.post("/admin/insights/webhooks", data={**form, "url": "http://10.1.2.3/hook"})
    assert refused.status_code == 422 and 'role="alert"' in refused.text
    assert 'value="http://10.1.2.3/hook"' in refused.text  # what was typed is kept
    no_events = admin.post("/admin/insights/webhooks", data={**form, "events": []})
    assert no_events.status_code == 422 and "events" in no_events.text
    assert len(admin.get("/api/webhooks", headers=ADMIN).json()["webhooks"]) == 2

    visitor = Visitor(admin)  # a 👎 makes a message.feedback event; its delivery fails and is logged
    assert visitor.rate(visitor.say("When do you open?"), "down").status_code == 200

    def logged() -> str | None:
        page = admin.get("/admin/insights").text
        block = page.split(f'data-webhook="{hook["id"]}"', 1)[1].split("data-webhook=", 1)[0]
        return block if "<table data-deliveries>" in block else None

    block = wait_until(logged, 15, "a delivery attempt in the log")
    assert re.search(r"<td>message\.feedback</td><td>1</td><td>failed</td>", block), block

    page = admin.get("/admin/insights").text
    deleted = admin.post(f"/admin/insights/webhooks/{hook['id']}/delete", data={"csrf_token": csrf_of(page)})
    assert deleted.status_code == 303
    after = admin.get(deleted.headers["location"]).text
    assert "Done: webhook deleted" in after and f'data-webhook="{hook["id"]}"' not in after
    assert [h["id"] for h in admin.get("/api/webhooks", headers=ADMIN).json()["webhooks"]] != [hook["id"]]
    assert len(admin.get("/api/webhooks", headers=ADMIN).json()["webhooks"]) == 1
