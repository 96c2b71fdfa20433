"""Log lines as `switchboard serve` writes them: a configured secret that reaches one anyway is masked."""

from __future__ import annotations

import logging

from pydantic import SecretStr

from gateway.core.logs import configure_logging
from tests.conftest import make_settings


def test_a_configured_secret_in_a_log_line_is_masked(capfd):
    settings = make_settings(llm_api_key=SecretStr("sk-live-abcdef123456"),
                             feed_secrets={"stock": SecretStr("feed-secret-987654")})
    root = logging.getLogger()
    kept = root.handlers[:], root.level
    try:
        for as_json in (False, True):
            configure_logging("INFO", as_json, settings.secret_values())
            log = logging.getLogger("gateway.turn.llm")
            log.warning("provider said: Incorrect API key provided: %s", "sk-live-abcdef123456")
            try:
                raise RuntimeError("signature with feed-secret-987654 failed")
            except RuntimeError:
                log.exception("feed failed")
    finally:
        root.handlers[:], level = kept
        root.setLevel(level)
    written = capfd.readouterr().err
    assert written.count("Incorrect API key provided: [redacted]") == 2
    assert "RuntimeError: signature with [redacted] failed" in written
    assert "abcdef123456" not in written and "987654" not in written
