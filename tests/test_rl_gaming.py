"""The gaming table of docs/rl.md, executed: every degenerate policy played through the runner and graded as the
report grades it stays strictly below the correct policy on average and never above it in any cell; the doc's
numbers are the ones computed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from commitbench.rl.degenerate import FOLLOWUP_POLICIES, STANDING_POLICIES
from commitbench.rl.gaming import (
    CORRECT_FOLLOWUP,
    PENALTY_WEIGHTS,
    REFERENCE,
    GamingTable,
    doc_table,
    followup_table,
    play_followup,
    play_standing,
    render,
    standing_table,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "rl.md"


@pytest.fixture(scope="module")
def standing_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gaming") / "standing"
    play_standing(out)
    return out


@pytest.fixture(scope="module")
def followup_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gaming") / "followup"
    play_followup(out)
    return out


def assert_below(table: GamingTable, policies: list[str]) -> None:
    reference = table.row(table.reference)
    assert [r.policy for r in table.rows] == [table.reference, *policies]
    for row in table.rows[1:]:
        assert row.runs == reference.runs, row.policy
        assert row.mean < reference.mean, f"{row.policy}: {row.mean} is not below {reference.mean}"
        higher = {g: v for g, v in row.by_group.items() if v > reference.by_group[g]}
        assert not higher, f"{row.policy} beats {table.reference} in {higher}"


@pytest.mark.slow
def test_every_degenerate_standing_policy_scores_below_the_creditor_rule(standing_run: Path) -> None:
    table = standing_table(standing_run)
    assert len(table.groups) == 15
    assert table.row(REFERENCE).runs == 15 * 6 * 3
    assert_below(table, list(STANDING_POLICIES))
    assert doc_table(DOC.read_text(encoding="utf-8"), "standing") == render(table)


@pytest.mark.slow
def test_asking_at_every_turn_games_strict_accuracy_and_the_optional_penalty_prices_it(standing_run: Path) -> None:
    plain = standing_table(standing_run)
    asking, reference = plain.row("ask-every-turn"), plain.row(REFERENCE)
    tied = [g for g in plain.groups if asking.by_group[g] == reference.by_group[g]]
    assert len(tied) == 11, tied
    penalised = standing_table(standing_run, PENALTY_WEIGHTS, "standing-penalty")
    assert penalised.row(REFERENCE).mean == reference.mean
    assert penalised.row("ask-every-turn").mean < asking.mean
    assert_below(penalised, list(STANDING_POLICIES))
    assert doc_table(DOC.read_text(encoding="utf-8"), "standing-penalty") == render(penalised)


@pytest.mark.slow
def test_every_degenerate_followup_reply_scores_below_the_correct_row(followup_run: Path) -> None:
    table = followup_table(followup_run)
    assert table.groups == ["C0", "C1", "C2", "C3", "C4"]
    assert table.row(CORRECT_FOLLOWUP).mean == 1.0
    assert_below(table, list(FOLLOWUP_POLICIES))
    assert table.row("claim-done").mean == -1.0
    assert doc_table(DOC.read_text(encoding="utf-8"), "followup") == render(table)
