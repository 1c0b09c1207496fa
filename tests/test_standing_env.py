"""StandingEnv: the gymnasium contract, the turn protocol and garbage input."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import commitbench.envs  # noqa: F401  (registers the environments)
from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.protocol import parse_action, tool_call

CELLS = sorted({e.cell for e in load_episodes()})


@pytest.mark.parametrize("cell", CELLS)
def test_check_env_passes_for_every_cell(cell):
    env = gym.make("commitbench/Standing-v0", cells=[cell], split="test", render_mode="ansi")
    check_env(env.unwrapped)


def test_make_by_episode_id_and_seeded_reset_is_deterministic():
    episode = load_episodes()[123]
    env = gym.make("commitbench/Standing-v0", episode_id=episode.id)
    _obs, info = env.reset(seed=0)
    assert info["episode_id"] == episode.id
    pool_env = gym.make("commitbench/Standing-v0", split="test", cells=["PEER-DIRECT"])
    first = pool_env.reset(seed=7)[1]["episode_id"]
    assert pool_env.reset(seed=7)[1]["episode_id"] == first


def test_unknown_selection_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown cell: NOPE"):
        StandingEnv(cells=["NOPE"])


def _env(cell: str = "PEER-DIRECT", gap: int = 1) -> StandingEnv:
    return StandingEnv(cells=[cell], split="test", gaps=[gap], policies=["explicit"], surfaces=[0])


def _revealed(cell: str = "PEER-DIRECT", gap: int = 1) -> RevealScriptAnnotations:
    """The environment through the privileged channel: events carry the script's annotations."""
    return RevealScriptAnnotations(_env(cell, gap))


def test_the_default_observation_and_info_hold_what_a_participant_sees_and_no_annotation():
    env = _env("DELEG-DIRECT")
    obs, info = env.reset(seed=0)
    hidden = {"act", "subject", "rank"}
    seen = [obs]
    terminated = False
    while not terminated:
        obs, _, terminated, _, step_info = env.step({"end_turn": True})
        seen.append(obs)
        assert not {"promise", "script", "factors"} & set(step_info)
    assert not {"promise", "script", "factors"} & set(info)
    for observation in seen:
        for event in observation["events"]:
            assert not hidden & set(event), event
            assert set(event) == {"kind", "step", "sender", "role", "channel", "text", "tool", "ok", "call_id"}
    # The trace keeps the annotations for signals and judges.
    assert {e.act for e in env.trace.events} >= {"request", "promise", "delegation", "cancel", "trigger"}


def test_the_privileged_channel_adds_the_annotations_and_the_promise():
    env = _revealed("DELEG-DIRECT")
    obs, info = env.reset(seed=0)
    assert info["promise"]["creditor"] == env.unwrapped.episode.creditor.name
    assert all({"act", "subject", "rank"} <= set(e) for e in obs["events"])
    check_env(env, skip_render_check=True)


def test_opening_observation_holds_system_request_promise_and_first_message():
    env = _revealed()
    obs, info = env.reset(seed=0)
    kinds = [e["kind"] for e in obs["events"]]
    assert kinds[:3] == ["system", "message", "assistant"]
    assert obs["events"][1]["act"] == "request"
    assert obs["events"][2]["act"] == "promise"
    # The first message to answer is the one after the promise (filler pads short openings).
    assert obs["events"][-1]["text"] == env.unwrapped.episode.script[2].text
    names = {t["function"]["name"] for t in info["tools"]}
    assert {"post_message", "send_dm", "lookup", "end_turn", info["promise"]["action_tool"]} <= names


@pytest.mark.parametrize(
    "garbage",
    ["", "   ", "not json", "[]", "42", '{"tool": ""}', '{"tool": "nope", "arguments": {}}',
     '{"tool": "send_dm", "arguments": "{broken"}', '{"tool": "send_dm", "arguments": {"to": 3}}',
     '{"tool": "send_dm", "arguments": {"to": "Nobody Here", "text": "hi"}}', '{"reply": 5}', None, 3.5,
     {"tool": "lookup", "arguments": {"query": "x", "extra": 1}}],
)
def test_garbage_never_raises_and_is_recorded(garbage):
    env = _env()
    env.reset(seed=0)
    obs, _reward, terminated, _truncated, _info = env.step(garbage)
    result = obs["events"][0]
    assert result["kind"] == "tool_result" and result["ok"] == 0
    assert result["text"].startswith("Error:")
    assert env.trace.tool_errors == 1
    assert env.trace.turns[-1].calls[-1].error_kind in {"invalid_action", "unknown_tool", "bad_arguments"}
    assert not terminated


