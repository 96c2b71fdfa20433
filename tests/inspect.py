"""Read what the gateway stored, straight from Redis, from a test thread (the app's loop is elsewhere)."""

from __future__ import annotations

import redis

from gateway.core.models import Message, TurnTrace


def _client(services) -> redis.Redis:
    return redis.Redis.from_url(services.settings.redis_url)


def read_trace(services, turn_id: str) -> TurnTrace:
    raw = _client(services).get(services.store.key("trace", turn_id))
    assert raw is not None, f"no trace stored for turn {turn_id}"
    return TurnTrace.model_validate_json(raw)


def read_persona_messages(services, persona_id: str) -> list[Message]:
    r = _client(services)
    ids = r.zrange(services.store.key("persona", persona_id, "msgs"), 0, -1)
    return [Message.model_validate_json(r.get(services.store.key("msg", i.decode()))) for i in ids]
