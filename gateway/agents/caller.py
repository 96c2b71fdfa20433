"""An agent API call's caller in one round trip: the API key (by its digest), the agent it names (by id
or name), the version asked for, and — when the key may call that agent — one call counted against the
key's per-minute limit. ``gateway/http/agent_auth.py`` turns what was read into 401 / 403 / 404 / 429 in
the same order as reading them one by one would."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.agents.api_keys import PREFIX, ApiKey, ApiKeys, digest
from gateway.agents.definitions import AgentDefinition, AgentVersion
from gateway.agents.store import LATEST, AgentStore
from gateway.conversation.rate_limit import API_KEY_WINDOW_S

# KEYS: by_digest, key records, agent names. ARGV: digest, agent ref, agent key prefix, version key prefix,
# version id (or "latest"), rate-limit key prefix, window s. {key, agent, version, used, ttl ms}; used is
# false when nothing was counted (no key, no agent, or the key may not call it, or its limit is off).
_READ = """
local key = false
local kid = redis.call('HGET', KEYS[1], ARGV[1])
if kid then key = redis.call('HGET', KEYS[2], kid) end
if not key then return {false, false, false, false, false} end
local agent = redis.call('GET', ARGV[3] .. ARGV[2])
if not agent then
  local aid = redis.call('HGET', KEYS[3], ARGV[2])
  if aid then agent = redis.call('GET', ARGV[3] .. aid) end
end
if not agent then return {key, false, false, false, false} end
local a = cjson.decode(agent)
local aid = a['id']
local vid = ARGV[5]
if vid == 'latest' then vid = a['latest_version_id'] or a['latestVersionId'] end
local version = false
if type(vid) == 'string' and vid ~= '' then version = redis.call('GET', ARGV[4] .. vid) end
local k = cjson.decode(key)
local allowed = false
for _, id in ipairs(k['agents']) do
  if id == aid then allowed = true end
end
local limit = tonumber(k['rate_limit_per_min']) or 0
if not allowed or limit <= 0 then return {key, agent, version, false, false} end
local counter = ARGV[6] .. k['id']
redis.call('SET', counter, 0, 'EX', ARGV[7], 'NX')
local used = redis.call('INCR', counter)
return {key, agent, version, used, redis.call('PTTL', counter)}
"""


@dataclass(frozen=True)
class CallerRead:
    key: ApiKey | None
    agent: AgentDefinition | None
    version: AgentVersion | None  # as stored; None when missing (check it belongs to ``agent``)
    used: int | None  # this minute's calls of the key, this one included; None: not counted
    ttl_ms: int


class CallerReader:
    def __init__(self, keys: ApiKeys, agents: AgentStore) -> None:
        self.keys = keys
        self.agents = agents
        self._read = keys.redis.register_script(_READ)

    async def read(self, key: str | None, agent_ref: str, version_id: str = LATEST) -> CallerRead:
        if not key or not key.startswith(PREFIX):
            return CallerRead(None, None, None, None, 0)
        store = self.agents.store
        raw_key, raw_agent, raw_version, used, ttl = await self._read(
            keys=[self.keys.by_digest_key, store.key("apikeys"), store.key("agents")],
            args=[digest(key), agent_ref, store.key("agent", ""), store.key("agentversion", ""), version_id,
                  self.keys.rate.key(""), API_KEY_WINDOW_S])
        return CallerRead(
            key=ApiKey.model_validate_json(raw_key) if raw_key else None,
            agent=AgentDefinition.model_validate_json(raw_agent) if raw_agent else None,
            version=AgentVersion.model_validate_json(raw_version) if raw_version else None,
            used=int(used) if used is not None else None,
            ttl_ms=int(ttl or 0),
        )
