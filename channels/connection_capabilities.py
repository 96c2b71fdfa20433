"""What each connection kind can show, readable without importing its vendor SDK."""

from __future__ import annotations

from gateway.channel import Capabilities

__all__ = ["CAPABILITIES", "SLACK", "TELEGRAM", "TWILIO_SMS", "WHATSAPP"]

TELEGRAM = Capabilities(max_length=4096, markup="html", typing=True, edit=True)
SLACK = Capabilities(max_length=40_000, markup="mrkdwn")
TWILIO_SMS = Capabilities(max_length=1600, markup="plain", citations="drop")
# WhatsApp takes 4,096 characters in a free-form message body; plain text with *bold* and _italics_ only
WHATSAPP = Capabilities(max_length=4096, markup="plain", citations="drop")

CAPABILITIES = {"telegram": TELEGRAM, "slack": SLACK, "twilio_sms": TWILIO_SMS, "whatsapp": WHATSAPP}
