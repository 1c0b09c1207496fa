"""The default observation and info of the follow-up environment hold what a participant sees and
none of the script's annotations (the standing environment's test is in test_standing_env.py)."""

from __future__ import annotations

import json

from followup_fixtures import REQUESTS, doability

from commitbench.envs.followup.env import FollowUpEnv
from commitbench.protocol import tool_call

HIDDEN_EVENT_FIELDS = {"act", "subject", "rank"}
HIDDEN_INFO_KEYS = {"episode", "factors", "category", "doability", "script", "promise", "expected"}


def test_followup_default_observation_and_info_hold_no_annotation_through_a_whole_episode() -> None:
    env = FollowUpEnv(requests=REQUESTS, doability=doability, setup="C2", variant="stated", request_id="rem-001")
    obs, info = env.reset(seed=0)
    seen, infos = [obs], [info]
    for action in (tool_call("get_current_time", {}), tool_call("no_such_tool", {}), json.dumps({"reply": "Done."})):
        obs, _reward, terminated, _truncated, info = env.step(action)
        seen.append(obs)
        infos.append(info)
        if terminated:
            break
    for step_info in infos:
        assert not HIDDEN_INFO_KEYS & set(step_info), sorted(step_info)
    for observation in seen:
        for event in observation["events"]:
            assert not HIDDEN_EVENT_FIELDS & set(event), event
    # The trace keeps the design factors for judges and reports.
    assert env.trace is not None and {"category", "doability"} <= set(env.trace.factors)
