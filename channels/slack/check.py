"""Slack's ``auth.test``: a Slack connection's credentials checked on save."""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.channel import ChannelContext, Connection, CredentialsRefused, VendorUnreachable

__all__ = ["SlackCheck"]


class SlackCheck:
    def __init__(self, context: ChannelContext) -> None:
        self.context = context

    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        client = AsyncWebClient(token=connection.secret("bot_token"), base_url=self.context.settings.slack_api_base,
                                timeout=15)
        try:
            answer = await client.auth_test()
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            if error in ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"):
                raise CredentialsRefused(f"credentials.bot_token: Slack refused the token ({error})") from None
            raise VendorUnreachable(f"Slack auth.test: {error or 'failed'}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise VendorUnreachable(f"Slack auth.test: {type(exc).__name__}") from exc
        team, user = answer.get("team"), answer.get("user")
        return f"{user} in {team}" if team and user else team or user

    async def forget(self, connection: Connection) -> None:
        return None  # the app's Request URL is set in Slack's app settings by the operator
