"""Logging as `switchboard serve` sets it up: the twilio and httpx loggers write warnings only (they log
each request's URL, Twilio's with the account SID); one masked line of ours per Twilio request stays."""

from __future__ import annotations

import logging

from gateway.core.logs import configure_logging
from tests.channels import vendors
from tests.channels.conftest import settle
from tests.fakes import twilio_api


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def test_twilio_and_llm_request_urls_are_not_logged_and_our_line_masks_the_sid(client, live, fake_twilio,
                                                                              fake_openai):
    root = logging.getLogger()
    kept = root.handlers[:], root.level
    lines = _Lines()
    try:
        configure_logging("INFO", False, live.services.settings.secret_values())
        root.addHandler(lines)
        fake_openai.script_reply("We open at nine.")
        assert vendors.post_twilio(client, "/channels/twilio/sms", vendors.sms_params("when do you open?")
                                   ).status_code == 200
        settle(live)
    finally:
        root.handlers[:], level = kept
        root.setLevel(level)
    assert fake_twilio.sent_texts() == ["We open at nine."]
    written = "\n".join(lines.lines)
    assert twilio_api.ACCOUNT_SID not in written
    assert [line for line in lines.lines if line.startswith(("twilio.", "httpx"))] == []
    masked = f"{fake_twilio.url}/2010-04-01/Accounts/••••{twilio_api.ACCOUNT_SID[-4:]}/Messages.json"
    assert f"channels.twilio.rest: twilio POST {masked}: HTTP 201" in lines.lines
    for name in ("twilio", "twilio.http_client", "twilio.async_http_client", "httpx", "httpx2"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING, name
