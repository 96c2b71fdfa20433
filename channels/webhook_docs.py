"""How each vendor webhook is described in the OpenAPI document.

The webhooks are plain routes that read and verify the raw body themselves (a signature covers the
exact bytes), so FastAPI cannot see their bodies; these descriptions say what the vendors send. Each
vendor module lists its paths with these in ``WEBHOOKS``; the registry adds them to the document."""

from __future__ import annotations

from typing import Any

from gateway.channel import webhook_operation

_TWILIO_SIGNATURE = {"X-Twilio-Signature": "Base64 HMAC-SHA1 of the public URL and the sorted form fields"}
_TWIML = {"200": {"description": "TwiML for Twilio", "content": {"application/xml": {"schema": {"type": "string"}}}}}


def _form(required: list[str], **fields: dict[str, Any]) -> dict[str, Any]:
    return {"application/x-www-form-urlencoded": {"type": "object", "required": required, "properties": fields}}


_STRING = {"type": "string"}
_CALL = {"CallSid": _STRING, "AccountSid": _STRING, "From": _STRING, "To": _STRING, "CallStatus": _STRING}

TELEGRAM_UPDATE = webhook_operation(
    "Telegram Bot API update",
    body={"application/json": {"type": "object", "required": ["update_id"], "properties": {
        "update_id": {"type": "integer"}, "message": {"type": "object"}, "edited_message": {"type": "object"},
        "callback_query": {"type": "object"}}}},
    headers={"X-Telegram-Bot-Api-Secret-Token": "The secret given to setWebhook (SWITCHBOARD_TELEGRAM_WEBHOOK_SECRET)"},
    answers={"200": {"description": "Queued (or a duplicate)", "content": {"application/json": {"schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}}}}}},
)
SLACK_EVENTS = webhook_operation(
    "Slack Events API delivery (event_callback, url_verification) or interactivity payload",
    body={
        "application/json": {"type": "object", "properties": {
            "type": {"type": "string"}, "event_id": {"type": "string"}, "challenge": {"type": "string"},
            "event": {"type": "object"}, "team_id": {"type": "string"}}},
        **_form([], payload={"type": "string", "description": "JSON of an interactivity payload"}),
    },
    headers={"X-Slack-Signature": "v0=<hex HMAC-SHA256 of v0:timestamp:body with the signing secret>",
             "X-Slack-Request-Timestamp": "Unix seconds; older than five minutes is refused"},
    answers={"200": {"description": "Acknowledged (the url_verification challenge is echoed)", "content": {
        "application/json": {"schema": {}}, "text/plain": {"schema": {"type": "string"}}}}},
)
TWILIO_SMS = webhook_operation(
    "Twilio incoming SMS",
    body=_form(["MessageSid", "From", "To"], MessageSid=_STRING, AccountSid=_STRING, From=_STRING, To=_STRING,
               Body=_STRING, NumMedia=_STRING),
    headers=_TWILIO_SIGNATURE, answers=_TWIML,
)
TWILIO_CALL = webhook_operation("Twilio incoming call", body=_form(["CallSid", "From", "To"], **_CALL),
                                headers=_TWILIO_SIGNATURE, answers=_TWIML)
TWILIO_SPEECH = webhook_operation(
    "Twilio Gather action: the caller's speech", headers=_TWILIO_SIGNATURE, answers=_TWIML,
    body=_form(["CallSid", "From", "To"], **_CALL, SpeechResult=_STRING, Confidence=_STRING),
)
TWILIO_STATUS = webhook_operation(
    "Twilio call status callback", body=_form(["CallSid"], **_CALL, CallDuration=_STRING),
    headers=_TWILIO_SIGNATURE, answers={"204": {"description": "Recorded"}},
)
WHATSAPP = webhook_operation(
    "Twilio incoming WhatsApp message (a connection)",
    body=_form(["MessageSid", "From", "To"], MessageSid=_STRING, AccountSid=_STRING, From=_STRING, To=_STRING,
               Body=_STRING, NumMedia=_STRING, MediaUrl0=_STRING, MediaContentType0=_STRING, ProfileName=_STRING),
    headers=_TWILIO_SIGNATURE, answers=_TWIML,
)
WHATSAPP_STATUS = webhook_operation(
    "Twilio status callback of a WhatsApp reply (a connection)",
    body=_form(["MessageSid", "MessageStatus"], MessageSid=_STRING, MessageStatus=_STRING, ErrorCode=_STRING,
               To=_STRING, From=_STRING),
    headers=_TWILIO_SIGNATURE, answers=_TWIML,
)
_META_SIGNATURE = {"X-Hub-Signature-256": "sha256=<hex HMAC-SHA256 of the raw body with the app secret>"}
_META_ANSWER = {"200": {"description": "Queued (each message its own inbox item) or a duplicate; statuses applied",
                        "content": {"text/plain": {"schema": {"type": "string"}}}}}


def _meta(summary: str, obj: str, items: str) -> dict[str, Any]:
    return webhook_operation(
        f"{summary}. The GET of the same path is Meta's subscription check (hub.mode=subscribe, "
        "hub.verify_token = the connection's verify token, hub.challenge echoed as text; else 403)",
        body={"application/json": {"type": "object", "required": ["object", "entry"], "properties": {
            "object": {"type": "string", "enum": [obj]}, "entry": {"type": "array", "items": {
                "type": "object", "properties": {"id": _STRING, items: {"type": "array"}}}}}}},
        headers=_META_SIGNATURE, answers=_META_ANSWER,
    )


META_WHATSAPP = _meta("WhatsApp Cloud API delivery: messages and statuses (a connection)",
                      "whatsapp_business_account", "changes")
META_PAGE = _meta("Messenger delivery: messages, postbacks, deliveries (a connection)", "page", "messaging")
META_INSTAGRAM = _meta("Instagram messaging delivery: messages, reads (a connection)", "instagram", "messaging")
TEAMS_ACTIVITY = webhook_operation(
    "Bot Framework activity from Microsoft Teams (a connection): messages are queued, other activities acknowledged",
    body={"application/json": {"type": "object", "required": ["type", "serviceUrl"], "properties": {
        "type": _STRING, "id": _STRING, "serviceUrl": _STRING, "channelId": _STRING, "text": _STRING,
        "from": {"type": "object"}, "conversation": {"type": "object"}, "recipient": {"type": "object"},
        "entities": {"type": "array"}}}},
    headers={"Authorization": "Bearer <the Bot Connector's JWT: issuer and keys from the OpenID metadata, "
                              "audience the connection's app id, serviceurl claim the activity's serviceUrl>"},
    answers={"200": {"description": "Queued, a duplicate, or nothing to answer",
                     "content": {"application/json": {"schema": {"type": "object"}}}}},
)
_CONNECTION_ID = {"name": "connection_id", "in": "path", "required": True, "schema": {"type": "string"},
                  "description": "The connection's id (GET /api/connections); unknown or disabled: 404"}


def for_connection(operation: dict[str, Any]) -> dict[str, Any]:
    """A vendor webhook's operation on a connection's path: the same, with the connection id in the path."""
    return {**operation, "parameters": [_CONNECTION_ID, *operation.get("parameters", [])]}

