"""Adjacent chunks: a retrieved document chunk brings its neighbours, merged into its text in
document order or as separate source nodes."""

from __future__ import annotations

from tests.gateway.agents.conftest import ADMIN, key_for, make_agent

GUIDE = ("# Rental guide\n\n## Deposit\n\nA deposit of 100 euros is taken at pick-up.\n\n"
         "## Tandems\n\nTandems cost 50 euros a day.\n\n## Returns\n\nReturn bikes by 18:00.\n")


def test_neighbours_merged_or_separate(api, fake_openai):
    upload = api.post("/api/kb/documents", headers=ADMIN, files=[("files", ("guide.md", GUIDE.encode()))],
                      data={"chunking": '{"strategy": "paragraph"}'})
    assert upload.status_code in (200, 201), upload.text
    merged = make_agent(api, "merged", adjacentChunkRange=1, adjacentChunkMerge=True, limit=1)
    auth = {"Authorization": f"Bearer {key_for(api, merged['id'])}"}
    out = api.post(f"/v1/agents/{merged['id']}/versions/latest/invoke", headers=auth, json={
        "messages": [{"role": "user", "content": "rental guide tandems"}]}).json()
    [node] = [n for n in out["customOutputs"]["sourceNodes"] if n["chunkId"].startswith("doc:")]
    assert node["text"].index("deposit") < node["text"].index("Tandems cost") < node["text"].index("Return bikes")
    system = fake_openai.chat_requests()[-1]["body"]["messages"][0]["content"]
    assert "A deposit of 100 euros" in system and "Return bikes by 18:00" in system

    separate = api.post(f"/v1/agents/{merged['id']}/versions/latest/invoke", headers=auth, json={
        "messages": [{"role": "user", "content": "rental guide tandems"}], "adjacentChunkMerge": False}).json()
    chunks = [n["chunkId"] for n in separate["customOutputs"]["sourceNodes"] if n["chunkId"].startswith("doc:")]
    assert len(chunks) == 3 and chunks[0].endswith("#2")  # the hit first, then its neighbours
    assert chunks[1:] == [chunks[0][:-1] + "1", chunks[0][:-1] + "3"]


def test_labels_narrow_the_pool(api):
    api.post("/api/kb/topics", headers=ADMIN, json={"source": "vip-tandem", "title": "Tandem rental for members",
                                                    "summary": "Members pay 40 euros a day for a tandem.",
                                                    "labels": ["rag_context", "members"]})
    agent = make_agent(api, "members", labels=["rag_context", "members"], limit=3)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    out = api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth, json={
        "messages": [{"role": "user", "content": "tandem rental price"}]}).json()
    assert [n["chunkId"] for n in out["customOutputs"]["sourceNodes"]] == ["vip-tandem"]
