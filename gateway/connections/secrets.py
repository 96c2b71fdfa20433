"""Credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under ``SWITCHBOARD_SECRET_KEY``.

The setting is a comma-separated list of keys, newest first: the first encrypts, every one decrypts,
so a key is rotated by putting a new one in front; ``rotated`` re-encrypts a value under the newest
key (the gateway does it for every connection when it starts, ``ConnectionStore.rotate_keys``), after
which the old key can go once ``switchboard connections check-keys`` says nothing needs it. In embedded
mode without the setting the keys come from the data dir (``key_file``).
"""

from __future__ import annotations

import json
from pathlib import Path

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


UNOPENED = "no key in SWITCHBOARD_SECRET_KEY decrypts the stored credentials"


class CredentialBox:
    def __init__(self, raw_keys: str | None, generated_file: Path | None = None) -> None:
        self._keys = parse_keys(raw_keys) if raw_keys else []
        self._fernet = MultiFernet(self._keys) if self._keys else None
        self.generated_file = generated_file  # the embedded mode's generated key, when it is the one that seals

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    @property
    def key_count(self) -> int:
        return len(self._keys)

    def key_of(self, sealed: str) -> int | None:
        """The position of the first configured key that opens ``sealed`` (0: the newest); None: none does."""
        for position, key in enumerate(self._keys):
            try:
                key.decrypt(sealed.encode())
            except InvalidToken:
                continue
            return position
        return None

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
            raise UnreadableCredentials(UNOPENED) from None

    def rotated(self, sealed: str) -> str | None:
        """The same credentials under the newest key; None when they are already under it (or no key is
        configured). ``UnreadableCredentials`` when no configured key opens them."""
        if not self._keys:
            return None
        position = self.key_of(sealed)
        if position is None:
            raise UnreadableCredentials(UNOPENED)
        if position == 0:
            return None
        return self._keys[0].encrypt(self._keys[position].decrypt(sealed.encode())).decode()
