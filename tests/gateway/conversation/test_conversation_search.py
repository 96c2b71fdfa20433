"""Conversation search finds a word said in any message of a conversation, not only in its last one,
from an index kept as messages are stored (and built once for conversations stored before it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from gateway.conversation.listing import Filters
from gateway.core.models import Conversation, Message, Role

ADMIN = {"Authorization": "Bearer admin-secret"}


def test_a_word_from_an_earlier_message_finds_the_conversation(gateway, fake_openai):
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        def chat(*texts: str) -> str:
            body = client.post("/api/chat/sessions").json()
            auth = {"Authorization": f"Bearer {body['token']}"}
            for text in texts:
                sent = client.post(f"/api/chat/sessions/{body['session_id']}/messages", json={"text": text},
                                   headers=auth)
                assert sent.status_code == 200, sent.text
            return body["session_id"]

        def found(q: str) -> list[str]:
            rows = client.get("/api/conversations", params={"q": q}, headers=ADMIN).json()["conversations"]
            return [r["last_message"]["text"] for r in rows]

        chat("How long does kiln firing take?", "And are you open on Sundays?")
        chat("Do you sell clay?", "Thanks, bye")
        assert found("kiln") == ["echo: And are you open on Sundays?"]
        assert found("KILN firing") == ["echo: And are you open on Sundays?"]
        assert found("kil") == ["echo: And are you open on Sundays?"]  # a word's beginning
        assert found("clay") == ["echo: Thanks, bye"]
        assert found("kiln clay") == []  # every word, in one conversation
        assert found("echo") == ["echo: Thanks, bye", "echo: And are you open on Sundays?"]  # newest first
        assert found("?!") == []


def _message(conversation: Conversation, text: str, at: datetime) -> Message:
    return Message(conversation_id=conversation.id, persona_id=conversation.persona_id, role=Role.USER,
                   channel=conversation.channel, text=text, created_at=at)


async def _stored(services, channel: str, *texts: str, ended: bool = False) -> Conversation:
    persona = await services.store.resolve_persona(f"{channel}:{texts[0]}")
    at = datetime.now(UTC) - timedelta(minutes=10)
    conversation = Conversation(persona_id=persona.id, channel=channel, started_at=at, last_activity_at=at,
                                ended_at=at if ended else None)
    await services.store.save_conversation(conversation)
    for n, text in enumerate(texts):
        await services.store.add_message(_message(conversation, text, at + timedelta(seconds=n)))
    return conversation


async def _ids(services, **filters) -> list[str]:
    rows, _ = await services.conversations.page(Filters.of(filters))
    return [r.conversation.id for r in rows]


async def test_channel_status_accents_and_ids_narrow_the_search(services):
    crepe = await _stored(services, "telegram", "Une crêpe au café, s'il vous plaît", "merci")
    ended = await _stored(services, "webchat", "Is the cafe open?", "ok", ended=True)
    assert set(await _ids(services, q="cafe")) == {crepe.id, ended.id}
    assert await _ids(services, q="Café", channel="telegram") == [crepe.id]
    assert await _ids(services, q="cafe", status="ended") == [ended.id]
    assert await _ids(services, q="cafe", status="bot") == [crepe.id]
    assert await _ids(services, q=crepe.id[:10]) == [crepe.id]  # an operator pastes an id's beginning
    assert await _ids(services, q=ended.persona_id) == [ended.id]


async def test_a_forgotten_conversation_is_no_longer_found(services):
    kept = await _stored(services, "webchat", "kiln rental please")
    gone = await _stored(services, "webchat", "kiln firing times")
    await services.store.search.forget(gone.id, ["kiln firing times", gone.id, gone.persona_id])
    assert await _ids(services, q="kiln") == [kept.id]
    assert await _ids(services, q="firing") == []
    assert not await services.store.redis.zscore(services.store.key("search", "words"), "firing")


async def test_conversations_stored_before_the_index_are_indexed_once(services):
    old = await _stored(services, "twilio_sms", "Can I book the kiln for Friday?", "great")
    redis = services.store.redis
    # What the previous release left: messages and the conversation list, but no search index.
    leftovers = [k async for k in redis.scan_iter(services.store.key("search", "*"))]
    await redis.delete(*leftovers)
    await redis.hset(services.store.key("convs", "search"), old.id, "great")
    assert await _ids(services, q="kiln") == []
    assert await services.store.search.backfill() == 1
    assert await _ids(services, q="kiln") == [old.id]
    assert not await redis.exists(services.store.key("convs", "search"))
    assert await services.store.search.backfill() == 0  # done once


async def test_common_words_read_the_list_newest_first_with_the_same_answers(services):
    """Past ``materialize_limit`` conversations for its rarest word, a query walks the list instead of
    intersecting sets: the same conversations come back, in the same order, page by page."""
    from gateway.conversation.search import ConversationSearch

    stored = [await _stored(services, "webchat", f"kiln firing question {n}", f"glaze number{n} please")
              for n in range(12)]
    await _stored(services, "webchat", "glaze only here")
    newest_first = [c.id for c in reversed(stored)]
    walking = ConversationSearch(services.store.redis, services.store.key, materialize_limit=0)
    order = services.store.list_key()
    for search in (services.store.search, walking):
        assert await search.ids("kiln glaze", order, 0, 5) == newest_first[:5]
        assert await search.ids("kiln glaze", order, 5, 50) == newest_first[5:]
        assert await search.ids("kil numb", order, 0, 50) == newest_first  # prefixes, many words each
        assert await search.ids("number3", order, 0, 50) == [stored[3].id]
        assert await search.ids("kiln zeppelin", order, 0, 50) == []
