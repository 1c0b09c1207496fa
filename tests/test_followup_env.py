"""FollowUpEnv: the contract, the tools' deterministic results, selection and check_env."""

from __future__ import annotations

import gymnasium as gym
import pytest
from followup_fixtures import REQUESTS, doability
from gymnasium.utils.env_checker import check_env

import commitbench.envs  # noqa: F401 (registers the environments)
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.envs.followup.env import FollowUpEnv
from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.episodes.followup.tools import CalculatorError, evaluate_arithmetic, search_articles
from commitbench.episodes.followup.vocabulary import Persona


def make(**kwargs: object) -> FollowUpEnv:
    return FollowUpEnv(requests=REQUESTS, doability=doability, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(120.50 - 35) * 1.2", pytest.approx(102.6)),
        ("2 ** 10", 1024),
        ("2 ^ 3", 8),
        ("-4 + abs(-3)", -1),
        ("round(10 / 3, 2)", 3.33),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("sqrt(16)", 4.0),
        ("17 % 5", 2),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: object) -> None:
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize(
    "expression",
    ["__import__('os')", "open('x')", "1 / 0", "2 ** 100000", "x + 1", "", "1 +", "[1, 2]", "'a' * 3", "abs(x=1)"],
)
def test_calculator_refuses_anything_else(expression: str) -> None:
    with pytest.raises(CalculatorError):
        evaluate_arithmetic(expression)


def test_registered_and_check_env_passes() -> None:
    env = gym.make(FOLLOWUP_ENV_ID, requests=REQUESTS, doability=doability, setup="C2")
    check_env(env.unwrapped)
    assert env.unwrapped.spec is not None


def test_opening_observation_is_system_prompt_and_user_message() -> None:
    env = make(setup="C2", variant="stated", persona="generic", request_id="rem-001")
    obs, info = env.reset(seed=0)
    kinds = [e["kind"] for e in obs["events"]]
    assert kinds == ["system", "message"]
    system, user = obs["events"]
    assert "It is now Thursday, 1 October 2026, 10:00" in system["text"]
    assert "schedule_task" in system["text"]  # the stated paragraph names the enabling tools
    assert user["text"] == "I have a busy week ahead. Remind me at 9 tomorrow to call the dentist."
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ["get_current_time", "calculator", "search_docs", "schedule_task", "create_reminder"]
    assert "factors" not in info and "episode" not in info  # the design is the script's, not the participant's
    assert env.trace is not None and env.trace.factors["doability"] == "doable"
    _, revealed = RevealScriptAnnotations(
        make(setup="C2", variant="stated", persona="generic", request_id="rem-001")
    ).reset(seed=0)
    assert revealed["episode"]["doability"] == "doable" and revealed["episode"]["category"] == "reminder"


def test_inferred_prompt_has_no_paragraph_and_c0_has_no_tools() -> None:
    env = make(setup="C0", variant="inferred", persona="generic", request_id="rem-001")
    obs, info = env.reset(seed=0)
    assert obs["events"][0]["text"] == (
        "You are a helpful, general-purpose assistant.\n\n"
        "It is now Thursday, 1 October 2026, 10:00 in the user's time zone."
    )
    assert info["tools"] == []


def test_support_persona_gets_account_lookup() -> None:
    env = make(setup="C1", persona="support", request_id="cb-001")
    _, info = env.reset(seed=0)
    assert "lookup_account" in [t["function"]["name"] for t in info["tools"]]
    generic = make(setup="C1", persona="generic", request_id="cb-001")
    _, info = generic.reset(seed=0)
    assert "lookup_account" not in [t["function"]["name"] for t in info["tools"]]


def test_tool_calls_then_reply_end_the_episode_and_fill_the_trace() -> None:
    env = make(setup="C2", request_id="rem-001")
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(
        {"tool": "create_reminder", "arguments": {"remind_at": "2026-10-02T09:00", "message": "Call the dentist"},
         "id": "c1"}
    )
    assert not terminated and reward == 0.0
    assert obs["events"][0]["text"] == "Reminder rem-001 created for 2026-10-02T09:00."
    env.step({"tool": "create_reminder", "arguments": {"remind_at": "2026-09-30T09:00", "message": "x"}})
    env.step({"tool": "schedule_task", "arguments": {"instruction": "check"}})
    env.step({"tool": "calculator", "arguments": {"expression": "6 * 7"}})
    obs, _, terminated, truncated, _ = env.step({"reply": "I set a reminder for 9 tomorrow."})
    assert terminated and not truncated
    trace = env.trace
    assert trace is not None
    calls = trace.turns[0].calls
    assert [(c.tool, c.ok) for c in calls] == [
        ("create_reminder", True), ("create_reminder", False), ("schedule_task", False), ("calculator", True)
    ]
    assert calls[1].result.startswith("Error: create_reminder: '2026-09-30T09:00' is not in the future")
    assert calls[3].result == "42"
    assert trace.turns[0].reply == "I set a reminder for 9 tomorrow."
    assert trace.turns[0].ended_by == "reply"
    assert trace.tool_errors == 2
    assert trace.factors["setup"] == "C2"
    # after the end every step is a no-op notice
    obs, _, terminated, _, _ = env.step({"reply": "again"})
    assert terminated and obs["events"][0]["kind"] == "notice"


