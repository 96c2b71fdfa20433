"""Which keys seal connections' credentials: ``SWITCHBOARD_SECRET_KEY``, or, in embedded mode, a key the
gateway generates once into the data dir.

Embedded mode (no ``SWITCHBOARD_REDIS_URL``) is one process on one machine, so a key kept beside the
data it protects costs nothing a first user would notice and lets them add a channel without reading
about keys first. With an external Redis several processes share the data and each needs the same key:
the setting stays required there. The gateway and the CLI both come here, so they always agree.

In embedded mode a key set in ``SWITCHBOARD_SECRET_KEY`` comes first and the generated one (when there is
one) is kept after it as an older key, so moving to a key of one's own re-encrypts what the generated key
sealed instead of making it unreadable.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from gateway.core.settings import Settings

__all__ = ["KEY_FILE", "SecretKeys", "UnusableKeyFile", "secret_keys"]

log = logging.getLogger(__name__)
KEY_FILE = "secret.key"


@dataclass(frozen=True)
class SecretKeys:
    raw: str | None  # the keys, comma-separated, newest first; None: none configured
    generated_file: Path | None = None  # where the key that seals comes from, when the gateway generated it


class UnusableKeyFile(ValueError):
    """The data dir's key file exists but holds no Fernet key."""


def _read(path: Path) -> str:
    from cryptography.fernet import Fernet  # imported where needed: every CLI command imports this module

    key = path.read_text(encoding="ascii").strip()
    try:
        Fernet(key)
    except ValueError:
        raise UnusableKeyFile(f"{path} holds no Fernet key; restore it from a backup, or move it away to generate a "
                              "new one (credentials sealed with the old one can then not be read)") from None
    return key


def _create(path: Path) -> str:
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: two processes starting at once cannot both write one; the loser reads the winner's
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(key + "\n")
    return key


def secret_keys(settings: Settings, *, create: bool) -> SecretKeys:
    """The keys to seal and open credentials with. ``create``: in embedded mode without a key, generate
    one (the gateway does; the CLI only reads, so it never makes a key no gateway uses)."""
    configured = settings.secret_key.get_secret_value().strip(", ") if settings.secret_key else None
    if not settings.embedded:
        return SecretKeys(configured or None)
    path = settings.data_dir / KEY_FILE
    if path.exists():
        generated = _read(path)
    elif configured or not create:
        return SecretKeys(configured or None)
    else:
        try:
            generated = _create(path)
        except FileExistsError:
            generated = _read(path)
        else:
            log.warning("connections: generated the key that encrypts channel credentials at %s (mode 0600). "
                        "Back it up with the data dir: without it stored credentials cannot be read. "
                        "Set SWITCHBOARD_SECRET_KEY to use a key of your own (docs/security).", path)
    if configured:
        keys = [k.strip() for k in configured.split(",") if k.strip()]
        return SecretKeys(",".join([*keys, *([generated] if generated not in keys else [])]))
    return SecretKeys(generated, path)
