"""What a relay caller is told on a handoff, in the language they speak.

``SWITCHBOARD_HANDOFF_MESSAGE`` and ``SWITCHBOARD_TWILIO_HANDOFF_UNAVAILABLE`` are written in one language.
For a caller whose language was detected (``channels.twilio.caller_language``) and is another than
``SWITCHBOARD_VOICE_LANGUAGE``, their default texts are said in the caller's language, for the languages the
word counter knows. A message the operator changed is theirs: it is said as they wrote it.
"""

from __future__ import annotations

from gateway.channel import Settings

__all__ = ["PHRASEBOOK", "handoff_message", "handoff_unavailable"]

# (handoff message, no one available), each the translation of the setting's default
PHRASEBOOK: dict[str, tuple[str, str]] = {
    "en": ("I'm passing you to a colleague. Someone will reply here as soon as possible.",
           "I'm sorry, no one is available to take your call right now. I can keep helping you."),
    "es": ("Le paso con un compañero. Alguien le responderá aquí lo antes posible.",
           "Lo siento, ahora mismo no hay nadie disponible para atender su llamada. Puedo seguir ayudándole."),
    "de": ("Ich verbinde Sie mit einem Kollegen. Jemand antwortet Ihnen hier so bald wie möglich.",
           "Es tut mir leid, gerade kann niemand Ihren Anruf annehmen. Ich kann Ihnen weiterhin helfen."),
    "fr": ("Je vous passe un collègue. Quelqu'un vous répondra ici dès que possible.",
           "Je suis désolé, personne n'est disponible pour prendre votre appel pour le moment. "
           "Je peux continuer à vous aider."),
    "it": ("La passo a un collega. Qualcuno le risponderà qui il prima possibile.",
           "Mi dispiace, al momento nessuno è disponibile per rispondere alla sua chiamata. "
           "Posso continuare ad aiutarla."),
    "pt": ("Vou passá-lo a um colega. Alguém lhe responderá aqui o mais rápido possível.",
           "Lamento, neste momento não há ninguém disponível para atender a sua chamada. "
           "Posso continuar a ajudá-lo."),
    "nl": ("Ik verbind u door met een collega. Iemand reageert hier zo snel mogelijk.",
           "Het spijt me, er is nu niemand beschikbaar om uw oproep aan te nemen. Ik kan u verder helpen."),
}


def _primary(code: str) -> str:
    return code.split("-", 1)[0].lower()


def _said(settings: Settings, name: str, index: int, language: str | None) -> str:
    configured = getattr(settings, name)
    if language is None or _primary(language) == _primary(settings.voice_language):
        return configured
    if configured != Settings.model_fields[name].default:  # the operator's own words
        return configured
    entry = PHRASEBOOK.get(_primary(language))
    return configured if entry is None else entry[index]


def handoff_message(settings: Settings, language: str | None) -> str:
    """``SWITCHBOARD_HANDOFF_MESSAGE`` for a caller speaking ``language`` (None: not known)."""
    return _said(settings, "handoff_message", 0, language)


def handoff_unavailable(settings: Settings, language: str | None) -> str:
    """``SWITCHBOARD_TWILIO_HANDOFF_UNAVAILABLE`` for a caller speaking ``language`` (None: not known)."""
    return _said(settings, "twilio_handoff_unavailable", 1, language)
