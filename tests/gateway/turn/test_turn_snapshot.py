"""An accepted turn survives its process: every field it had is there again after a round trip."""

from __future__ import annotations

import dataclasses

from gateway.core.models import Conversation, InboundMessage, Message, Persona, Role, TurnTrace
from gateway.turn.pipeline import Turn


def _turn() -> Turn:
    inbound = InboundMessage(channel="telegram", external_user_id="42", external_message_id="7",
                             identity="telegram:42", text="hi", thread="t1", display_name="Ada")
    persona = Persona(identities=["telegram:42"], display_name="Ada")
    conversation = Conversation(persona_id=persona.id, channel="telegram", thread="t1")
    message = Message(conversation_id=conversation.id, persona_id=persona.id, role=Role.USER, channel="telegram",
                      text="hi", external_id="7")
    trace = TurnTrace(conversation_id=conversation.id, persona_id=persona.id, channel="telegram",
                      user_message_id=message.id, error="earlier note")
    return Turn(inbound, persona, conversation, message, ticket=5, started=True, trace=trace, rag_mode="queued")


def test_every_saved_field_round_trips():
    turn = _turn()
    again = Turn.restore(turn.snapshot())
    for f in dataclasses.fields(Turn):
        if f.name not in Turn.RECOMPUTED:
            assert getattr(again, f.name) == getattr(turn, f.name), f.name


def test_every_field_is_either_saved_or_recomputed():
    """A field added to Turn must be saved, or declared as worked out again when the turn runs."""
    saved = {f.name for f in dataclasses.fields(Turn)} - Turn.RECOMPUTED
    again = Turn.restore(_turn().snapshot())
    assert {name for name in saved if getattr(again, name) is not None} == saved
