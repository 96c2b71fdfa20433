"""A connection's one state and the sentence that says it, the same on the API and in the console.

Derived from the record and its status, never stored apart from them, so every action that changes
either (a save, a check with the vendor, enabling, disabling) changes what is shown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

__all__ = ["State", "VENDORS", "describe"]

State = Literal["environment", "enabled", "disabled", "check_failed"]
VENDORS = {"telegram": "Telegram", "slack": "Slack", "twilio_sms": "Twilio", "twilio_voice": "Twilio",
           "whatsapp": "Twilio", "whatsapp_cloud": "Meta", "messenger": "Meta", "instagram": "Meta",
           "teams": "Microsoft"}


def _at(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def describe(kind: str, *, enabled: bool, read_only: bool, verified_at: datetime | None,
             check_error: str | None) -> tuple[State, str]:
    """``(state, message)``. ``check_error`` is why the last check with the vendor failed (a failed
    check leaves the connection disabled; one that passes clears it)."""
    vendor = VENDORS.get(kind, "the vendor")
    if read_only:
        return "environment", "Configured by environment variables; read-only here."
    if not enabled and check_error:
        return "check_failed", (f"Disabled: the check with {vendor} failed ({check_error}). "
                                "Fix the cause, then verify again to enable it.")
    if not enabled:
        return "disabled", "Disabled: its webhook answers 404."
    if verified_at is None:
        return "enabled", f"Enabled; not checked with {vendor}."
    accepted = "the token and registered the webhook URL" if kind == "telegram" else "the credentials"
    return "enabled", f"Enabled: {vendor} accepted {accepted} at {_at(verified_at)}."
