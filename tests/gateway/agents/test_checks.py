"""The agent's model-judged checks through invoke: multi-hop refinement searches again with the
judge's query; the hallucination check regenerates an unsupported answer once, with the judge's
feedback; a judge that fails never fails the invocation."""

from __future__ import annotations

import json

from tests.gateway.agents.conftest import key_for, make_agent


def invoke(api, agent, auth, text, **extra):
    return api.post(f"/v1/agents/{agent['id']}/versions/latest/invoke", headers=auth,
                    json={"messages": [{"role": "user", "content": text}], **extra}).json()


def test_multihop_then_an_unsupported_answer_is_regenerated(api, fake_openai):
    agent = make_agent(api, enableMultihopQueryRefinement=True, enableHallucinationCheck=True, limit=1)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_json({"relevant": False, "refined_query": "tandem rental price per day"})
    fake_openai.script_json({"relevant": True, "refined_query": ""})
    fake_openai.script_reply("Tandems are 90 euros and come with a free lunch.")
    fake_openai.script_json({"supported": False, "unsupported_claims": ["90 euros", "a free lunch"]})
    fake_openai.script_reply("Tandems are 50 euros a day.")
    out = invoke(api, agent, auth, "when do you open and what about two-seaters?")
    assert out["output"][0]["content"][0]["text"] == "Tandems are 50 euros a day."
    custom = out["customOutputs"]
    assert custom["ragMode"] == "multihop" and custom["multihop"]["queries"] == ["tandem rental price per day"]
    assert "tandem" in [n["chunkId"] for n in custom["sourceNodes"]]
    assert custom["hallucinationCheck"] == {"checked": True, "supported": False, "regenerated": True,
                                            "unsupportedClaims": ["90 euros", "a free lunch"], "note": None}
    retry = fake_openai.chat_requests()[-1]["body"]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Tandems are 90 euros and come with a free lunch."}
    assert "- a free lunch" in retry[-1]["content"]


def test_a_supported_answer_is_kept_and_a_failing_judge_does_not_fail_the_call(api, fake_openai):
    agent = make_agent(api, enableHallucinationCheck=True)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("We open 9:00-17:00.")
    fake_openai.script_json({"supported": True, "unsupported_claims": []})
    kept = invoke(api, agent, auth, "opening hours?")
    assert kept["output"][0]["content"][0]["text"] == "We open 9:00-17:00."
    assert kept["customOutputs"]["hallucinationCheck"]["regenerated"] is False
    fake_openai.script_reply("We open at nine.")
    fake_openai.fail_next(500, times=2)  # the judge's call fails (and its retry)
    failed = invoke(api, agent, auth, "opening hours?")
    assert failed["output"][0]["content"][0]["text"] == "We open at nine."
    check = failed["customOutputs"]["hallucinationCheck"]
    assert check["checked"] is False and "judge failed" in check["note"]


def test_checks_can_be_switched_on_per_invocation_and_hold_the_stream(api, fake_openai):
    agent = make_agent(api)
    auth = {"Authorization": f"Bearer {key_for(api, agent['id'])}"}
    fake_openai.script_reply("Tandems are 50 euros a day.")
    fake_openai.script_json({"supported": True, "unsupported_claims": []})
    with api.stream("POST", f"/v1/agents/{agent['id']}/versions/latest/invoke-stream", headers=auth,
                    json={"messages": [{"role": "user", "content": "tandem?"}], "enableHallucinationCheck": True}) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert [line["object"] for line in lines] == ["response.delta", "response.completed"]  # one checked piece
    assert lines[0]["text"] == "Tandems are 50 euros a day."
    assert lines[1]["customOutputs"]["hallucinationCheck"]["supported"] is True
