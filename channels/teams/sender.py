"""A Teams connection's reply: sent through the connector service the activity came from, in reply to it.

The reply's parts go out in order (split at ``TEAMS.max_length``); the last carries the cards: the
footnoted sources, and a proposed action's choices when the turn offers them. While the model thinks
a typing activity is sent every few seconds (Teams shows one for about three).
"""

from __future__ import annotations

import dataclasses

from channels.connection_capabilities import TEAMS
from channels.connections import note_delivery
from channels.delivery import deliver_parts
from channels.outbound_retry import RetryPolicy
from channels.render import render
from channels.teams.cards import choices_card, citations_card, message, split_sources
from channels.teams.connector import Connector, Where
from gateway.channel import ChannelContext, ChannelDeliveryError, Connection, DeliveryReport

__all__ = ["TeamsSink"]


class TeamsSink:
    streaming = False
    channel = "teams"
    typing_interval_s = 3.0

    def __init__(self, connector: Connector, where: Where, policy: RetryPolicy, context: ChannelContext,
                 connection: Connection) -> None:
        self.connector, self.where, self.policy = connector, where, policy
        self.context, self.connection = context, connection
        self.choices: list[str] = []

    def offer(self, choices: list[str]) -> None:
        self.choices = list(choices)

    async def delta(self, text: str) -> None:  # pragma: no cover - not streaming
        raise NotImplementedError

    async def typing(self) -> None:
        typing = dataclasses.replace(self.where, activity_id=None)
        await self.connector.send(self.connection, typing, {"type": "typing"}, what="typing")

    async def deliver(self, text: str) -> DeliveryReport:
        body, cited = split_sources(text)
        parts = render(body, TEAMS)
        cards = ([citations_card(cited)] if cited else []) + ([choices_card(self.choices)] if self.choices else [])

        activities = [message(part, cards if i == len(parts) else None) for i, part in enumerate(parts, 1)]

        async def send(activity: dict) -> str:
            return await self.connector.send(self.connection, self.where, activity, what="reply")

        report = await deliver_parts(activities, send, self.policy, what="teams reply")
        return await note_delivery(self.context, self.connection, report)

    async def say(self, text: str) -> None:
        report = await self.deliver(text)
        if not report.delivered:
            raise ChannelDeliveryError(report.error or "teams reply failed")
