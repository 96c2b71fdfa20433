"""What each connection kind can show, readable without importing its vendor SDK."""

from __future__ import annotations

from gateway.channel import Capabilities

__all__ = ["CAPABILITIES", "INSTAGRAM", "MESSENGER", "SLACK", "TELEGRAM", "TWILIO_SMS", "WHATSAPP", "WHATSAPP_CLOUD"]

TELEGRAM = Capabilities(max_length=4096, markup="html", typing=True, edit=True)
SLACK = Capabilities(max_length=40_000, markup="mrkdwn")
TWILIO_SMS = Capabilities(max_length=1600, markup="plain", citations="drop")
# WhatsApp takes 4,096 characters in a free-form message body; plain text with *bold* and _italics_ only
WHATSAPP = Capabilities(max_length=4096, markup="plain", citations="drop")

# Meta's own limits: WhatsApp Cloud 4,096 characters of text body, Messenger 2,000, Instagram 1,000 (bytes,
# by Meta's word: the renderer splits by characters, so a reply in a non-Latin script may need shorter parts)
WHATSAPP_CLOUD = Capabilities(max_length=4096, markup="plain", citations="drop", typing=True, templates=True)
MESSENGER = Capabilities(max_length=2000, markup="plain", citations="drop", typing=True)
INSTAGRAM = Capabilities(max_length=1000, markup="plain", citations="drop", typing=True)

CAPABILITIES = {"telegram": TELEGRAM, "slack": SLACK, "twilio_sms": TWILIO_SMS, "whatsapp": WHATSAPP,
                "whatsapp_cloud": WHATSAPP_CLOUD, "messenger": MESSENGER, "instagram": INSTAGRAM}
