"""A relay reply whose socket closes under it: what went out is what the call heard, and the reply stops."""

from __future__ import annotations

from fastapi import WebSocketDisconnect

from channels.twilio.relay import RelaySink


class ClosingSocket:
    """Starlette's ``WebSocket.send_json`` as it behaves once the caller hung up: it raises
    ``WebSocketDisconnect`` (the call's receive loop may not have seen the close yet)."""

    def __init__(self, open_for: int) -> None:
        self.open_for = open_for
        self.sent: list[dict] = []

    async def send_json(self, data: dict) -> None:
        if len(self.sent) >= self.open_for:
            raise WebSocketDisconnect(1006)
        self.sent.append(data)


async def test_a_socket_that_closes_mid_reply_ends_the_reply_with_what_went_out():
    ws = ClosingSocket(open_for=2)
    sink = RelaySink(ws)
    for delta in ("Our guided ", "coastal tour ", "leaves every ", "Saturday "):
        await sink.delta(delta)  # the model's stream is not failed by the closed socket
    assert [m["token"] for m in ws.sent] == ["Our guided ", "coastal tour "]
    assert sink.interrupted.is_set()  # the turn stops the model and stores what was heard
    assert sink.heard == "Our guided coastal tour "
    report = await sink.deliver("Our guided coastal tour leaves every Saturday.")
    assert report.interrupted and ws.sent[-1]["token"] == "coastal tour "  # nothing more is said


async def test_the_models_handoff_signal_is_never_said_and_a_reply_of_only_it_says_the_handoff_message():
    ws = ClosingSocket(open_for=100)
    sink = RelaySink(ws)
    for delta in ("[HAND", "OFF]"):
        await sink.delta(delta)
    await sink.deliver("I'm passing you to a colleague.")  # what the pipeline made of a bare signal
    assert "".join(m["token"] for m in ws.sent) == "I'm passing you to a colleague."

    ws = ClosingSocket(open_for=100)
    sink = RelaySink(ws)
    for delta in ("One moment, ", "I'll get Ana. ", "[HANDOFF]"):
        await sink.delta(delta)
    await sink.deliver("One moment, I'll get Ana.")
    assert "".join(m["token"] for m in ws.sent).strip() == "One moment, I'll get Ana."
