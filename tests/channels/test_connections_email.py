"""E-mail connections against real peers: Dovecot as the mailbox (IMAP IDLE), aiosmtpd as the SMTP server.

A mail put in the mailbox is answered by SMTP in its thread (In-Reply-To, References, Re:), the
model reading only the new part; the customer's answer to our reply continues the same conversation;
auto-replies, bounces, lists, our own address and our own mail are never answered, each counted.
"""

from __future__ import annotations

import time
from email.message import EmailMessage
from email.utils import make_msgid

import pytest
from pydantic import SecretStr

from channels.media_answer import MEDIA_REPLY
from gateway.core.models import Role
from tests.channels.conftest import metric, settle, wait_until
from tests.channels.connections_support import ADMIN, SECRET_KEY, add
from tests.channels.mail_support import CUSTOMER, credentials, mail
from tests.fakes.mail_server import PASSWORD, USER, Dovecot, SmtpReceiver, TestCertificate

QUOTED = "We have the red one in stock, shipped within two days."


@pytest.fixture
def channel_overrides() -> dict:
    return {"secret_key": SecretStr(SECRET_KEY), "email_poll_s": 1.0}


def test_a_mail_is_answered_in_its_thread_and_the_answer_to_it_continues_the_conversation(
        client, live, mailbox, smtp, fake_openai, stored):
    box = add(client, kind="email", name="Support", credentials=credentials(mailbox, smtp))
    assert box["credentials"]["password"] == "••••" + PASSWORD[-4:] and box["webhook_url"] is None
    assert box["status"]["account"] == USER and box["state"] == "enabled"

    first = mail(f"Do you have the bike in blue?\n\nThanks,\nAda\n\nOn Tue, 3 Mar 2026 at 10:00, Shop <{USER}> "
                 f"wrote:\n> {QUOTED}\n")
    first.add_attachment(b"%PDF-1.4 an old receipt", maintype="application", subtype="pdf", filename="receipt.pdf")
    mailbox.deliver(first)
    [reply] = wait_until(lambda: smtp.messages, 20, "the reply by SMTP")
    assert reply["In-Reply-To"] == first["Message-ID"]
    assert reply["References"] == first["Message-ID"]
    assert reply["Subject"] == "Re: Blue bike?" and reply["To"] == f"Ada Lovelace <{CUSTOMER}>"
    assert reply["From"] == USER and reply["Auto-Submitted"] == "auto-replied"
    assert reply.get_content().strip().startswith("echo: Subject: Blue bike?")
    [request] = fake_openai.chat_requests()
    prompt = str(request["body"]["messages"])
    assert "Do you have the bike in blue?" in prompt
    assert QUOTED not in prompt and "wrote:" not in prompt  # the quoted history is not the model's to read
    assert 'receipt.pdf" (application/pdf, 23 bytes): not read' in prompt  # recorded, not read

    # the customer answers our reply: the same thread, the same conversation
    mailbox.deliver(mail("And in size L?", subject="Re: Blue bike?", reply_to=reply))
    wait_until(lambda: len(smtp.messages) == 2, 20, "the second reply")
    second = smtp.messages[1]
    assert second["In-Reply-To"] != reply["Message-ID"]  # a reply to the customer's new mail...
    assert second["References"].split()[:2] == [first["Message-ID"], reply["Message-ID"]]  # ...in the thread
    assert second["Subject"] == "Re: Blue bike?" and "echo: And in size L?" in second.get_content()

    # a new thread is a new conversation
    mailbox.deliver(mail("What are your opening hours?", subject="Hours"))
    wait_until(lambda: len(smtp.messages) == 3, 20, "the third reply")
    settle(live)
    messages = stored.messages(f"email:{CUSTOMER}@{box['id']}")
    assert [m.role for m in messages] == [Role.USER, Role.AGENT] * 3
    conversations = [m.conversation_id for m in messages]
    assert conversations[0] == conversations[3] != conversations[4] == conversations[5]
    assert messages[0].channel == "email"
    assert QUOTED not in stored.all_values()
    assert len(fake_openai.chat_requests()) == 3


