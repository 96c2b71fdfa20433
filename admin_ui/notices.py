"""The "Done:" notice after a console action, carried in ``?done=`` across the redirect.

The value is the text and an HMAC of it under the session's CSRF secret, so only the console itself can
put words there: a link that someone else crafted (``?done=Your session expired. Call …``) shows
nothing. Nothing is stored, and a reload shows the same notice."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

from admin_ui.security import Signed

__all__ = ["notice", "shown"]

_SEPARATOR = "~"


def _mac(signed: Signed, text: str) -> str:
    key = f"console-notice:{signed.session.csrf}".encode()
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def notice(signed: Signed, text: str) -> str:
    """The URL-quoted value of ``?done=`` that shows ``text`` to this session."""
    return quote(f"{_mac(signed, text)}{_SEPARATOR}{text}", safe="")


def shown(signed: Signed | None, value: str | None) -> str | None:
    """The text of a ``?done=`` value the console made for this session; None for anything else."""
    if signed is None or not value or _SEPARATOR not in value:
        return None
    mac, text = value.split(_SEPARATOR, 1)
    return text if hmac.compare_digest(mac, _mac(signed, text)) else None
