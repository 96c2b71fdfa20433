"""Section size budgets: one token estimate, cuts at a line or word boundary with a visible marker."""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.tokens import estimate_tokens

CUT_MARKER = "\n[... cut: {n} more characters]"
# Room for the marker itself, so a cut section still fits its budget.
_MARKER_ROOM = len(CUT_MARKER.format(n=10**9))


@dataclass(frozen=True)
class Sized:
    text: str
    tokens: int
    truncated: bool = False
    cut_chars: int = 0

    def report(self) -> dict[str, int | bool]:
        return {
            "chars": len(self.text),
            "tokens": self.tokens,
            "truncated": self.truncated,
            "cut_chars": self.cut_chars,
        }


def fit(text: str, max_tokens: int) -> Sized:
    """``text`` unchanged when it fits ``max_tokens``; otherwise cut at a boundary, marked."""
    if estimate_tokens(text) <= max_tokens:
        return Sized(text, estimate_tokens(text))
    limit = max(0, max_tokens * 4 - _MARKER_ROOM)
    cut_at = _boundary(text, limit)
    kept = text[:cut_at].rstrip()
    result = kept + CUT_MARKER.format(n=len(text) - len(kept))
    return Sized(result, estimate_tokens(result), truncated=True, cut_chars=len(text) - len(kept))


def _boundary(text: str, limit: int) -> int:
    """The last line break before ``limit`` (if it keeps at least half), else the last space."""
    for sep in ("\n", " "):
        at = text.rfind(sep, 0, limit + 1)
        if at >= limit // 2 and at > 0:
            return at
    return limit
