"""Inbound deliveries shaped and signed exactly as each vendor sends them (payloads from their docs)."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import uuid

import httpx
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

from tests.fakes import slack_api, telegram_api, twilio_api

PUBLIC_URL = "https://bot.example.com"  # what the vendors were told; the gateway sits behind a proxy
TELEGRAM_SECRET = "tg-webhook-secret_123"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
USER_ID = 424242
_ids = itertools.count(int(time.time()) % 1_000_000 * 1000)


def next_id() -> int:
    return next(_ids)


# -- Telegram ---------------------------------------------------------------------------------
def telegram_message(text: str | None = None, *, chat_id: int = USER_ID, user_id: int = USER_ID,
                     chat_type: str = "private", **extra) -> dict:
    chat = {"id": chat_id, "type": chat_type}
    chat.update({"first_name": "Ada", "last_name": "Lovelace", "username": "ada"} if chat_type == "private"
                else {"title": "Support group"})
    msg = {"message_id": next_id() % 100000, "date": int(time.time()), "chat": chat,
           "from": {"id": user_id, "is_bot": False, "first_name": "Ada", "last_name": "Lovelace",
                    "username": "ada", "language_code": "en"}}
    if text is not None:
        msg["text"] = text
        if text.startswith("/"):
            msg["entities"] = [{"offset": 0, "length": len(text.split()[0]), "type": "bot_command"}]
    msg.update(extra)
    return msg


def telegram_update(message: dict, update_id: int | None = None, kind: str = "message") -> dict:
    return {"update_id": update_id if update_id is not None else next_id(), kind: message}


def telegram_press(sent: dict, data: str, *, user_id: int = USER_ID) -> dict:
    """A callback query: ``user_id`` pressed the button with ``data`` under the bot's message ``sent``."""
    return {"id": str(next_id()), "chat_instance": "-8012345678901234567", "data": data, "message": sent,
            "from": {"id": user_id, "is_bot": False, "first_name": "Ada", "username": "ada", "language_code": "en"}}


def post_telegram(client: httpx.Client, update: dict, secret: str | None = TELEGRAM_SECRET) -> httpx.Response:
    headers = {"X-Telegram-Bot-Api-Secret-Token": secret} if secret is not None else {}
    return client.post("/channels/telegram/webhook", json=update, headers=headers)


# -- Slack ------------------------------------------------------------------------------------
def slack_event(text: str, *, kind: str = "app_mention", channel: str = "C0GENERAL", user: str = "U0ADA0001",
                ts: str | None = None, **extra) -> dict:
    event = {"type": kind, "user": user, "text": text, "ts": ts or f"{time.time():.6f}", "channel": channel,
             "event_ts": ts or f"{time.time():.6f}", "team": slack_api.TEAM_ID,
             "blocks": [{"type": "rich_text", "block_id": "b1", "elements": []}]}
    if kind == "message":
        event["channel_type"] = extra.pop("channel_type", "im")
    event.update(extra)
    return event


def slack_envelope(event: dict, event_id: str | None = None) -> dict:
    return {
        "token": "legacy-verification-token", "team_id": slack_api.TEAM_ID, "api_app_id": "A0APP0001",
        "event": event, "type": "event_callback", "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [{"enterprise_id": None, "team_id": slack_api.TEAM_ID, "user_id": slack_api.BOT_USER_ID,
                            "is_bot": True, "is_enterprise_install": False}],
        "is_ext_shared_channel": False, "event_context": "4-eyJldCI6ImFwcF9tZW50aW9uIn0",
    }


def post_slack(client: httpx.Client, payload: dict, *, secret: str = SLACK_SECRET, retry_num: int | None = None,
               timestamp: int | None = None, path: str = "/channels/slack/events") -> httpx.Response:
    import json

    body = json.dumps(payload)
    ts = str(timestamp if timestamp is not None else int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=body),
    }
    if retry_num is not None:
        headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
    return client.post(path, content=body, headers=headers)


