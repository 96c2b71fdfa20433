"""What the person a call is transferred to hears first: two lines on the call so far and the caller's question.

Built from the call's own transcript, without a model (the transfer must not wait on one, nor fail with
it): the first line says what the caller asked about and what the assistant last answered, the second the
question they are being transferred with (the last thing they said before asking for a person, keys they
pressed passed over when they said anything; the request itself when that was all they said). The relay
puts it in the ``handoffData`` of its ``end``, the ``<Dial>``'s whisper says it to the operator's leg, and
the console shows it with the handoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from channels.twilio.keypad import is_pressed

__all__ = ["CallTranscript", "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 200  # each line; a whisper is heard before the caller is connected, so it stays short
_QUOTE_CHARS = 90


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip(",.;:") + "…"


@dataclass
class CallTranscript:
    """What was said on one call, in order: ``("caller" | "assistant", text)``."""

    said: list[tuple[str, str]] = field(default_factory=list)

    def caller(self, text: str) -> None:
        self.said.append(("caller", text))

    def assistant(self, text: str) -> None:
        if text.strip():
            self.said.append(("assistant", text))

    def summary(self, phone: str = "", *, asked_for_person: bool = True) -> tuple[str, str]:
        """The two lines: the call so far, and the caller's question. When the caller asked for a person,
        their last words are that request and the question is what they asked before it; when the model
        handed the call over, it is their last words."""
        asked = [text for who, text in self.said if who == "caller"]
        answers = [text for who, text in self.said if who == "assistant"]
        topics = asked[:-1] if asked_for_person else asked  # what they asked before asking for a person
        said = [text for text in topics if not is_pressed(text)] or topics  # "[pressed 0]" is no question
        question = said[-1] if said else (asked[-1] if asked else "")
        who = f"Caller {phone}" if phone else "The caller"
        if topics:
            first = f"{who} asked about \u201c{_cut(topics[0], _QUOTE_CHARS)}\u201d"
            if len(topics) > 1:
                first += f" and {len(topics) - 1} more"
            if answers:
                first += f"; the assistant last said \u201c{_cut(answers[-1], _QUOTE_CHARS)}\u201d"
        else:
            first = f"{who} asked for a person straight away"
        return _cut(first, MAX_LINE_CHARS), _cut(f"Their question: \u201c{question}\u201d", MAX_LINE_CHARS)
