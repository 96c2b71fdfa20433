"""What a channel connection is: a kind, a name, the agent it answers as, credentials and a status."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from gateway.connections.state import describe
from gateway.core.models import new_id, utcnow
from gateway.core.settings import Settings

__all__ = ["DEFAULT_ID", "EMAIL_FIELDS", "EMAIL_TLS", "KINDS", "META_KINDS", "OPTIONAL", "REQUIRED", "SECRET_FIELDS",
           "Connection", "ConnectionStatus", "Kind", "environment_connections", "is_connection_id", "mask",
           "webhook_path"]

Kind = Literal["telegram", "slack", "twilio_sms", "twilio_voice", "whatsapp", "whatsapp_cloud", "messenger",
               "instagram", "discord", "teams", "email"]
KINDS: tuple[str, ...] = get_args(Kind)
DEFAULT_ID = "default"  # the environment-configured channels, listed read-only
# What ``Connection.id`` makes (12 hex digits). Anything else names no connection and is refused before
# Redis is asked: ``<id>:status`` would otherwise read the status hash as a record (WRONGTYPE, a 500).
_ID_SHAPE = re.compile(r"[0-9a-f]{12}")

# A mailbox: read over IMAP, answered over SMTP, both with ``tls`` one of ``EMAIL_TLS``.
EMAIL_FIELDS = ("imap_host", "imap_port", "smtp_host", "smtp_port", "username", "password", "address", "tls")
EMAIL_TLS = ("ssl", "starttls", "none")
# What an operator gives for each kind (the Telegram webhook secret the gateway makes itself).
REQUIRED: dict[str, tuple[str, ...]] = {
    "telegram": ("bot_token",),
    "slack": ("bot_token", "signing_secret"),
    "twilio_sms": ("account_sid", "auth_token", "phone_number"),
    "twilio_voice": ("account_sid", "auth_token", "phone_number"),
    "whatsapp": ("account_sid", "auth_token", "sender"),
    "whatsapp_cloud": ("access_token", "phone_number_id", "app_secret"),
    "messenger": ("page_access_token", "page_id", "app_secret"),
    "instagram": ("access_token", "ig_user_id", "app_secret"),
    "discord": ("bot_token", "application_id", "public_key"),
    "teams": ("app_id", "app_password"),  # the Azure bot registration's Microsoft App ID and client secret
    "email": EMAIL_FIELDS,
}
# What an operator may give besides (Meta's webhook verify token is made by the gateway when not given; the
# WhatsApp Business Account id lets the console list the account's message templates).
OPTIONAL: dict[str, tuple[str, ...]] = {
    "whatsapp_cloud": ("verify_token", "waba_id"),
    "messenger": ("verify_token",),
    "instagram": ("verify_token",),
    "teams": ("tenant_id",),  # a single-tenant bot's directory: its token is asked of that tenant
}
META_KINDS = frozenset({"whatsapp_cloud", "messenger", "instagram"})
# Shown masked (last 4 characters) everywhere; the rest (a phone number, a WhatsApp sender, a page id, the
# verify token the operator pastes into Meta's app) is an address or meant to be shown.
SECRET_FIELDS = frozenset({"bot_token", "signing_secret", "auth_token", "account_sid", "webhook_secret",
                           "access_token", "page_access_token", "app_secret",
                           "app_password", "password"})

_PATHS = {
    "telegram": "/channels/telegram/{id}/webhook",
    "slack": "/channels/slack/{id}/events",
    "twilio_sms": "/channels/twilio/{id}/sms",
    "twilio_voice": "/channels/twilio/{id}/voice",
    "whatsapp": "/channels/whatsapp/{id}",
    "whatsapp_cloud": "/channels/meta/{id}/whatsapp",
    "messenger": "/channels/meta/{id}/messenger",
    "instagram": "/channels/meta/{id}/instagram",
    "discord": "/channels/discord/{id}/interactions",
    "teams": "/channels/teams/{id}/messages",
}  # an email connection has none: nothing calls us, we read its mailbox


_ENVIRONMENT_PATHS = {  # the environment-configured channels keep the paths they always had
    "telegram": "/channels/telegram/webhook",
    "slack": "/channels/slack/events",
    "twilio_sms": "/channels/twilio/sms",
    "twilio_voice": "/channels/twilio/voice",
}


def webhook_path(kind: str, connection_id: str) -> str | None:
    if connection_id == DEFAULT_ID:
        return _ENVIRONMENT_PATHS[kind]
    path = _PATHS.get(kind)
    return None if path is None else path.format(id=connection_id)


def is_connection_id(value: str) -> bool:
    return _ID_SHAPE.fullmatch(value) is not None


def mask(value: str) -> str:
    """``••••1234``: enough to tell two tokens apart, never enough to use one."""
    return "••••" + value[-4:] if len(value) > 8 else "••••"


class ConnectionStatus(BaseModel):
    """What an operator acts on: when the vendor last accepted the credentials, traffic, the last error."""

    verified_at: datetime | None = None
    last_inbound_at: datetime | None = None
    last_outbound_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    account: str | None = None  # who the vendor says we are: a bot's @username, a Slack team, a Twilio account
    waiting_for_template: int = 0  # WhatsApp replies refused outside the 24-hour window
    check_error: str | None = None  # why the last check with the vendor failed; cleared when one passes


class Connection(BaseModel):
    """A connection with its credentials in plain text: only in memory, never stored or answered so."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: new_id()[:12])
    kind: Kind
    name: str = Field(min_length=1, max_length=100)
    agent: str | None = None  # ``agent_id`` or ``agent_id@version``; None: the channels' agent
    enabled: bool = True
    credentials: dict[str, str] = Field(default_factory=dict, repr=False)
    status: ConnectionStatus = Field(default_factory=ConnectionStatus)
    read_only: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    def secret(self, name: str) -> str:
        return self.credentials.get(name, "")

    def redact(self, text: str) -> str:
        """``text`` with every secret of this connection masked (a vendor error may echo one). The other
        credentials (a host, an app id, a phone number) are shown in full everywhere: an error names them."""
        for name, value in self.credentials.items():
            if name in SECRET_FIELDS and len(value) >= 6:
                text = text.replace(value, mask(value))
        return text

    def public(self, public_url: str) -> dict:
        """The answer shape: credentials masked, the URL the vendor must call, the state in one sentence."""
        body = self.model_dump(mode="json", exclude={"credentials"})
        body["credentials"] = {k: mask(v) if k in SECRET_FIELDS else v for k, v in self.credentials.items()}
        path = webhook_path(self.kind, self.id)
        body["webhook_url"] = None if path is None else public_url.rstrip("/") + path
        if self.kind in META_KINDS:  # pasted with the URL into Meta's app dashboard
            body["verify_token"] = self.credentials.get("verify_token")
        body["state"], body["state_message"] = describe(
            self.kind, enabled=self.enabled, read_only=self.read_only, verified_at=self.status.verified_at,
            check_error=self.status.check_error)
        return body


def environment_connections(settings: Settings) -> dict[str, Connection]:
    """The channels configured by environment variables, by kind, as the read-only connection ``default``
    (statuses empty): what the connections list shows, and whose credentials an environment channel's
    vendor errors are masked by."""
    found: dict[str, dict[str, str]] = {}
    if settings.telegram_bot_token is not None:
        found["telegram"] = {"bot_token": settings.telegram_bot_token.get_secret_value()}
    if settings.slack_bot_token is not None and settings.slack_signing_secret is not None:
        found["slack"] = {"bot_token": settings.slack_bot_token.get_secret_value(),
                          "signing_secret": settings.slack_signing_secret.get_secret_value()}
    if settings.twilio_account_sid and settings.twilio_auth_token:
        twilio = {"account_sid": settings.twilio_account_sid,
                  "auth_token": settings.twilio_auth_token.get_secret_value(),
                  "phone_number": settings.twilio_from_number or ""}
        found["twilio_sms"] = found["twilio_voice"] = twilio
    return {kind: Connection(id=DEFAULT_ID, kind=kind, name="default", credentials=creds, read_only=True)
            for kind, creds in found.items()}
