"""Connection listeners across two "replicas" (two ConnectionListeners on one Redis): each enabled
connection's listener runs in exactly one of them, a disabled connection's listener stops, and when the
holder stops the other replica takes the listener over."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from channels.listeners import ConnectionListeners
from gateway.channel import Connection
from gateway.services import Services
from tests.channels.connections_support import SECRET_KEY


@pytest.fixture
async def services(settings):
    built = Services.build(settings.model_copy(update={"secret_key": SecretStr(SECRET_KEY)}))
    await built.start()
    yield built
    await built.aclose()


class Replica:
    def __init__(self, context, name: str) -> None:
        self.running: set[str] = set()
        self.listeners = ConnectionListeners(context, "telegram", self.listen, lease_s=0.9, poll_s=0.1)
        self.name = name

    async def listen(self, connection: Connection) -> None:
        self.running.add(connection.id)
        try:
            await asyncio.Event().wait()
        finally:
            self.running.discard(connection.id)


async def _until(check, within: float = 3.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)  # noqa: ASYNC110 - polling two replicas' state


async def test_one_listener_per_connection_across_replicas(services) -> None:
    context = services.channel_context()
    store = context.connections
    one = await store.save(Connection(kind="telegram", name="one", credentials={"bot_token": "1:abcdefgh"}))
    two = await store.save(Connection(kind="telegram", name="two", credentials={"bot_token": "2:abcdefgh"}))
    await store.save(Connection(kind="slack", name="not mine", credentials={"bot_token": "x", "signing_secret": "y"}))
    a, b = Replica(context, "a"), Replica(context, "b")
    a.listeners.start()
    b.listeners.start()
    try:
        await _until(lambda: a.running | b.running == {one.id, two.id})
        await asyncio.sleep(0.5)  # several polls and renewals later: still exactly one of each
        assert a.running | b.running == {one.id, two.id} and not a.running & b.running

        await store.save(one.model_copy(update={"enabled": False}))
        await _until(lambda: one.id not in a.running | b.running)
        assert two.id in a.running | b.running

        holder, other = (a, b) if two.id in a.running else (b, a)
        await holder.listeners.stop()
        await _until(lambda: two.id in other.running)
        assert not holder.running
    finally:
        await a.listeners.stop()
        await b.listeners.stop()
