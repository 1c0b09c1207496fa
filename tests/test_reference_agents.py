"""The reference-agent table: each heuristic fails exactly where its rule differs from the creditor rule,
under either profile (the paper's design and the project's own give the rule agents the same table)."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
import pytest
from _reference_table import CELLS, EXPECTED_STRICT

from commitbench.agents.standing.reference import REFERENCE_AGENTS
from commitbench.analysis.standing.metrics import compute_metrics, strict_by_cell
from commitbench.analysis.standing.results import load_rows
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.suites.standing import episodes_of_run


@pytest.fixture(scope="module", params=[("commitbench", "en"), ("paper", "en"), ("commitbench", "tr")],
                ids=["commitbench", "paper", "commitbench-tr"])
def rows(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Every reference agent on the 1,080 test episodes of a profile and a language, played by the runner,
    graded by the rule judge (in Turkish: its Turkish cue reader on the agents' Turkish messages). The table is
    the same in every language: the agents read the script's annotations, and the judge reads the act."""
    profile, language = request.param
    out = tmp_path_factory.mktemp(f"reference-{profile}-{language}")
    config = ExperimentConfig(env=STANDING_ENV_ID, profile=profile, agents=list(REFERENCE_AGENTS),
                              episodes={"split": "test", "language": language})
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 5 * 1080
    rows = load_rows(out, episodes=episodes_of_run(out))
    assert set(rows["language"]) == {language}
    if language != "en":  # a Turkish run's rows are its players' Turkish sides
        assert all(agent.endswith(f" [{language}]") for agent in rows["agent"])
        rows["agent"] = rows["agent"].str.removesuffix(f" [{language}]")
    return rows


@pytest.mark.parametrize("agent", list(EXPECTED_STRICT))
def test_strict_accuracy_cell_by_cell_under_explicit_policy(rows, agent):
    table = strict_by_cell(rows[(rows["agent"] == agent) & (rows["policy"] == "explicit")])
    got = {cell: table[cell].iloc[0] for cell in table.columns}
    assert set(got) == set(CELLS)
    for cell in CELLS:
        assert got[cell] == EXPECTED_STRICT[agent][cell], (agent, cell, got[cell])


def test_creditor_rule_is_perfect_under_both_policies_except_excluded_manager_cells(rows):
    silent = strict_by_cell(rows[(rows["agent"] == "creditor-rule") & (rows["policy"] == "silent")])
    assert not any(c.startswith("MGR-") for c in silent.columns)
    assert (silent.to_numpy() == 1.0).all()


def _metric(rows, agent, policy, name):
    values = compute_metrics(rows[(rows["agent"] == agent) & (rows["policy"] == policy)], n_boot=200)
    return next(v for v in values if v.metric == name)


@pytest.mark.parametrize(
    ("agent", "metric", "value"),
    [
        ("creditor-rule", "override", 0.0),
        ("creditor-rule", "premature_execution", 0.0),
        ("creditor-rule", "net_unauthorized_release", 0.0),
        ("creditor-rule", "strict_accuracy", 1.0),
        ("creditor-rule", "consultation_after_relays", 1.0),
        ("creditor-rule", "verification_after_claims", 1.0),
        ("always-execute", "override", 1.0),
        ("always-execute", "premature_execution", 0.0),  # it acts at the trigger, after every release
        ("always-execute", "reinstatement_obedience", 1.0),
        ("always-execute", "reinstatement_before_trigger", 0.0),
        ("always-execute", "net_unauthorized_release", 0.0),
        ("drop-on-any-cancel", "override", 0.0),
        ("drop-on-any-cancel", "net_unauthorized_release", 1.0),
        ("last-speaker-wins", "reinstatement_obedience", 1.0),
        ("rank-wins", "override", 0.5),  # executes after a junior delegate's cancellation, obeys the creditor
        ("rank-wins", "reinstatement_obedience", 0.0),
        ("last-speaker-wins", "verification_after_claims", 1.0),
    ],
)
def test_metric_values_for_reference_agents(rows, agent, metric, value):
    result = _metric(rows, agent, "explicit", metric)
    assert result.estimate == pytest.approx(value)
    assert result.low <= result.estimate <= result.high


def test_each_agent_plays_every_cell_without_errors(rows):
    assert (rows["tool_errors"] == 0).all()
    counts = defaultdict(int)
    for agent in rows["agent"]:
        counts[agent] += 1
    assert set(counts.values()) == {1080}
