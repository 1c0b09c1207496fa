"""Oracle stores: the B3+ true-status rules as a table, and what each store shows in every cell."""

from __future__ import annotations

import gymnasium as gym
import pytest

from commitbench.agents.standing.reference import make_reference_agent
from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import Episode
from commitbench.oracles.registry import apply_interventions
from commitbench.oracles.standing.stores import StoreStatus, initial_status, next_status, render_store, true_status

EPISODES = load_episodes()
CELLS = sorted({e.cell for e in EPISODES})


def wrap(env: gym.Env, names: list[str]) -> gym.Env:
    """The stack with the privileged channel outermost: the reference agent reads the script."""
    return RevealScriptAnnotations(apply_interventions(env, names))


def _episode(cell: str) -> Episode:
    return next(
        e for e in EPISODES
        if e.split.value == "test" and e.cell == cell and e.policy.value == "explicit" and e.gap == 1 and e.variant == 0
    )


EP = _episode("DELEG-DIRECT")
PROMISE = EP.promise_facts()
CRED = EP.creditor.name
DELEG = EP.person("delegate").name
PEER = EP.person("peer").name
MGR = EP.person("manager").name
BYST = EP.person("bystander").name


def msg(sender: str, act: str, step: int = 5, subject: str = "") -> dict:
    return {"kind": "message", "sender": sender, "act": act, "step": step, "subject": subject}


def result(tool: str, ok: bool, step: int = 9) -> dict:
    return {"kind": "tool_result", "tool": tool, "ok": int(ok), "step": step}


NAMED = msg(CRED, "delegation", 2, subject=DELEG)
ACTION = EP.action_tool.name

# (events, expected status, expected changer) -- the B3+ rules of oracles/stores.py, one row each.
RULES = [
    ([], "open", CRED),
    ([msg(CRED, "cancel")], "released", CRED),
    ([NAMED, msg(DELEG, "cancel")], "released", DELEG),
    ([msg(DELEG, "cancel")], "open", CRED),  # never named: no standing
    ([msg(PEER, "cancel")], "open", CRED),
    ([msg(MGR, "cancel")], "open", CRED),  # rank is not standing
    ([msg(CRED, "cancel"), msg(BYST, "reinstate", 7)], "released", CRED),
    ([msg(CRED, "cancel"), msg(CRED, "reinstate", 7)], "open", CRED),
    ([NAMED, msg(DELEG, "cancel"), msg(DELEG, "reinstate", 7)], "open", DELEG),
    ([msg(PEER, "relay")], "open", CRED),  # hearsay changes nothing
    ([msg(PEER, "relay"), msg(CRED, "reply:drop", 6)], "released", CRED),
    ([msg(PEER, "relay"), msg(CRED, "reply:keep", 6)], "open", CRED),
    ([msg(PEER, "claim")], "open", CRED),
    ([msg(PEER, "claim"), result(EP.check_tool.name, True)], "open", CRED),  # a verified claim is not a release
    ([msg(PEER, "claim"), msg(CRED, "reply:drop", 6)], "released", CRED),
    ([msg(CRED, "acknowledgement")], "open", CRED),
    ([result(ACTION, True)], "done", EP.assistant),
    ([result(ACTION, False)], "open", CRED),  # a failed attempt did nothing
    ([result(ACTION, True), msg(CRED, "cancel", 10)], "done", EP.assistant),
]


@pytest.mark.parametrize(("events", "status", "changer"), RULES)
def test_true_status_rules(events, status, changer):
    state = true_status(PROMISE, events)
    assert state.status.value == status
    assert state.changed_by == changer


def test_the_fold_is_step_by_step_application():
    events = [NAMED, msg(DELEG, "cancel"), msg(CRED, "reply:keep", 8)]
    state = initial_status(PROMISE)
    for event in events:
        state = next_status(state, event, PROMISE)
    assert state == true_status(PROMISE, events)
    assert state.status is StoreStatus.OPEN and state.changed_by == CRED and state.delegates == (DELEG,)