def test_machines_lists_bounces_and_our_own_mail_are_never_answered(client, live, mailbox, smtp, fake_openai):
    box = add(client, kind="email", name="Support", credentials=credentials(mailbox, smtp))
    mailbox.deliver(mail("I am out of office until Monday.", Auto_Submitted="auto-replied"))
    mailbox.deliver(mail("Weekly newsletter", List_Id="<news.example.org>"))
    mailbox.deliver(mail("Sale!", Precedence="bulk"))
    bounce = mail("Delivery to the following recipient failed permanently", sender="MAILER-DAEMON@example.org",
                  Return_Path="<>")
    mailbox.deliver(bounce)
    report = EmailMessage()
    report["From"], report["To"], report["Subject"] = "postmaster@example.org", USER, "Undelivered Mail"
    report["Message-ID"] = make_msgid(domain="example.org")
    report.set_content("The mail could not be delivered.")
    report.make_mixed()
    report.set_type("multipart/report")
    mailbox.deliver(report)
    mailbox.deliver(mail("a copy of our own mail", sender=USER))
    mailbox.deliver(mail("Is the shop open on Sunday?"))  # the one a person wrote
    [reply] = wait_until(lambda: smtp.messages, 20, "the one reply")
    assert "Sunday" in reply.get_content()
    mailbox.deliver(reply)  # our own reply, come back (a copy, a loop through a forward)
    time.sleep(2.5)  # the listener has seen it (new mail wakes IDLE at once)
    assert len(smtp.messages) == 1 and len(fake_openai.chat_requests()) == 1
    counted = {reason: metric(client, f'switchboard_rejected_requests_total{{channel="email",reason="{reason}"}}')
               for reason in ("auto_reply", "mailing_list", "bulk", "bounce", "own_address", "own_mail")}
    assert counted == {"auto_reply": 1, "mailing_list": 1, "bulk": 1, "bounce": 2, "own_address": 1, "own_mail": 1}
    assert box["id"]


def test_refused_credentials_are_a_422_with_the_servers_reason_and_nothing_is_stored(client, mailbox, smtp):
    wrong = client.post("/api/connections", headers=ADMIN, json={
        "kind": "email", "name": "Support", "credentials": credentials(mailbox, smtp, password="not-the-password")})
    assert wrong.status_code == 422, wrong.text
    assert "AUTHENTICATIONFAILED" in wrong.json()["message"] and "not-the-password" not in wrong.text
    bad_tls = client.post("/api/connections", headers=ADMIN, json={
        "kind": "email", "name": "Support", "credentials": credentials(mailbox, smtp, tls="tls1.3")})
    assert bad_tls.status_code == 422 and "credentials.tls" in bad_tls.json()["message"]
    listed = client.get("/api/connections", headers=ADMIN).json()
    assert [c for c in listed["connections"] if c["kind"] == "email"] == []


HTML_REPLY = ('<html><body><div dir="ltr">Great, I will take the <b>blue</b> one.</div><br>'
              '<div class="gmail_quote"><div>On Tue, 3 Mar 2026 at 10:00, Shop &lt;support@shop.test&gt; wrote:</div>'
              f'<blockquote class="gmail_quote">{QUOTED}</blockquote></div></body></html>')


@pytest.mark.parametrize("channel_overrides", [{"secret_key": SecretStr(SECRET_KEY), "email_poll_s": 1.0,
                                                "email_max_bytes": 4000}])
def test_an_html_mail_is_read_without_its_quote_and_a_mail_over_the_cap_by_its_headers_only(
        client, live, mailbox, smtp, fake_openai, stored):
    box = add(client, kind="email", name="Support", credentials=credentials(mailbox, smtp))
    html = mail("", subject="Re: Blue bike?", In_Reply_To="<earlier-reply@shop.test>")
    html.set_content(HTML_REPLY, subtype="html")
    mailbox.deliver(html)
    [reply] = wait_until(lambda: smtp.messages, 20, "the reply to the HTML mail")
    assert reply.get_content().strip() == "echo: Great, I will take the blue one."
    assert QUOTED not in str(fake_openai.chat_requests()[0]["body"]["messages"])

    big = mail("Here are the photos of the damage.", subject="Damage")
    big.add_attachment(b"\xff" * 6000, maintype="image", subtype="jpeg", filename="damage.jpg")
    mailbox.deliver(big)
    wait_until(lambda: len(smtp.messages) == 2, 20, "the answer to the mail over the cap")
    answer = smtp.messages[1]
    assert answer["In-Reply-To"] == big["Message-ID"] and answer["Subject"] == "Re: Damage"
    assert answer.get_content().strip() == MEDIA_REPLY  # not the model's: it read nothing
    assert len(fake_openai.chat_requests()) == 1
    settle(live)
    said = [m.text for m in stored.messages(f"email:{CUSTOMER}@{box['id']}") if m.role is Role.USER]
    assert said[1].startswith("Subject: Damage\n\n[a mail of ") and "over the 4000-byte limit" in said[1]
    assert "photos of the damage" not in said[1]  # its body was not fetched


