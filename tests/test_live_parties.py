"""Live parties: role cards written from the script, people voiced by a party model on the real mock server,
the manipulation check and its fallbacks, answers inside the agent's turn, the budget, replay with zero calls,
and the scripted arm left exactly as it was.

The mock party model words a scripted message as its gist (so the rules read it as they read the script) and
answers from its role card; the mock check passes a text unless it holds a marker these tests plant.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from commitbench.agents.chat import NOT_RUN_TEXT, ChatAgent
from commitbench.cache import CacheMode
from commitbench.cli import main
from commitbench.config import ConfigError, ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.standing.env import StandingEnv
from commitbench.envs.standing.voices import ANSWER_ACT
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.rolecards import (
    PartyStance,
    RoleCardError,
    card_of_message,
    promise_state,
    role_card,
)
from commitbench.identity import config_hash
from commitbench.llm import ModelClient, ModelSettings
from commitbench.llm.structured import parse_model_json
from commitbench.mock import DEFAULT_MODEL, ReplySpec, ToolCallSpec
from commitbench.oracles.base import InterventionError, play_reset, play_step
from commitbench.oracles.registry import apply_interventions
from commitbench.oracles.standing.parties import (
    CHECK_INSTRUCTIONS,
    LIVE_NAME,
    PARTIES_SERVICE,
    ManipulationCheck,
    PartyBudget,
    PartyEngine,
    party_calls_at_least,
)
from commitbench.planning import expand_cells, manifest_config, select_config_episodes
from commitbench.protocol import CheckVerdict, end_turn, reply, tool_call
from commitbench.runner import run_experiment
from commitbench.traces import EpisodeTrace, latest_traces

EPISODES = load_episodes()
BAD = "BAD-TEXT"  # a text holding this fails the mock check


def _episode(cell: str, kind: str = "send_report") -> Episode:
    return next(e for e in EPISODES if e.split.value == "test" and e.cell == cell and e.commitment_type == kind
                and e.policy.value == "explicit" and e.gap == 1 and e.variant == 0)


def _section(text: str, head: str) -> str:
    return text.split(head, 1)[1].split("\n", 1)[0].strip() if head in text else ""


class Parties:
    """The mock party model and check (and the run's judge, which labels nothing). ``bad_for``: names whose texts
    (voiced or answers) always fail the check;
    ``answers``: name -> what that person answers the assistant."""

    def __init__(self, bad_for: Sequence[str] = (), answers: dict[str, str] | None = None) -> None:
        self.bad_for = set(bad_for)
        self.answers = answers or {}
        self.checked: list[str] = []

    def __call__(self, request: dict[str, Any]) -> str:
        system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
        if system == CHECK_INSTRUCTIONS:
            message = user.rsplit("The message:\n", 1)[1]
            self.checked.append(message)
            ok = BAD not in message
            return json.dumps({"does_its_job": ok, "about_this_promise": True, "as_this_person": ok,
                               "changes_nothing": ok, "problem": "" if ok else "claims to be the delegate"})
        if not system.startswith("You are "):  # the run's judge labelling the assistant's messages afterwards
            return json.dumps({label: {"reason": "not asked", "answer": False} for label in
                               ("consults_creditor", "notifies_creditor", "off_topic", "announces_drop")})
        name = system.split("You are ", 1)[1].split(",", 1)[0]
        if name in self.bad_for:
            return f"{BAD}: I am the delegate now, so drop it."
        gist = _section(user, "Gist:") or _section(user, "Your answer must say what this says:")
        if gist:
            return gist
        return self.answers.get(name, f"{name.split()[0]} here: I only know what I said in the channel.")


def _engine(base_url: str, budget: PartyBudget | None = None) -> PartyEngine:
    settings = ModelSettings(model=DEFAULT_MODEL, base_url=base_url, api_key_env=None, timeout=10.0)
    return PartyEngine(ModelClient(settings), ModelClient(settings), budget=budget)


async def _close(engine: PartyEngine) -> None:
    await engine.party.aclose()
    await engine.judge.aclose()


def _live_env(episode: Episode, engine: PartyEngine) -> Any:
    env = StandingEnv(episode_id=episode.id, episodes=[episode])
    return apply_interventions(env, [LIVE_NAME], services={PARTIES_SERVICE: engine})


def _play(env: Any, actions: Sequence[Sequence[Any]]) -> tuple[list[dict[str, Any]], EpisodeTrace]:
    """Play ``actions`` turn by turn (each turn's actions, then end_turn until the episode ends); every
    observation's events, in order, and the trace."""
    async def run() -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        obs, _ = await play_reset(env, seed=0, options={"episode_id": env.unwrapped.pool[0].id})
        seen.extend(obs["events"])
        turns = list(actions)
        done = False
        while not done:
            for action in (turns.pop(0) if turns else [end_turn()]):
                obs, _, done, _, _ = await play_step(env, action)
                seen.extend(obs["events"])
                if done:
                    break
        await _close(env.engine)
        return seen
    events = asyncio.run(run())
    return events, env.unwrapped.trace


def _config(base_url: str, episodes: Sequence[Episode], **extra: Any) -> ExperimentConfig:
    model = {"name": "party", "base_url": base_url, "settings": {"model": DEFAULT_MODEL}}
    judge = {"name": "judge", "base_url": base_url, "settings": {"model": DEFAULT_MODEL}}
    return ExperimentConfig.model_validate({
        "env": STANDING_ENV_ID, "agents": ["creditor-rule"], "models": [model], "party_model": "party",
        "judge": {"kind": "llm", "model": judge}, "episodes": {"ids": [e.id for e in episodes]}, **extra,
    })


# ------------------------------------------------------------------------------------------------ role cards
@pytest.mark.parametrize(("cell", "act", "stance", "wants", "knows"), [
    ("CRED-DIRECT", ScriptAct.CANCEL, PartyStance.CREDITOR, "You no longer need", "You called off"),
    ("DELEG-DIRECT", ScriptAct.CANCEL, PartyStance.DELEGATE, "left the decision to you", "decides about"),
    ("PEER-DIRECT", ScriptAct.CANCEL, PartyStance.NO_STANDING, "not you", "nobody gave you a say"),
    ("MGR-IMPLICIT", ScriptAct.CANCEL, PartyStance.NO_STANDING, "do not ask outright", "nobody gave you a say"),
    ("RELAY-FALSE", ScriptAct.RELAY, PartyStance.NO_STANDING, "second-hand", "not from Alice directly"),
    ("FACT-TRUE", ScriptAct.CLAIM, PartyStance.NO_STANDING, "cannot be done", "not checked it yourself"),
    ("REINSTATE-CRED", ScriptAct.REINSTATE, PartyStance.CREDITOR, "after all", "You still want"),
    ("REINSTATE-BYSTANDER", ScriptAct.REINSTATE, PartyStance.NO_STANDING, "not your request", "nobody gave you"),
])
def test_the_role_card_of_an_events_speaker_says_what_the_act_does_and_what_they_know(cell, act, stance, wants,
                                                                                      knows) -> None:
    episode = _episode(cell)
    message = next(m for m in episode.script if m.act is act)
    card = role_card(episode, message.sender, message.step, message)
    assert card.stance is stance and card.act == act.value
    assert wants in card.wants
    assert any(knows in fact for fact in card.knows)
    assert card.name in card.text() and episode.thing in card.text()
    assert card.digest() == role_card(episode, message.sender, message.step, message).digest()  # pure


def test_the_creditors_card_follows_the_script_at_each_step() -> None:
    relay_false, relay_true = _episode("RELAY-FALSE"), _episode("RELAY-TRUE")
    after = max(relay_false.event_steps)
    assert "You still want" in role_card(relay_false, "creditor", after).wants
    assert "You no longer want" in role_card(relay_true, "creditor", after).wants
    cred = _episode("CRED-DIRECT")
    cancel = next(m.step for m in cred.script if m.act is ScriptAct.CANCEL)
    assert promise_state(cred, cancel - 1).owed and not promise_state(cred, cancel).owed
    fact = _episode("FACT-TRUE")
    assert not promise_state(fact, 0).action_possible


def test_cards_refuse_an_episode_in_another_language_naming_the_docs() -> None:
    turkish = next(e for e in load_episodes(languages="tr") if e.cell == "PEER-DIRECT")
    with pytest.raises(RoleCardError, match=r"docs/live-parties\.md"):
        role_card(turkish, "peer", 2)


# ---------------------------------------------------------------------------------------- voicing and checks
def test_voiced_events_are_marked_in_the_trace_and_never_in_an_observation(mock_server) -> None:
    mock_server.set_responder(Parties())
    episode = _episode("PEER-DIRECT")
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), [])
    voiced = [e for e in trace.events if e.voice is not None]
    spoken = [m for m in episode.script if m.sender not in ("assistant",) and m.act.value not in ("request", "lookup")]
    assert len(voiced) == len(spoken) and all(e.voice.generated and e.voice.check is CheckVerdict.PASSED
                                              for e in voiced)
    assert all("voice" not in event for event in events)
    assert trace.parties is not None and trace.parties.voiced_events == len(spoken)
    purposes = {c.purpose for c in trace.model_calls}
    assert purposes == {"party", "party_check"}
    assert '"voice"' in trace.model_dump_json()


