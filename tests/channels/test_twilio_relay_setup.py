"""A call's ``setup`` resolves the caller while the welcome greeting plays: the first prompt's turn finds
the caller's persona in its arrival round trip instead of creating it on the caller's time."""

from __future__ import annotations

import pytest

from gateway.core.models import Role
from tests.channels import vendors
from tests.channels.conftest import wait_until
from tests.channels.relay_client import prompt, setup, socket, tokens

NEW_CALLER, NEW_CALL = "+15557770009", "CA" + "9" * 32


@pytest.fixture
def channel_overrides() -> dict:
    return {"twilio_voice_mode": "relay", "retrieval_strategy": "hybrid"}


def test_setup_resolves_a_new_caller_before_the_first_prompt(live, fake_openai, stored):
    fake_openai.script_reply("Yes, every Saturday at half past ten.")
    with socket(live, NEW_CALL, NEW_CALLER) as ws:
        assert stored.persona_id(f"phone:{NEW_CALLER}") is None
        setup(ws, NEW_CALL, NEW_CALLER)
        wait_until(lambda: stored.persona_id(f"phone:{NEW_CALLER}") is not None, timeout=5)
        persona = stored.persona_id(f"phone:{NEW_CALLER}")
        assert stored.messages(f"phone:{NEW_CALLER}") == []  # nothing said yet: no conversation, no message
        prompt(ws, "Do you offer guided tours?")
        got = tokens(ws)
    assert got and got[-1][1]["last"] is True
    messages = stored.messages(f"phone:{NEW_CALLER}")
    assert [m.role for m in messages] == [Role.USER, Role.AGENT]
    assert stored.persona_id(f"phone:{NEW_CALLER}") == persona  # the turn used the persona setup made


def test_a_prompt_right_after_setup_waits_for_the_one_resolution(live, fake_openai, stored):
    fake_openai.script_reply("Yes.")
    with socket(live) as ws:
        setup(ws)
        prompt(ws, "Do you offer guided tours?")  # no pause: the turn and setup's resolution race
        got = tokens(ws)
    assert got and got[-1][1]["last"] is True
    depth = stored.services.store.key("persona", "x").count(":")
    personas = [k for k in stored.keys("persona:*") if k.count(":") == depth]  # the records, not their indexes
    assert personas == [stored.services.store.key("persona", stored.persona_id(f"phone:{vendors.CALLER}"))]
    assert stored.messages(f"phone:{vendors.CALLER}")[0].text == "Do you offer guided tours?"
