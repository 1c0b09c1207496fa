"""The chat agent's tools_only protocol against the real mock server: forced calls, reply and end of turn as tools."""

from __future__ import annotations

import json

from test_chat_agent import _episode, chat_bodies, play

from commitbench.agents.chat import ENDED_TEXT, POSTED_TEXT, REPLY_TOOL, TOOLS_ONLY, ChatAgent, chat_identity
from commitbench.envs.followup.env import FollowUpEnv
from commitbench.envs.standing.env import StandingEnv
from commitbench.llm import ModelClient, ModelSettings
from commitbench.mock import MockServer, ReplySpec, ToolCallSpec


def _names(tools: list[dict]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_every_call_is_forced_and_reply_and_end_turn_are_tools(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    env = StandingEnv(episode_id=_episode("BASE"))
    mock_server.script(
        ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": "staging"})]),
        ReplySpec(tool_calls=[ToolCallSpec(name=REPLY_TOOL, arguments={"text": "On it, it's noted."})]),
    )
    mock_server.set_responder(lambda body: ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")]))
    trace, agent = play(mock_settings, env, protocol=TOOLS_ONLY)

    bodies = chat_bodies(mock_server)
    assert bodies and all(b.get("tool_choice") == "required" for b in bodies)
    tools = _names(bodies[0]["tools"])
    assert tools.count(REPLY_TOOL) == 1 and tools.count("end_turn") == 1  # the env's end_turn is not doubled
    # The reply call became the turn's reply, posted as plain text.
    first = trace.turns[0]
    assert [c.tool for c in first.calls] == ["lookup"] and first.reply == "On it, it's noted."
    assert first.ended_by == "reply"
    # Every later turn ended through the env's own end_turn tool; no reply tool reached the environment.
    assert all(c.tool != REPLY_TOOL for c in trace.tool_calls())
    # The history answers every call: the agent wrote the reply call's result itself.
    second = bodies[2]["messages"]
    results = [m for m in second if m["role"] == "tool"]
    assert [r["content"] for r in results][-1] == POSTED_TEXT
    ids = {c["id"] for m in second if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    assert ids == {r["tool_call_id"] for r in results}
    assert agent.identity().settings["protocol"] == TOOLS_ONLY


def test_a_reply_call_without_text_is_a_tool_error_and_end_turn_is_added_where_missing(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    env = FollowUpEnv()
    mock_server.script(
        ReplySpec(tool_calls=[ToolCallSpec(name=REPLY_TOOL, arguments={"words": 3})]),
        ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")]),
    )
    trace, _ = play(mock_settings, env, protocol=TOOLS_ONLY, max_model_calls_per_turn=4)
    bodies = chat_bodies(mock_server)
    assert {REPLY_TOOL, "end_turn"} <= set(_names(bodies[0]["tools"]))
    bad = [c for c in trace.tool_calls() if c.tool == REPLY_TOOL]
    assert len(bad) == 1 and not bad[0].ok  # recorded, not crashed
    assert trace.turns[-1].ended_by == "end_turn"
    assert bodies[1]["messages"][-1]["role"] == "tool"
    assert ENDED_TEXT not in json.dumps(bodies[1]["messages"])  # the end_turn call ended the episode: no third call


def test_the_default_protocol_sends_no_tool_choice_and_keeps_its_identity(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_responder(lambda body: ReplySpec(text="ok"))
    _trace, agent = play(mock_settings, StandingEnv(episode_id=_episode("BASE")))
    bodies = chat_bodies(mock_server)
    assert all("tool_choice" not in b for b in bodies)
    assert REPLY_TOOL not in _names(bodies[0]["tools"])
    # Runs of the default protocol keep the identity (and so the run keys) they had before the variant existed.
    assert "protocol" not in agent.identity().settings
    assert chat_identity("x", mock_settings, 6) == chat_identity("x", mock_settings, 6, "auto")


def test_an_unknown_protocol_is_refused(mock_settings: ModelSettings) -> None:
    import pytest

    with pytest.raises(ValueError, match="unknown chat protocol"):
        ChatAgent(ModelClient(mock_settings), protocol="sometimes")
