"""The floor for bench/turn_overhead.py: a bare ASGI endpoint doing the same Redis reads/writes and the
same LLM call as a gateway turn, and nothing else. Run with uvicorn: ``bench.turn_floor:app``.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from openai import AsyncOpenAI, DefaultAioHttpClient
from openai.types.chat import ChatCompletion
from redis.asyncio import Redis

redis = Redis.from_url(os.environ.get("FLOOR_REDIS_URL", "redis://127.0.0.1:6379/0"), max_connections=200)
llm = AsyncOpenAI(api_key="x", base_url=os.environ["FLOOR_LLM_URL"], http_client=DefaultAioHttpClient())
P = "sb:floor:"
# The gateway's default system prompt for a new persona is ~2,000 characters (instructions, meta,
# 45-day calendar, RAG section); the floor sends one of the same size so the LLM call is the same.
SYSTEM = ("You are the assistant of a business. Answer briefly from the information below. " * 25)[:2000]
MEMORY = 15


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    data = json.loads(body)
    conv = scope["path"].rsplit("/", 1)[-1]
    now = time.time()
    # Same shape of Redis work as a turn: session check, dedup, persona/conversation, message writes,
    # memory read, ticket lock, trace write.
    await redis.hgetall(P + "session:" + conv)
    await redis.set(P + "dedup:" + uuid.uuid4().hex, "1", nx=True, ex=60)
    await redis.get(P + "persona:" + conv)
    await redis.set(P + "conv:" + conv, "{}")
    await redis.incr(P + "ticket:" + conv)
    mid = uuid.uuid4().hex
    pipe = redis.pipeline(transaction=False)
    pipe.set(P + "msg:" + mid, json.dumps({"role": "user", "text": data["text"]}))
    pipe.zadd(P + "conv:" + conv + ":msgs", {mid: now})
    pipe.zadd(P + "persona:" + conv + ":msgs", {mid: now})
    await pipe.execute()
    ids = await redis.zrevrangebyscore(P + "persona:" + conv + ":msgs", "+inf", "-inf", start=0, num=60)
    history = []
    if ids:
        raw = await redis.mget([P + "msg:" + i.decode() for i in ids[:MEMORY]])
        history = [json.loads(r) for r in reversed(raw) if r]
    messages = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": m.get("role", "user"), "content": m["text"]} for m in history]
    # The same call as the gateway's LLM client: a plain JSON body through the SDK's post().
    resp = await llm.post("/chat/completions", body={"model": "bench", "messages": messages, "stream": False},
                          cast_to=ChatCompletion, options={"security": {"bearer_auth": True}})
    text = resp.choices[0].message.content
    aid = uuid.uuid4().hex
    pipe = redis.pipeline(transaction=False)
    pipe.set(P + "msg:" + aid, json.dumps({"role": "assistant", "text": text}))
    pipe.zadd(P + "conv:" + conv + ":msgs", {aid: now})
    pipe.zadd(P + "persona:" + conv + ":msgs", {aid: now})
    pipe.set(P + "trace:" + aid, "{}")
    await pipe.execute()
    await redis.incr(P + "serving:" + conv)
    out = json.dumps({"reply": {"text": text}}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": out})
