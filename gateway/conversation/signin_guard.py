"""The console's sign-in limit: an attempt is counted before its password is checked.

One Lua step reads the account's and the address's counts and whether the address is known to the
account, and either refuses or counts the attempt in both, so concurrent attempts cannot all pass a
check that was made before any of them was counted. A success takes its own attempt back (only
failures stay counted) and makes the address known to the account for
``SWITCHBOARD_SIGNIN_KNOWN_ADDRESS_DAYS``.

The lock-out cannot be turned against an account's owner from another address: past the account's
limit, an address that signed in to that account recently is still let through to the password check
(its own per-address limit still applies), while every other address waits out the window. See
docs/security/limits.md for why this rather than a progressive delay.

The account is counted by its canonical name (``operators.account_name``: the same name the password
check resolves), so no spelling of a name is a fresh count for the same account; a typed name that is
no possible account is counted under one shared name. An address is counted by its
``limit_bucket`` (an IPv6 client by its /64).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.conversation.operators import account_name
from gateway.conversation.rate_limit import RateLimit
from gateway.core.client_address import limit_bucket

__all__ = ["NO_ACCOUNT", "Admission", "SignInGuard"]

NO_ACCOUNT = "-"  # the count of typed names that are no possible username (no account starts with "-")

# KEYS: account count, address count, "address known to account" marker.
# ARGV: account limit, address limit, window (s). Limits of 0 are off.
# Returns {verdict, wait_ms}: 0 admitted, 1 refused for the address, 2 refused for the account;
# an admitted attempt's wait_ms is 1 when the address is known.
_ADMIT = """
local account_limit, address_limit, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local account = tonumber(redis.call('GET', KEYS[1]) or '0')
local address = tonumber(redis.call('GET', KEYS[2]) or '0')
local known = redis.call('EXISTS', KEYS[3])
if address_limit > 0 and address >= address_limit then
  return {1, redis.call('PTTL', KEYS[2])}
end
if account_limit > 0 and account >= account_limit and known == 0 then
  return {2, redis.call('PTTL', KEYS[1])}
end
for i = 1, 2 do
  redis.call('SET', KEYS[i], 0, 'EX', window, 'NX')
  redis.call('INCR', KEYS[i])
end
return {0, known}
"""

# Take one counted attempt back (never below zero, never a key without its window).
_RETURN = """
for i = 1, 2 do
  if tonumber(redis.call('GET', KEYS[i]) or '0') > 0 then redis.call('DECR', KEYS[i]) end
end
if tonumber(ARGV[1]) > 0 then redis.call('SET', KEYS[3], 1, 'EX', ARGV[1]) end
return 0
"""


@dataclass(frozen=True)
class Admission:
    account: str | None  # the canonical account the typed name names; None: no possible account
    address: str  # the address's limit bucket
    known_address: bool  # the address signed in to this account recently


class SignInGuard:
    def __init__(self, account: RateLimit, address: RateLimit, known_for_s: int) -> None:
        self._account = account
        self._address = address
        self._known_for_s = known_for_s
        redis = account.store.redis
        self._admit = redis.register_script(_ADMIT)
        self._return = redis.register_script(_RETURN)

    def _keys(self, account: str | None, bucket: str) -> list[str]:
        name = account or NO_ACCOUNT
        known = self._account.store.key("signin-known", name, bucket)
        return [self._account.key(name), self._address.key(bucket), known]

    async def admit(self, typed_username: str, address: str) -> Admission:
        """Count one attempt, or raise ``RateLimited`` (counting nothing) when a limit is reached."""
        account, bucket = account_name(typed_username), limit_bucket(address)
        rules = self._account.rule, self._address.rule
        verdict, value = await self._admit(keys=self._keys(account, bucket),
                                           args=[rules[0].limit, rules[1].limit, rules[0].window_s])
        if verdict == 1:
            raise self._address.refuse(rules[1].limit, max(int(value), 1))
        if verdict == 2:
            raise self._account.refuse(rules[0].limit, max(int(value), 1))
        return Admission(account, bucket, known_address=bool(value))

    async def succeeded(self, admission: Admission) -> None:
        await self._return(keys=self._keys(admission.account, admission.address), args=[self._known_for_s])
