"""The reply renderer and the outbound retry helper, without any server."""

from __future__ import annotations

import asyncio

import pytest

from channels.errors import ChannelRateLimited, ChannelRejected, ChannelUnavailable
from channels.outbound_retry import RetryPolicy, send_with_retry
from channels.render import render, split_text, to_speech
from gateway.channel import Capabilities

PLAIN = Capabilities(max_length=60, markup="plain")


def test_short_text_is_one_unnumbered_part():
    assert render("Hello **there**.", Capabilities(max_length=100, markup="html")) == ["Hello <b>there</b>."]


def test_split_prefers_paragraphs_then_sentences_and_numbers_parts():
    text = "First paragraph is short.\n\nSecond one has two sentences. This is the second sentence of it."
    parts = render(text, PLAIN)
    assert parts == ["(1/3) First paragraph is short.", "(2/3) Second one has two sentences.",
                     "(3/3) This is the second sentence of it."]
    assert all(len(p) <= 60 for p in parts)


def test_a_word_longer_than_the_limit_is_cut_not_dropped():
    word = "x" * 150
    parts = render(word, PLAIN)
    assert all(len(p) <= 60 for p in parts)
    assert "".join(p.split(" ", 1)[1] for p in parts) == word


@pytest.mark.parametrize("markup", ["html", "mrkdwn", "plain"])
def test_a_code_block_split_across_parts_is_closed_and_reopened(markup):
    code = "\n\n".join(f"step_{i} = run(step_{i - 1})  # stage {i}" for i in range(1, 13))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it once."
    caps = Capabilities(max_length=160, markup=markup)
    parts = render(text, caps)
    assert len(parts) > 2 and all(len(p) <= 160 for p in parts)
    if markup == "html":
        assert all(p.count("<pre>") == p.count("</pre>") for p in parts)
        inside = [p.split("<pre>", 1)[1].split("</pre>", 1)[0] for p in parts if "<pre>" in p]
        assert "\n".join(inside).split() == code.split()
        assert "```" not in "".join(parts)
    if markup == "mrkdwn":
        assert all(p.count("```") % 2 == 0 for p in parts)


def test_limit_counts_the_escaped_length():
    chunks = split_text("<" * 100, 40, lambda s: len(s.replace("<", "&lt;")))
    assert [len(c) for c in chunks] == [10] * 10


def test_buttons_degrade_to_numbered_text():
    caps = Capabilities(max_length=200, markup="mrkdwn")
    out = render("Pick one:", caps, buttons=["Book a visit", "Talk to a human"])
    assert out == ["Pick one:\n\n1. Book a visit\n2. Talk to a human"]


@pytest.mark.parametrize(("markup", "expected"), [
    ("html", "<b>Hi</b> &amp; <i>you</i>\n• <code>x&lt;y</code> <a href=\"https://a.io\">a</a>"),
    ("mrkdwn", "*Hi* &amp; _you_\n• `x&lt;y` <https://a.io|a>"),
    ("plain", "Hi & you\n- x<y a (https://a.io)"),
])
def test_markup_dialects(markup, expected):
    assert render("**Hi** & *you*\n- `x<y` [a](https://a.io)", Capabilities(1000, markup)) == [expected]


def test_speech_has_no_markup_urls_or_emoji():
    assert to_speech("# Hours\n**Open** 9-5 🎉 see https://x.io/h or [the page](https://x.io)") == \
        "Hours\nOpen 9-5 see or the page"


def test_arithmetic_stars_are_not_emphasis():
    assert render("2 * 3 * 4 = 24", Capabilities(100, "html")) == ["2 * 3 * 4 = 24"]


async def _no_sleep(_: float) -> None:
    await asyncio.sleep(0)


async def test_retry_honours_retry_after_then_succeeds():
    waits, calls = [], []

    async def sleep(s: float) -> None:
        waits.append(s)

    async def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ChannelRateLimited("429", retry_after_s=7)
        if len(calls) == 2:
            raise ChannelUnavailable("503")
        return "ok"

    assert await send_with_retry(call, RetryPolicy(tries=3, base_delay_s=0.1, max_delay_s=30), sleep=sleep) == "ok"
    assert waits[0] == 7 and 0.16 <= waits[1] <= 0.24  # second try: base * 2 ± 20%


async def test_retry_is_bounded_and_rejections_are_not_retried():
    calls = []

    async def unavailable() -> str:
        calls.append(1)
        raise ChannelUnavailable("500")

    with pytest.raises(ChannelUnavailable):
        await send_with_retry(unavailable, RetryPolicy(tries=4, base_delay_s=0.01), sleep=_no_sleep)
    assert len(calls) == 4

    async def rejected() -> str:
        calls.append(2)
        raise ChannelRejected("403")

    with pytest.raises(ChannelRejected):
        await send_with_retry(rejected, RetryPolicy(tries=4), sleep=_no_sleep)
    assert calls.count(2) == 1


async def test_retry_after_is_capped():
    waits = []

    async def sleep(s: float) -> None:
        waits.append(s)

    async def call() -> str:
        if not waits:
            raise ChannelRateLimited("429", retry_after_s=3600)
        return "ok"

    await send_with_retry(call, RetryPolicy(tries=2, max_delay_s=5), sleep=sleep)
    assert waits == [5]
