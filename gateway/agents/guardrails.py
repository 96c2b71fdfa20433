"""Guardrails an agent (or one invocation) can switch on by name; ``GET /v1/guardrails`` lists them.

- ``pii-redaction``: e-mail addresses, phone numbers and payment card numbers (digit runs that pass
  the Luhn check) become ``[email]``, ``[phone]``, ``[card]`` — in the caller's messages before the
  model or the store sees them, and in the answer before the caller does.
- ``blocked-terms``: a message containing one of ``SWITCHBOARD_BLOCKED_TERMS`` (comma-separated,
  whole words, any case) is refused with 400 and not stored; an answer containing one is replaced
  by a refusal.
- ``prompt-injection-screen``: retrieved text that tries to instruct the model ("ignore previous
  instructions", "you are now", a fake system turn, …) is left out of the context and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.core.errors import BadRequest

EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
CARD_CANDIDATE = re.compile(r"\b(?:\d[ -]?){13,19}\b")
PHONE = re.compile(r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){2,4}\b")
INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above) (?:instructions|prompts?|rules)"
    r"|disregard (?:all |the )?(?:previous|prior|above)|you are now (?:a|an|in) "
    r"|reveal (?:your|the) (?:system )?prompt|^\s*(?:system|assistant)\s*:|<\|?(?:im_start|system)\|?>",
    re.IGNORECASE | re.MULTILINE,
)
BLOCKED_ANSWER = "I can't help with that."


@dataclass(frozen=True)
class Guardrail:
    name: str
    description: str


CATALOG = (
    Guardrail("pii-redaction", "e-mail addresses, phone numbers and card numbers (Luhn) redacted in and out"),
    Guardrail("blocked-terms", "messages with a SWITCHBOARD_BLOCKED_TERMS word are refused; answers replaced"),
    Guardrail("prompt-injection-screen", "retrieved text that tries to instruct the model is left out"),
)
NAMES = {g.name for g in CATALOG}


def luhn(digits: str) -> bool:
    total, double = 0, False
    for ch in reversed(digits):
        d = int(ch)
        if double:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
        double = not double
    return total % 10 == 0


def redact(text: str) -> str:
    def card(match: re.Match) -> str:
        digits = re.sub(r"\D", "", match.group())
        return "[card]" if 13 <= len(digits) <= 19 and luhn(digits) else match.group()

    text = EMAIL.sub("[email]", text)
    text = CARD_CANDIDATE.sub(card, text)
    return PHONE.sub(lambda m: "[phone]" if 7 <= len(re.sub(r"\D", "", m.group())) <= 15 else m.group(), text)


class Guardrails:
    def __init__(self, names: list[str], blocked_terms: str = "") -> None:
        unknown = sorted(set(names) - NAMES)
        if unknown:
            raise BadRequest(f"guardrails: unknown {', '.join(unknown)}; GET /v1/guardrails lists them")
        self.names = set(names)
        terms = [t.strip() for t in blocked_terms.split(",") if t.strip()]
        self._blocked = re.compile(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\b", re.IGNORECASE) if terms \
            else None
        self.screened = 0  # retrieved chunks left out by the injection screen

    def incoming(self, text: str) -> str:
        if "blocked-terms" in self.names and self._blocked is not None and self._blocked.search(text):
            raise BadRequest("the message contains a blocked term; nothing was stored")
        return redact(text) if "pii-redaction" in self.names else text

    def outgoing(self, text: str) -> str:
        if "blocked-terms" in self.names and self._blocked is not None and self._blocked.search(text):
            return BLOCKED_ANSWER
        return redact(text) if "pii-redaction" in self.names else text

    def context_allowed(self, text: str) -> bool:
        if "prompt-injection-screen" in self.names and INJECTION.search(text):
            self.screened += 1
            return False
        return True
