"""Which of a line's languages a caller speaks: Twilio's ``lang`` when it names another one (a detecting
recognizer), else the utterance's own words, and only when one language clearly leads."""

from __future__ import annotations

import pytest

from channels.twilio.caller_language import CallLanguage, parse_languages

LANGUAGES = parse_languages(" en-US, de-DE ,es-ES,en-US,")


def test_the_setting_lists_each_language_once_in_order():
    assert LANGUAGES == ("en-US", "de-DE", "es-ES")


@pytest.mark.parametrize(("text", "lang", "switched"), [
    ("Hola, ¿a qué hora abren mañana?", "en-US", ("es-ES", "words")),
    ("Wann haben Sie morgen geöffnet?", "en-US", ("de-DE", "words")),
    ("Hello", "es", ("es-ES", "lang")),  # Deepgram's ``multi`` names what it heard by its primary subtag
    ("What time do you open tomorrow?", "en-US", None),
    ("OK", "en-US", None),
    ("Hola", "en-US", None),  # one word decides nothing
])
def test_an_utterance_switches_the_call_only_when_it_clearly_says_another_language(text, lang, switched):
    choice = CallLanguage("en-US", LANGUAGES).heard(text, lang)
    assert (None if choice is None else (choice.code, choice.why)) == switched


def test_once_the_callers_language_is_known_it_stays():
    call = CallLanguage("en-US", LANGUAGES)
    assert call.heard("OK", "en-US") is None and not call.known  # not told yet
    assert call.heard("What time do you open tomorrow?", "en-US") is None and call.known
    assert call.heard("Hola, ¿a qué hora abren mañana?", "en-US") is None and call.name == "English"


def test_a_line_without_languages_never_switches_nor_names_one():
    call = CallLanguage("en-US", ())
    assert call.heard("Hola, ¿a qué hora abren mañana?", "es") is None and call.name is None