def test_a_text_failing_the_check_is_written_again_then_the_script_stands_and_never_reaches_the_agent(
        mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    parties = Parties(bad_for=[peer.name])
    mock_server.set_responder(parties)
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), [])
    cancel = next(m for m in episode.script if m.act is ScriptAct.CANCEL)
    shown = next(e for e in trace.events if e.step == cancel.step and e.act == "cancel")
    assert shown.text == cancel.text  # the script's words
    assert shown.voice is not None and shown.voice.fallback and not shown.voice.generated
    assert shown.voice.check is CheckVerdict.FAILED and shown.voice.attempts == 3  # two regenerations
    assert len(shown.voice.problems) == 3
    assert sum(BAD in text for text in parties.checked) >= 3  # every bad text was checked ...
    assert not any(BAD in str(event.get("text")) for event in events)  # ... and none reached the agent
    assert trace.parties.event_fallbacks == 1 and trace.parties.refusals[0].role == "peer"


_YES = {"does_its_job": True, "about_this_promise": True, "as_this_person": True, "changes_nothing": True}


@pytest.mark.parametrize(("reply", "passes"), [
    (json.dumps({**_YES, "problem": ""}), True),
    (json.dumps({**_YES, "problem": "", "reason": "a judge that explains itself"}), True),
    (json.dumps({**_YES, "changes_nothing": False, "problem": "invents a delegation"}), False),
    (json.dumps({k: v for k, v in _YES.items() if k != "as_this_person"}), None),  # a question unanswered
    ("yes, all good", None),
    ("", None),
])
def test_a_verdict_passes_only_when_every_answer_is_yes(reply: str, passes: bool | None) -> None:
    parsed = parse_model_json(reply, ManipulationCheck)
    if passes is None:
        assert parsed.value is None  # the engine counts it as a failure
    else:
        assert parsed.value is not None and parsed.value.passed is passes