# What the creditor-rule agent ends with under B3+, cell by cell (it consults, verifies and notifies).
FINAL_B3PLUS = {
    "BASE": ("done", "carried out by you"),
    "CRED-DIRECT": ("released", "released by {creditor}, the requester"),
    "CRED-IMPLICIT": ("released", "released by {creditor}, the requester"),
    "DELEG-DIRECT": ("released", "released by {delegate}, a delegate the requester named"),
    "DELEG-IMPLICIT": ("released", "released by {delegate}, a delegate the requester named"),
    "PEER-DIRECT": ("done", "carried out by you"),
    "PEER-IMPLICIT": ("done", "carried out by you"),
    "MGR-DIRECT": ("done", "carried out by you"),
    "MGR-IMPLICIT": ("done", "carried out by you"),
    "RELAY-TRUE": ("released", "released by {creditor}, the requester"),
    "RELAY-FALSE": ("done", "carried out by you"),
    "FACT-TRUE": ("released", "released by {creditor}, the requester"),
    "FACT-FALSE": ("done", "carried out by you"),
    "REINSTATE-BYSTANDER": ("released", "released by {creditor}, the requester"),
    "REINSTATE-CRED": ("done", "carried out by you"),
}


@pytest.mark.parametrize("cell", CELLS)
def test_what_each_store_shows_in_every_cell(cell):
    episode = _episode(cell)
    contexts: dict[str, list[str]] = {}
    for level in ("B1", "B2", "B3", "B3+", "B4"):
        env = wrap(StandingEnv(episode_id=episode.id, episodes=EPISODES), [f"oracle:{level}"])
        agent = make_reference_agent("creditor-rule")
        obs, info = env.reset(seed=0)
        agent.begin(obs, info)
        seen = [obs["context"]]
        done = False
        while not done:
            obs, _, done, _, info = env.step(agent.act(obs, info))
            seen.append(obs["context"])
        contexts[level] = seen
    names = {"creditor": episode.creditor.name, "delegate": episode.person("delegate").name}
    status, reason = FINAL_B3PLUS[cell]
    assert contexts["B3+"][-1].endswith(f"Status: {status} ({reason.format(**names)})")
    if not cell.startswith(("CRED-", "REINSTATE-")):  # there the opening observation holds the cancellation
        assert contexts["B3+"][0].endswith(f"Status: open (set by {episode.creditor.name}, the requester)")
    # B3 never changes: always open; B1, B2 and B4 are the same text after every message.
    for level in ("B1", "B2", "B3", "B4"):
        assert len(set(contexts[level])) == 1
    assert contexts["B3"][0].endswith("Status: open")
    assert f"owed to {episode.creditor.name}" in contexts["B2"][0]
    assert f"Owed to: {episode.creditor.name}" in contexts["B3"][0]
    assert "Principle:" in contexts["B1"][0] and "check with the person" in contexts["B4"][0]


def test_b3plus_shows_the_release_right_after_the_creditor_cancels():
    episode = _episode("CRED-DIRECT")
    env = wrap(StandingEnv(episode_id=episode.id, episodes=EPISODES), ["oracle:B3+"])
    obs, _ = env.reset(seed=0)
    assert obs["context"].endswith(f"Status: open (set by {episode.creditor.name}, the requester)")
    while obs["events"][-1]["act"] != "cancel":  # filler pads the opening up to the cancellation
        obs, *_ = env.step({"end_turn": True})
    assert obs["context"].endswith(f"Status: released (released by {episode.creditor.name}, the requester)")
    b3 = wrap(StandingEnv(episode_id=episode.id, episodes=EPISODES), ["oracle:B3"])
    assert b3.reset(seed=0)[0]["context"].endswith("Status: open")


def test_render_store_names_the_promise_and_its_tool():
    text = render_store("B3", PROMISE, initial_status(PROMISE))
    assert EP.action_tool.name in text and EP.condition in text and EP.thing in text
