"""👍 / 👎 buttons under the bot's Slack replies (Block Kit), and the vote a press casts on the stored reply.

The buttons ride on the reply's own ``chat.postMessage`` (its last part: the text in section blocks, then
an actions block whose buttons carry the stored reply's id). A press reaches the Interactivity Request URL
(the same path as events, signed the same way) as a ``block_actions`` payload; bolt acks it at once and
the vote is recorded after (one per Slack user and reply, changeable; only for a reply of a conversation
in the channel or thread it was pressed in), then the message is updated: the buttons make way for a
thank-you. A press on anything else records nothing."""

from __future__ import annotations

import logging

import aiohttp
from pydantic import BaseModel, ConfigDict, ValidationError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.channel import Connection, Feedback, NotFound, Voter, scope_identity, scope_thread

__all__ = ["ACTION_PREFIX", "ButtonPress", "RatingPress", "SlackRatings", "rated_blocks", "sections"]

log = logging.getLogger(__name__)

ACTION_PREFIX = "sb_rate_"
BLOCK_ID = "sb_rate"
SECTION_MAX_CHARS = 3000  # Block Kit's limit on a section's text
THANKS = "Thanks for your feedback!"
CHANNEL = "slack"


def sections(text: str) -> list[dict]:
    """``text`` as section blocks (each at most Block Kit's limit)."""
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text[i:i + SECTION_MAX_CHARS]}}
            for i in range(0, len(text), SECTION_MAX_CHARS)]


def rated_blocks(text: str, message_id: str) -> list[dict]:
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": label, "emoji": True},
                "action_id": f"{ACTION_PREFIX}{rating}", "value": message_id}
               for label, rating in (("👍", "up"), ("👎", "down"))]
    return [*sections(text), {"type": "actions", "block_id": BLOCK_ID, "elements": buttons}]


class ButtonPress(BaseModel):
    """The parts of a ``block_actions`` payload a press of one of our buttons needs: who pressed it, under
    which message (its chat, thread, text and blocks), and the pressed button's action id and value."""

    model_config = ConfigDict(frozen=True)

    user: str
    team: str
    channel: str
    message_ts: str
    thread_ts: str | None
    action_id: str
    value: str
    text: str
    blocks: list[dict]

    @classmethod
    def parse(cls, body: dict, prefix: str) -> ButtonPress | None:
        """The press of the payload's button whose action id starts with ``prefix``; None without one."""
        try:
            action = next(a for a in body.get("actions") or [] if str(a.get("action_id", "")).startswith(prefix))
            message = body.get("message") or {}
            container = body.get("container") or {}
            return cls(user=body["user"]["id"], team=(body.get("team") or {}).get("id") or body["user"].get("team_id"),
                       channel=(body.get("channel") or {}).get("id") or container["channel_id"],
                       message_ts=message.get("ts") or container["message_ts"],
                       thread_ts=message.get("thread_ts") or container.get("thread_ts"),
                       action_id=action["action_id"], value=action["value"],
                       text=message.get("text", ""), blocks=message.get("blocks") or [])
        except (StopIteration, KeyError, TypeError, AttributeError, ValidationError):
            return None


class RatingPress(ButtonPress):
    @classmethod
    def parse(cls, body: dict, prefix: str = ACTION_PREFIX) -> RatingPress | None:
        return super().parse(body, prefix)  # type: ignore[return-value]

    @property
    def rating(self) -> str:
        return self.action_id.removeprefix(ACTION_PREFIX)

    @property
    def message_id(self) -> str:
        return self.value


class SlackRatings:
    def __init__(self, feedback: Feedback | None, client: AsyncWebClient, connection: Connection | None) -> None:
        self.feedback = feedback
        self.client = client
        self.connection = connection

    async def record(self, press: RatingPress) -> None:
        identity = f"slack:{press.team}/{press.user}"
        # the reply's thread is the conversation's: a DM's replies are not threaded, a mention's are
        thread = f"{press.channel}:{press.thread_ts}" if press.thread_ts else press.channel
        if self.connection is not None:
            identity, thread = scope_identity(identity, self.connection.id), scope_thread(thread, self.connection.id)
        if self.feedback is None or press.rating not in ("up", "down"):
            return
        try:
            await self.feedback.rate(None, press.message_id, Voter(identity, thread=thread, channel=CHANNEL),
                                     press.rating)
        except NotFound:
            log.info("slack: a rating press on %r, not a reply of this channel: nothing recorded", press.message_id)
            return
        blocks = [b for b in press.blocks if b.get("block_id") != BLOCK_ID]
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": THANKS}]})
        try:
            await self.client.chat_update(channel=press.channel, ts=press.message_ts, text=press.text, blocks=blocks)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:  # the vote stands; the buttons stay
            log.warning("slack: could not replace the rating buttons: %s", exc)