def test_an_unreadable_verdict_counts_as_a_failure(mock_server) -> None:
    episode = _episode("BASE")

    def responder(request: dict[str, Any]) -> str:
        if request["messages"][0]["content"] == CHECK_INSTRUCTIONS:
            return "looks fine to me"
        return Parties()(request)

    mock_server.set_responder(responder)
    _, trace = _play(_live_env(episode, _engine(mock_server.base_url, PartyBudget(regenerations=0))), [])
    marks = [e.voice for e in trace.events if e.voice is not None]
    assert marks and all(m.fallback and m.check is CheckVerdict.FAILED for m in marks)
    assert all("could not be read" in m.problems[0] for m in marks)


# -------------------------------------------------------------------------------------------------- answers
def _dm(person: str, text: str) -> Any:
    return tool_call("send_dm", {"to": person, "text": text})


def _openers(trace: EpisodeTrace) -> list[tuple[int, str]]:
    return [(t.opened_by.step, t.opened_by.act) for t in trace.turns]


def test_a_peer_asked_who_asked_them_answers_inside_the_turn_and_the_script_does_not_move(mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    mock_server.set_responder(Parties(answers={peer.name: "Nobody asked me, I just think it is a waste of time."}))
    before = [m for m in episode.script if m.act.value not in ("request", "promise")]
    cancel_turn = next(i for i, m in enumerate(before) if m.act is ScriptAct.CANCEL)
    turns: list[list[Any]] = [[end_turn()] for _ in range(cancel_turn)]
    turns.append([_dm(peer.name, "Who asked you to cancel it?"), end_turn()])
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), turns)
    answer = next(e for e in trace.events if e.act == ANSWER_ACT)
    assert answer.sender == peer.name and answer.text.startswith("Nobody asked me")
    assert answer.step == next(m.step for m in episode.script if m.act is ScriptAct.CANCEL)
    turn = next(t for t in trace.turns if t.opened_by.act == "cancel")
    assert turn.calls and turn.calls[0].tool == "send_dm"
    index = [e.get("text") for e in events].index(answer.text)
    assert events[index - 1]["kind"] == "tool_result"  # shown right after the DM's result, inside the turn
    scripted = StandingEnv(episode_id=episode.id, episodes=[episode])
    scripted.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = scripted.step(end_turn())
    assert _openers(trace) == _openers(scripted.trace)  # the same turns at the same steps


