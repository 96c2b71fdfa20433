"""The knowledge gaps, from the model's side: ten differently worded questions about a subject the knowledge
base lacks are one gap on the Insights API (grouped with the gateway's own embedding model); a topic written
for it makes the next such question answered."""

from __future__ import annotations

import httpx

from gateway.http.app import create_app
from tests.conftest import MODEL_PATH
from tests.fakes.live_server import LiveServer
from tests.gateway.insight.test_gap_clusters import OTHERS, PARKING
from tests.gateway.insight.test_insights_api import ADMIN, Visitor, insights


def test_ten_wordings_of_a_missing_subject_are_one_gap_and_a_topic_answers_the_next(settings, fake_openai):
    dense = settings.model_copy(update={"embeddings": "fastembed", "embedding_model_path": MODEL_PATH,
                                       "retrieval_strategy": "hybrid"})  # the scripted replies are the answers
    with LiveServer(create_app(dense)) as server, httpx.Client(base_url=server.url, timeout=30) as api:
        topic = {"source": "hours", "title": "Opening hours", "facts": ["open Tuesday to Sunday, 10 to 18"],
                 "summary": "We open Tuesday to Sunday, 10:00 to 18:00."}
        assert api.post("/api/kb/topics", json=topic, headers=ADMIN).status_code == 201
        for question in PARKING + OTHERS[:2]:
            fake_openai.script_reply("Sorry, I don't know.")
            Visitor(api).say(question)
        report = insights(api)
        assert report["unanswered"] == 12
        gaps = report["gaps"]
        parking = [g for g in gaps if set(g["examples"]) & set(PARKING)]
        assert len(parking) == 1, gaps  # one gap, not ten
        assert parking[0]["count"] == 10 and len(parking[0]["groups"]) == 10
        assert len(parking[0]["examples"]) == 5 and set(parking[0]["examples"]) <= set(PARKING)
        assert sorted(g["count"] for g in gaps) == [1, 1, 10]  # the vouchers and the Sunday questions apart

        parking_topic = {"source": "parking", "title": "Parking for customers",
                         "facts": ["customers park free in the yard behind the studio",
                                   "street parking outside is allowed after 18:00"],
                         "summary": "Where to park your car: free in the yard behind the studio."}
        assert api.post("/api/kb/topics", json=parking_topic, headers=ADMIN).status_code == 201
        fake_openai.script_reply("Park free in the yard behind the studio.")
        reply = Visitor(api).say("Where can my car go while I'm at a class?")
        assert "yard" in reply["text"]
        after = insights(api)
        assert after["unanswered"] == 12 and after["turns"] == report["turns"] + 1
