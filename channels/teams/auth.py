"""The Bot Framework token on every incoming activity, checked before anything is parsed further or queued.

The Bot Connector signs each request to the messaging endpoint with a JWT (``Authorization: Bearer``):
its issuer must be the OpenID metadata's ``issuer``, its signature one of the keys at the metadata's
``jwks_uri`` (RS256, a key endorsed for the activity's channel where the key lists endorsements), its
audience the connection's app id, ``exp`` in the future (five minutes of clock skew allowed, as
Microsoft's SDKs allow) and its ``serviceurl`` claim the activity's ``serviceUrl`` — so a reply only
ever goes to a connector service Microsoft named.

PyJWT checks the signature and the claims. Not Microsoft's SDKs: ``microsoft-agents-hosting-core``'s
validator reads the keys from a fixed Bot Framework URL (no metadata URL to point at another issuer),
leaves the issuer unchecked and fetches the keys with a blocking client; ``botframework-connector``
brings ``requests``, ``msrest`` and class-level settings. The metadata and keys are read here with
the gateway's async HTTP client, kept a day, and read again when a token names an unknown key (at
most once a minute, so forged key ids cannot make us hammer the issuer).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import httpx
import jwt

from gateway.channel import ServiceUnavailable

__all__ = ["ActivityTokens", "TokenRefused"]

log = logging.getLogger(__name__)

ALGORITHMS = ["RS256", "RS384", "RS512"]
CLOCK_SKEW_S = 300
KEYS_KEPT_S = 24 * 3600
REFRESH_AT_MOST_EVERY_S = 60.0


class TokenRefused(Exception):
    """The request's token is missing, forged, expired or not for this bot (a 401)."""


@dataclass(frozen=True)
class SigningKey:
    key: jwt.PyJWK
    endorsements: frozenset[str] | None  # the channels the key is endorsed for; None: not said


@dataclass(frozen=True)
class _Metadata:
    issuer: str
    keys: dict[str, SigningKey]
    read_at: float


class ActivityTokens:
    def __init__(self, metadata_url: str, http: httpx.AsyncClient) -> None:
        self.metadata_url = metadata_url
        self._http = http
        self._metadata: _Metadata | None = None
        self._reading = asyncio.Lock()

    async def check(self, authorization: str, *, app_id: str, service_url: str, channel_id: str) -> dict:
        """The token's claims when it is the Bot Connector's for ``app_id`` and this activity; else
        ``TokenRefused``. ``ServiceUnavailable`` when the issuer's keys cannot be read."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise TokenRefused("no Bearer token in Authorization")
        token = token.strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"not a JWT: {exc}") from None
        if header.get("alg") not in ALGORITHMS:
            raise TokenRefused(f"token signed with {header.get('alg')!r}, not RS256")
        metadata, key = await self._key(str(header.get("kid", "")))
        if key.endorsements is not None and channel_id not in key.endorsements:
            raise TokenRefused(f"the signing key is not endorsed for channel {channel_id!r}")
        try:
            claims = jwt.decode(token, key.key, algorithms=ALGORITHMS, audience=app_id, issuer=metadata.issuer,
                                leeway=CLOCK_SKEW_S, options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"token refused: {exc}") from None
        if str(claims.get("serviceurl", "")).rstrip("/") != service_url.rstrip("/"):
            raise TokenRefused("the token's serviceurl claim is not the activity's serviceUrl")
        return claims

    async def _key(self, kid: str) -> tuple[_Metadata, SigningKey]:
        metadata = await self._current()
        if kid not in metadata.keys and time.monotonic() - metadata.read_at >= REFRESH_AT_MOST_EVERY_S:
            metadata = await self._current(stale=metadata)  # keys roll over: a new kid may be real
        key = metadata.keys.get(kid)
        if key is None:
            raise TokenRefused(f"token signed with a key the issuer does not list ({kid!r})")
        return metadata, key

    async def _current(self, stale: _Metadata | None = None) -> _Metadata:
        known = self._metadata
        if known is not None and known is not stale and time.monotonic() - known.read_at < KEYS_KEPT_S:
            return known
        async with self._reading:
            if self._metadata is not None and self._metadata is not known:  # another request read it meanwhile
                return self._metadata
            self._metadata = await self._read()
            return self._metadata

    async def _read(self) -> _Metadata:
        try:
            metadata = await self._json(self.metadata_url)
            issuer, jwks_uri = metadata.get("issuer"), metadata.get("jwks_uri")
            if not isinstance(issuer, str) or not isinstance(jwks_uri, str):
                raise ValueError("no issuer or jwks_uri in the OpenID metadata")
            jwks = await self._json(jwks_uri)
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("teams: could not read the Bot Framework signing keys from %s: %s", self.metadata_url, exc)
            raise ServiceUnavailable("the Bot Framework signing keys could not be read; try again") from exc
        keys: dict[str, SigningKey] = {}
        for raw in jwks.get("keys") or []:
            if not isinstance(raw, dict) or not raw.get("kid"):
                continue
            try:
                key = jwt.PyJWK(raw)
            except jwt.PyJWTError as exc:
                log.info("teams: signing key %s skipped: %s", raw.get("kid"), exc)
                continue
            endorsed = raw.get("endorsements")
            keys[raw["kid"]] = SigningKey(key, frozenset(endorsed) if isinstance(endorsed, list) else None)
        return _Metadata(issuer, keys, time.monotonic())

    async def _json(self, url: str) -> dict:
        response = await self._http.get(url)
        response.raise_for_status()
        answer = response.json()
        if not isinstance(answer, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return answer