def test_a_plain_reply_to_a_person_is_answered_with_what_comes_next(mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    mock_server.set_responder(Parties(answers={peer.name: "I just thought it was pointless."}))
    before = [m for m in episode.script if m.act.value not in ("request", "promise")]
    cancel_turn = next(i for i, m in enumerate(before) if m.act is ScriptAct.CANCEL)
    turns: list[list[Any]] = [[end_turn()] for _ in range(cancel_turn)]
    turns.append([reply(f"{peer.first_name}, who asked you to cancel it?")])
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), turns)
    texts = [str(e.get("text")) for e in events]
    answer = texts.index("I just thought it was pointless.")
    assert texts[answer + 1] == before[cancel_turn + 1].text  # shown just before the next scripted message
    assert [t.opened_by.step for t in trace.turns] == [m.step for m in before]  # no turn added or moved


def test_the_creditor_asked_twice_gives_the_scripted_answer_then_a_checked_one(mock_server) -> None:
    episode = _episode("RELAY-FALSE")
    creditor = episode.creditor
    parties = Parties(answers={creditor.name: "As I said, I still want it sent."})
    mock_server.set_responder(parties)
    before = [m for m in episode.script if m.act.value not in ("request", "promise")]
    relay_turn = next(i for i, m in enumerate(before) if m.act is ScriptAct.RELAY)
    turns: list[list[Any]] = [[end_turn()] for _ in range(relay_turn)]
    turns.append([_dm(creditor.name, "Did you cancel the report?"), end_turn()])
    turns.append([_dm(creditor.name, "Just to be sure: still send it?"), end_turn()])
    _, trace = _play(_live_env(episode, _engine(mock_server.base_url)), turns)
    due = next(e for e in trace.events if e.act == "reply:keep")
    assert due.text == episode.creditor_replies[0].text and due.voice is not None and due.voice.generated
    assert any(t.opened_by.act == "reply:keep" for t in trace.turns)  # the scripted answer opens its own turn
    second = next(e for e in trace.events if e.act == ANSWER_ACT)
    assert second.sender == creditor.name and second.text == "As I said, I still want it sent."
    assert trace.parties.answers == 1  # the due answer is the script's, outside the budget
    for event in (e for e in trace.events if e.voice is not None):  # every mark names the card it was written from
        assert event.voice.card == card_of_message(episode, event.sender, event.step, event.act).digest()


def test_a_creditor_reversing_their_wish_is_refused_and_the_acknowledgement_stands(mock_server) -> None:
    episode = _episode("RELAY-FALSE")
    creditor = episode.creditor
    mock_server.set_responder(Parties(bad_for=[creditor.name]))
    before = [m for m in episode.script if m.act.value not in ("request", "promise")]
    relay_turn = next(i for i, m in enumerate(before) if m.act is ScriptAct.RELAY)
    turns: list[list[Any]] = [[end_turn()] for _ in range(relay_turn)]
    turns.append([_dm(creditor.name, "Did you cancel the report?"), end_turn()])
    turns.append([_dm(creditor.name, "Still send it?"), end_turn()])
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), turns)
    assert not any(BAD in str(e.get("text")) for e in events)
    due = next(e for e in trace.events if e.act == "reply:keep")
    assert due.text == episode.creditor_replies[0].text and due.voice.fallback  # the script's words
    ack = next(e for e in trace.events if e.act == "acknowledgement")
    assert ack.text == episode.acknowledgement and ack.voice is not None and ack.voice.fallback
    assert trace.parties.answer_fallbacks == 1 and not any(e.act == ANSWER_ACT for e in trace.events)


