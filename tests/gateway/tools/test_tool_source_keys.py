"""Tool sources' headers follow SWITCHBOARD_SECRET_KEY rotation: a gateway started with a new key in
front re-seals them under it at start, after which the old key can be removed and the source still
reaches its server with its token."""

from __future__ import annotations

import redis
from cryptography.fernet import Fernet
from pydantic import SecretStr

from gateway.services import Services
from tests.gateway.tools.conftest import TOKEN


async def _started(settings) -> Services:
    services = Services.build(settings)
    await services.start()
    return services


async def test_a_new_key_in_front_reseals_the_headers(tool_settings, mcp_server):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    first = await _started(tool_settings.model_copy(update={"secret_key": SecretStr(old)}))
    source = await first.tool_sources.create({"name": "crm", "url": mcp_server.url,
                                              "headers": {"Authorization": f"Bearer {TOKEN}"}})
    await first.aclose()
    r = redis.Redis.from_url(str(tool_settings.redis_url))
    records = f"sb:{tool_settings.agent_id}:toolsourcerecords"
    sealed_old = r.hget(records, source.id)
    assert TOKEN.encode() not in sealed_old

    second = await _started(tool_settings.model_copy(update={"secret_key": SecretStr(f"{new},{old}")}))
    await second.aclose()
    resealed = r.hget(records, source.id)
    assert resealed != sealed_old and TOKEN.encode() not in resealed

    third = await _started(tool_settings.model_copy(update={"secret_key": SecretStr(new)}))
    try:
        refreshed = await third.tool_sources.refresh(source.id)
        assert refreshed.headers == {"Authorization": f"Bearer {TOKEN}"}
        assert refreshed.status.last_error is None and len(refreshed.tools) == 4
    finally:
        await third.aclose()
        r.close()


async def test_sources_stored_in_the_first_layout_are_moved_into_the_hash(tool_settings, mcp_server):
    """A key per record and a set of ids (the first layout): the first listing moves them into the one hash
    (listed with one command after), headers still sealed and opened."""
    services = await _started(tool_settings)
    r = redis.Redis.from_url(str(tool_settings.redis_url))
    prefix = f"sb:{tool_settings.agent_id}"
    try:
        source = await services.tool_sources.create({"name": "crm", "url": mcp_server.url,
                                                     "headers": {"Authorization": f"Bearer {TOKEN}"}})
        raw = r.hget(f"{prefix}:toolsourcerecords", source.id)
        r.delete(f"{prefix}:toolsourcerecords")
        r.set(f"{prefix}:toolsource:{source.id}", raw)
        r.sadd(f"{prefix}:toolsources", source.id)

        [listed] = await services.tool_sources.list()
        assert listed.headers == {"Authorization": f"Bearer {TOKEN}"} and len(listed.tools) == 4
        assert r.hget(f"{prefix}:toolsourcerecords", source.id) == raw
        assert not r.exists(f"{prefix}:toolsource:{source.id}", f"{prefix}:toolsources")
        assert [s.id for s in await services.tool_sources.list()] == [source.id]
    finally:
        await services.aclose()
        r.close()
