"""Twilio plumbing shared by SMS and voice: the async REST client, webhook signatures, typed webhooks.

The REST client is twilio's own ``Client`` on ``AsyncTwilioHttpClient`` (``create_async``: nothing
blocks the event loop), with its ``Api`` domain pointed at ``SWITCHBOARD_TWILIO_API_BASE``.
Webhooks are verified with ``RequestValidator`` against ``SWITCHBOARD_PUBLIC_URL`` + path + query,
the URL Twilio was given, so verification works behind a proxy that rewrites host or scheme.
"""

from __future__ import annotations

import contextvars
import logging
import re
from typing import Any

import aiohttp
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from twilio.base.exceptions import TwilioRestException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.http.response import Response as TwilioResponse
from twilio.request_validator import RequestValidator, get_signature_algorithm
from twilio.rest import Client
from twilio.rest.api.v2010 import account as _account  # noqa: F401 -- imported here, not by the first send

from channels.delivery import reject_unverified
from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from gateway.channel import ChannelContext, mask

__all__ = ["CallWebhook", "SmsWebhook", "TwilioRest", "verified_form"]

SIGNATURE_HEADER = "X-Twilio-Signature"
SETTINGS_HEADER = "X-Twilio-Webhooks-Signature-Settings"
# Twilio drops a repeated Messages create carrying the same token (a resumed turn's resend).
IDEMPOTENCY_HEADER = "I-Twilio-Idempotency-Token"
log = logging.getLogger(__name__)
_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
# twilio's exceptions drop the response headers; each send reads its own Retry-After from here
_last_headers: contextvars.ContextVar[Any] = contextvars.ContextVar("twilio_last_headers", default=None)
# twilio's create_async takes no extra headers; the send's idempotency token travels here
_idempotency_token: contextvars.ContextVar[str | None] = contextvars.ContextVar("twilio_idempotency", default=None)


class _HeaderKeepingHttpClient(AsyncTwilioHttpClient):
    async def request(self, *args: Any, **kwargs: Any) -> TwilioResponse:
        token = _idempotency_token.get()
        if token is not None:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), IDEMPOTENCY_HEADER: token}
        response = await super().request(*args, **kwargs)
        _last_headers.set(response.headers)
        # twilio's own loggers (WARNING and worse only: ``quiet_libraries``) write each request's URL,
        # account SID and all; this is the one line per request kept, the SID masked
        method, url = kwargs.get("method") or args[0], kwargs.get("url") or kwargs.get("uri") or args[1]
        log.info("twilio %s %s: HTTP %s", str(method).upper(), _ACCOUNT_SID.sub(lambda m: mask(m.group()), str(url)),
                 response.status_code)
        return response


class SmsWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    message_sid: str = Field(alias="MessageSid")
    from_: str = Field(alias="From")
    to: str = Field(alias="To")
    body: str = Field(default="", alias="Body")
    num_media: int = Field(default=0, alias="NumMedia")


class CallWebhook(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    call_sid: str = Field(alias="CallSid")
    from_: str = Field(alias="From")
    to: str = Field(alias="To")
    call_status: str | None = Field(default=None, alias="CallStatus")
    direction: str | None = Field(default=None, alias="Direction")
    speech_result: str | None = Field(default=None, alias="SpeechResult")
    confidence: float | None = Field(default=None, alias="Confidence")
    digits: str | None = Field(default=None, alias="Digits")  # keys pressed in a <Gather input="dtmf">


async def verified_form(request: Request, context: ChannelContext, channel: str,
                        auth_token: str | None = None) -> dict[str, str]:
    """The webhook's form parameters, once ``X-Twilio-Signature`` proved Twilio sent them; else 403.

    Signed with ``auth_token`` when given (a connection's account), else the settings' account. The
    ``AccountSid`` Twilio puts in every webhook is a credential (masked in every answer): it is dropped
    here, once the signature over it is checked, so it is never queued or stored."""
    token = SecretStr(auth_token) if auth_token else context.settings.twilio_auth_token
    form = await request.form()
    url = context.settings.public_url.rstrip("/") + request.url.path
    if request.url.query:
        url += "?" + request.url.query
    signature = request.headers.get(SIGNATURE_HEADER, "")
    algorithm = get_signature_algorithm(request.headers.get(SETTINGS_HEADER))
    if token is None or not signature or not RequestValidator(token.get_secret_value()).validate(
        url, form, signature, algorithm
    ):
        reject_unverified(context, channel, f"missing or wrong {SIGNATURE_HEADER}", status=403)
    return {k: v for k, v in form.items() if isinstance(v, str) and k != "AccountSid"}


class TwilioRest:
    """Sends SMS through twilio's REST client; vendor errors leave as the channel error tree."""

    def __init__(self, context: ChannelContext, account: tuple[str, str] | None = None,
                 from_number: str | None = None) -> None:
        """The settings' account, or ``account`` = (account SID, auth token) of a connection."""
        self.settings = context.settings
        self.from_number = from_number or context.settings.twilio_from_number
        self.account = account
        self._http: _HeaderKeepingHttpClient | None = None
        self._client: Client | None = None

    def _rest(self) -> Client:
        """Built on first use, inside the running loop its aiohttp session belongs to."""
        if self._client is None:
            settings = self.settings
            if self.account is None:
                assert settings.twilio_auth_token is not None and settings.twilio_account_sid is not None
                self.account = (settings.twilio_account_sid, settings.twilio_auth_token.get_secret_value())
            self._http = _HeaderKeepingHttpClient(timeout=15)
            # a non-empty environment keeps twilio from reading TWILIO_EDGE / TWILIO_REGION from os.environ
            self._client = Client(*self.account, http_client=self._http, environment={"SWITCHBOARD": "1"})
            self._client.api.base_url = settings.twilio_api_base.rstrip("/")
        return self._client

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def send_sms(self, to: str, body: str, from_: str | None = None, idempotency_token: str | None = None,
                       status_callback: str | None = None) -> str:
        sender = from_ or self.from_number
        token = _idempotency_token.set(idempotency_token)  # this task's context: no other send sees it
        extra = {"status_callback": status_callback} if status_callback else {}
        try:
            message = await self._rest().messages.create_async(to=to, from_=sender, body=body, **extra)
        except TwilioRestException as exc:
            detail = f"twilio Messages: HTTP {exc.status} {exc.code or ''} {exc.msg}".strip()
            if exc.status == 429:
                headers = _last_headers.get()
                after = headers.get("Retry-After") if headers is not None else None
                raise ChannelRateLimited(detail, retry_after_s=float(after) if after else None) from exc
            if exc.status >= 500:
                raise ChannelUnavailable(detail) from exc
            raise ChannelRejected(detail) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelUnavailable(f"twilio Messages: {type(exc).__name__}: {exc}") from exc
        finally:
            _idempotency_token.reset(token)
        return str(message.sid)

    async def account_name(self) -> str:
        """Who the credentials belong to (``GET /Accounts/<sid>.json``); the channel error tree otherwise."""
        sid = self._rest().username
        try:
            account = await self._rest().api.v2010.accounts(sid).fetch_async()
        except TwilioRestException as exc:
            detail = f"twilio Accounts: HTTP {exc.status} {exc.code or ''} {exc.msg}".strip()
            raise (ChannelUnavailable if exc.status >= 500 or exc.status == 429 else ChannelRejected)(detail) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelUnavailable(f"twilio Accounts: {type(exc).__name__}: {exc}") from exc
        return str(account.friendly_name or sid)


def twilio_configured(context: ChannelContext) -> bool:
    s = context.settings
    return bool(s.twilio_account_sid and s.twilio_auth_token)