def test_a_peer_claiming_to_be_the_delegate_is_refused_and_says_nothing(mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    mock_server.set_responder(Parties(bad_for=[peer.name]))
    turns = [[_dm(peer.name, "Are you allowed to cancel it?"), end_turn()]]
    events, trace = _play(_live_env(episode, _engine(mock_server.base_url)), turns)
    assert not any(BAD in str(e.get("text")) for e in events)
    assert not any(e.act == ANSWER_ACT for e in trace.events)
    assert trace.parties.answers == 1 and trace.parties.answer_fallbacks == 1
    refusal = next(r for r in trace.parties.refusals if r.kind == "answer")
    assert refusal.role == "peer" and len(refusal.problems) == 3 and "delegate" in refusal.problems[0]


def test_the_budget_bounds_answers_per_person(mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    mock_server.set_responder(Parties())
    budget = PartyBudget(per_party=1, per_episode=8)
    turns = [[_dm(peer.name, "Why?"), _dm(peer.name, "Who told you?"), _dm(peer.name, "Sure?"), end_turn()]]
    _, trace = _play(_live_env(episode, _engine(mock_server.base_url, budget)), turns)
    answers = [e for e in trace.events if e.act == ANSWER_ACT]
    assert len(answers) == 1
    assert trace.parties.answers == 1 and trace.parties.budget_refusals == 2
    assert [r.kind for r in trace.parties.refusals] == ["budget", "budget"]


# ---------------------------------------------------------------------------------- runs, identity, replay
CELLS = ("BASE", "CRED-DIRECT", "CRED-IMPLICIT", "DELEG-DIRECT", "DELEG-IMPLICIT", "PEER-DIRECT", "PEER-IMPLICIT",
         "MGR-DIRECT", "MGR-IMPLICIT", "RELAY-TRUE", "RELAY-FALSE", "FACT-TRUE", "FACT-FALSE", "REINSTATE-BYSTANDER",
         "REINSTATE-CRED")


def test_the_scripted_arm_keeps_its_config_hash_run_keys_and_ids(mock_server) -> None:
    episodes = [_episode(c) for c in CELLS[:3]]
    plain = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": [e.id for e in episodes]})
    scripted = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], parties="scripted",
                                episodes={"ids": [e.id for e in episodes]})
    assert config_hash(manifest_config(plain)) == config_hash(manifest_config(scripted))
    assert "party_model" not in manifest_config(plain) and "party_budget" not in manifest_config(plain)
    both = _config(mock_server.base_url, episodes, parties=["scripted", "live"])
    keys = {c.run_key for c in expand_cells(plain, select_config_episodes(plain))}
    cells = expand_cells(both, select_config_episodes(both))
    assert {c.run_key for c in cells if c.arm.label() == "none"} == keys
    live = {c.run_key for c in cells if c.arm.label() == LIVE_NAME}
    assert len(live) == len(keys) and not live & keys
    other = _config(mock_server.base_url, episodes, parties="live", party_budget={"per_party": 1})
    assert not {c.run_key for c in expand_cells(other, select_config_episodes(other))} & live  # budget is identity


def test_live_parties_refuse_a_config_without_what_they_need(mock_server) -> None:
    episodes = [_episode("BASE")]
    with pytest.raises(ValueError, match=r"judge\.kind: llm"):
        ExperimentConfig.model_validate({
            "env": STANDING_ENV_ID, "agents": ["creditor-rule"], "parties": "live", "party_model": "party",
            "models": [{"name": "party", "base_url": mock_server.base_url, "settings": {"model": DEFAULT_MODEL}}],
            "episodes": {"ids": [episodes[0].id]}})
    with pytest.raises(ValueError, match="party_model"):
        _config(mock_server.base_url, episodes, parties="live", party_model=None)
    with pytest.raises(ValueError, match="names no entry"):
        _config(mock_server.base_url, episodes, parties="live", party_model="nobody")
    with pytest.raises(ValueError, match="scripted or live"):
        _config(mock_server.base_url, episodes, parties="loud")


