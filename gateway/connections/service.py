"""Adding, changing and removing connections: validated, verified with the vendor, then stored.

Refused input (unknown kind, a missing credential, an unknown agent, credentials the vendor refuses)
stores nothing. A vendor that cannot be reached does not lose the operator's work: the connection
is stored disabled with the error in its status, to be verified again later. Checking the stored
credentials again (verify again, enable) records its outcome either way: a failed check leaves the
connection disabled with that error as its last error; one that passes clears it.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.agents.store import LATEST, AgentStore
from gateway.connections.model import (
    DEFAULT_ID,
    EMAIL_TLS,
    KINDS,
    META_KINDS,
    OPTIONAL,
    REQUIRED,
    Connection,
    Kind,
    environment_connections,
)
from gateway.connections.store import ConnectionStore
from gateway.connections.verify import ConnectionVerifier, CredentialsRefused, VendorUnreachable
from gateway.core.errors import Conflict, InvalidInput, NotFound
from gateway.core.models import utcnow
from gateway.core.settings import Settings

__all__ = ["ConnectionCreate", "ConnectionPatch", "Connections"]

log = logging.getLogger(__name__)
# A Telegram bot token is ``<bot id>:<secret>``; aiogram refuses any other shape (a space, no colon, a
# non-digit id) with an exception of its own, so it is refused here first, as input, naming the field.
_TELEGRAM_TOKEN = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
# Discord's application id is a snowflake; its public key 32 bytes in hex, as the developer portal shows both
_SNOWFLAKE, _ED25519_HEX = re.compile(r"[0-9]{15,22}"), re.compile(r"[0-9a-fA-F]{64}")


class ConnectionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    name: str = Field(min_length=1, max_length=100)
    agent: str | None = None
    enabled: bool = True
    credentials: dict[str, str] = Field(default_factory=dict)


class ConnectionPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=100)
    agent: str | None = None
    enabled: bool | None = None
    credentials: dict[str, str] | None = None  # the fields given replace those stored; the rest stay


def _invalid(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    return InvalidInput(f"{'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}")


def _check_credentials(kind: str, credentials: dict[str, str]) -> None:
    for name in REQUIRED[kind]:
        if not credentials.get(name, "").strip():
            raise InvalidInput(f"credentials.{name}: required for a {kind} connection")
    known = REQUIRED[kind] + OPTIONAL.get(kind, ())
    for name in OPTIONAL.get(kind, ()):
        if name in credentials and not credentials[name]:
            raise InvalidInput(f"credentials.{name}: empty (leave it out instead)")
    unknown = sorted(set(credentials) - set(known))
    if unknown:
        raise InvalidInput(f"credentials.{unknown[0]}: not a {kind} credential (expected {', '.join(known)})")
    if kind == "telegram" and not _TELEGRAM_TOKEN.fullmatch(credentials["bot_token"]):
        raise InvalidInput("credentials.bot_token: not a Telegram bot token (written <bot id>:<secret>, "
                           "as @BotFather gives it)")
    if kind == "discord" and not _SNOWFLAKE.fullmatch(credentials["application_id"]):
        raise InvalidInput("credentials.application_id: not a Discord application id (digits, as the developer "
                           "portal's General Information shows it)")
    if kind == "discord" and not _ED25519_HEX.fullmatch(credentials["public_key"]):
        raise InvalidInput("credentials.public_key: not a Discord public key (64 hex digits, as the developer "
                           "portal's General Information shows it)")
    if kind == "whatsapp" and not credentials["sender"].startswith("whatsapp:+"):
        raise InvalidInput("credentials.sender: a WhatsApp sender is written whatsapp:+<number>")
    if kind == "email":
        _check_mailbox(credentials)


def _check_mailbox(credentials: dict[str, str]) -> None:
    if credentials["tls"] not in EMAIL_TLS:
        raise InvalidInput(f"credentials.tls: one of {', '.join(EMAIL_TLS)}")
    for name in ("imap_port", "smtp_port"):
        if not credentials[name].isdigit() or not 0 < int(credentials[name]) < 65536:
            raise InvalidInput(f"credentials.{name}: a port number (1-65535)")
    if "@" not in credentials["address"].strip("@"):
        raise InvalidInput("credentials.address: the mailbox's address, written name@domain")


class Connections:
    def __init__(self, settings: Settings, store: ConnectionStore, agents: AgentStore,
                 verifiers: dict[str, ConnectionVerifier]) -> None:
        self.settings = settings
        self.store = store
        self.agents = agents
        self.verifiers = verifiers  # kind -> its vendor check, filled as the channels are installed

    def webhook_url(self, connection: Connection) -> str:
        return connection.public(self.settings.public_url)["webhook_url"] or ""  # "": a kind with none (email)

    async def list(self) -> list[Connection]:
        return [*await self.environment(), *await self.store.list()]

    async def get(self, connection_id: str) -> Connection:
        if connection_id == DEFAULT_ID:
            found = await self.environment()
            if not found:
                raise NotFound("no channel is configured by environment variables")
            return found[0]
        return await self.store.get(connection_id)

    async def create(self, data: Any) -> Connection:
        try:
            spec = ConnectionCreate.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None
        if spec.kind not in KINDS:
            raise InvalidInput(f"kind: unknown kind {spec.kind!r}; one of {', '.join(KINDS)}")
        credentials = {k: v.strip() for k, v in spec.credentials.items()
                       if v.strip() or k not in OPTIONAL.get(spec.kind, ())}
        _check_credentials(spec.kind, credentials)
        agent = await self._agent(spec.agent)
        self.store.box.seal({})  # no key: refused before the vendor is asked anything
        if spec.kind == "telegram":
            credentials["webhook_secret"] = secrets.token_urlsafe(32)
        if spec.kind in META_KINDS and not credentials.get("verify_token"):
            credentials["verify_token"] = secrets.token_urlsafe(24)
        kind: Kind = spec.kind  # type: ignore[assignment]
        connection = Connection(kind=kind, name=spec.name, agent=agent, enabled=spec.enabled, credentials=credentials)
        return await self._verified_save(connection)

    async def update(self, connection_id: str, data: Any) -> Connection:
        self._writable(connection_id)
        try:
            patch = ConnectionPatch.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc) from None
        current = await self.store.get(connection_id)
        changes: dict[str, Any] = {k: v for k, v in patch.model_dump(exclude_unset=True).items() if k != "credentials"}
        if "agent" in changes:
            changes["agent"] = await self._agent(changes["agent"])
        if "name" in changes and changes["name"] is None:
            raise InvalidInput("name: cannot be empty")
        reverify = False
        if patch.credentials:
            given = {k: v.strip() for k, v in patch.credentials.items()}
            merged = {**{k: v for k, v in current.credentials.items() if k != "webhook_secret"}, **given}
            _check_credentials(current.kind, merged)
            if "webhook_secret" in current.credentials:
                merged["webhook_secret"] = current.credentials["webhook_secret"]
            reverify = merged != current.credentials
            changes["credentials"] = merged
        if changes.get("enabled") and not current.enabled:
            reverify = True
        updated = current.model_copy(update=changes)
        if not reverify:
            return await self.store.save(updated)
        # a refusal of credentials given here is refused input; of the stored ones, the connection's state
        saved = await self._verified_save(updated, stored_credentials="credentials" not in changes)
        if "credentials" in changes and saved.status.verified_at != current.status.verified_at:
            await self._forget(current)  # e.g. the old bot token's webhook: it must not call us any more
        return saved

    async def verify_again(self, connection_id: str) -> Connection:
        self._writable(connection_id)
        current = await self.store.get(connection_id)
        return await self._verified_save(current.model_copy(update={"enabled": True}), stored_credentials=True)

    async def delete(self, connection_id: str) -> None:
        self._writable(connection_id)
        connection = await self.store.get(connection_id)
        await self.store.delete(connection_id)  # first: its webhook answers 404 from now on
        await self._forget(connection)

    async def _forget(self, connection: Connection) -> None:
        verifier = self.verifiers.get(connection.kind)
        if verifier is not None:
            try:
                await verifier.forget(connection)
            except Exception as exc:  # the vendor side is best effort; the connection is gone either way
                log.warning("connection %s: could not undo the %s side: %s", connection.id, connection.kind,
                            connection.redact(str(exc)))

    # -- the parts -----------------------------------------------------------------------------
    async def _verified_save(self, connection: Connection, *, stored_credentials: bool = False) -> Connection:
        """Save after asking the vendor. ``stored_credentials``: the credentials are those already
        stored, so a refusal is recorded as the connection's failed check (and still raised)."""
        verifier = self.verifiers.get(connection.kind)
        error = None
        status = connection.status
        if verifier is not None and connection.enabled:
            try:
                account = await verifier.verify(connection, self.webhook_url(connection))
                status = status.model_copy(update={"verified_at": utcnow(), "account": account})
            except VendorUnreachable as exc:
                error = connection.redact(str(exc))
                connection = connection.model_copy(update={"enabled": False})
            except CredentialsRefused as exc:
                if stored_credentials:
                    await self._check_failed(connection, connection.redact(exc.message))
                raise
        saved = await self.store.save(connection.model_copy(update={"status": status}))
        if error is not None:
            await self._check_failed(saved, error, saved_already=True)
        elif verifier is not None and connection.enabled:
            await self.store.note(saved.id, last_error=None, last_error_at=None, check_error=None)
        return await self.store.get(saved.id)

    async def _check_failed(self, connection: Connection, error: str, *, saved_already: bool = False) -> None:
        """One failed check, one state: disabled, with this error as the check's and the last error."""
        if not saved_already:
            await self.store.save(connection.model_copy(update={"enabled": False}))
        log.warning("connection %s (%s) disabled: the check with the vendor failed: %s", connection.id,
                    connection.kind, error)
        await self.store.note_error(connection, error)
        await self.store.note(connection.id, check_error=error[:500])

    async def _agent(self, agent: str | None) -> str | None:
        """``id``, ``id@version`` or an agent's name, checked; None (the channels' agent) as given."""
        if agent is None or not agent.strip():
            return None
        agent_id, _, version = agent.strip().partition("@")
        try:
            try:
                await self.agents.get(agent_id)
            except NotFound:
                agent_id = (await self.agents.by_name(agent_id)).id
            await self.agents.resolve(agent_id, version or LATEST)
        except NotFound as exc:
            raise InvalidInput(f"agent: {exc.message}") from None
        return f"{agent_id}@{version}" if version else agent_id

    def _writable(self, connection_id: str) -> None:
        if connection_id == DEFAULT_ID:
            raise Conflict("the default connection is configured by environment variables and is read-only here")

    async def environment(self) -> list[Connection]:
        """The channels configured by environment variables, as the read-only connection ``default``."""
        return [connection.model_copy(update={"status": await self.store.environment_status(kind)})
                for kind, connection in environment_connections(self.settings).items()]