def test_garbage_never_raises() -> None:
    env = make(setup="C3", request_id="mem-001")
    env.reset(seed=0)
    for action in ["garbage", {"tool": "nope", "arguments": {}}, {"tool": "memory_write", "arguments": "{bad"},
                   {"tool": "memory_write", "arguments": {"key": "flat"}}, 17]:
        obs, _, terminated, _, _ = env.step(action)
        assert obs["events"][0]["ok"] == 0
        assert not terminated
    assert env.trace is not None and env.trace.tool_errors == 5 and env.trace.invalid_actions == 2


def test_memory_round_trip_and_tool_limit() -> None:
    env = make(setup="C3", request_id="mem-001", max_tool_calls=3)
    env.reset(seed=0)
    env.step({"tool": "memory_write", "arguments": {"key": "flat", "value": "12"}})
    obs, *_ = env.step({"tool": "memory_read", "arguments": {"key": "flat"}})
    assert obs["events"][0]["text"] == "12"
    obs, _, terminated, _, _ = env.step({"tool": "memory_read", "arguments": {"key": "other"}})
    assert terminated
    assert [e["kind"] for e in obs["events"]] == ["tool_result", "notice"]
    assert env.trace is not None and env.trace.turns[0].ended_by == "turn_limit"


def test_c4_tools_confirm_deterministically() -> None:
    env = make(setup="C4", persona="support", request_id="cb-001")
    env.reset(seed=0)
    obs, *_ = env.step({"tool": "create_ticket", "arguments": {"summary": "Bill", "requested_action": "Call back"}})
    assert obs["events"][0]["text"] == "Ticket TCK-001 opened for the support team."
    obs, *_ = env.step({"tool": "escalate_to_human", "arguments": {"reason": "bill", "contact_method": "phone"}})
    assert obs["events"][0]["text"] == "Escalation ESC-002 queued; a human agent will contact the user by phone."
    obs, *_ = env.step({"tool": "lookup_account", "arguments": {"account_id": "A-77"}})
    first = obs["events"][0]["text"]
    obs, *_ = env.step({"tool": "lookup_account", "arguments": {"account_id": "A-77"}})
    assert obs["events"][0]["text"] == first and first.startswith("Account A-77: plan ")


def test_selection_and_seeded_reset() -> None:
    env = make(setup=["C0", "C2"], variant=["inferred", "stated"], category="reminder")
    assert len(env.pool) == 8  # 2 setups x 2 variants x both personas (crossed unless a persona is named)
    a = [env.reset(seed=s)[1]["episode_id"] for s in range(6)]
    b = [env.reset(seed=s)[1]["episode_id"] for s in range(6)]
    assert a == b
    _, info = env.reset(options={"episode_id": "rem-001:C2:stated:generic"})
    assert info["episode_id"] == "rem-001:C2:stated:generic"
    with pytest.raises(ValueError, match="unknown setup"):
        make(setup="C9")
    with pytest.raises(ValueError, match="unknown request"):
        make(request_id="rem-999")
    with pytest.raises(ValueError, match="not in this environment's selection"):
        env.reset(options={"episode_id": "x"})


def test_persona_crossing() -> None:
    env = make(request_id="rem-001", setup="C1", persona=["generic", "support"])
    assert {e.persona for e in env.pool} == {Persona.GENERIC, Persona.SUPPORT}
    # By default too, whatever persona the text was written for.
    assert {e.persona for e in make(request_id="cb-001", setup="C1").pool} == {Persona.GENERIC, Persona.SUPPORT}
    assert [e.persona for e in make(request_id="cb-001", setup="C1", persona="support").pool] == [Persona.SUPPORT]
    assert search_articles(Persona.SUPPORT, "when is my bill due")[0].startswith("Bills:")
