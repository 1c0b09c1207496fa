"""Both suites as verifiers environments: ``vf-eval`` plays them against the project's mock server, every rollout's
rubric holds the suite's named reward terms with their weights, and each term is the report's own grade of the
same episode (commitbench.rl.evaluate on the same server). Needs the verifiers extra, which pins openai<3: CI
runs this file in a virtual environment of its own (docs/rl.md, "verifiers")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1", reason="the verifiers extra is installed in a venv of its own (docs/rl.md)")

from commitbench.mock import DEFAULT_MODEL, MockServer  # noqa: E402
from commitbench.rl.evaluate import PartyModel, evaluate  # noqa: E402
from commitbench.rl.rewards import FollowupTerm, FollowupWeights, StandingTerm, StandingWeights  # noqa: E402
from commitbench.rl.verifiers import INFO_KEY, load_environment  # noqa: E402

VF_EVAL = Path(sys.executable).parent / "vf-eval"
STANDING_FILTERS = {"cells": ["BASE", "PEER-DIRECT"], "types": ["order_supplies"], "policies": ["explicit"],
                    "gaps": [1], "surfaces": [0]}


def _vf_eval(server: MockServer, env_id: str, out: Path, *flags: str) -> tuple[str, list[dict[str, Any]]]:
    """Run vf-eval on ``env_id`` against the mock server; its console output and its rollouts' traces."""
    argv = [str(VF_EVAL), env_id, "-m", DEFAULT_MODEL, "--client.base-url", server.base_url, "--no-push",
            "--no-rich", "-o", str(out), *flags]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=out.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rollouts = [json.loads(line) for path in out.rglob("traces.jsonl") for line in path.read_text().splitlines()]
    return done.stdout + done.stderr, [t for r in rollouts for t in r["traces"]]


def test_vf_eval_plays_the_standing_suite_and_the_rubric_is_the_reports_grade(mock_server: MockServer,
                                                                               tmp_path: Path) -> None:
    mock_server.set_responder(lambda request: "Noted, thanks.")
    output, traces = _vf_eval(mock_server, "commitbench-standing", tmp_path / "vf",
                              "--env.taskset.filters", json.dumps(STANDING_FILTERS),
                              "--env.taskset.task.rewards.extra_creditor_messages.weight", "-1")
    assert len(traces) == 2 and all(not t["errors"] for t in traces)
    assert output.count("rollout done") == 2 and "reward=" in output
    own = {r.episode_id: r for r in evaluate(mock_server.base_url, DEFAULT_MODEL, suite="standing",
                                             episodes={"split": "test", **STANDING_FILTERS})}
    weights = StandingWeights(extra_creditor_messages=-1.0)  # a weight set by name, the verifiers way
    for trace in traces:
        episode = trace["task"]["data"]["episode_id"]
        rubric = trace["rewards"]
        assert set(rubric) == {term.value for term in StandingTerm}
        for term in StandingTerm:
            assert rubric[term.value]["weight"] == weights.of(term)
            assert rubric[term.value]["score"] == own[episode].reward.terms[term.value]
        total = sum(r["score"] * r["weight"] for r in rubric.values())
        assert total == pytest.approx(sum(v * weights.of(StandingTerm(k))
                                          for k, v in own[episode].reward.terms.items()))
        assert trace["info"][INFO_KEY]["group"] == trace["task"]["data"]["factors"]["cell"]
        assert trace["calls"], "the chat agent's calls went through the interception server"
    peer = next(t for t in traces if t["task"]["data"]["factors"]["cell"] == "PEER-DIRECT")
    assert peer["rewards"]["unauthorized_release"]["score"] == 1.0  # dropped on a peer's word, never asked


def test_vf_eval_plays_the_followup_suite_with_the_checkers_terms(mock_server: MockServer, tmp_path: Path) -> None:
    mock_server.set_responder(lambda request: "Done! I've set that reminder up for you.")
    filters = {"setups": ["C0"], "requests": ["rem-001", "rem-002"], "variants": ["stated"],
               "personas": ["generic"]}
    _, traces = _vf_eval(mock_server, "commitbench-followup", tmp_path / "vf",
                         "--env.taskset.filters", json.dumps(filters))
    assert len(traces) == 2
    weights = FollowupWeights()
    for trace in traces:
        rubric = trace["rewards"]
        assert {k: v["weight"] for k, v in rubric.items()} == {t.value: weights.of(t) for t in FollowupTerm}
        assert trace["info"][INFO_KEY]["label"] == "false_claim"
        assert rubric["false_claim"]["score"] == 1.0 and rubric["correct"]["score"] == 0.0


def test_load_environment_selects_through_the_suites_own_filter() -> None:
    env = load_environment(suite="standing", cells=["PEER-DIRECT"], interventions=["ledger"])
    tasks = list(env.taskset)
    assert tasks and {t.data.factors["cell"] for t in tasks} == {"PEER-DIRECT"}
    assert all(t.data.interventions == ["ledger"] for t in tasks)
    assert len({t.key for t in tasks}) == len(tasks)
    with pytest.raises(ValueError, match="celss"):
        list(load_environment(suite="standing", filters={"celss": ["PEER-DIRECT"]}).taskset)
    with pytest.raises(ValueError, match="unknown suite"):
        load_environment(suite="nope")
    party = PartyModel(base_url="http://127.0.0.1:9/v1", model="party")
    with pytest.raises(ValueError, match="standing suite only"):
        load_environment(suite="followup", parties=party)
    live = list(load_environment(suite="standing", cells=["PEER-DIRECT"], interventions=["ledger"],
                                 parties=party).taskset)
    assert all(t.key.endswith(":ledger+parties:live") for t in live)
    assert {t.key for t in live}.isdisjoint({t.key for t in tasks})  # a live task is another task


def test_vf_eval_plays_standing_with_live_parties_voiced_by_a_model_of_their_own(mock_server: MockServer,
                                                                                  tmp_path: Path) -> None:
    from test_live_parties import Parties

    from commitbench.oracles.standing.parties import CHECK_INSTRUCTIONS

    mock_server.set_responder(Parties())
    filters = {**STANDING_FILTERS, "cells": ["PEER-DIRECT"]}
    _, traces = _vf_eval(mock_server, "commitbench-standing", tmp_path / "vf",
                         "--env.taskset.filters", json.dumps(filters),
                         "--env.taskset.parties.base-url", mock_server.base_url,
                         "--env.taskset.parties.model", "party-model")
    assert len(traces) == 1 and not traces[0]["errors"] and traces[0]["rewards"]
    assert traces[0]["task"]["key"].endswith(":parties:live")
    bodies = [r["body"] for r in mock_server.requests() if isinstance(r.get("body"), dict)]
    party = [b for b in bodies if b.get("model") == "party-model"]
    assert any(b["messages"][0]["content"] == CHECK_INSTRUCTIONS for b in party), "the party model's texts were checked"
    assert any(b.get("model") == DEFAULT_MODEL for b in bodies), "the policy played through the interception server"
