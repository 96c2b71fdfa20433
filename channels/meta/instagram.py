"""Instagram direct messages (kind ``instagram``): a professional account's DMs, through the Messenger
API for Instagram.

Meta posts ``instagram`` deliveries to ``/channels/meta/{id}/instagram``; replies go to ``POST
/me/messages`` with the access token of the Facebook page linked to the account, split at
Instagram's 1,000, with ``sender_action: typing_on`` while the model thinks; a read (``mid``) marks
the reply read.
"""

from __future__ import annotations

from channels.connection_capabilities import INSTAGRAM
from channels.meta.connection import MetaConnections
from channels.meta.platform import MessagingPlatform
from gateway.channel import ChannelContext

__all__ = ["Instagram", "build_connections"]


class Instagram(MessagingPlatform):
    kind = channel = "instagram"
    capabilities = INSTAGRAM
    token_field, id_field, identity_prefix = "access_token", "ig_user_id", "instagram"
    objects = frozenset({"instagram"})

    def account_fields(self) -> str:
        return "username,name"

    def account_name(self, answer: dict) -> str | None:
        username = answer.get("username")
        return f"@{username}" if username else answer.get("name")


def build_connections(context: ChannelContext) -> MetaConnections:
    return MetaConnections(context, Instagram())
