"""A small OpenAI-compatible server: chat completions (plain, streaming, JSON schema, image parts), embeddings,
and audio (``/v1/audio/transcriptions`` answers ``transcripts``; ``/v1/audio/speech`` an OGG/Opus note).

Tests script what it answers (``script_reply``, ``script_json``, ``fail_next``) and assert on what it
received (``requests``). Unscripted chat requests get an echo of the last user message.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass
class Scripted:
    text: str | None = None
    status: int | None = None
    delay_s: float = 0.0
    raw: str | None = None  # a body sent as it is (a proxy's HTML page, truncated JSON)
    content_type: str = "application/json"
    events: list[str] | None = None  # server-sent events sent as they are, for a streaming request
    choices: list | None = None  # the completion's "choices", when not the usual one
    tool_calls: list[tuple[str, dict]] | None = None  # (name, arguments) the model asks for, plain or streamed
    fail_after_chars: int | None = None  # a stream that breaks after this much text


@dataclass
class FakeOpenAI:
    requests: list[dict] = field(default_factory=list)
    script: deque[Scripted] = field(default_factory=deque)
    default_delay_s: float = 0.0
    reject_tools: bool = False  # answer 400 to any request that carries tools, as a model without them does
    chunk_chars: int = 4
    chunk_delay_s: float = 0.0
    default_reply: str | None = None  # what an unscripted request gets instead of the echo (benches)
    paced_whole: bool = False  # a non-streamed answer waits as long as streaming it would take (benches)
    structured_reply: str | None = None  # what an unscripted schema-constrained request gets (benches)
    # An unscripted request whose last message is a tool result answers with that result (so a test sees the
    # tool's answer reach the reply without scripting it).
    echo_tool_results: bool = False
    # A model that always does the same: an unscripted request offered tools whose last message is the user's
    # asks for this call; ``tool_result_delay_s`` holds the answer to a tool result that long.
    auto_tool_call: tuple[str, dict] | None = None
    tool_result_delay_s: float = 0.0
    # media (issue 44): what /audio/transcriptions answers (one per request, then ``default_transcript``)
    transcripts: deque[str] = field(default_factory=deque)
    default_transcript: str = "What are your opening hours?"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script_reply(self, text: str, delay_s: float = 0.0) -> None:
        self.script.append(Scripted(text=text, delay_s=delay_s))

    def script_json(self, data: dict | str) -> None:
        self.script.append(Scripted(text=data if isinstance(data, str) else json.dumps(data)))

    def script_raw(self, body: str, content_type: str = "application/json", status: int = 200) -> None:
        self.script.append(Scripted(raw=body, content_type=content_type, status=status))

    def script_events(self, events: list[str]) -> None:
        self.script.append(Scripted(events=events))

    def script_choices(self, choices: list) -> None:
        self.script.append(Scripted(choices=choices))

    def script_tool_calls(self, *calls: tuple[str, dict], text: str = "") -> None:
        """The next answer asks for these tool calls (``text`` said before them, if any)."""
        self.script.append(Scripted(text=text, tool_calls=list(calls)))

    def script_broken_stream(self, text: str, after_chars: int) -> None:
        self.script.append(Scripted(text=text, fail_after_chars=after_chars))

    def fail_next(self, status: int = 500, times: int = 1) -> None:
        for _ in range(times):
            self.script.append(Scripted(status=status))

    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def audio_requests(self) -> list[dict]:
        return [r for r in self.requests if "/audio/" in r["path"]]

    def image_parts(self) -> list[str]:
        """The image URLs every chat request carried in its messages' content parts."""
        return [part["image_url"]["url"] for r in self.chat_requests() for m in r["body"]["messages"]
                if isinstance(m.get("content"), list) for part in m["content"] if part.get("type") == "image_url"]

    def _unscripted(self, body: dict) -> Scripted:
        last = body["messages"][-1]["role"] if body.get("messages") else None
        if self.auto_tool_call is not None and body.get("tools") and last == "user":
            return Scripted(text="", tool_calls=[self.auto_tool_call])
        return Scripted(delay_s=self.tool_result_delay_s if last == "tool" else 0.0)

    def _next(self) -> Scripted | None:
        with self._lock:
            return self.script.popleft() if self.script else None

    def app(self) -> FastAPI:
        app = FastAPI()
        fake = self

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            fake.requests.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
            if fake.reject_tools and body.get("tools"):
                return JSONResponse({"error": {"message": "tools are not supported by this model",
                                               "type": "invalid_request_error", "param": "tools"}}, status_code=400)
            step = fake._next() or fake._unscripted(body)
            delay = step.delay_s or fake.default_delay_s
            if delay:
                await asyncio.sleep(delay)
            if step.raw is not None:
                return Response(step.raw, status_code=step.status or 200, media_type=step.content_type)
            if step.events is not None:
                return StreamingResponse(_raw_events(step.events), media_type="text/event-stream")
            if step.status:
                return JSONResponse({"error": {"message": "scripted failure", "type": "server_error"}},
                                    status_code=step.status)
            text = step.text
            if text is None and fake.structured_reply is not None and body.get("response_format"):
                text = fake.structured_reply
            if text is None and fake.default_reply is not None:
                text = fake.default_reply
            if text is None and fake.echo_tool_results and body["messages"][-1]["role"] == "tool":
                results = []
                for m in reversed(body["messages"]):
                    if m["role"] != "tool":
                        break
                    results.insert(0, m["content"])
                text = "From the tools: " + " | ".join(results)
            if text is None:
                users = [_text(m["content"]) for m in body["messages"] if m["role"] == "user"]
                text = f"echo: {users[-1] if users else ''}"
            usage = {"prompt_tokens": 11, "completion_tokens": max(1, len(text) // 4),
                     "total_tokens": 11 + max(1, len(text) // 4)}
            if step.tool_calls is not None and body.get("tool_choice") == "none":
                step = Scripted(text=step.text or None)  # tools may not be called now: the model answers
                text = step.text or f"echo: {[m for m in body['messages'] if m['role'] == 'user'][-1]['content']}"
            if step.tool_calls is not None:
                calls = [{"id": f"call_{len(fake.requests)}_{i}", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args)}}
                         for i, (name, args) in enumerate(step.tool_calls)]
                if body.get("stream"):
                    return StreamingResponse(_tool_stream(body["model"], text, calls, usage),
                                             media_type="text/event-stream")
                return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                        "model": body["model"], "usage": usage, "choices": [{
                            "index": 0, "finish_reason": "tool_calls",
                            "message": {"role": "assistant", "content": text or None, "tool_calls": calls}}]}
            if step.fail_after_chars is not None:
                return StreamingResponse(_broken_stream(body["model"], text, step.fail_after_chars),
                                         media_type="text/event-stream")
            if body.get("stream"):
                return StreamingResponse(_stream(body["model"], text, fake.chunk_chars, usage, fake.chunk_delay_s),
                                         media_type="text/event-stream")
            if fake.paced_whole and fake.chunk_delay_s:  # a whole answer takes as long as its stream would
                await asyncio.sleep(len(text) / fake.chunk_chars * fake.chunk_delay_s)
            return {
                "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": step.choices if step.choices is not None else [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": usage,
            }

        @app.post("/v1/audio/transcriptions")
        async def transcriptions(request: Request):
            form = await request.form()
            upload = form["file"]
            data = await upload.read()
            fake.requests.append({"path": request.url.path, "headers": dict(request.headers), "body": {
                "model": form.get("model"), "filename": upload.filename, "bytes": len(data),
                "content_type": upload.content_type}})
            with fake._lock:
                text = fake.transcripts.popleft() if fake.transcripts else fake.default_transcript
            return {"text": text}

        @app.post("/v1/audio/speech")
        async def speech(request: Request):
            body = await request.json()
            fake.requests.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
            from tests.fakes.media_files import ogg_opus

            return Response(ogg_opus(1.0), media_type="audio/ogg")

        @app.post("/v1/embeddings")
        async def embeddings(request: Request):
            body = await request.json()
            fake.requests.append({"path": request.url.path, "body": body, "headers": dict(request.headers)})
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(inputs)]
            return {"object": "list", "data": data, "model": body["model"],
                    "usage": {"prompt_tokens": embedding_tokens(inputs), "total_tokens": embedding_tokens(inputs)}}

        return app


