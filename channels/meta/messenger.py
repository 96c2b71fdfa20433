"""Facebook Messenger (kind ``messenger``): a Facebook page's conversations, answered as the page.

Meta posts ``page`` deliveries to ``/channels/meta/{id}/messenger``; replies go to ``POST
/me/messages`` with the page access token (``messaging_type: RESPONSE``), split at Messenger's 2,000
characters, with ``sender_action: typing_on`` while the model thinks. Deliveries (``mids``) mark
replies delivered; echoes of our own replies are skipped.
"""

from __future__ import annotations

from channels.connection_capabilities import MESSENGER
from channels.meta.connection import MetaConnections
from channels.meta.platform import MessagingPlatform
from gateway.channel import ChannelContext

__all__ = ["Messenger", "build_connections"]


class Messenger(MessagingPlatform):
    kind = channel = "messenger"
    capabilities = MESSENGER
    token_field, id_field, identity_prefix = "page_access_token", "page_id", "messenger"
    objects = frozenset({"page"})

    def account_fields(self) -> str:
        return "name"

    def account_name(self, answer: dict) -> str | None:
        return answer.get("name")


def build_connections(context: ChannelContext) -> MetaConnections:
    return MetaConnections(context, Messenger())