def slack_block_actions(posted: dict, posted_ts: str, action_id: str, *, user: str = "U0ADA0001",
                        channel: str | None = None) -> dict:
    """Slack's ``block_actions`` payload: ``user`` pressed the button ``action_id`` under the bot's message
    ``posted`` (the chat.postMessage parameters, sent at ``posted_ts``)."""
    [value] = [e["value"] for b in posted.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]
               if e["action_id"] == action_id] or ["unknown"]
    channel = channel or posted["channel"]
    message = {"type": "message", "bot_id": slack_api.BOT_ID, "user": slack_api.BOT_USER_ID, "ts": posted_ts,
               "text": posted["text"], "blocks": posted.get("blocks") or [], "team": slack_api.TEAM_ID}
    if posted.get("thread_ts"):
        message["thread_ts"] = posted["thread_ts"]
    return {
        "type": "block_actions", "api_app_id": "A0APP0001", "token": "legacy-verification-token",
        "user": {"id": user, "username": "ada", "name": "ada", "team_id": slack_api.TEAM_ID},
        "team": {"id": slack_api.TEAM_ID, "domain": "test"}, "channel": {"id": channel, "name": "general"},
        "container": {"type": "message", "message_ts": posted_ts, "channel_id": channel, "is_ephemeral": False},
        "trigger_id": f"{next_id()}.{next_id()}.abcdef", "response_url": "https://hooks.slack.com/actions/T/1/x",
        "message": message, "state": {"values": {}},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "sb_rate", "value": value,
                     "text": {"type": "plain_text", "text": "👍", "emoji": True}, "action_ts": f"{time.time():.6f}"}],
    }


def post_slack_interaction(client: httpx.Client, payload: dict, *, secret: str = SLACK_SECRET,
                           path: str = "/channels/slack/events") -> httpx.Response:
    """An interaction as Slack posts it: form-encoded ``payload=<json>``, signed like events."""
    import json
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(payload)})
    ts = str(int(time.time()))
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
               "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)}
    return client.post(path, content=body, headers=headers)


# -- Twilio -----------------------------------------------------------------------------------
CALLER = "+15557654321"


def sms_params(body: str, *, sender: str = CALLER, sid: str | None = None) -> dict[str, str]:
    sid = sid or f"SM{uuid.uuid4().hex}"
    return {
        "ToCountry": "US", "ToState": "CA", "SmsMessageSid": sid, "NumMedia": "0", "ToCity": "",
        "FromZip": "", "SmsSid": sid, "FromState": "CA", "SmsStatus": "received", "FromCity": "",
        "Body": body, "FromCountry": "US", "To": twilio_api.FROM_NUMBER, "ToZip": "", "NumSegments": "1",
        "MessageSid": sid, "AccountSid": twilio_api.ACCOUNT_SID, "From": sender, "ApiVersion": "2010-04-01",
    }


def call_params(call_sid: str, *, sender: str = CALLER, status: str = "in-progress", **extra: str) -> dict[str, str]:
    params = {
        "AccountSid": twilio_api.ACCOUNT_SID, "ApiVersion": "2010-04-01", "CallSid": call_sid,
        "CallStatus": status, "Called": twilio_api.FROM_NUMBER, "Caller": sender, "Direction": "inbound",
        "From": sender, "FromCountry": "US", "To": twilio_api.FROM_NUMBER, "ToCountry": "US",
    }
    params.update(extra)
    return params


def post_twilio(client: httpx.Client, path: str, params: dict[str, str], *,
                token: str = twilio_api.AUTH_TOKEN) -> httpx.Response:
    """``path`` may carry a query string; the signature covers PUBLIC_URL + path + query, as Twilio's does."""
    signature = RequestValidator(token).compute_signature(PUBLIC_URL + path, params)
    return client.post(path, data=params, headers={"X-Twilio-Signature": signature})


def telegram_token() -> str:
    return telegram_api.TOKEN


# -- Meta (WhatsApp Cloud API, Messenger, Instagram) -----------------------------------------------
META_APP_SECRET = "meta-app-secret-5b1f0c9e7d2a4e8f"
WA_PHONE_NUMBER_ID = "106540352242922"
WA_BUSINESS_ACCOUNT = "102290129340398"
WA_CUSTOMER = "16505551234"
PAGE_ID = "109876543210987"
IG_USER_ID = "17841400008460056"
PSID = "6543210987654321"  # a page-scoped (or Instagram-scoped) user id


def whatsapp_text(text: str, *, mid: str | None = None, sender: str = WA_CUSTOMER) -> dict:
    return {"from": sender, "id": mid or f"wamid.HBgL{uuid.uuid4().hex.upper()}", "timestamp": str(int(time.time())),
            "type": "text", "text": {"body": text}}