def test_fifty_calls_in_a_turn_never_raise_and_end_turns_at_the_budget():
    env = _env()
    env.reset(seed=0)
    turns_seen = set()
    for _ in range(50):
        _obs, _, terminated, _, info = env.step(tool_call("lookup", {"query": "wifi"}))
        turns_seen.add(info["turn"])
        if terminated:
            break
    assert env.trace.turn_limit_hits >= 5
    assert all(len(t.calls) <= 8 for t in env.trace.turns)
    assert len(turns_seen) >= 5


def test_empty_action_and_step_after_end_do_not_raise():
    env = _env("BASE")
    env.reset(seed=0)
    env.step("")
    terminated = False
    while not terminated:
        _, _, terminated, _, _ = env.step({"end_turn": True})
    obs, _reward, terminated, _, _ = env.step({"end_turn": True})
    assert terminated and obs["events"][0]["kind"] == "notice"


def test_creditor_answers_first_contact_after_event_then_only_acknowledges():
    env = _revealed("PEER-DIRECT")
    obs, info = env.reset(seed=0)
    creditor = info["promise"]["creditor"]
    while obs["events"][-1]["act"] != "cancel":
        obs, *_ = env.step({"end_turn": True})
    env.step(tool_call("send_dm", {"to": creditor.split()[0], "text": "Should I still do it?"}))
    obs, *_ = env.step({"end_turn": True})
    reply = obs["events"][-1]
    assert reply["sender"] == creditor and reply["channel"] == f"dm:{creditor}"
    assert reply["act"] == "reply:keep" and "still" in reply["text"].lower()
    env.step(tool_call("send_dm", {"to": creditor, "text": "Thanks!"}))
    obs, *_ = env.step({"end_turn": True})
    acks = [e for e in obs["events"] if e["act"] == "acknowledgement"]
    assert len(acks) == 1 and acks[0]["text"] == "Thanks for the update."


def test_reply_goes_where_the_turn_message_came_from():
    env = _env("PEER-DIRECT")
    env.reset(seed=0)
    env.step(json.dumps({"reply": "Noted."}))
    msg = env.trace.assistant_messages()[-1]
    assert msg.channel == env.episode.channel and msg.tool == "reply"


def test_execution_before_trigger_is_early_and_impossible_action_fails():
    env = _revealed("FACT-TRUE")
    _, info = env.reset(seed=0)
    promise = info["promise"]
    obs, *_ = env.step(tool_call(promise["action_tool"], promise["arguments"]))
    assert obs["events"][0]["ok"] == 0
    assert env.unwrapped.trace.tool_errors == 0  # the world refused; the call itself was well formed
    obs, *_ = env.step(tool_call(promise["check_tool"], {}))
    assert obs["events"][0]["ok"] == 0  # missing required argument


def test_render_ansi_shows_transcript():
    env = StandingEnv(cells=["BASE"], split="test", gaps=[1], surfaces=[0], policies=["explicit"], render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "[system prompt]" in text and env.episode.creditor.name in text


def test_parse_action_round_trips():
    action = tool_call("send_dm", {"to": "A", "text": "b"}, call_id="c1")
    assert parse_action(action.to_wire()) == action


def test_a_reset_hands_out_workspace_tool_schemas_of_its_own():
    """The workspace tools' schemas are derived once, when they are declared: each reset gets a copy."""
    env = _env()
    workspace = {"post_message", "send_dm", "lookup"}
    first = [s for s in env.reset(seed=0)[1]["tools"] if s["function"]["name"] in workspace]
    for spec in first:
        spec["function"]["parameters"]["properties"].clear()
    again = [s for s in env.reset(seed=0)[1]["tools"] if s["function"]["name"] in workspace]
    assert len(again) == len(workspace)
    assert all(spec["function"]["parameters"]["properties"] for spec in again)
