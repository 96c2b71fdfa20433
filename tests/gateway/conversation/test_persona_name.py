"""An operator reads a customer's name or number, never a hex persona id."""

from __future__ import annotations

from gateway.core.models import Persona


def test_a_persona_is_shown_by_the_channels_name_or_number():
    assert Persona(identities=["telegram:42"], display_name="Ann Lee").shown_name == "Ann Lee"
    assert Persona(identities=["phone:+15551234567"]).shown_name == "+15551234567"
    assert Persona(identities=["slack:T1/U2"]).shown_name == "Slack user T1/U2"
    web = Persona(identities=["web:3f2a9c"])
    assert web.shown_name == f"Web visitor {web.id[:6]}"