def whatsapp_delivery(*messages: dict, statuses: tuple[dict, ...] = (), name: str = "Sheena Nelson",
                      phone_number_id: str = WA_PHONE_NUMBER_ID) -> dict:
    value: dict = {"messaging_product": "whatsapp",
                   "metadata": {"display_phone_number": "15550783881", "phone_number_id": phone_number_id}}
    if messages:
        senders = sorted({m["from"] for m in messages})
        value["contacts"] = [{"profile": {"name": name}, "wa_id": s} for s in senders]
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {"object": "whatsapp_business_account",
            "entry": [{"id": WA_BUSINESS_ACCOUNT, "changes": [{"value": value, "field": "messages"}]}]}


def whatsapp_status(message_id: str, status: str, *, errors: list[dict] | None = None) -> dict:
    body = {"id": message_id, "status": status, "timestamp": str(int(time.time())), "recipient_id": WA_CUSTOMER}
    if errors:
        body["errors"] = errors
    return body


def messaging_text(text: str, *, mid: str | None = None, sender: str = PSID, recipient: str = PAGE_ID) -> dict:
    now = int(time.time() * 1000)
    return {"sender": {"id": sender}, "recipient": {"id": recipient}, "timestamp": now,
            "message": {"mid": mid or f"m_{uuid.uuid4().hex}", "text": text}}


def messaging_delivery(*events: dict, obj: str = "page", account: str = PAGE_ID) -> dict:
    return {"object": obj, "entry": [{"id": account, "time": int(time.time() * 1000), "messaging": list(events)}]}


def meta_signature(body: bytes, secret: str = META_APP_SECRET) -> str:
    """``X-Hub-Signature-256`` as Meta computes it: HMAC-SHA256 of the raw body with the app secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_meta(client: httpx.Client, path: str, payload: dict, *, secret: str | None = META_APP_SECRET
              ) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Hub-Signature-256"] = meta_signature(body, secret)
    return client.post(path, content=body, headers=headers)


# -- Microsoft Teams (Bot Framework activities, shaped as Teams sends them) -------------------
TEAMS_APP_ID = "8a1c5f3e-6b2d-4e7a-9c0f-1d2e3f4a5b6c"
TEAMS_APP_PASSWORD = "Qx8Q~teams-client-secret-value-0123456789"
TEAMS_TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
TEAMS_USER = "29:1XJKJMvc5GBtc2JwZq0oj8tHZmzrQgFmB39ATiQWA85gQtHieVkKilBZ9XHoq9j7Zaqt7CZ-NJWi7me2kHTL3Bw"
TEAMS_PERSONAL_CHAT = "a:1Hkx8F8G5hLm0pZrUT6c9fzB7CQWBM6DnKU0O2AB3Y1_yjMZ6S1Y6EK-pTgEdgZbK"


def teams_message(text: str, *, service_url: str, activity_id: str | None = None, conversation_type: str = "personal",
                  conversation_id: str = TEAMS_PERSONAL_CHAT, mention_bot: bool = False, user: str = TEAMS_USER,
                  value: dict | None = None) -> dict:
    """A ``message`` activity from a person to the bot (``28:<app id>``); with ``mention_bot`` its text starts
    with ``<at>Switchboard</at>`` and a mention entity names the bot, as Teams sends an @mention."""
    bot = {"id": f"28:{TEAMS_APP_ID}", "name": "Switchboard"}
    mention = "<at>Switchboard</at>"
    activity = {
        "type": "message", "id": activity_id or f"{next_id()}", "timestamp": "2026-11-27T06:10:00.123Z",
        "localTimestamp": "2026-11-27T07:10:00.123+01:00", "serviceUrl": service_url, "channelId": "msteams",
        "from": {"id": user, "name": "Megan Bowen", "aadObjectId": "00000000-0000-0000-0000-0000000000a1"},
        "conversation": {"id": conversation_id, "conversationType": conversation_type, "tenantId": TEAMS_TENANT,
                         **({"isGroup": True} if conversation_type != "personal" else {})},
        "recipient": bot, "textFormat": "plain", "locale": "en-US",
        "text": f"{mention} {text}" if mention_bot else text,
        "entities": [{"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"}],
        "channelData": {"tenant": {"id": TEAMS_TENANT}},
    }
    if mention_bot:
        activity["entities"].append({"type": "mention", "text": mention, "mentioned": bot})
    if value is not None:
        activity["value"] = value
    return activity


def post_teams(client: httpx.Client, path: str, activity: dict, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return client.post(path, json=activity, headers=headers)
