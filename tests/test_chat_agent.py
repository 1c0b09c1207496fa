"""The chat agent against the real mock server: rendering, tool calls, errors, limits, identity."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import gymnasium as gym
import pytest
from _runner_fixtures import standing_responder

import commitbench.envs  # noqa: F401 - registers the environments
from commitbench.agents.chat import NOT_RUN_TEXT, UNPARSED_KEY, ChatAgent, format_line
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.llm import ModelClient, ModelSettings, RetryPolicy
from commitbench.mock import FaultConfig, FaultKind, MockServer, ReplySpec, ToolCallSpec
from commitbench.traces import EpisodeTrace

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.005, seed=1)


def _episode(cell: str, gap: int = 1) -> str:
    for e in load_episodes():
        if e.split.value == "test" and e.cell == cell and e.gap == gap and e.policy.value == "explicit":
            return e.id
    raise AssertionError(f"no {cell} episode")


def play(
    settings: ModelSettings,
    env: gym.Env[Any, Any],
    *,
    retry: RetryPolicy = FAST_RETRY,
    **agent_kwargs: Any,
) -> tuple[EpisodeTrace, ChatAgent]:
    async def go() -> tuple[EpisodeTrace, ChatAgent]:
        async with ModelClient(settings, retry=retry) as client:
            agent = ChatAgent(client, **agent_kwargs)
            observation, info = env.reset(seed=0)
            agent.begin(observation, info)
            for _ in range(500):
                action = await agent.act(observation, info)
                observation, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            else:
                raise AssertionError("episode did not end")
            trace = env.unwrapped.trace
            trace.model_calls = agent.model_calls
            return trace, agent

    return asyncio.run(go())


def chat_bodies(server: MockServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests() if r["path"].endswith("/chat/completions")]


# ---------------------------------------------------------------- an episode end to end
def test_scripted_model_plays_a_standing_episode_with_tools(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    env = StandingEnv(episode_id=_episode("FACT-FALSE", gap=20))
    trace, _agent = play(mock_settings, env)

    assert trace.terminated and trace.tool_errors == 0
    tools_called = [c.tool for c in trace.tool_calls()]
    promise_tool = env.episode.action_tool.name
    assert promise_tool in tools_called and "lookup" in tools_called and "end_turn" in tools_called
    # The action and the announcement came in one response and ran in order.
    i = tools_called.index(promise_tool)
    assert tools_called[i + 1] == "post_message"
    assert trace.reward == 1.0  # FACT-FALSE: the action is possible and executed after the trigger
    # Every model call is recorded; the reasoning is kept apart from the reply text.
    assert len(trace.model_calls) == len(chat_bodies(mock_server))
    with_reasoning = [m for m in trace.model_calls if m.reasoning]
    assert with_reasoning and all(m.text == "" for m in with_reasoning)
    assert all(m.cache_key and not m.error for m in trace.model_calls)
    # Lookup answers were posted as replies.
    replies = [t.reply for t in trace.turns if t.reply]
    assert replies and all(r for r in replies)


def test_rendering_keeps_a_stable_prefix_and_the_openai_message_shapes(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    env = StandingEnv(episode_id=_episode("PEER-DIRECT", gap=20))
    play(mock_settings, env)
    bodies = chat_bodies(mock_server)
    assert len(bodies) > 5
    first = bodies[0]["messages"]
    assert first[0] == {"role": "system", "content": env.episode.system_prompt}
    request = env.episode.script[0]
    creditor = env.episode.creditor
    assert first[1] == {
        "role": "user",
        "content": f"[{request.channel}] {creditor.name} ({creditor.title}): {request.text}",
    }
    assert first[2] == {"role": "assistant", "content": env.episode.script[1].text}
    # Each request extends the previous one: the conversation is a stable prefix.
    for earlier, later in itertools.pairwise(bodies):
        before, after = earlier["messages"], later["messages"]
        assert after[: len(before) - 1] == before[:-1]
        assert after[len(before) - 1]["content"].startswith(before[-1]["content"] or "")
    # Tools are the env's function schemas; each tool call is answered by a tool message in order.
    _, fresh_info = StandingEnv(episode_id=env.episode.id).reset(seed=0)
    assert bodies[0]["tools"] == fresh_info["tools"]
    last = bodies[-1]["messages"]
    for index, message in enumerate(last):
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answered = [m["tool_call_id"] for m in last[index + 1 : index + 1 + len(ids)]]
            assert answered == ids
            assert all(len(i) == 9 and i.isalnum() for i in ids)


def test_format_line_for_channels_and_direct_messages() -> None:
    event = {"sender": "Alice Moreno", "role": "senior engineer", "channel": "#design", "text": "hi"}
    assert format_line(event) == "[#design] Alice Moreno (senior engineer): hi"
    in_dm = format_line({**event, "channel": "dm:Alice Moreno"})
    assert in_dm == "[dm:Alice Moreno] Alice Moreno (senior engineer): hi"
    assert format_line({**event, "role": ""}) == "[#design] Alice Moreno: hi"


# ---------------------------------------------------------------- bad model output
def test_malformed_tool_arguments_become_a_recorded_tool_error(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script(
        ReplySpec(tool_calls=[ToolCallSpec(name="send_dm", arguments='{"to": "Alice Moreno", "text": "hi')]),
        ReplySpec(text="Sorry, let me try again later."),
    )
    mock_server.set_responder(lambda request: ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")]))
    env = StandingEnv(episode_id=_episode("BASE"))
    trace, _ = play(mock_settings, env)

    assert trace.terminated  # the episode went on to its end
    bad = [c for c in trace.tool_calls() if not c.ok]
    assert len(bad) == 1 and bad[0].error_kind == "bad_arguments"
    assert bad[0].raw_arguments == '{"to": "Alice Moreno", "text": "hi'
    assert trace.tool_errors == 1
    assert trace.turns[0].reply == "Sorry, let me try again later."
    # The raw text is kept in the call record; the history re-sent to the server is valid JSON.
    assert trace.model_calls[0].tool_calls[0]["arguments"] == '{"to": "Alice Moreno", "text": "hi'
    second = chat_bodies(mock_server)[1]["messages"]
    sent = next(m for m in second if m.get("tool_calls"))["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {UNPARSED_KEY: '{"to": "Alice Moreno", "text": "hi'}
    assert second[-1]["role"] == "tool" and second[-1]["content"].startswith("Error:")


def test_unknown_tool_is_an_env_error_and_the_episode_goes_on(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script(ReplySpec(tool_calls=[ToolCallSpec(name="teleport", arguments={"to": "Mars"})]))
    mock_server.set_responder(lambda request: ReplySpec(text=""))
    trace, _ = play(mock_settings, StandingEnv(episode_id=_episode("BASE")))
    assert trace.terminated
    (bad,) = [c for c in trace.tool_calls() if not c.ok]
    assert bad.error_kind == "unknown_tool" and "teleport" in bad.result


def test_text_replies_empty_answers_and_refusals(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.script(
        ReplySpec(text="Noted."),
        ReplySpec(text=""),
        ReplySpec(text="x", fault=FaultKind.REFUSAL),
    )
    mock_server.set_responder(lambda request: ReplySpec(text=""))
    trace, _ = play(mock_settings, StandingEnv(episode_id=_episode("BASE", gap=20)))
    assert (trace.turns[0].reply, trace.turns[0].ended_by) == ("Noted.", "reply")
    assert (trace.turns[1].reply, trace.turns[1].ended_by) == (None, "end_turn")
    assert trace.turns[2].ended_by == "reply" and trace.turns[2].reply.startswith("I'm sorry")
    assert trace.model_calls[2].error.startswith("refusal:")
    assert all(not m.error for i, m in enumerate(trace.model_calls) if i != 2)


def test_remaining_tool_calls_are_closed_when_the_turn_ends(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script(
        ReplySpec(
            text="Let me think.",
            tool_calls=[
                ToolCallSpec(name="end_turn"),
                ToolCallSpec(name="lookup", arguments={"query": "wifi"}),
            ],
        )
    )
    mock_server.set_responder(lambda request: ReplySpec(text=""))
    trace, agent = play(mock_settings, StandingEnv(episode_id=_episode("BASE", gap=20)))
    assert [c.tool for c in trace.turns[0].calls] == ["end_turn"]  # lookup never ran
    assert trace.turns[0].reply is None  # narration that comes with tool calls is not posted
    messages = agent.messages
    index = next(i for i, m in enumerate(messages) if m.get("tool_calls"))
    assert messages[index]["content"] == "Let me think."
    assert messages[index + 1]["content"] == "Turn ended."
    assert messages[index + 2] == {"role": "tool", "tool_call_id": "call00002", "content": NOT_RUN_TEXT}
    assert messages[index + 3]["role"] == "user"


def test_model_calls_per_turn_are_capped_with_a_notice(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.set_responder(
        lambda request: ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": "printer"})])
    )
    env = StandingEnv(episode_id=_episode("BASE"), max_calls_per_turn=50)
    trace, _ = play(mock_settings, env, max_model_calls_per_turn=3)
    assert trace.terminated
    notices = [m for m in trace.model_calls if m.purpose == "notice"]
    assert len(notices) == len(trace.turns)
    assert all(m.error.startswith("call_limit: 3 model calls") for m in notices)
    calls = [m for m in trace.model_calls if m.purpose == "agent"]
    assert len(calls) == 3 * len(trace.turns) == len(chat_bodies(mock_server))
    assert all(len(t.calls) == 3 and t.ended_by == "end_turn" for t in trace.turns)


# ---------------------------------------------------------------- infrastructure failures
def test_exhausted_retries_mark_an_infra_error_and_stop_calling(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script(ReplySpec(text="Noted."))
    mock_server.set_faults(FaultConfig(sequence=[None, FaultKind.HTTP_500, FaultKind.HTTP_500, FaultKind.HTTP_500]))
    trace, agent = play(mock_settings, StandingEnv(episode_id=_episode("BASE", gap=20)))
    assert trace.terminated  # the episode ran to its end
    assert agent.infra_error is not None and agent.infra_error.startswith("server_error: gave up after 3 attempts")
    assert [m.error.split(":")[0] for m in trace.model_calls] == ["", "server_error"]
    assert mock_server.stats().chat_completions == 4  # no call after the failure
    assert all(t.ended_by == "end_turn" for t in trace.turns[1:])


def test_empty_choices_are_retried_then_recorded(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.set_faults(FaultConfig(sequence=[FaultKind.EMPTY_CHOICES, FaultKind.EMPTY_CHOICES]))
    mock_server.set_responder(lambda request: ReplySpec(text=""))
    trace, agent = play(mock_settings, StandingEnv(episode_id=_episode("BASE")))
    assert agent.infra_error is None and all(not m.error for m in trace.model_calls)
    assert mock_server.stats().outcomes["empty_choices"] == 2


# ---------------------------------------------------------------- context and identity
class _ShowsState(gym.ObservationWrapper):
    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {**observation, "context": "Open promises: 1"}


def test_context_goes_last_and_never_into_the_history(mock_server: MockServer, mock_settings: ModelSettings) -> None:
    mock_server.script(ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": "wifi"})]))
    mock_server.set_responder(lambda request: ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")]))
    env = _ShowsState(StandingEnv(episode_id=_episode("BASE")))
    _, agent = play(mock_settings, env)
    bodies = chat_bodies(mock_server)
    assert bodies[0]["messages"][-1]["content"].endswith("\n\nOpen promises: 1")
    # After a tool result the context is its own user message.
    assert bodies[1]["messages"][-2]["role"] == "tool"
    assert bodies[1]["messages"][-1] == {"role": "user", "content": "Open promises: 1"}
    assert not any("Open promises" in str(m.get("content")) for m in agent.messages)


def test_identity_holds_settings_but_not_the_endpoint(mock_server: MockServer) -> None:
    settings = ModelSettings(
        model="mock-model", base_url=mock_server.base_url, api_key_env="SECRET_KEY_VAR", temperature=0.3,
        max_tokens=77, extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    client = ModelClient(settings)
    identity = ChatAgent(client, name="chat:mock", max_model_calls_per_turn=4).identity()
    asyncio.run(client.aclose())
    dumped = json.dumps(identity.model_dump())
    assert identity.kind == "chat" and identity.name == "chat:mock"
    assert identity.settings["model"]["sampling"] == {"temperature": 0.3, "max_tokens": 77}
    assert identity.settings["max_model_calls_per_turn"] == 4
    assert mock_server.base_url not in dumped and "SECRET_KEY_VAR" not in dumped


@pytest.mark.parametrize("bad", [0, -1])
def test_call_cap_must_be_positive(mock_server: MockServer, mock_settings: ModelSettings, bad: int) -> None:
    client = ModelClient(mock_settings)
    with pytest.raises(ValueError, match="max_model_calls_per_turn"):
        ChatAgent(client, max_model_calls_per_turn=bad)
    asyncio.run(client.aclose())