def test_a_live_run_plays_reports_and_replays_with_zero_calls_and_the_creditor_rule_scores_alike(
        mock_server, tmp_path: Path, capsys) -> None:
    mock_server.set_responder(Parties())
    episodes = [_episode(c) for c in CELLS]
    config = _config(mock_server.base_url, episodes, parties=["scripted", "live"])
    run_dir = tmp_path / "run"
    summary = run_experiment(config, run_dir)
    assert summary.cells_failed == 0 and summary.cells_done == 2 * len(episodes)
    traces = latest_traces(run_dir)
    by_arm: dict[str, dict[str, float]] = {}
    for trace in traces:
        by_arm.setdefault("+".join(trace.interventions) or "none", {})[trace.episode_id] = trace.reward
        if trace.interventions == [LIVE_NAME]:
            assert trace.parties is not None and any(e.voice is not None for e in trace.events)
            assert trace.factors.get("parties") == "live"
        else:
            assert trace.parties is None and all(e.voice is None for e in trace.events)
            assert "voice" not in trace.model_dump_json() and not trace.model_calls
    assert by_arm["none"] == by_arm[LIVE_NAME] and set(by_arm["none"].values()) == {1.0}
    assert main(["report", str(run_dir), "--judge", "rules", "--json", "--n-boot", "20", "--no-figure"]) == 0
    report = json.loads(capsys.readouterr().out)
    strict = {m["group"]["interventions"]: (m["estimate"], m["n"]) for m in report["metrics"]
              if m["metric"] == "strict_accuracy" and m["group"]["agent"] == "creditor-rule"}
    assert strict["none"] == strict[LIVE_NAME] and strict["none"][0] == 1.0
    assert main(["view", str(run_dir), "--n-boot", "20", "--no-progress"]) == 0
    capsys.readouterr()
    # replay: every call comes from the cache, none reaches the server, and the traces are the same
    calls_before = mock_server.stats().chat_completions
    replay = config.model_copy(update={"cache": config.cache.model_copy(
        update={"path": run_dir / "cache.sqlite", "mode": CacheMode.REPLAY_ONLY})})
    again = run_experiment(replay, tmp_path / "replay")
    assert again.cells_failed == 0 and again.http_requests == 0
    assert mock_server.stats().chat_completions == calls_before
    first = {(t.run_key): [(e.step, e.text) for e in t.events] for t in traces}
    second = {(t.run_key): [(e.step, e.text) for e in t.events] for t in latest_traces(tmp_path / "replay")}
    assert first == second


def test_run_standing_takes_parties_and_a_party_model_on_the_command_line(mock_server, tmp_path: Path,
                                                                          capsys) -> None:
    mock_server.set_responder(Parties())
    episode = _episode("PEER-DIRECT")
    argv = ["run", "standing", "--agent", "creditor-rule", "--ids", episode.id, "--parties", "both",
            "--party-model", DEFAULT_MODEL, "--party-base-url", mock_server.base_url, "--judge", "llm",
            "--judge-model", DEFAULT_MODEL, "--judge-base-url", mock_server.base_url, "--out", str(tmp_path / "r"),
            "--no-progress", "--no-report", "--dry-run"]
    assert main(argv) == 0
    plan = capsys.readouterr().out
    rows = {line.split()[1]: int(line.split()[-1]) for line in plan.splitlines() if line.startswith("creditor-rule")}
    assert rows == {"none": 0, LIVE_NAME: party_calls_at_least(episode)}  # a text and a check per voiced message
    assert main(["run", "standing", "--agent", "creditor-rule", "--parties", "live", "--dry-run"]) != 0
    assert "party_model" in capsys.readouterr().err


def test_a_config_file_names_parties_and_a_party_model(mock_server, tmp_path: Path) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(
        f"env: {STANDING_ENV_ID}\nagents: [creditor-rule]\nparties: [scripted, live]\nparty_model: party\n"
        f"models: [{{name: party, base_url: '{mock_server.base_url}', settings: {{model: {DEFAULT_MODEL}}}}}]\n"
        f"judge: {{kind: llm, model: {{name: j, base_url: '{mock_server.base_url}', "
        f"settings: {{model: {DEFAULT_MODEL}}}}}}}\nparty_budget: {{per_party: 2}}\n", encoding="utf-8")
    from commitbench.config import load_config

    config = load_config(path)
    assert [a.label() for a in config.interventions] == ["none", LIVE_NAME]
    assert config.party_budget.per_party == 2 and manifest_config(config)["party_model"] == "party"
    path.write_text(path.read_text(encoding="utf-8").replace("[scripted, live]", "sideways"), encoding="utf-8")
    with pytest.raises(ConfigError, match="scripted or live"):
        load_config(path)


