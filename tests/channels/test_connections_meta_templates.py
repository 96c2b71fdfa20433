"""WhatsApp Cloud past the 24-hour window: the refusal in the trace and the console, and a template
picked from the account's approved ones in the console re-opens the conversation."""

from __future__ import annotations

import html

import pytest
from pydantic import SecretStr

from tests.admin_ui.conftest import PASSWORD
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.channels.connections_support import ADMIN, SECRET_KEY, add, webhook_path
from tests.channels.test_handoff import act, console  # noqa: F401  (a fixture: the signed-in console)

TOKEN = "EAAG-whatsapp-cloud-token-0009"
CUSTOMER = f"whatsapp:+{vendors.WA_CUSTOMER}"
TEMPLATES = [
    {"name": "follow_up", "language": "en_US", "status": "APPROVED", "category": "UTILITY", "id": "1",
     "components": [{"type": "BODY", "text": "Hi! Are you still interested in your question? Reply to continue."}]},
    {"name": "order_update", "language": "en_US", "status": "APPROVED", "category": "UTILITY", "id": "2",
     "components": [{"type": "BODY", "text": "Your order {{1}} has shipped."}]},  # variables: not offered
    {"name": "spring_sale", "language": "en_US", "status": "REJECTED", "category": "MARKETING", "id": "3",
     "components": [{"type": "BODY", "text": "Sale!"}]},
]


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "admin_password": SecretStr(PASSWORD), "admin_user": "root"}


def test_a_template_sent_from_the_console_reopens_a_conversation_past_the_24_hour_window(
        client, live, console, fake_meta, fake_openai, stored):  # noqa: F811
    fake_meta.add_account(vendors.WA_PHONE_NUMBER_ID, TOKEN, "whatsapp", verified_name="Shop",
                          display_phone_number="+1 555 0100")
    fake_meta.templates[vendors.WA_BUSINESS_ACCOUNT] = TEMPLATES
    wa = add(client, kind="whatsapp_cloud", name="WhatsApp", credentials={
        "access_token": TOKEN, "phone_number_id": vendors.WA_PHONE_NUMBER_ID, "app_secret": vendors.META_APP_SECRET,
        "waba_id": vendors.WA_BUSINESS_ACCOUNT})
    path = webhook_path(wa)
    fake_meta.outside_window.add(vendors.WA_CUSTOMER)
    assert vendors.post_meta(client, path, vendors.whatsapp_delivery(
        vendors.whatsapp_text("Are you open tomorrow?"))).status_code == 200
    settle(live)
    question, refused = stored.messages(f"{CUSTOMER}@{wa['id']}")
    assert refused.delivery.value == "failed" and "131047" in refused.delivery_error

    page = html.unescape(console.get(f"/admin/conversations/{question.conversation_id}").text)
    assert "WhatsApp refused a free-form reply outside the 24-hour customer-service window (Meta 131047)" in page
    assert "Re-open with a template" in page
    assert "follow_up (en_US): Hi! Are you still interested" in page
    assert "order_update" not in page and "spring_sale" not in page
    [listing] = fake_meta.sent("message_templates")
    assert listing["_path"] == f"{vendors.WA_BUSINESS_ACCOUNT}/message_templates" and listing["status"] == "APPROVED"

    # a template the account does not have is refused, nothing sent
    assert act(console, question.conversation_id, "template", template="spring_sale|en_US").status_code == 422
    assert fake_meta.sent("templates_sent") == []
    answer = act(console, question.conversation_id, "template", template="follow_up|en_US")
    assert answer.status_code == 303 and "done=" in answer.headers["location"]
    [sent] = fake_meta.sent("templates_sent")
    assert sent["to"] == vendors.WA_CUSTOMER and sent["template"] == {"name": "follow_up",
                                                                      "language": {"code": "en_US"}}
    template_message = stored.messages(f"{CUSTOMER}@{wa['id']}")[-1]
    assert template_message.role.value == "operator" and template_message.delivery.value == "delivered"
    assert template_message.text.startswith("[template follow_up (en_US)] Hi! Are you still interested")
    assert client.get(f"/api/connections/{wa['id']}", headers=ADMIN).json()["status"]["waiting_for_template"] == 0

    # the customer answers the template: Meta opens a new 24-hour window, and the assistant's reply goes out
    fake_meta.outside_window.discard(vendors.WA_CUSTOMER)
    assert vendors.post_meta(client, path, vendors.whatsapp_delivery(
        vendors.whatsapp_text("Yes, still interested!"))).status_code == 200
    settle(live)
    reply = stored.messages(f"{CUSTOMER}@{wa['id']}")[-1]
    assert reply.text == "echo: Yes, still interested!" and reply.delivery.value == "delivered"
    assert fake_meta.sent_texts(vendors.WA_CUSTOMER) == ["echo: Yes, still interested!"]


def test_the_channels_screen_adds_a_meta_kind_and_shows_the_url_and_verify_token_to_paste(
        client, live, console, fake_meta):  # noqa: F811
    from tests.admin_ui.conftest import csrf_of

    fake_meta.add_account(vendors.PAGE_ID, "EAAG-page-token-console-1", "page", name="Bike Shop Page")
    listing = console.get("/admin/channels").text
    assert "Add a Facebook Messenger page" in listing and 'id="messenger-page_access_token"' in listing
    assert 'id="messenger-verify_token" name="verify_token" autocomplete' in listing  # optional: not required
    added = console.post("/admin/channels", data={
        "csrf_token": csrf_of(listing), "kind": "messenger", "name": "Page", "agent": "",
        "page_access_token": "EAAG-page-token-console-1", "page_id": vendors.PAGE_ID,
        "app_secret": vendors.META_APP_SECRET, "verify_token": ""})
    assert added.status_code == 303, added.text
    page = console.get(added.headers["location"]).text
    [connection] = [c for c in client.get("/api/connections", headers=ADMIN).json()["connections"]
                    if c["kind"] == "messenger"]
    assert connection["status"]["account"] == "Bike Shop Page"
    assert f'<code id="webhook-url">{connection["webhook_url"]}</code>' in page
    assert f'<code id="verify-token">{connection["verify_token"]}</code>' in page
    assert "EAAG-page-token-console-1" not in page and vendors.META_APP_SECRET not in page
    hub = {"hub.mode": "subscribe", "hub.challenge": "77", "hub.verify_token": connection["verify_token"]}
    assert client.get(webhook_path(connection), params=hub).text == "77"
