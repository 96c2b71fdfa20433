"""``switchboard chat``: a terminal conversation, through a running gateway or in process."""

from __future__ import annotations

import asyncio
import sys

import httpx

from gateway.core.models import InboundMessage, new_id
from gateway.core.settings import Settings
from gateway.turn.ports import DeliveryReport

PROMPT = "you> "


class _PrintingSink:
    streaming = True
    channel = "terminal"

    def __init__(self) -> None:
        self.started = False

    async def delta(self, text: str) -> None:
        if not self.started:
            sys.stdout.write("agent> ")
            self.started = True
        sys.stdout.write(text)
        sys.stdout.flush()

    async def deliver(self, text: str) -> DeliveryReport:
        sys.stdout.write("\n" if self.started else f"agent> {text}\n")
        return DeliveryReport(delivered=True)


async def _read_line() -> str | None:
    line = await asyncio.to_thread(sys.stdin.readline)
    return line.rstrip("\n") if line else None


async def _lines():
    """The user's messages, prompted one at a time, until end of input."""
    while True:
        sys.stdout.write(PROMPT)
        sys.stdout.flush()
        text = await _read_line()
        if text is None:
            return
        if text.strip():
            yield text


async def _over_http(url: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        session = (await client.post("/api/chat/sessions")).json()
        auth = {"Authorization": f"Bearer {session['token']}"}
        print(f"connected to {url} (session {session['session_id']}); Ctrl-D to quit")
        async for text in _lines():
            resp = await client.post(
                f"/api/chat/sessions/{session['session_id']}/messages", json={"text": text}, headers=auth
            )
            body = resp.json()
            print(f"agent> {body['reply']['text']}" if resp.is_success else f"error> {body['message']}")
        return 0


async def _in_process(settings: Settings) -> int:
    from gateway.services import Services

    services = Services.build(settings)
    await services.start()
    identity = f"terminal:{new_id()}"
    print("in-process agent (no gateway was running); Ctrl-D to quit")
    try:
        async for text in _lines():
            inbound = InboundMessage(
                channel="terminal", external_user_id=identity, external_message_id=new_id(),
                identity=identity, text=text,
            )
            await services.pipeline.handle(inbound, _PrintingSink())
        return 0
    finally:
        await services.aclose()


async def run_terminal_chat(settings: Settings, url: str | None = None) -> int:
    target = url or settings.public_url
    try:
        async with httpx.AsyncClient(timeout=1.0) as client:
            running = (await client.get(f"{target}/healthz")).is_success
    except httpx.HTTPError:
        running = False
    if running:
        return await _over_http(target)
    if url:
        print(f"no gateway answers at {url}", file=sys.stderr)
        return 1
    return await _in_process(settings)
