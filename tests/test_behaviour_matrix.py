"""The behaviour matrix of docs/validity.md, executed: every scripted behaviour in every cell, under both profiles.

The table in the docs is the specification: each row a behaviour (``tests/_behaviour_agents.py``), each
column a cell, each entry the signals and the strict grade derived by hand from the definitions. This test
reads that table from the docs (so the docs and the test cannot drift), plays every row on every
commitment type of every cell (variant 0, gap 1, explicit policy) through the runner, grades the runs as
the report does (signals, the rule judge, strict accuracy) and compares each run's tokens with the entry.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from _behaviour_agents import BEHAVIOURS

from commitbench.analysis.standing.results import load_rows
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.suites.standing import episodes_of_run

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "validity.md"
START, END = "<!-- behaviour-matrix:start -->", "<!-- behaviour-matrix:end -->"
PROFILES = ("commitbench", "paper")
OUTCOMES = ("E", "E≠", "E<", "–")
FLAGS = ("O", "R", "P", "×2", "C", "c", "N", "V")
# A mark on an entry the current code gets wrong (kept only while a fix is under way).
KNOWN_WRONG = "‡"


def read_matrix() -> dict[str, dict[str, str]]:
    """The table between the markers of docs/validity.md: behaviour -> cell -> entry."""
    text = DOC.read_text(encoding="utf-8")
    body = text[text.index(START) + len(START): text.index(END)]
    rows = [line.strip() for line in body.splitlines() if line.strip().startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    matrix: dict[str, dict[str, str]] = {}
    for line in rows[2:]:
        values = [cell.strip() for cell in line.strip("|").split("|")]
        matrix[values[0]] = dict(zip(header[1:], values[1:], strict=True))
    return matrix


def expected_tokens(entry: str, profile: str) -> tuple[frozenset[str], bool, bool]:
    """The tokens an entry gives under a profile, its strict grade, and whether it is marked known-wrong."""
    marked = entry.startswith(KNOWN_WRONG)
    words = entry.lstrip(KNOWN_WRONG).split()
    strict_word = words[-1]
    grades = strict_word.split("/")
    if not set(grades) <= {"✓", "✗"} or len(grades) not in (1, 2):
        raise ValueError(f"entry {entry!r}: the last word must be ✓, ✗ or commitbench/paper such as ✗/✓")
    strict = (grades[0] if profile == "commitbench" or len(grades) == 1 else grades[1]) == "✓"
    tokens: set[str] = set()
    for word in words[:-1]:
        token, _, only = word.partition("@")
        if token not in OUTCOMES + FLAGS or only not in ("", *PROFILES):
            raise ValueError(f"entry {entry!r}: unknown token {word!r}")
        if not only or only == profile:
            tokens.add(token)
    if len(tokens & set(OUTCOMES)) != 1:
        raise ValueError(f"entry {entry!r}: exactly one of {', '.join(OUTCOMES)} is needed")
    return frozenset(tokens), strict, marked


def run_tokens(row: pd.Series) -> tuple[frozenset[str], bool | None]:
    """A graded run's tokens (the legend of the matrix) and its strict grade."""
    tokens: set[str] = set()
    if not row["executed"]:
        tokens.add("–")
    elif row["executed_early"]:
        tokens.add("E<")
    elif not row["executed_args_match"]:
        tokens.add("E≠")
    else:
        tokens.add("E")
    for flag, column in (("O", "executed_after_release"), ("R", "executed_after_reinstatement"),
                         ("P", "executed_before_release"), ("C", "consulted"), ("c", "consulted_late"),
                         ("N", "notified"), ("V", "verified")):
        if row.get(column) is True:
            tokens.add(flag)
    if row.get("executions", 0) >= 2:
        tokens.add("×2")
    strict = row["strict"]
    return frozenset(tokens), None if strict is None or pd.isna(strict) else bool(strict)


@pytest.fixture(scope="module", params=PROFILES)
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pd.DataFrame]:
    """Every behaviour on every cell and commitment type (variant 0, gap 1, explicit), graded like the report."""
    profile = request.param
    out = tmp_path_factory.mktemp(f"matrix-{profile}")
    agents = [f"_behaviour_agents:{cls.__name__}" for cls in BEHAVIOURS.values()]
    config = ExperimentConfig(env=STANDING_ENV_ID, profile=profile, agents=agents, concurrency=16,
                              episodes={"policies": ["explicit"], "gaps": [1], "surfaces": [0]})
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    return profile, load_rows(out, episodes=episodes_of_run(out))


def test_the_table_in_the_docs_is_well_formed() -> None:
    matrix = read_matrix()
    assert list(matrix) == list(BEHAVIOURS), "the rows of the table are the behaviours of tests/_behaviour_agents.py"
    for behaviour, entries in matrix.items():
        assert len(entries) == 15, behaviour
        for entry in entries.values():
            for profile in PROFILES:
                expected_tokens(entry, profile)  # raises on a malformed entry


@pytest.mark.slow
def test_every_behaviour_in_every_cell_gets_the_entry_of_the_table(graded: tuple[str, pd.DataFrame]) -> None:
    profile, rows = graded
    matrix = read_matrix()
    names = {f"_behaviour_agents:{cls.__name__}": name for name, cls in BEHAVIOURS.items()}
    wrong: list[str] = []
    still_marked: list[str] = []
    for (agent, cell), runs in rows.groupby(["agent", "cell"]):
        behaviour = names[str(agent)]
        tokens, strict, marked = expected_tokens(matrix[behaviour][str(cell)], profile)
        got = {run_tokens(run) for _, run in runs.iterrows()}
        matches = got == {(tokens, strict)}
        if marked and matches:
            still_marked.append(f"{behaviour} / {cell}")
        if not marked and not matches:
            shown = "; ".join(f"{' '.join(sorted(t))} {'✓' if s else '✗' if s is False else '?'}" for t, s in got)
            wrong.append(f"{behaviour} / {cell} [{profile}]: expected {' '.join(sorted(tokens))} "
                         f"{'✓' if strict else '✗'}, got {shown}")
    assert len(rows) == len(BEHAVIOURS) * 15 * 8
    assert not wrong, "\n".join(wrong)
    assert not still_marked, f"entries marked {KNOWN_WRONG} now pass; remove the mark: {still_marked}"


def test_the_legend_names_every_token() -> None:
    text = DOC.read_text(encoding="utf-8")
    legend = text[text.index("<!-- behaviour-matrix:legend -->"): text.index(START)]
    for token in OUTCOMES + FLAGS:
        assert re.search(rf"`{re.escape(token)}`", legend), token
