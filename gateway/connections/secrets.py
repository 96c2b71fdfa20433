"""Credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under ``SWITCHBOARD_SECRET_KEY``.

The setting is a comma-separated list of keys, newest first: the first encrypts, every one decrypts,
so a key is rotated by putting a new one in front; ``rotate`` re-encrypts a value under the newest
key (the gateway does it for every connection when it starts), after which the old key can go.
"""

from __future__ import annotations

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from gateway.core.errors import InvalidInput, ServiceUnavailable

__all__ = ["CredentialBox", "NoSecretKey", "UnreadableCredentials", "parse_keys"]

KEY_HINT = ('SWITCHBOARD_SECRET_KEY must be Fernet keys (32 url-safe base64 bytes), comma-separated, newest first; '
            'make one with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"')


class NoSecretKey(InvalidInput):
    """Credentials were given but no key is configured to encrypt them."""


class UnreadableCredentials(ServiceUnavailable):
    """Stored credentials none of the configured keys can decrypt (a key was removed too early): a 503
    on the API, a 404 on the connection's webhook (as for a disabled one), an error in the log."""


def parse_keys(raw: str) -> list[Fernet]:
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    try:
        return [Fernet(k) for k in keys]
    except ValueError:
        raise ValueError(KEY_HINT) from None


class CredentialBox:
    def __init__(self, raw_keys: str | None) -> None:
        keys = parse_keys(raw_keys) if raw_keys else []
        self._newest = keys[0] if keys else None
        self._fernet = MultiFernet(keys) if keys else None

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    def seal(self, credentials: dict[str, str]) -> str:
        if self._fernet is None:
            raise NoSecretKey("credentials: set SWITCHBOARD_SECRET_KEY before adding a connection with credentials "
                              "(they are stored encrypted); " + KEY_HINT.split("; ", 1)[1])
        return self._fernet.encrypt(json.dumps(credentials).encode()).decode()

    def open(self, sealed: str) -> dict[str, str]:
        if self._fernet is None:
            raise UnreadableCredentials("stored credentials need SWITCHBOARD_SECRET_KEY to be read")
        try:
            return json.loads(self._fernet.decrypt(sealed.encode()))
        except InvalidToken:
            raise UnreadableCredentials("no key in SWITCHBOARD_SECRET_KEY decrypts the stored credentials") from None

    def rotated(self, sealed: str) -> str | None:
        """The same credentials under the newest key; None when they are already under it."""
        if self._fernet is None or self._newest is None:
            return None
        try:
            self._newest.decrypt(sealed.encode())
            return None
        except InvalidToken:
            return self._fernet.rotate(sealed.encode()).decode()
