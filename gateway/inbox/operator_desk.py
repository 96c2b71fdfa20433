"""The operator's side of a handoff: take a conversation over, reply through its own channel, hand it
back — and give it back to the bot when nobody has acted for ``SWITCHBOARD_HANDOFF_IDLE_S``.

A reply goes out the way the conversation came in: for a messaging channel, through the channel's
``sink_for`` on the conversation's newest delivery (the inbox keeps it); for a channel that shows
replies itself (web chat: the stored message reaches the open page live), through the sink it
registered in ``direct_sinks``. Every step is a message in the transcript: the operator's replies
(which the bot sees in its memory afterwards) and system notes for taking over and handing back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from gateway.conversation.handoff import Handoff, Handoffs
from gateway.conversation.operators import display_name
from gateway.conversation.store import RedisStore
from gateway.core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from gateway.core.models import Conversation, DeliveryStatus, Message, Role
from gateway.core.settings import Settings
from gateway.inbox.handler import InboxHandler
from gateway.inbox.stream import Inbox
from gateway.turn.ports import Capabilities, DeliveryReport, MessageTemplate, ReplySink, TemplateSink

log = logging.getLogger(__name__)

DirectSink = Callable[[Conversation], ReplySink]


class CannotHandOff(InvalidInput):
    """This conversation's channel cannot be answered by a person from the console."""