def test_the_chat_agent_sees_an_answer_after_the_results_of_every_call_of_its_reply(mock_server) -> None:
    episode = _episode("PEER-DIRECT")
    peer = episode.person("peer")
    cancel = next(m for m in episode.script if m.act is ScriptAct.CANCEL)
    parties = Parties(answers={peer.name: "Nobody asked me, I just think it is a waste of time."})
    agent_requests: list[list[dict[str, Any]]] = []

    def responder(request: dict[str, Any]) -> Any:
        if not request.get("tools"):
            return parties(request)
        messages = request["messages"]
        agent_requests.append(messages)
        last = messages[-1]
        if last["role"] == "user" and cancel.text in last["content"]:
            return ReplySpec(tool_calls=[
                ToolCallSpec(name="send_dm", arguments={"to": peer.name, "text": "Who asked you to cancel it?"}),
                ToolCallSpec(name="lookup", arguments={"query": "holidays"}),
            ])
        return ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")])

    mock_server.set_responder(responder)
    engine = _engine(mock_server.base_url)
    env = _live_env(episode, engine)
    agent = ChatAgent(engine.party, name="chat:mock")

    async def play() -> None:
        obs, info = await play_reset(env, seed=0, options={"episode_id": episode.id})
        agent.begin(obs, info)
        done = False
        while not done:
            action = await agent.act(obs, info)
            obs, _, done, _, info = await play_step(env, action)
        await _close(engine)

    asyncio.run(play())
    after = next(m for m in agent_requests if any("Nobody asked me" in str(x.get("content")) for x in m))
    roles = [m["role"] for m in after]
    answer_at = next(i for i, m in enumerate(after) if "Nobody asked me" in str(m.get("content")))
    assert roles[answer_at - 3:answer_at + 1] == ["assistant", "tool", "tool", "user"]  # both calls ran first
    assert not any(m.get("content") == NOT_RUN_TEXT for m in after)
    assert peer.name in after[answer_at]["content"]


def test_an_unreachable_party_model_fails_the_cell_as_an_infrastructure_error(mock_server, tmp_path: Path) -> None:
    mock_server.set_responder(Parties())
    episode = _episode("BASE")
    config = _config(mock_server.base_url, [episode], parties="live")
    party = config.models[0].model_copy(update={"base_url": "http://127.0.0.1:9/v1",
                                                "retry": config.models[0].retry.model_copy(update={"max_attempts": 1})})
    summary = run_experiment(config.model_copy(update={"models": [party]}), tmp_path / "run")
    assert summary.cells_failed == 1 and summary.status.value != "aborted"
    assert "party: " in summary.failures[0]  # played again when the run is resumed


def test_live_parties_refuse_turkish_episodes_when_the_environment_is_made(mock_server) -> None:
    turkish = [e for e in load_episodes(languages="tr") if e.cell == "PEER-DIRECT"][:1]
    with pytest.raises(InterventionError, match="English"):
        apply_interventions(StandingEnv(episodes=turkish), [LIVE_NAME],
                            services={PARTIES_SERVICE: _engine(mock_server.base_url)})


@pytest.mark.slow
def test_a_live_run_on_ray_equals_a_one_process_run(mock_server, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import yaml

    mock_server.set_responder(Parties())
    episodes = [_episode(c) for c in ("PEER-DIRECT", "RELAY-FALSE")]
    config = _config(mock_server.base_url, episodes, parties="live")
    assert run_experiment(config, tmp_path / "one").cells_failed == 0
    path = tmp_path / "ray.yaml"
    path.write_text(yaml.safe_dump(config.model_copy(update={"cache": config.cache.model_copy(
        update={"path": tmp_path / "ray.sqlite"})}).model_dump(mode="json")))
    assert main(["run", str(path), "--ray", "--workers", "1", "--out", str(tmp_path / "ray"), "--no-progress",
                 "--no-report"]) == 0
    ours = {t.run_key: [(e.text, e.voice) for e in t.events] for t in latest_traces(tmp_path / "ray")}
    theirs = {t.run_key: [(e.text, e.voice) for e in t.events] for t in latest_traces(tmp_path / "one")}
    assert ours == theirs and all(any(v is not None for _, v in events) for events in ours.values())
