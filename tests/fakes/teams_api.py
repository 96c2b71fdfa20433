"""A fake Microsoft identity platform and Bot Connector service for Teams connections.

As the Bot Framework's issuer it serves OpenID metadata (``/v1/.well-known/openidconfiguration``) whose
``jwks_uri`` lists an RSA key generated here, endorsed for ``msteams``; ``activity_token`` signs what the
Bot Connector would put in an activity's ``Authorization`` header with it (``forged=True``: with another
key of the same id). As the token URL (``/{tenant}/oauth2/v2.0/token``) it issues bot tokens for the app
ids and passwords given with ``add_app`` (client credentials) and refuses others as Entra ID does
(``invalid_client``, 401). As the connector service at ``service_url`` it takes replies (``POST
/v3/conversations/{id}/activities/{activity}``, recorded as ``reply``) and typing activities (recorded
as ``typing``), each only with a token it issued. Scripted failures (``token``, ``reply``, ``typing``)
answer in Entra ID's or the connector's error shape, a scripted ``description`` as the error's message.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.fakes.recording import Recorder

ISSUER = "https://api.botframework.com"
KEY_ID = "fake-bf-key-1"
SERVICE_PATH = "/amer/"  # Teams' connector URLs carry a region: https://smba.trafficmanager.net/amer/


def _private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class FakeTeams:
    recorder: Recorder = field(default_factory=Recorder)
    url: str = ""
    apps: dict[str, str] = field(default_factory=dict)  # app id -> password
    issued: dict[str, str] = field(default_factory=dict)  # bot token -> the app id it was issued to
    key: rsa.RSAPrivateKey = field(default_factory=_private_key)
    forger: rsa.RSAPrivateKey = field(default_factory=_private_key)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def metadata_url(self) -> str:
        return f"{self.url}/v1/.well-known/openidconfiguration"

    @property
    def token_url(self) -> str:
        return f"{self.url}/botframework.com/oauth2/v2.0/token"

    @property
    def service_url(self) -> str:
        return self.url + SERVICE_PATH

    def add_app(self, app_id: str, password: str) -> None:
        self.apps[app_id] = password

    def reset(self) -> None:
        self.recorder.reset()
        self.apps.clear()
        self.issued.clear()

    def activity_token(self, app_id: str, *, service_url: str | None = None, expires_in: int = 3600,
                       forged: bool = False, issuer: str = ISSUER) -> str:
        now = int(time.time())
        claims = {"iss": issuer, "aud": app_id, "serviceurl": service_url or self.service_url,
                  "nbf": now - 60, "iat": now - 60, "exp": now + expires_in}
        return jwt.encode(claims, self.forger if forged else self.key, algorithm="RS256", headers={"kid": KEY_ID})

    def sent(self, method: str = "reply") -> list[dict]:
        return [c.params for c in self.recorder.received(method)]

    def sent_texts(self) -> list[str]:
        return [p["text"] for p in self.sent()]

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.get("/v1/.well-known/openidconfiguration")
        async def metadata():
            return {"issuer": ISSUER, "authorization_endpoint": f"{fake.url}/v1/botframework.com/oauth2/authorize",
                    "jwks_uri": f"{fake.url}/v1/.well-known/keys", "id_token_signing_alg_values_supported": ["RS256"],
                    "token_endpoint_auth_methods_supported": ["private_key_jwt"]}

        @app.get("/v1/.well-known/keys")
        async def keys():
            fake.recorder.record("keys", {}, 200)
            public = jwt.algorithms.RSAAlgorithm.to_jwk(fake.key.public_key(), as_dict=True)
            return {"keys": [{**public, "kid": KEY_ID, "use": "sig", "endorsements": ["msteams", "webchat"]}]}

        @app.post("/{tenant}/oauth2/v2.0/token")
        async def token(tenant: str, request: Request):
            form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
            params = {"_tenant": tenant, "client_id": form.get("client_id"), "scope": form.get("scope"),
                      "grant_type": form.get("grant_type")}
            app_id = form.get("client_id", "")
            failure = fake.recorder.next_failure("token")
            if failure is not None:
                fake.recorder.record("token", params, failure.status)
                return JSONResponse({"error": "temporarily_unavailable",
                                     "error_description": failure.description or "AADSTS90033: try again"},
                                    failure.status)
            if app_id not in fake.apps:
                fake.recorder.record("token", params, 400)
                return JSONResponse({"error": "unauthorized_client", "error_description": (
                    f"AADSTS700016: Application with identifier '{app_id}' was not found in the directory "
                    f"'{tenant}'.")}, 400)
            if fake.apps[app_id] != form.get("client_secret"):
                fake.recorder.record("token", params, 401)
                return JSONResponse({"error": "invalid_client", "error_description": (
                    f"AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request "
                    f"is the client secret value, not the client secret ID, for a secret added to app '{app_id}'.")},
                    401)
            fake.recorder.record("token", params, 200)
            issued = f"fake-bot-token-{next(fake._ids)}"
            fake.issued[issued] = app_id
            return {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": issued}

        async def activity(conversation: str, request: Request, reply_to: str | None):
            params = {"_conversation": conversation, "_reply_to": reply_to, **await request.json()}
            method = "typing" if params.get("type") == "typing" else "reply"
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
            if bearer not in fake.issued:
                fake.recorder.record(method, params, 401)
                return JSONResponse({"message": "Authorization has been denied for this request."}, 401)
            failure = fake.recorder.next_failure(method)
            if failure is not None:
                fake.recorder.record(method, params, failure.status)
                headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                code = "TooManyRequests" if failure.status == 429 else "ServiceError"
                return JSONResponse({"error": {"code": code, "message": failure.description or "Failed"}},
                                    failure.status, headers=headers)
            fake.recorder.record(method, params, 200)
            return {"id": f"1:fake-activity-{next(fake._ids)}"}

        @app.post(SERVICE_PATH + "v3/conversations/{conversation}/activities/{reply_to}")
        async def reply(conversation: str, reply_to: str, request: Request):
            return await activity(conversation, request, reply_to)

        @app.post(SERVICE_PATH + "v3/conversations/{conversation}/activities")
        async def send(conversation: str, request: Request):
            return await activity(conversation, request, None)

        return app
