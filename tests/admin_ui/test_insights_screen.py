"""The Insights screen shows what visitors did: conversations, a 👎 with its comment, cost, the per-day
chart and the unanswered questions, from the same counters as GET /api/insights."""

from __future__ import annotations

import re

import httpx

from tests.admin_ui.conftest import csrf_of, sign_in


def test_the_screen_shows_ratings_comments_cost_charts_and_gaps(console, fake_openai):
    with httpx.Client(base_url=console.url, timeout=30) as client:
        sign_in(client)
        session = client.post("/api/chat/sessions").json()
        auth = {"Authorization": f"Bearer {session['token']}", "X-Chat-Session": session["session_id"]}
        path = f"/api/chat/sessions/{session['session_id']}/messages"
        fake_openai.script_reply("Sorry, I don't know if we rent unicycles.")
        reply = client.post(path, json={"text": "Do you rent unicycles?"}, headers=auth).json()["reply"]
        voted = client.post(f"/api/conversations/{reply['conversation_id']}/messages/{reply['message_id']}/feedback",
                            json={"rating": "down", "comment": "Please add unicycles"}, headers=auth)
        assert voted.status_code == 200, voted.text
        page = client.get(f"/admin/conversations/{reply['conversation_id']}").text  # the outcome on the conversation
        badge = '<p id="outcomes">Outcome: <span class="badge" data-outcome="unanswered">unanswered</span></p>'
        assert badge in page, page
        screen = client.get("/admin/insights", params={"range": "today"})
        assert screen.status_code == 200
        html = screen.text
        assert re.search(r"<title>[^<]*Insights[^<]*</title>", html)  # the page's title is only its title
        assert html.count('id="cost-h"') == 1
        assert re.search(r'<th scope="row">Conversations</th><td>1</td>', html)
        assert re.search(r'<th scope="row">Unanswered</th><td>1 \(100 %\)</td>', html)
        unanswered = re.search(r'<th scope="row">Unanswered</th><td>[^<]*</td><td><a data-outcome-list href="([^"]+)"',
                               html).group(1)  # the figure's conversations, in the list filtered by outcome
        listed = client.get(unanswered).text
        assert re.findall(r'<tr data-conversation="([^"]+)"', listed) == [reply["conversation_id"]]
        assert re.search(r'<th scope="row">Rated 👍 / 👎</th><td>0 / 1 \(0 % 👍\)</td>', html)
        assert "👎 Please add unicycles" in html
        assert re.search(r"<title>\d{4}-\d\d-\d\d: 1</title>", html)  # today's bar in the per-day chart
        assert "Do you rent unicycles?" in html
        other_channel = client.get("/admin/insights", params={"range": "30", "channel": "telegram"}).text
        assert re.search(r'<th scope="row">Conversations</th><td>0</td>', other_channel)
        write = re.search(r'data-write-topic href="([^"]+)"', html).group(1).replace("&amp;", "&")
        editor = client.get(write).text  # the gap's questions, pre-filled into a new topic
        assert 'id="asked"' in editor and "<li>Do you rent unicycles?</li>" in editor
        assert 'id="title" name="title" value="Do you rent unicycles?"' in editor
        gap = re.search(r'action="/admin/insights/gaps/([0-9a-f]+)/dismiss"', html).group(1)
        refused = client.post(f"/admin/insights/gaps/{gap}/dismiss", data={"csrf_token": "forged"})
        assert refused.status_code in (400, 403)
        assert "Do you rent unicycles?" in client.get("/admin/insights").text
        dismissed = client.post(f"/admin/insights/gaps/{gap}/dismiss", data={"csrf_token": csrf_of(html)})
        assert dismissed.status_code == 303
        assert "Do you rent unicycles?" not in client.get("/admin/insights").text
