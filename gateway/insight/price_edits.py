"""The operator's edits to the price table (console and ``/api/insights/prices``), kept in Redis so every
replica prices alike: each replica holds them in its ``PriceTable`` (a turn prices its calls without a
round trip) and reloads them when a change is announced on a Redis channel."""

from __future__ import annotations

from pydantic import ValidationError

from gateway.conversation.store import RedisStore
from gateway.core.errors import InvalidInput, NotFound
from gateway.core.settings import ModelPrice
from gateway.insight.prices import PriceTable

__all__ = ["PriceEdits"]

MODEL_MAX_CHARS = 200


class PriceEdits:
    def __init__(self, store: RedisStore, table: PriceTable) -> None:
        self.store = store
        self.table = table

    @property
    def key(self) -> str:
        return self.store.key("insight", "prices")

    @property
    def changes_channel(self) -> str:
        return self.store.key("insight", "prices", "changed")

    async def reload(self) -> None:
        edited = {}
        for model, raw in (await self.store.redis.hgetall(self.key)).items():
            try:
                edited[model.decode()] = ModelPrice.model_validate_json(raw)
            except ValidationError:
                continue  # written by hand and unreadable: the table's other prices stand
        self.table.use_edited(edited)

    async def set(self, model: str, price: ModelPrice) -> dict:
        model = model.strip()
        if not model or len(model) > MODEL_MAX_CHARS:
            raise InvalidInput(f"model: a name of 1-{MODEL_MAX_CHARS} characters")
        await self.store.redis.hset(self.key, model, price.model_dump_json())
        await self._changed()
        return next(row for row in self.table.rows() if row["model"] == model)

    async def remove(self, model: str) -> None:
        """The edit goes: the environment's or built-in price (if any) applies again."""
        if not await self.store.redis.hdel(self.key, model):
            raise NotFound(f"no edited price for {model!r}")
        await self._changed()

    async def _changed(self) -> None:
        await self.reload()
        await self.store.redis.publish(self.changes_channel, "1")
