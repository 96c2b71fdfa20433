"""A small shop's REST API (a real FastAPI app) serving its own OpenAPI 3 document at ``/openapi.json``, and
the same in YAML at ``/openapi.yaml``.

Every request but the document's is recorded (method, path, query, ``Idempotency-Key``,
``Authorization``, JSON body) so tests assert on what the gateway sent and how often. ``token`` makes
every request without ``Bearer <token>`` (the document's included) a 401.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

ORDERS = {"4411": "shipped", "4412": "packed"}


class Refund(BaseModel):
    amount: float
    reason: str


class Money(BaseModel):
    currency: str = "EUR"
    refund: Refund  # a $ref inside a $ref'd schema


@dataclass
class FakeShop:
    token: str | None = None
    requests: list[dict] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI(title="Shop", version="1.0")
        fake = self

        @app.middleware("http")
        async def guard(request: Request, call_next):
            if fake.token is not None and request.headers.get("authorization") != f"Bearer {fake.token}":
                return JSONResponse({"detail": "unauthorized"}, status_code=401)
            if request.url.path not in ("/openapi.json", "/openapi.yaml"):
                body = await request.body()
                fake.requests.append({"method": request.method, "path": request.url.path,
                                      "query": dict(request.query_params),
                                      "idempotency_key": request.headers.get("idempotency-key"),
                                      "authorization": request.headers.get("authorization"),
                                      "body": json.loads(body) if body else None})
            return await call_next(request)

        @app.get("/orders/{order_id}", operation_id="getOrder", summary="Look an order up by its number.")
        async def get_order(order_id: str, verbose: bool = False) -> dict:
            if order_id not in ORDERS:
                raise HTTPException(404, f"no order {order_id}")
            return {"order": order_id, "status": ORDERS[order_id], **({"carrier": "DHL"} if verbose else {})}

        @app.post("/orders/{order_id}/refunds", operation_id="refundOrder", status_code=201,
                  summary="Refund part of an order.")
        async def refund_order(order_id: str, money: Money,
                               x_channel: str | None = Header(default=None)) -> dict:
            return {"refund": f"RF-{order_id}", "amount": money.refund.amount,
                    "currency": money.currency, "channel": x_channel}

        @app.get("/openapi.yaml", include_in_schema=False)
        async def openapi_yaml() -> Response:
            return Response(yaml.safe_dump(app.openapi(), sort_keys=False), media_type="application/yaml")

        @app.get("/whoami", operation_id="whoAmI", summary="Echoes the caller's credentials (a careless API).")
        async def who_am_i(request: Request) -> dict:
            return {"authorization": request.headers.get("authorization")}

        return app
