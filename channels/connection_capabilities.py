"""What each connection kind can show, readable without importing its vendor SDK."""

from __future__ import annotations

from gateway.channel import Capabilities, Settings

__all__ = ["CAPABILITIES", "INSTAGRAM", "MESSENGER", "SLACK", "TEAMS", "TELEGRAM", "TWILIO_SMS", "TWILIO_VOICE",
           "WHATSAPP", "WHATSAPP_CLOUD", "relay_capabilities"]

TELEGRAM = Capabilities(max_length=4096, markup="html", typing=True, edit=True)
SLACK = Capabilities(max_length=40_000, markup="mrkdwn")
TWILIO_SMS = Capabilities(max_length=1600, markup="plain", citations="drop")
# WhatsApp takes 4,096 characters in a free-form message body; plain text with *bold* and _italics_ only
WHATSAPP = Capabilities(max_length=4096, markup="plain", citations="drop")

# a call by Gather: spoken, no markup; knowledge-base context as a queued job
TWILIO_VOICE = Capabilities(max_length=4000, markup="plain", voice=True, rag_mode="queued", handoff=False,
                            citations="drop")
# Meta's own limits: WhatsApp Cloud 4,096 characters of text body, Messenger 2,000, Instagram 1,000 (bytes,
# by Meta's word: the renderer splits by characters, so a reply in a non-Latin script may need shorter parts)
WHATSAPP_CLOUD = Capabilities(max_length=4096, markup="plain", citations="drop", typing=True, templates=True)
MESSENGER = Capabilities(max_length=2000, markup="plain", citations="drop", typing=True)
INSTAGRAM = Capabilities(max_length=1000, markup="plain", citations="drop", typing=True)
# Teams takes about 28 KB in one activity (text and cards together) and shows a subset of Markdown; the
# footnoted sources become an Adaptive Card under the reply (channels/teams/cards.py)
TEAMS = Capabilities(max_length=20_000, markup="markdown", typing=True)

CAPABILITIES = {"telegram": TELEGRAM, "slack": SLACK, "twilio_sms": TWILIO_SMS, "twilio_voice": TWILIO_VOICE,
                "whatsapp": WHATSAPP, "whatsapp_cloud": WHATSAPP_CLOUD, "messenger": MESSENGER, "instagram": INSTAGRAM,
                "teams": TEAMS}


def relay_capabilities(settings: Settings) -> Capabilities:
    """A call over ConversationRelay (channel ``twilio_relay``): streamed; a person when a number is set."""
    return Capabilities(max_length=4000, markup="plain", voice=True, streaming=True,
                        rag_mode=settings.twilio_relay_rag_mode, handoff=bool(settings.twilio_handoff_number),
                        citations="drop")