class OperatorDesk:
    def __init__(
        self, settings: Settings, store: RedisStore, handoffs: Handoffs, inbox: Inbox,
        handlers: dict[str, InboxHandler], direct_sinks: dict[str, DirectSink], capabilities: dict[str, Capabilities],
    ) -> None:
        self.settings = settings
        self.store = store
        self.handoffs = handoffs
        self.inbox = inbox
        self.handlers = handlers  # shared with the inbox consumer: filled as channels are installed
        self.direct_sinks = direct_sinks
        self.capabilities = capabilities  # channel name -> what it can do, filled as channels are installed
        self.on_take_over: list[Callable[[Conversation], Awaitable[None]]] = []  # insight (issue 41): outcomes

    async def conversation(self, conversation_id: str) -> Conversation:
        conversation = await self.store.get_conversation(conversation_id)
        if conversation is None:
            raise NotFound(f"no conversation {conversation_id!r}")
        return conversation

    def can_hand_off(self, conversation: Conversation) -> str | None:
        """None when a person can take this conversation over, else why not (in plain words)."""
        capabilities = self.capabilities.get(conversation.channel)
        if capabilities is not None and capabilities.handoff:
            return None
        if capabilities is not None and capabilities.voice:
            return ("A phone call cannot be taken over mid-call: its replies are spoken live. "
                    "Call the customer back, or answer them on another channel.")
        return f"The {conversation.channel!r} channel is not configured here, so nobody can reply on it."

    async def take_over(self, conversation_id: str, operator: str) -> Conversation:
        conversation = await self.conversation(conversation_id)
        if (why := self.can_hand_off(conversation)) is not None:
            raise CannotHandOff(why)
        current = await self.handoffs.get(conversation_id)
        await self.handoffs.take_over(conversation_id, operator)
        for hook in self.on_take_over:
            await hook(conversation)
        if current is None or current.operator != operator:
            await self._note(conversation, f"{operator} took over the conversation; the assistant is paused.",
                             notice=f"{display_name(operator)} joined the conversation")
        return conversation

    async def send(self, conversation_id: str, operator: str, text: str) -> Message:
        """Deliver ``text`` through the conversation's channel and store it as the operator's message."""
        text = text.strip()
        if not text:
            raise InvalidInput("Reply: type a message first")
        if len(text) > self.settings.max_message_chars:
            raise PayloadTooLarge(f"Reply: {len(text)} characters; the limit is {self.settings.max_message_chars}")
        conversation = await self.conversation(conversation_id)
        handoff = await self.handoffs.get(conversation_id)
        if handoff is None or handoff.status != "human":
            raise Conflict("Take over the conversation before replying: the assistant is answering it")
        if handoff.operator != operator:
            raise Conflict(f"{handoff.operator} has taken over this conversation; only they can reply")
        sink = await self.reply_sink(conversation)
        await self.handoffs.wait_for_gate(conversation_id, 5.0)  # a bot reply already on its way goes first
        message = await self._sent(conversation, operator, text, lambda _: sink.deliver(text))
        await self.handoffs.touch(conversation_id)
        return message

    async def _sent(self, conversation: Conversation, operator: str, text: str,
                    send: Callable[[str], Awaitable[DeliveryReport]]) -> Message:
        """The operator's message, stored before it is sent and then with its outcome."""
        message = Message(conversation_id=conversation.id, persona_id=conversation.persona_id, role=Role.OPERATOR,
                          channel=conversation.channel, text=text, delivery=DeliveryStatus.PENDING,
                          author=display_name(operator))
        await self.store.add_message(message)
        try:
            report = await send(message.id)
        except Exception as exc:  # the vendor refused or is away: the message says so in the transcript
            log.warning("operator message in conversation %s failed: %s", conversation.id, exc)
            report = DeliveryReport(delivered=False, error=f"{type(exc).__name__}: {exc}")
        message.delivery = DeliveryStatus.DELIVERED if report.delivered else DeliveryStatus.FAILED
        message.delivery_error = report.error
        await self.store.update_message(message)
        return message

    def has_templates(self, conversation: Conversation) -> bool:
        capabilities = self.capabilities.get(conversation.channel)
        return capabilities is not None and capabilities.templates

    async def _template_sink(self, conversation: Conversation) -> TemplateSink:
        if not self.has_templates(conversation):
            raise CannotHandOff(f"The {conversation.channel!r} channel has no message templates")
        return await self.reply_sink(conversation)  # type: ignore[return-value]

    async def templates(self, conversation_id: str) -> list[MessageTemplate]:
        """The approved templates of the account the conversation came through (asked of the vendor)."""
        return await (await self._template_sink(await self.conversation(conversation_id))).templates()

    async def send_template(self, conversation_id: str, operator: str, name: str, language: str) -> Message:
        """Send an approved template (WhatsApp: what re-opens a conversation past its 24-hour window), stored
        as the operator's message with its outcome. No take-over needed: the assistant could not reply anyway."""
        conversation = await self.conversation(conversation_id)
        sink = await self._template_sink(conversation)
        template = next((t for t in await sink.templates() if (t.name, t.language) == (name, language)), None)
        if template is None:
            raise InvalidInput(f"Template: no approved template {name!r} ({language}) on this account")
        text = f"[template {name} ({language})] {template.text}".strip()
        return await self._sent(conversation, operator, text, lambda stored: sink.send_template(template, stored))

    async def hand_back(self, conversation_id: str, operator: str) -> None:
        conversation = await self.conversation(conversation_id)
        if await self.handoffs.hand_back(conversation_id):
            await self._note(conversation, f"{operator} handed the conversation back to the assistant.",
                             notice=f"{display_name(operator)} left the conversation")

    async def return_idle(self) -> int:
        """Give back to the bot every handed-off conversation without operator activity for the idle time."""
        cutoff = time.time() - self.settings.handoff_idle_s
        returned = 0
        for conversation_id in await self.handoffs.idle(cutoff):
            if not await self.handoffs.hand_back(conversation_id, idle_before=cutoff):
                continue  # someone acted meanwhile
            returned += 1
            conversation = await self.store.get_conversation(conversation_id)
            if conversation is not None:
                await self._note(conversation, self.settings.handoff_return_note)
        return returned

    async def state(self, conversation_id: str) -> Handoff | None:
        return await self.handoffs.get(conversation_id)

    async def reply_sink(self, conversation: Conversation) -> ReplySink:
        """Where a message to the conversation goes outside a turn (an operator's reply, the closing question)."""
        direct = self.direct_sinks.get(conversation.channel)
        if direct is not None:
            return direct(conversation)
        handler = self.handlers.get(conversation.channel)
        if handler is None:
            raise CannotHandOff(self.can_hand_off(conversation) or
                                f"no {conversation.channel!r} channel runs in this process")
        delivery = await self.inbox.reply_via(conversation.id)
        if delivery is None:
            raise CannotHandOff("This conversation has no message to reply to yet (it is older than 30 days, "
                                "or came in before replies could be addressed).")
        return handler.sink_for(delivery)

    async def _note(self, conversation: Conversation, text: str, notice: str | None = None) -> None:
        await self.store.add_message(Message(
            conversation_id=conversation.id, persona_id=conversation.persona_id, role=Role.SYSTEM,
            channel=conversation.channel, text=text, notice=notice,
        ))
