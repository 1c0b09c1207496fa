"""The self-kept ledger: pure operations, what the agent sees after each message, malformed calls."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.oracles.registry import apply_interventions
from commitbench.oracles.standing.ledger import (
    MAX_ENTRIES,
    AgentLedger,
    LedgerStatus,
    ledger_add,
    ledger_update,
    normalise_entry_id,
    render_ledger,
    replay_ledger,
)
from commitbench.protocol import tool_call

EPISODES = load_episodes()
EPISODE = next(
    e for e in EPISODES
    if e.split.value == "test" and e.cell == "BASE" and e.gap == 20 and e.variant == 0 and e.policy.value == "explicit"
)


def _add(ledger: AgentLedger, owed_to: str = "Alice", promise: str = "deploy when CI is green") -> AgentLedger:
    ledger, ok, _ = ledger_add(ledger, {"owed_to": owed_to, "promise": promise})
    assert ok
    return ledger


def test_add_then_update_keeps_the_history_and_who_caused_each_change():
    ledger = _add(AgentLedger())
    ledger, ok, message = ledger_update(ledger, {"entry": "L1", "status": "released", "caused_by": "Bob",
                                                  "note": "Bob said to drop it"})
    assert ok and message == "L1 is now released (caused by Bob)."
    ledger, ok, _ = ledger_update(ledger, {"entry": "1", "status": "open", "caused_by": "Alice"})
    assert ok
    entry = ledger.entries[0]
    assert [(c.status, c.caused_by) for c in entry.history] == [
        (LedgerStatus.OPEN, "Alice"), (LedgerStatus.RELEASED, "Bob"), (LedgerStatus.OPEN, "Alice")
    ]
    text = render_ledger(ledger)
    assert "L1: deploy when CI is green | owed to Alice | status open | last changed by Alice" in text
    assert "history: open (Alice) -> released (Bob) -> open (Alice)" in text


@pytest.mark.parametrize("written", ["L2", "l2", "#2", " 2 ", 2])
def test_entry_ids_accept_common_spellings(written):
    assert normalise_entry_id(written) == "L2"


@pytest.mark.parametrize("written", ["two", "L", "", None, True, 2.5, "L1x"])
def test_entry_ids_reject_anything_else(written):
    assert normalise_entry_id(written) is None


@pytest.mark.parametrize(
    ("operation", "args", "message"),
    [
        ("add", {"owed_to": "", "promise": "x"}, "'owed_to' must not be empty"),
        ("add", {"owed_to": "A", "promise": "   "}, "'promise' must not be empty"),
        ("add", {"owed_to": "A", "promise": "x" * 301}, "longer than 300"),
        ("add", {"owed_to": 3, "promise": "x"}, "'owed_to' must be a string"),
        ("update", {"entry": "L7", "status": "done", "caused_by": "me"}, "there is no entry L7"),
        ("update", {"entry": "first", "status": "done", "caused_by": "me"}, "must be an entry id"),
        ("update", {"entry": "L1", "status": "finished", "caused_by": "me"}, "must be one of open, released"),
        ("update", {"entry": "L1", "status": "done", "caused_by": ""}, "'caused_by' must not be empty"),
    ],
)
def test_bad_operations_leave_the_ledger_unchanged_and_say_why(operation, args, message):
    ledger = _add(AgentLedger())
    function = ledger_add if operation == "add" else ledger_update
    after, ok, text = function(ledger, args)
    assert not ok and message in text
    assert after == ledger


def test_the_ledger_is_bounded():
    ledger = AgentLedger()
    for i in range(MAX_ENTRIES):
        ledger = _add(ledger, promise=f"p{i}")
    _, ok, text = ledger_add(ledger, {"owed_to": "A", "promise": "one more"})
    assert not ok and "full" in text


# ------------------------------------------------------------------------------- in the env
def _ledger_env(names: tuple[str, ...] = ("ledger:self-kept",)):
    return apply_interventions(StandingEnv(episode_id=EPISODE.id, episodes=EPISODES), list(names))


def test_tools_and_instructions_reach_the_agent():
    env = _ledger_env(("ledger:self-kept", "policy:explicit"))
    obs, info = env.reset(seed=0)
    names = [t["function"]["name"] for t in info["tools"]]
    assert names[-2:] == ["ledger_add", "ledger_update"]
    assert "You keep a commitment ledger" in info["system_prompt"]
    assert obs["context"] == "Your commitment ledger is empty. Record a promise with ledger_add."


CALLS = [
    tool_call("ledger_add", {"owed_to": "Alice Moreno", "promise": "deploy billing-api", "note": "when CI is green"}),
    tool_call("ledger_update", {"entry": "L1", "status": "on_hold", "caused_by": "Bob"}),
    tool_call("ledger_update", {"entry": "L3", "status": "done", "caused_by": "me"}),  # unknown entry
    tool_call("ledger_update", {"entry": "L1", "status": "cancelled", "caused_by": "Bob"}),  # not a status
    tool_call("ledger_add", '{"owed_to": "Alice"'),  # arguments are not JSON
    tool_call("ledger_add", {"owed_to": "Alice"}),  # missing promise
    tool_call("ledger_update", {"entry": 1, "status": "open", "caused_by": "me"}),  # entry must be a string
    tool_call("ledger_add", {"owed_to": "Alice", "promise": "x", "extra": 1}),  # unknown argument
    tool_call("ledger_update", {"entry": "L1", "status": "open", "caused_by": "Alice Moreno", "note": "back on"}),
]
OK = [True, True, False, False, False, False, False, False, True]


def test_the_ledger_shown_after_each_call_is_the_replay_of_the_agents_own_calls():
    env = _ledger_env()
    env.reset(seed=0)
    trace = env.unwrapped.trace
    for call, ok in zip(CALLS, OK, strict=True):
        obs, _, done, _, _ = env.step(call)
        assert not done
        result = obs["events"][0]
        assert result["kind"] == "tool_result" and result["ok"] == int(ok), result["text"]
        if not ok:
            assert result["text"].startswith("Error: ")
        assert obs["context"] == render_ledger(replay_ledger(trace.tool_calls()))
    assert trace.tool_errors == OK.count(False)
    final = replay_ledger(trace.tool_calls())
    assert [c.status.value for c in final.entries[0].history] == ["open", "on_hold", "open"]


def test_the_ledger_survives_the_turn_and_is_cleared_by_reset():
    env = _ledger_env()
    env.reset(seed=0)
    env.step(CALLS[0])
    obs, *_ = env.step({"end_turn": True})  # next message: the ledger is still shown
    assert obs["events"][-1]["kind"] == "message"
    assert "L1: deploy billing-api" in obs["context"]
    obs, _ = env.reset(seed=0)
    assert "empty" in obs["context"]


_ARGUMENT = st.one_of(st.text(max_size=8), st.integers(-2, 4), st.none(), st.booleans())
_CALL = st.one_of(
    st.builds(lambda o, p: tool_call("ledger_add", {"owed_to": o, "promise": p}), _ARGUMENT, _ARGUMENT),
    st.builds(
        lambda e, s, c: tool_call("ledger_update", {"entry": e, "status": s, "caused_by": c}),
        st.one_of(_ARGUMENT, st.sampled_from(["L1", "L2", "2"])),
        st.one_of(_ARGUMENT, st.sampled_from([s.value for s in LedgerStatus])),
        _ARGUMENT,
    ),
    st.builds(lambda raw: tool_call("ledger_update", raw), st.text(max_size=12)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_CALL, max_size=12))
def test_any_call_sequence_never_raises_and_the_context_is_the_replay(calls):
    env = _ledger_env()
    env.reset(seed=0)
    trace = env.unwrapped.trace
    for call in calls:
        obs, _, done, _, _ = env.step(call)
        if done:
            break
        assert obs["context"] == render_ledger(replay_ledger(trace.tool_calls()))
        json.dumps(obs["context"])
