"""The export reads conversations a page at a time by their last activity (a score cursor, not an offset):
more conversations than a page, many of them at one same moment, each come out exactly once, with their
messages and tokens."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from gateway.conversation.store import RedisStore
from gateway.core.metrics import Metrics
from gateway.core.models import Conversation, DeliveryStatus, Message, Persona, Role, TokenUsage, TurnTrace
from gateway.insight.export import BATCH
from gateway.insight.service import Insight


async def _store_conversations(store: RedisStore, count: int) -> dict[str, int]:
    """``count`` conversations, a third of them at one same moment; each reply's completion tokens = its number."""
    now = datetime.now(UTC).replace(microsecond=0)
    expected = {}
    for i in range(count):
        at = now - timedelta(hours=1) if i % 3 == 0 else now - timedelta(seconds=i)
        persona = Persona(identities=[f"webchat:export{i}"])
        await store.save_persona(persona)
        conversation = Conversation(persona_id=persona.id, channel="webchat", started_at=at, last_activity_at=at)
        await store.save_conversation(conversation)
        user = Message(conversation_id=conversation.id, persona_id=persona.id, role=Role.USER, channel="webchat",
                       text=f"question {i}", created_at=at)
        await store.add_message(user)
        trace = TurnTrace(conversation_id=conversation.id, persona_id=persona.id, channel="webchat",
                          user_message_id=user.id, model="gpt-4o-mini",
                          usage=TokenUsage(prompt_tokens=100, completion_tokens=i))
        reply = Message(conversation_id=conversation.id, persona_id=persona.id, role=Role.AGENT, channel="webchat",
                        text=f"answer {i}", turn_id=trace.turn_id, delivery=DeliveryStatus.DELIVERED,
                        created_at=at + timedelta(milliseconds=1))
        await store.add_message(reply)
        await store.finish_turn(reply, conversation, trace, store.key("active_convs"))
        expected[conversation.id] = i
    return expected


def test_every_conversation_once_across_pages(settings):
    async def run() -> list[dict]:
        redis = Redis.from_url(settings.redis_url)
        store = RedisStore(redis, settings.agent_id)
        expected = await _store_conversations(store, 2 * BATCH + 37)
        insight = Insight.build(settings, store, Metrics())
        today = datetime.now(UTC).date()
        chunks = insight.exporter.stream(today - timedelta(days=1), today, "jsonl")
        lines = [json.loads(chunk) async for chunk in chunks]
        await redis.aclose()
        return lines, expected

    lines, expected = asyncio.run(run())
    assert sorted(line["id"] for line in lines) == sorted(expected)  # each once, none missing
    for line in lines:
        i = expected[line["id"]]
        assert [m["text"] for m in line["messages"]] == [f"question {i}", f"answer {i}"]
        assert (line["prompt_tokens"], line["completion_tokens"]) == (100, i)
        assert line["cost"] == round((100 * 0.15 + i * 0.60) / 1e6, 9)
    stamps = [line["last_activity_at"] for line in lines]
    assert stamps == sorted(stamps, reverse=True)  # newest first
