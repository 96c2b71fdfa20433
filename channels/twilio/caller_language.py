"""Which of a phone line's languages a caller speaks (``SWITCHBOARD_TWILIO_RELAY_LANGUAGES``).

Twilio's ``prompt`` names a ``lang``: with a detecting recognizer (``multi``) it is what the caller spoke;
otherwise it is only the language recognition was set to. So a ``lang`` other than the session's current
one is taken as the caller's; the same one is checked against the words themselves: common function
words of each configured language are counted and one language must clearly lead (at least two words,
twice the runner-up), so "OK" or a name decides nothing. No model and no dependency: it runs in the
socket's loop in microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CallLanguage", "LanguageChoice", "detect", "language_name", "parse_languages"]

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

# A few dozen of each language's most frequent function words, none shared with another list below.
_MARKERS: dict[str, frozenset[str]] = {
    "en": frozenset("the and is are you your what when where how can could would please have does my "
                    "with this that there for about open".split()),
    "es": frozenset("el los las una es están qué cuándo dónde cómo puedo puede quiero hola gracias por "
                    "favor tienen hay del para mi sus abren abierto horario".split()),
    "de": frozenset("der die das und ist sind ich sie wie wann wo was können kann bitte haben hat "
                    "mein nicht mit geöffnet öffnungszeiten hallo danke".split()),
    "fr": frozenset("le les et est sont vous je quand où comment pouvez peux voudrais bonjour merci "
                    "avez pour mon ouvert horaires quelle quel".split()),
    "it": frozenset("il gli sono voi io quando dove come potete posso vorrei buongiorno grazie avete "
                    "per mio aperto orari che della".split()),
    "pt": frozenset("os as você vocês eu onde como podem gostaria olá obrigado obrigada "
                    "têm meu aberto horário não".split()),
    "nl": frozenset("de het en zijn jullie ik wanneer waar hoe kunnen kan graag bedankt hebben "
                    "mijn niet openingstijden".split()),
}
_NAMES = {"en": "English", "es": "Spanish", "de": "German", "fr": "French", "it": "Italian",
          "pt": "Portuguese", "nl": "Dutch", "pl": "Polish", "sv": "Swedish", "da": "Danish",
          "nb": "Norwegian", "no": "Norwegian", "fi": "Finnish", "ja": "Japanese", "zh": "Chinese",
          "ko": "Korean", "hi": "Hindi", "ar": "Arabic", "tr": "Turkish", "ru": "Russian"}


def parse_languages(raw: str | None) -> tuple[str, ...]:
    """``en-US,de-DE,es-ES`` as its codes, in order, without blanks or repeats."""
    seen: dict[str, None] = {}
    for part in (raw or "").split(","):
        if part.strip():
            seen.setdefault(part.strip(), None)
    return tuple(seen)


def _primary(code: str) -> str:
    return code.split("-", 1)[0].lower()


def language_name(code: str) -> str:
    """``es-ES`` → ``Spanish``; an unknown code is named as it is."""
    return _NAMES.get(_primary(code), code)


@dataclass(frozen=True)
class LanguageChoice:
    code: str  # one of the line's languages, as configured (``es-ES``)
    why: str  # ``lang`` (Twilio said so) or ``words`` (the utterance's words)


def _configured(code: str, languages: Sequence[str]) -> str | None:
    """The configured code ``code`` names: exactly, or by its primary subtag (Deepgram's ``multi`` says ``es``)."""
    if code in languages:
        return code
    return next((c for c in languages if _primary(c) == _primary(code)), None) if code else None


def detect(text: str, lang: str | None, current: str, languages: Sequence[str]) -> LanguageChoice | None:
    """The configured language the caller spoke ``text`` in (``current`` too, when the words clearly say
    so); None when it cannot be told."""
    named = _configured(lang or "", languages)
    if named is not None and _primary(named) != _primary(current):
        return LanguageChoice(named, "lang")
    words = [w.lower() for w in _WORD.findall(text)]
    scores = sorted(((sum(w in _MARKERS.get(_primary(c), ()) for w in words), c) for c in languages), reverse=True)
    if not scores:
        return None
    best, code = scores[0]
    runner_up = scores[1][0] if len(scores) > 1 else 0
    if best < 2 or best < 2 * runner_up:
        return None
    return LanguageChoice(code, "words")


class CallLanguage:
    """One call's language: ``default`` until the caller's first utterance that clearly says which of
    ``languages`` they speak; after that it is known and no longer checked. ``settled``: known already (an
    earlier relay session of the call detected it)."""

    def __init__(self, default: str, languages: Sequence[str], settled: str | None = None) -> None:
        self.languages = tuple(languages)
        settled = _configured(settled or "", self.languages)
        self.code = settled or default
        self.known = settled is not None or not self.languages  # nothing to switch to: nothing to detect

    @property
    def name(self) -> str | None:
        """The language the agent is told to answer in; None when the line has no languages set."""
        return language_name(self.code) if self.languages else None

    def heard(self, text: str, lang: str | None) -> LanguageChoice | None:
        """The switch ``text`` calls for (once it is another language than the call's); None: no switch."""
        if self.known:
            return None
        choice = detect(text, lang, self.code, self.languages)
        if choice is None:
            return None
        self.known = True
        if choice.code == self.code:
            return None
        self.code = choice.code
        return choice