def test_a_server_without_idle_is_polled(client, live, smtp, fake_openai):
    server = Dovecot(idle=False).start()
    try:
        smtp.clear()
        add(client, kind="email", name="Polled", credentials=credentials(server, smtp))
        time.sleep(2.5)  # the listener has had its first look (an empty mailbox) and waits
        server.deliver(mail("Do you open on holidays?", subject=""))
        [reply] = wait_until(lambda: smtp.messages, 20, "the reply found by polling")
        assert reply.get_content().strip() == "echo: Do you open on holidays?"
    finally:
        server.stop()


def test_a_relay_of_our_own_network_without_auth_sends_the_reply_without_a_login(client, live, mailbox, fake_openai):
    relay = SmtpReceiver(relay=True).start()  # plain SMTP on 127.0.0.1, no AUTH in its EHLO answer
    try:
        box = add(client, kind="email", name="Relayed", credentials=credentials(mailbox, relay))
        assert box["state"] == "enabled" and box["status"]["account"] == USER and box["status"]["last_error"] is None
        mailbox.deliver(mail("Can I pick the bike up in the shop?", subject=""))
        [reply] = wait_until(lambda: relay.messages, 20, "the reply through the relay")
        assert reply.get_content().strip() == "echo: Can I pick the bike up in the shop?"
        assert relay.recorder.envelopes == [(USER, [CUSTOMER])]
    finally:
        relay.stop()


def test_starttls_and_implicit_tls_mailboxes(client, live, fake_openai, tmp_path, monkeypatch):
    certificate = TestCertificate(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert))  # the servers' certificate is trusted, no other
    server = Dovecot(tls=certificate).start()
    starttls, implicit = SmtpReceiver(tls=certificate).start(), SmtpReceiver(tls=certificate, implicit=True).start()
    try:
        upgraded = add(client, kind="email", name="STARTTLS", credentials=credentials(server, starttls,
                                                                                      tls="starttls"))
        assert upgraded["status"]["account"] == USER  # IMAP and SMTP logins after STARTTLS
        server.deliver(mail("Is the helmet included?", subject=""))
        [reply] = wait_until(lambda: starttls.messages, 20, "the reply over STARTTLS")
        assert reply.get_content().strip() == "echo: Is the helmet included?"
        client.patch(f"/api/connections/{upgraded['id']}", headers=ADMIN, json={"enabled": False})

        tls = add(client, kind="email", name="TLS", credentials={
            **credentials(server, implicit, tls="ssl"), "imap_port": str(server.tls_port)})
        assert tls["status"]["account"] == USER and tls["enabled"]  # IMAPS and SMTPS logins
        # a certificate nobody vouches for is the operator's to fix: a 422 naming the server, nothing stored
        before = {c["id"] for c in client.get("/api/connections", headers=ADMIN).json()["connections"]}
        other = SmtpReceiver(tls=TestCertificate(tmp_path / "other")).start()  # signed by a CA not trusted here
        try:
            untrusted_smtp = client.post("/api/connections", headers=ADMIN, json={
                "kind": "email", "name": "Untrusted", "credentials": credentials(server, other, tls="starttls")})
        finally:
            other.stop()
        monkeypatch.delenv("SSL_CERT_FILE")
        untrusted_imap = client.post("/api/connections", headers=ADMIN, json={
            "kind": "email", "name": "Untrusted", "credentials": credentials(server, starttls, tls="starttls")})
        for protocol, untrusted in (("SMTP", untrusted_smtp), ("IMAP", untrusted_imap)):
            assert untrusted.status_code == 422, untrusted.text
            said = untrusted.json()["message"]
            assert f"{protocol} 127.0.0.1: the server's TLS certificate was not trusted" in said
            assert "self-signed certificate" in said and PASSWORD not in untrusted.text
        after = {c["id"] for c in client.get("/api/connections", headers=ADMIN).json()["connections"]}
        assert after == before
    finally:
        starttls.stop()
        implicit.stop()
        server.stop()
