"""👍 / 👎 Block Kit buttons under Slack replies: they ride on the reply's own chat.postMessage; a press
(a signed ``block_actions`` interaction at the events URL) is acknowledged at once, records the vote on
that reply, and the message's buttons make way for a thank-you; a press naming another channel's reply
records nothing; an unsigned interaction is refused."""

from __future__ import annotations

from tests.channels import vendors
from tests.channels.conftest import settle, wait_until
from tests.channels.connections_support import ADMIN


def _feedback(client) -> dict:
    return client.get("/api/insights", headers=ADMIN).json()["feedback"]


def test_a_press_rates_the_reply_and_replaces_the_buttons(client, live, fake_slack, fake_openai, stored):
    fake_openai.script_reply("We open at *nine*.")
    vendors.post_slack(client, vendors.slack_envelope(vendors.slack_event("<@U0BOT0001> when do you open?")))
    settle(live)
    [posted] = fake_slack.posted()
    [_, reply] = stored.messages(f"slack:{vendors.slack_api.TEAM_ID}/U0ADA0001")
    section, actions = posted["blocks"]
    assert section["text"] == {"type": "mrkdwn", "text": "We open at _nine_."}  # markdown rendered as mrkdwn
    assert [(e["text"]["text"], e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("👍", "sb_rate_up", reply.id), ("👎", "sb_rate_down", reply.id)]
    assert posted["text"] == "We open at _nine_."  # the notification's text

    press = vendors.slack_block_actions(posted, fake_slack.sent_ts[0], "sb_rate_down")
    answer = vendors.post_slack_interaction(client, press)
    assert answer.status_code == 200
    wait_until(lambda: fake_slack.recorder.received("chat.update"), what="the message updated")
    settle(live)
    assert _feedback(client) == {"up": 0, "down": 1, "comments": 0}
    [update] = fake_slack.recorder.received("chat.update")
    assert update.params["ts"] == fake_slack.sent_ts[0] and update.params["channel"] == posted["channel"]
    assert [b["type"] for b in update.params["blocks"]] == ["section", "context"]
    assert update.params["blocks"][1]["elements"][0]["text"] == "Thanks for your feedback!"

    # the same user changes their mind (the buttons on another client): the vote moves
    vendors.post_slack_interaction(client, vendors.slack_block_actions(posted, fake_slack.sent_ts[0], "sb_rate_up"))
    wait_until(lambda: len(fake_slack.recorder.received("chat.update")) == 2, what="the second update")
    assert _feedback(client) == {"up": 1, "down": 0, "comments": 0}


def test_a_press_naming_another_channels_reply_or_unsigned_records_nothing(client, live, fake_slack, fake_openai):
    fake_openai.script_reply("Hello there.")
    vendors.post_slack(client, vendors.slack_envelope(vendors.slack_event("hi", kind="message", channel="D0DM0001")))
    settle(live)
    [posted] = fake_slack.posted()
    forged = vendors.slack_block_actions(posted, fake_slack.sent_ts[0], "sb_rate_up", user="U0EVE0001",
                                         channel="C0OTHER01")
    assert vendors.post_slack_interaction(client, forged).status_code == 200
    unsigned = vendors.post_slack_interaction(client, vendors.slack_block_actions(posted, fake_slack.sent_ts[0],
                                                                                  "sb_rate_up"), secret="wrong")
    assert unsigned.status_code == 401
    settle(live)
    assert fake_slack.recorder.received("chat.update") == []
    assert _feedback(client) == {"up": 0, "down": 0, "comments": 0}