def _text(content: str | list) -> str:
    """A message's text, content parts (text and images) included."""
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "[image]") if p.get("type") == "text" else "[image]" for p in content)


def embedding_tokens(inputs: list[str]) -> int:
    """What the fake reports as an embeddings call's ``usage.prompt_tokens``: the inputs' words."""
    return sum(len(text.split()) for text in inputs)


def _vector(text: str, dim: int = 16) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 for b in digest[:dim]]


async def _stream(model: str, text: str, size: int, usage: dict, delay_s: float = 0.0):
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    for i in range(0, len(text), size):
        chunk = {**base, "choices": [{"index": 0, "delta": {"content": text[i:i + size]}, "finish_reason": None}]}
        yield f"data: {json.dumps(chunk)}\n\n"
        if delay_s:
            await asyncio.sleep(delay_s)
    yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]})}\n\n"
    yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


async def _raw_events(events: list[str]):
    for event in events:
        yield event


async def _tool_stream(model: str, text: str, calls: list[dict], usage: dict):
    """Text (if any), then each tool call in fragments, as OpenAI streams them."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict, finish: str | None = None) -> str:
        return f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"

    if text:
        yield chunk({"role": "assistant", "content": text})
    for i, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        yield chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]})
        for k in range(0, len(arguments), 7):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments[k:k + 7]}}]})
    yield chunk({}, "tool_calls")
    yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


async def _broken_stream(model: str, text: str, after: int):
    """Some text, then the connection drops mid-answer."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    yield f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'content': text[:after]}}]})}\n\n"
    raise ConnectionResetError("the model server dropped the stream")
