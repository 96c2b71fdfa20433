"""A reply as Teams message activities: its text in Markdown, its sources (and a proposed action's
choices) as Adaptive Cards under it.

The turn hands a channel with footnote citations its reply with ``Sources:`` and one ``[n] Title
(url)`` line per cited source after it (``gateway.turn.citations.footnotes``); here that list is taken
off the text and shown as a card, each title a link where the source has a URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CARD_TYPE", "Cited", "choices_card", "citations_card", "message", "split_sources"]

CARD_TYPE = "application/vnd.microsoft.card.adaptive"
_SOURCES = re.compile(r"\n\nSources:\n((?:\[\d+\] [^\n]+\n?)+)\Z")
_LINE = re.compile(r"\[(\d+)\] (.+?)(?: \((https?://[^\s)]+)\))?$")


@dataclass(frozen=True)
class Cited:
    n: int
    title: str
    url: str | None = None


def split_sources(text: str) -> tuple[str, list[Cited]]:
    """(the reply without its footnoted sources, the sources); the text as it is when it has none."""
    found = _SOURCES.search(text.rstrip() + "\n")
    if found is None:
        return text, []
    cited = [Cited(int(m.group(1)), m.group(2), m.group(3))
             for line in found.group(1).splitlines() if (m := _LINE.fullmatch(line.strip()))]
    return text[:found.start()].rstrip(), cited


def citations_card(cited: list[Cited]) -> dict:
    rows = [{"type": "TextBlock", "text": f"[{c.n}] " + (f"[{c.title}]({c.url})" if c.url else c.title),
             "wrap": True, "size": "Small", "spacing": "None"} for c in cited]
    return {"contentType": CARD_TYPE, "content": {
        "type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "version": "1.4",
        "body": [{"type": "TextBlock", "text": "Sources", "weight": "Bolder", "size": "Small"}, *rows]}}


def choices_card(choices: list[str]) -> dict:
    """A proposed action's answers (Yes / No) as buttons: a press comes back as a message whose ``value``
    is the button's data, ``{"choice": ...}``, read as what the person said (``Activity.said``)."""
    return {"contentType": CARD_TYPE, "content": {
        "type": "AdaptiveCard", "$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "version": "1.4",
        "body": [], "actions": [{"type": "Action.Submit", "title": c, "data": {"choice": c}} for c in choices]}}


def message(text: str, attachments: list[dict] | None = None) -> dict:
    activity: dict = {"type": "message", "text": text, "textFormat": "markdown"}
    if attachments:
        activity["attachments"] = attachments
    return activity
