"""Reply rendering: the model's Markdown converted to each channel's dialect and split to its limit.

``render`` never truncates: a reply longer than the channel's limit is split at paragraph, then
line, then sentence, then word boundaries (characters only as a last resort) into parts numbered
``(1/3) `` … whose *rendered* length (after escaping) fits the limit. Buttons degrade to a
numbered list appended to the text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

from gateway.channel import Capabilities

__all__ = ["Dialect", "buttons_as_text", "html_to_text", "number_parts", "render", "split_text", "to_speech"]

_INLINE = re.compile(
    r"```[\w+-]*\n?(?P<pre>.*?)```"
    r"|`(?P<code>[^`\n]+)`"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>[^)\s]+)\)"
    r"|\*\*(?=\S)(?P<bold>.+?)(?<=\S)\*\*"
    r"|__(?=\S)(?P<bold2>.+?)(?<=\S)__"
    r"|~~(?=\S)(?P<strike>.+?)(?<=\S)~~"
    r"|(?<![\w*])\*(?=[^\s*])(?P<em>[^*\n]+?)(?<=\S)\*(?![\w*])"
    r"|(?<![\w_])_(?=[^\s_])(?P<em2>[^_\n]+?)(?<=\S)_(?![\w_])",
    re.S,
)
FENCE = "```"
FENCE_SLACK = 24  # what closing and reopening a block adds to a part, in the widest dialect (HTML)
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.M)
_BULLET = re.compile(r"^([ \t]*)[-*+][ \t]+", re.M)
_URL = re.compile(r"https?://\S+|www\.\S+")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff\U0000fe0f\U0000200d\U00002300-\U000023ff"
    "\U00002b00-\U00002bff]"
)


@dataclass(frozen=True)
class Dialect:
    """How one markup language spells each inline element; ``escape`` applies to literal text."""

    escape: Callable[[str], str]
    bold: Callable[[str], str]
    italic: Callable[[str], str]
    strike: Callable[[str], str]
    code: Callable[[str], str]
    pre: Callable[[str], str]
    link: Callable[[str, str], str]
    bullet: str = "• "

    def convert(self, text: str) -> str:
        text = _HEADING.sub(lambda m: f"**{m.group(1)}**", text)
        text = _BULLET.sub(lambda m: m.group(1) + "\x00", text)
        out: list[str] = []
        pos = 0
        for m in _INLINE.finditer(text):
            out.append(self._literal(text[pos:m.start()]))
            out.append(self._element(m))
            pos = m.end()
        out.append(self._literal(text[pos:]))
        return "".join(out)

    def _literal(self, text: str) -> str:
        return self.escape(text).replace("\x00", self.bullet)

    def _element(self, m: re.Match[str]) -> str:
        if m.group("pre") is not None:
            return self.pre(self.escape(m.group("pre").strip("\n")))
        if m.group("code") is not None:
            return self.code(self.escape(m.group("code")))
        if m.group("label") is not None:
            return self.link(m.group("label"), m.group("url"))
        for name, wrap in (("bold", self.bold), ("bold2", self.bold), ("strike", self.strike),
                           ("em", self.italic), ("em2", self.italic)):
            if m.group(name) is not None:
                return wrap(self.convert(m.group(name)))
        return self.escape(m.group(0))  # pragma: no cover - every alternative is named


def _esc_html(text: str) -> str:
    return html.escape(text, quote=False)


def _esc_mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _html_link(label: str, url: str) -> str:
    if not url.startswith(("http://", "https://", "tg://", "mailto:")):
        return _esc_html(f"{label} ({url})")
    return f'<a href="{html.escape(url, quote=True)}">{_esc_html(label)}</a>'


def _plain_link(label: str, url: str) -> str:
    return label if label == url else f"{label} ({url})"


def _same(text: str) -> str:
    return text


HTML = Dialect(
    escape=_esc_html,
    bold=lambda s: f"<b>{s}</b>",
    italic=lambda s: f"<i>{s}</i>",
    strike=lambda s: f"<s>{s}</s>",
    code=lambda s: f"<code>{s}</code>",
    pre=lambda s: f"<pre>{s}</pre>",
    link=_html_link,
)
MRKDWN = Dialect(
    escape=_esc_mrkdwn,
    bold=lambda s: f"*{s}*",
    italic=lambda s: f"_{s}_",
    strike=lambda s: f"~{s}~",
    code=lambda s: f"`{s}`",
    pre=lambda s: f"```{s}```",
    link=lambda label, url: f"<{url}|{_esc_mrkdwn(label)}>",
)
PLAIN = Dialect(
    escape=_same, bold=_same, italic=_same, strike=_same, code=_same, pre=_same, link=_plain_link, bullet="- "
)
MARKDOWN = Dialect(
    escape=_same, bold=lambda s: f"**{s}**", italic=lambda s: f"*{s}*", strike=lambda s: f"~~{s}~~",
    code=lambda s: f"`{s}`", pre=lambda s: f"```\n{s}\n```", link=lambda label, url: f"[{label}]({url})",
    bullet="- ",
)
DIALECTS: dict[str, Dialect] = {"html": HTML, "mrkdwn": MRKDWN, "plain": PLAIN, "markdown": MARKDOWN}


def to_speech(text: str) -> str:
    """What a voice should say: no markup, no URLs, no emoji, no list bullets."""
    spoken = Dialect(
        escape=_same, bold=_same, italic=_same, strike=_same, code=_same, pre=_same,
        link=lambda label, url: label, bullet="",
    ).convert(text)
    spoken = _EMOJI.sub("", _URL.sub("", spoken))
    spoken = re.sub(r"[ \t]+", " ", spoken)
    return re.sub(r"\s*\n\s*", "\n", spoken).strip()


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._href: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href.append(dict(attrs).get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href and (href := self._href.pop()):
            self.out.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        self.out.append(data)


def html_to_text(text: str) -> str:
    """An HTML part as plain text (tags dropped, entities decoded, link targets kept in brackets)."""
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    return "".join(parser.out)


def buttons_as_text(buttons: Sequence[str]) -> str:
    return "\n".join(f"{i}. {label}" for i, label in enumerate(buttons, 1))


# Boundaries, coarsest first: paragraph, line, sentence, word. A piece keeps its trailing separator.
_BOUNDARIES = (
    re.compile(r"\n[ \t]*\n\s*"),
    re.compile(r"\n"),
    re.compile(r"(?<=[.!?…。])[\"')\]]*\s+"),
    re.compile(r"\s+"),
)


def _cut(text: str, boundary: re.Pattern[str]) -> list[str]:
    pieces, start = [], 0
    for m in boundary.finditer(text):
        if m.end() > start and m.start() > start:
            pieces.append(text[start:m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _hard_cut(text: str, budget: int, measure: Callable[[str], int]) -> list[str]:
    chunks = []
    while text:
        lo, hi = 1, len(text)
        while lo < hi:  # the longest prefix that renders within the budget
            mid = (lo + hi + 1) // 2
            if measure(text[:mid]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        chunks.append(text[:lo])
        text = text[lo:]
    return chunks


def _pack(text: str, budget: int, measure: Callable[[str], int], level: int = 0) -> list[str]:
    if measure(text) <= budget:
        return [text]
    if level == len(_BOUNDARIES):
        return _hard_cut(text, budget, measure)
    chunks: list[str] = []
    current, approx = "", 0
    for piece in _cut(text, _BOUNDARIES[level]):
        size = measure(piece)
        # Pieces render almost independently: sum their sizes, and measure the joined text exactly
        # only near the budget (keeps long replies linear rather than quadratic).
        if approx + size <= budget * 0.8 or measure(current + piece) <= budget:
            current, approx = current + piece, approx + size
            continue
        if current.strip():
            chunks.append(current)
        current, approx = "", 0
        if size <= budget:
            current, approx = piece, size
        else:
            *done, current = _pack(piece, budget, measure, level + 1)
            chunks.extend(done)
            approx = measure(current)
    if current.strip():
        chunks.append(current)
    # the estimate can only be off by markup spanning pieces; re-split the rare chunk it let through
    return [part for chunk in chunks for part in
            ([chunk] if measure(chunk) <= budget else _pack(chunk, budget, measure, level + 1))]


def split_text(text: str, budget: int, measure: Callable[[str], int] = len) -> list[str]:
    """Source chunks whose ``measure`` (rendered length, whitespace-trimmed) is within ``budget``."""
    if budget < 1:
        raise ValueError("budget must be positive")
    return [c.strip() for c in _pack(text.strip(), budget, lambda s: measure(s.strip())) if c.strip()]


def _prefix(i: int, n: int) -> str:
    return f"({i}/{n}) "


def number_parts(chunks: Sequence[str]) -> list[str]:
    n = len(chunks)
    return list(chunks) if n < 2 else [_prefix(i, n) + c for i, c in enumerate(chunks, 1)]


def render(text: str, caps: Capabilities, *, buttons: Sequence[str] = ()) -> list[str]:
    """The parts to send, in order; each within ``caps.max_length`` after conversion."""
    if buttons:
        text = f"{text.rstrip()}\n\n{buttons_as_text(buttons)}"
    convert = to_speech if caps.voice else DIALECTS[caps.markup].convert
    if len(convert(text.strip())) <= caps.max_length:
        return [convert(text.strip())]
    # A code block cut in two is closed at the end of one part and reopened in the next; leave room.
    slack = FENCE_SLACK if FENCE in text else 0
    count = 2
    while True:  # the numbering prefix's width depends on the count of parts it numbers
        budget = caps.max_length - len(_prefix(count, count)) - slack
        chunks = _balance_fences(split_text(text, budget, lambda s: len(convert(s))))
        if len(_prefix(len(chunks), len(chunks))) <= len(_prefix(count, count)):
            return number_parts([convert(c) for c in chunks])
        count = len(chunks)


def _balance_fences(chunks: Sequence[str]) -> list[str]:
    """Close a code block at the end of a part and reopen it at the start of the next."""
    out: list[str] = []
    inside = False
    for chunk in chunks:
        if inside:
            chunk = f"{FENCE}\n{chunk}"
        inside = chunk.count(FENCE) % 2 == 1
        out.append(f"{chunk}\n{FENCE}" if inside else chunk)
    return out
