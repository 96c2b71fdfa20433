"""An OpenAI-compatible chat endpoint that answers instantly (aiohttp, so it is never the bottleneck).

A request offered tools (``tool_choice`` not ``none``) whose last message is the user's asks for one call
of the first tool offered (``{"party_size": 4, "day": "Friday"}``), or of the tool the message names as
``use:<function name>`` (with ``{"order": "4411"}``); after a tool result it answers in words.

Run: python bench/instant_llm.py PORT [DELAY_S]
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

BODY = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sure, done."}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23},
})


CHUNK = ('data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench",'
         '"choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}\n\n')
STREAM = "".join(CHUNK % json.dumps(part) for part in ("Sure", ", ", "done", ".")) + (
    'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench","choices":[],'
    '"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}\n\ndata: [DONE]\n\n')


# A structured (JSON-schema) request — the search LLM picking articles — gets a valid answer choosing none.
SELECTION = json.dumps({**json.loads(BODY), "choices": [{"index": 0, "finish_reason": "stop", "message": {
    "role": "assistant", "content": json.dumps({"search_result": {f"article_id_{i}": "none" for i in (1, 2, 3)}})}}]})


TOOL_ARGUMENTS = json.dumps({"party_size": 4, "day": "Friday"})


def _tool_call(body: dict) -> web.Response | None:
    """The answer asking for a call of the first offered tool, when this request should get one."""
    if not body.get("tools") or body.get("tool_choice") == "none" or body["messages"][-1]["role"] != "user":
        return None
    said = body["messages"][-1].get("content") or ""
    named = said.split("use:", 1)[1].split()[0] if "use:" in said else None
    name = named or body["tools"][0]["function"]["name"]
    arguments = json.dumps({"order": "4411"}) if named else TOOL_ARGUMENTS
    call = {"id": "call_bench", "type": "function", "function": {"name": name, "arguments": arguments}}
    if not body.get("stream"):
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return web.json_response({**json.loads(BODY), "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": message}]})
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
             "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}, "finish_reason": "tool_calls"}]}
    usage = {**chunk, "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23}}
    text = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n"
    return web.Response(text=text, content_type="text/event-stream")


def make_app(delay_s: float = 0.0) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.read()
        if delay_s:
            await asyncio.sleep(delay_s)
        if b'"tools"' in body and (asked := _tool_call(json.loads(body))) is not None:
            return asked
        if b'"stream":true' in body.replace(b" ", b""):  # the streamed form, for streaming callers
            return web.Response(text=STREAM, content_type="text/event-stream")
        if b'"response_format"' in body:
            return web.Response(text=SELECTION, content_type="application/json")
        return web.Response(text=BODY, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


if __name__ == "__main__":
    port = int(sys.argv[1])
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    web.run_app(make_app(delay), host="127.0.0.1", port=port, print=None, access_log=None)
