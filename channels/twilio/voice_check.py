"""Twilio voice connections: the account checked on save. Their calls are not routed per connection
yet: they are stored, verified and listed, the calls still go to the environment-configured number.
"""

from __future__ import annotations

from gateway.channel import ChannelContext, Connection

__all__ = ["TwilioVoiceCheck"]


class TwilioVoiceCheck:
    def __init__(self, context: ChannelContext) -> None:
        self.context = context

    async def verify(self, connection: Connection, webhook_url: str) -> str | None:
        from channels.twilio.connection import twilio_account  # twilio's client: imported on first use

        return await twilio_account(self.context, connection)

    async def forget(self, connection: Connection) -> None:
        return None
