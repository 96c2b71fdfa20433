"""A reply's choices (a proposed action's Yes / No) as Block Kit buttons under it, and a press of one as the
person's next message.

The buttons ride on the reply's own ``chat.postMessage`` (its last part), each carrying its choice as its
value. A press reaches the events URL as a signed ``block_actions`` interaction; it is queued in the inbox
like a message (ordered in the chat, deduplicated per proposal: a second press on the same message makes no
second turn) and its turn reads the choice as the person's words, so a Yes acts exactly as typing "Yes".
The message is then updated: the buttons make way for the choice made."""

from __future__ import annotations

import logging

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.ratings import ButtonPress, sections

__all__ = ["CHOICE_PREFIX", "ChoicePress", "choice_blocks", "take_choice"]

log = logging.getLogger(__name__)

CHOICE_PREFIX = "sb_choice_"
BLOCK_ID = "sb_choice"


def choice_blocks(text: str, choices: list[str]) -> list[dict]:
    buttons = [{"type": "button", "text": {"type": "plain_text", "text": choice[:75]},
                "action_id": f"{CHOICE_PREFIX}{i}", "value": choice[:2000]} for i, choice in enumerate(choices)]
    return [*sections(text), {"type": "actions", "block_id": BLOCK_ID, "elements": buttons}]


class ChoicePress(ButtonPress):
    @classmethod
    def parse(cls, body: dict, prefix: str = CHOICE_PREFIX) -> ChoicePress | None:
        if body.get("type") != "block_actions":
            return None
        return super().parse(body, prefix)  # type: ignore[return-value]

    @property
    def choice(self) -> str:
        return self.value


async def take_choice(client: AsyncWebClient, press: ChoicePress) -> None:
    """The message's buttons replaced by the choice made, so it is pressed once. Best effort: the press is
    the person's next message whatever happens here."""
    blocks = [b for b in press.blocks if b.get("block_id") != BLOCK_ID]
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"You chose: *{press.choice}*"}]})
    try:
        await client.chat_update(channel=press.channel, ts=press.message_ts, text=press.text, blocks=blocks)
    except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
        log.warning("slack: could not take the choice buttons off %s: %s", press.message_ts, exc)
