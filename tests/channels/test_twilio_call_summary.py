"""The question a transferred call is summarised with is the last thing the caller said that led to the
handoff: before their request for a person, or the very last when the model handed the call over; keys they
pressed are no question when they said anything."""

from __future__ import annotations

from channels.twilio.call_summary import CallTranscript


def _call(*said: tuple[str, str]) -> CallTranscript:
    transcript = CallTranscript()
    for who, text in said:
        if who == "caller":
            transcript.caller(text)
        else:
            transcript.assistant(text)
    return transcript


def test_the_question_is_the_last_one_before_the_request_for_a_person():
    call = _call(("caller", "Do you rent e-bikes?"), ("assistant", "Yes, 35 euros a day."),
                 ("caller", "Can I bring the bike back a day late?"), ("assistant", "Let me check."),
                 ("caller", "Can I talk to a person?"))
    summary, question = call.summary("+15550002222")
    assert question == "Their question: \u201cCan I bring the bike back a day late?\u201d"
    assert summary.startswith("Caller +15550002222 asked about \u201cDo you rent e-bikes?\u201d and 1 more")


def test_a_model_handoff_is_summarised_with_the_last_thing_said():
    call = _call(("caller", "Do you rent e-bikes?"), ("assistant", "Yes."), ("caller", "My e-bike caught fire."))
    assert call.summary(asked_for_person=False)[1] == "Their question: \u201cMy e-bike caught fire.\u201d"


def test_keys_pressed_are_passed_over_for_what_the_caller_said():
    call = _call(("caller", "My bike's chain broke, can you repair it today?"), ("assistant", "Press 0 for a person."),
                 ("caller", "[pressed 0]"))
    assert call.summary(asked_for_person=False)[1] == (
        "Their question: \u201cMy bike's chain broke, can you repair it today?\u201d")
    only_keys = _call(("caller", "[pressed 2]"))
    assert only_keys.summary(asked_for_person=False)[1] == "Their question: \u201c[pressed 2]\u201d"
