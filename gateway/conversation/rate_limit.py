"""Rate limits counted in Redis, so every replica shares one count per caller.

A limit allows ``limit`` events per ``window_s`` for one caller (an address, a session, an account,
an API key). The window is fixed and starts at the caller's first event, which costs one atomic round
trip (``SET NX EX`` + ``INCR`` + ``PTTL`` in a MULTI) and one short-lived key per caller and window.
A library such as ``limits`` would open its own Redis pool from a URL, outside our client's timeouts,
retries and the embedded Redis; three commands did not justify that.

Two ways to count: ``take`` counts every event and refuses past the limit (sessions, messages,
API calls); ``failed`` counts only failures and ``check`` refuses once they reach the limit, even a
right password or token, until the window ends (sign-in, the admin token). A refusal is a
``RateLimited`` (429 with ``Retry-After``) and is counted in ``switchboard_rate_limited{limit}``.
A limit of 0 is off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.conversation.store import RedisStore
from gateway.core.errors import RateLimited
from gateway.core.metrics import Metrics
from gateway.core.settings import Settings

__all__ = ["API_KEY_WINDOW_S", "RateLimit", "RateLimits", "Rule"]

API_KEY_WINDOW_S = 60  # an API key's limit is per minute


@dataclass(frozen=True)
class Rule:
    name: str  # the metric's label and part of the key: never a caller's address or secret
    limit: int  # events (or failures) per window; 0: no limit
    window_s: int
    what: str  # for the refusal's message: "new chat sessions from one address"


class RateLimit:
    def __init__(self, store: RedisStore, rule: Rule, metrics: Metrics) -> None:
        self.store = store
        self.rule = rule
        self._metrics = metrics

    def key(self, who: str) -> str:
        return self.store.key("ratelimit", self.rule.name, who)

    def refuse(self, limit: int, wait_ms: int) -> RateLimited:
        self._metrics.rate_limited.labels(self.rule.name).inc()
        wait_s = max(1, -(-wait_ms // 1000))
        return RateLimited(f"too many {self.rule.what}: {limit} per {self.rule.window_s} s; "
                           f"try again in {wait_s} s", retry_after_s=wait_s)

    def _queue_count(self, pipe, who: str) -> None:  # noqa: ANN001 - a redis pipeline
        key = self.key(who)
        pipe.set(key, 0, ex=self.rule.window_s, nx=True)  # the window starts at the first event
        pipe.incr(key)
        pipe.pttl(key)

    async def _count(self, who: str) -> tuple[int, int]:
        async with self.store.redis.pipeline(transaction=True) as pipe:
            self._queue_count(pipe, who)
            _, used, ttl_ms = await pipe.execute()
        return int(used), int(ttl_ms)

    async def take(self, who: str, limit: int | None = None) -> None:
        """Count one event for ``who``; past the limit (``limit`` overrides the rule's) refuse it."""
        limit = self.rule.limit if limit is None else limit
        if limit <= 0:
            return
        used, ttl_ms = await self._count(who)
        if used > limit:
            raise self.refuse(limit, ttl_ms)

    @staticmethod
    async def take_each(*takes: tuple[RateLimit, str]) -> None:
        """``take`` for several (limit, caller) pairs in one round trip; every pair is counted, and the
        first one past its limit is the refusal."""
        if not any(limit.rule.limit > 0 for limit, _ in takes):
            return
        async with takes[0][0].store.redis.pipeline(transaction=True) as pipe:
            check = RateLimit.queue_each(pipe, *takes)
            answers = await pipe.execute()
        check(answers)

    @staticmethod
    def queue_each(pipe, *takes: tuple[RateLimit, str]) -> Callable[[list], None]:  # noqa: ANN001 - a pipeline
        """Queue ``take_each``'s counts in ``pipe`` (a MULTI with someone else's commands); returns the check
        to run on the pipeline's answers, which raises the first refusal."""
        start = len(pipe.command_stack)
        active = [(limit, who) for limit, who in takes if limit.rule.limit > 0]
        for limit, who in active:
            limit._queue_count(pipe, who)

        def check(answers: list) -> None:
            for i, (limit, _) in enumerate(active):
                used, ttl_ms = int(answers[start + 3 * i + 1]), int(answers[start + 3 * i + 2])
                if used > limit.rule.limit:
                    raise limit.refuse(limit.rule.limit, ttl_ms)

        return check

    async def check(self, who: str) -> None:
        """Refuse ``who`` while its failures have reached the limit; counts nothing."""
        if self.rule.limit <= 0:
            return
        key = self.key(who)
        async with self.store.redis.pipeline(transaction=False) as pipe:
            pipe.get(key)
            pipe.pttl(key)
            used, ttl_ms = await pipe.execute()
        if used is not None and int(used) >= self.rule.limit and ttl_ms != -2:
            raise self.refuse(self.rule.limit, max(int(ttl_ms), 1))

    async def failed(self, who: str) -> None:
        if self.rule.limit > 0:
            await self._count(who)

    async def clear(self, who: str) -> None:
        await self.store.redis.delete(self.key(who))


@dataclass(frozen=True)
class RateLimits:
    """Every limited surface's limit, built once from the settings (``SWITCHBOARD_*`` in README)."""

    webchat_sessions: RateLimit  # per client address
    webchat_address_messages: RateLimit  # per client address
    webchat_session_messages: RateLimit  # per session
    admin_token_failures: RateLimit  # per client address
    signin_account: RateLimit  # failures per username
    signin_address: RateLimit  # failures per client address
    api_keys: RateLimit  # per key; each key's own limit per minute

    async def take_webchat_message(self, address: str, session_id: str) -> None:
        """One web-chat message against its address's and its session's limits, in one round trip."""
        await RateLimit.take_each((self.webchat_address_messages, address), (self.webchat_session_messages, session_id))

    def queue_webchat_message(self, pipe, address: str, session_id: str) -> Callable[[list], None]:  # noqa: ANN001
        """``take_webchat_message`` queued in ``pipe`` (the web chat's session read); the check to run on
        its answers."""
        return RateLimit.queue_each(pipe, (self.webchat_address_messages, address),
                                    (self.webchat_session_messages, session_id))

    @classmethod
    def build(cls, store: RedisStore, settings: Settings, metrics: Metrics) -> RateLimits:
        s = settings

        def limit(name: str, count: int, window_s: int, what: str) -> RateLimit:
            return RateLimit(store, Rule(name, count, window_s, what), metrics)

        return cls(
            webchat_sessions=limit("webchat-session-address", s.webchat_sessions_per_address,
                                   s.webchat_sessions_window_s, "new chat sessions from one address"),
            webchat_address_messages=limit("webchat-message-address", s.webchat_messages_per_address,
                                           s.webchat_messages_window_s, "chat messages from one address"),
            webchat_session_messages=limit("webchat-message-session", s.webchat_messages_per_session,
                                           s.webchat_messages_window_s, "messages in one chat session"),
            admin_token_failures=limit("admin-token-address", s.admin_token_failures_per_address,
                                       s.admin_token_failures_window_s, "wrong admin tokens from one address"),
            signin_account=limit("signin-account", s.signin_failures_per_account, s.signin_window_s,
                                 "failed sign-ins for one account"),
            signin_address=limit("signin-address", s.signin_failures_per_address, s.signin_window_s,
                                 "failed sign-ins from one address"),
            api_keys=limit("api-key", s.api_key_rate_limit_per_min, API_KEY_WINDOW_S, "calls with one API key"),
        )
