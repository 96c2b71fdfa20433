"""Operator accounts for the console, in Redis: a username, a role and an argon2id password hash.

``admin`` may do everything; ``operator`` runs conversations (handoff) and reads the knowledge
base and the prompt. The last admin cannot be removed or demoted, so the console never locks
everyone out."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from pydantic import BaseModel

from gateway.conversation.store import RedisStore
from gateway.core.errors import Conflict, InvalidInput, NotFound

Role = Literal["admin", "operator"]
ROLES: tuple[Role, ...] = ("admin", "operator")
USERNAME = re.compile(r"^[a-z0-9][a-z0-9._@-]{1,63}$")
MIN_PASSWORD = 10
MAX_PASSWORD = 256


class Operator(BaseModel):
    username: str
    role: Role
    created_at: datetime
    password_changed_at: datetime


def display_name(username: str) -> str:
    """The name a customer sees for an operator: ``sam`` → "Sam", ``ann.lee@shop.example`` → "Ann Lee"."""
    words = re.split(r"[._-]+", username.split("@", 1)[0])
    return " ".join(word[:1].upper() + word[1:] for word in words if word) or username


def account_name(typed: str) -> str | None:
    """The account a typed username names (trimmed, lower-cased), or None when that is no possible
    username. Sign-in, its per-account limit and every change to an account go through this, so one
    account has exactly one spelling: padding or letter case never makes a second one."""
    name = typed.strip().lower()
    return name if USERNAME.fullmatch(name) else None


def _check_password(password: str) -> None:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInput(f"password: between {MIN_PASSWORD} and {MAX_PASSWORD} characters")


class Operators:
    def __init__(self, store: RedisStore, concurrent_checks: int = 2) -> None:
        self._store = store
        # argon2 takes ~64 MiB and a core per hash: a burst of sign-ins queues here instead of
        # growing the process (SWITCHBOARD_SIGNIN_CONCURRENT_CHECKS).
        self._slots = asyncio.Semaphore(concurrent_checks)
        self._redis = store.redis
        self._hasher = PasswordHasher()
        self._index = store.key("operators")
        self._dummy: str | None = None  # made on the first unknown username (a hash costs ~50 ms)

    def _key(self, username: str) -> str:
        return self._store.key("operator", username)

    async def _hash(self, password: str) -> str:
        async with self._slots:
            return await asyncio.to_thread(self._hasher.hash, password)

    async def _verify(self, stored: str, password: str) -> None:
        async with self._slots:
            await asyncio.to_thread(self._hasher.verify, stored, password)

    async def create(self, username: str, password: str, role: Role) -> Operator:
        name = account_name(username)
        if name is None:
            raise InvalidInput("username: 2-64 characters: lower-case letters, digits, '.', '_', '@', '-'")
        if role not in ROLES:
            raise InvalidInput(f"role: one of {', '.join(ROLES)}")
        _check_password(password)
        now = datetime.now(UTC).isoformat()
        mapping = {"role": role, "hash": await self._hash(password), "created_at": now, "password_changed_at": now}
        if not await self._redis.hsetnx(self._key(name), "role", role):
            raise Conflict(f"an operator named {name!r} already exists")
        await self._redis.hset(self._key(name), mapping=mapping)
        await self._redis.sadd(self._index, name)
        return await self._require(name)

    async def get(self, username: str) -> Operator | None:
        name = account_name(username)
        raw = await self._redis.hgetall(self._key(name)) if name else None
        if not raw or b"hash" not in raw:
            return None
        data = {k.decode(): v.decode() for k, v in raw.items() if k != b"hash"}
        return Operator(username=name, **data)

    async def _require(self, username: str) -> Operator:
        found = await self.get(username)
        if found is None:
            raise NotFound(f"no operator named {username!r}")
        return found

    async def all(self) -> list[Operator]:
        names = sorted(n.decode() for n in await self._redis.smembers(self._index))
        return [op for op in [await self.get(n) for n in names] if op is not None]

    async def count(self) -> int:
        return await self._redis.scard(self._index)

    async def verify(self, username: str, password: str) -> Operator | None:
        """The operator when the password is right; None otherwise (and as slowly for an unknown name)."""
        name = account_name(username)
        stored = await self._redis.hget(self._key(name), "hash") if name else None
        if stored is None and self._dummy is None:
            self._dummy = await self._hash("not a password of anyone")
        # Verifying against the dummy when the username is unknown takes as long as a real check,
        # so response times do not tell which usernames exist.
        try:
            await self._verify(stored.decode() if stored else self._dummy, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        return await self.get(name) if stored and name else None

    async def _admins(self) -> int:
        return sum(op.role == "admin" for op in await self.all())

    async def set_role(self, username: str, role: Role) -> Operator:
        if role not in ROLES:
            raise InvalidInput(f"role: one of {', '.join(ROLES)}")
        operator = await self._require(username)
        if operator.role == "admin" and role != "admin" and await self._admins() <= 1:
            raise Conflict("the last admin cannot be demoted; make someone else admin first")
        await self._redis.hset(self._key(operator.username), "role", role)
        return await self._require(operator.username)

    async def reset_password(self, username: str, password: str) -> Operator:
        operator = await self._require(username)
        _check_password(password)
        await self._redis.hset(self._key(operator.username), mapping={
            "hash": await self._hash(password), "password_changed_at": datetime.now(UTC).isoformat(),
        })
        return await self._require(operator.username)

    async def remove(self, username: str) -> Operator:
        """Remove the account; the removed operator (its canonical name signs its sessions out)."""
        operator = await self._require(username)
        if operator.role == "admin" and await self._admins() <= 1:
            raise Conflict("the last admin cannot be removed")
        await self._redis.delete(self._key(operator.username))
        await self._redis.srem(self._index, operator.username)
        return operator
