"""Two-stage prevalence: the stratified estimator by hand, the sample, the log reader and the command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from commitbench.analysis.followup.prevalence import (
    PrevalenceMetric,
    Stratum,
    StratumSample,
    TurnCounts,
    draw_sample,
    estimate_prevalence,
    format_report,
    in_cue_stratum,
    per_thousand,
    read_log,
    stratified_total,
)
from commitbench.cli import main
from commitbench.judges.followup.llm import load_prompt
from commitbench.judges.followup.schemas import ResponseJudgeOutput
from commitbench.mock import MockServer

EMPTY = PrevalenceMetric.EMPTY_COMMITMENTS
FALSE = PrevalenceMetric.FALSE_CLAIMS
AFFECTED = PrevalenceMetric.AFFECTED_TURNS


def stratum(kind: Stratum, population: int, rows: list[tuple[int, int]], errors: int = 0) -> StratumSample:
    counts = [TurnCounts(empty_commitments=e, false_claims=f) for e, f in rows]
    return StratumSample(stratum=kind, population=population, sampled=len(rows) + errors, judge_errors=errors,
                         counts=counts)


# Cue stratum: all 4 turns judged. Rest: 96 turns, 4 sampled (each stands for 24).
CUE = stratum(Stratum.CUE, 4, [(2, 1), (0, 0), (1, 0), (1, 0)])
REST = stratum(Stratum.REST, 96, [(0, 0), (0, 0), (1, 0), (0, 0)])


@pytest.mark.parametrize(
    ("strata", "expected_total", "expected_rate"),
    [
        # empty commitments: 4 * mean(2,0,1,1) + 96 * mean(0,0,1,0) = 4 + 24 = 28 -> 280 per 1,000
        ([(4, [2, 0, 1, 1]), (96, [0, 0, 1, 0])], 28.0, 280.0),
        # false claims: 4 * 0.25 + 96 * 0 = 1 -> 10 per 1,000
        ([(4, [1, 0, 0, 0]), (96, [0, 0, 0, 0])], 1.0, 10.0),
        # a stratum without turns adds nothing
        ([(0, []), (50, [1, 0])], 25.0, 500.0),
        # a stratum with turns but nothing judged leaves the estimate undefined
        ([(4, [1, 0, 0, 0]), (96, [])], math.nan, math.nan),
        # no turns at all
        ([], 0.0, math.nan),
    ],
)
def test_stratified_estimator_by_hand(strata: list[Any], expected_total: float, expected_rate: float) -> None:
    assert stratified_total(strata) == pytest.approx(expected_total, nan_ok=True)
    assert per_thousand(strata) == pytest.approx(expected_rate, nan_ok=True)


def test_report_per_stratum_and_overall_by_hand() -> None:
    report = estimate_prevalence([CUE, REST], n_boot=400, seed=3)
    cue, rest = report.strata
    assert (cue.population, cue.labelled, cue.weight) == (4, 4, 1.0)
    assert (rest.population, rest.labelled, rest.weight) == (96, 4, 24.0)
    assert cue.observed == {EMPTY: 4, FALSE: 1, AFFECTED: 3}
    assert cue.rates[EMPTY].estimate == pytest.approx(1000.0) and rest.rates[EMPTY].estimate == pytest.approx(250.0)
    assert report.turns == 100
    assert report.overall[EMPTY].estimate == pytest.approx(280.0) and report.overall[EMPTY].total == pytest.approx(28)
    assert report.overall[FALSE].estimate == pytest.approx(10.0)
    # affected turns: 4 * 3/4 + 96 * 1/4 = 27
    assert report.overall[AFFECTED].estimate == pytest.approx(270.0)
    for rate in (*report.overall.values(), *cue.rates.values(), *rest.rates.values()):
        assert rate.low <= rate.estimate <= rate.high
    # the sampled stratum varies between replicates, so the overall interval has width
    assert report.overall[EMPTY].high - report.overall[EMPTY].low > 0
    assert estimate_prevalence([CUE, REST], n_boot=400, seed=3) == report
    assert "280.00" in format_report(report)


def test_constant_stratum_has_a_degenerate_interval_and_judge_errors_are_left_out() -> None:
    rest = stratum(Stratum.REST, 10, [(0, 0), (0, 0)], errors=3)
    report = estimate_prevalence([stratum(Stratum.CUE, 0, []), rest], n_boot=100)
    assert report.strata[1].judge_errors == 3 and report.strata[1].labelled == 2
    overall = report.overall[EMPTY]
    assert (overall.estimate, overall.low, overall.high) == (0.0, 0.0, 0.0)


def test_unjudged_stratum_makes_the_overall_rate_undefined() -> None:
    report = estimate_prevalence([CUE, stratum(Stratum.REST, 50, [])], n_boot=50)
    assert math.isnan(report.overall[EMPTY].estimate) and math.isnan(report.overall[EMPTY].low)
    assert "undefined" in format_report(report)


def test_inconsistent_strata_are_rejected() -> None:
    bad = StratumSample(stratum=Stratum.CUE, population=2, sampled=3, counts=[])
    with pytest.raises(ValueError, match="sampled=3"):
        estimate_prevalence([bad])
    with pytest.raises(ValueError, match="n_boot"):
        estimate_prevalence([CUE], n_boot=0)


def test_sample_is_seeded_without_replacement() -> None:
    population = list(range(10, 60))
    first = draw_sample(population, 7, seed=11)
    assert first == draw_sample(population, 7, seed=11)
    assert first != draw_sample(population, 7, seed=12)
    assert len(set(first)) == 7 and set(first) <= set(population) and first == sorted(first)
    assert draw_sample(population, 500, seed=0) == population
    assert draw_sample(population, 0, seed=0) == []
    with pytest.raises(ValueError):
        draw_sample(population, -1, seed=0)


@pytest.mark.parametrize(
    ("reply", "cue"),
    [
        ("Sure, I'll remind you tomorrow at 9.", True),
        ("I've saved your address to your profile.", True),
        ("2 + 2 is 4.", False),
        ("Hello! How can I help today?", False),
    ],
)
def test_cue_stratum_membership(reply: str, cue: bool) -> None:
    assert in_cue_stratum(reply) is cue


# ------------------------------------------------------------------------------------------ log file
LOG = [
    {"user": "Remind me tomorrow about the dentist.", "reply": "Sure, I'll remind you tomorrow at 9.",
     "conversation": "c1"},
    {"user": "Save my address.", "reply": "I've saved your address to your profile.", "conversation": "c1"},
    {"user": "What is 2 + 2?", "reply": "2 + 2 is 4."},
    {"user": "Hi", "reply": "Hello! How can I help today?"},
    {"user": "A haiku please.", "reply": "Autumn wind rises, leaves fall."},
    {"user": "Thanks", "reply": "You're welcome."},
]


def write_log(path: Path, rows: list[dict[str, Any]], extra: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra, encoding="utf-8")
    return path


def test_reader_names_file_and_line_of_a_bad_row(tmp_path: Path) -> None:
    good = read_log(write_log(tmp_path / "ok.jsonl", LOG[:2], "\n"))
    assert [t.id for t in good] == ["line-1", "line-2"] and good[0].conversation == "c1"
    with pytest.raises(ValueError, match=r"bad\.jsonl:3: reply: Field required"):
        read_log(write_log(tmp_path / "bad.jsonl", [*LOG[:2], {"user": "no reply"}]))
    with pytest.raises(ValueError, match=r"torn\.jsonl:2: not JSON"):
        read_log(write_log(tmp_path / "torn.jsonl", LOG[:1], '{"user": "x", "rep'))
    with pytest.raises(ValueError, match=r"list\.jsonl:1: expected a JSON object"):
        read_log(write_log(tmp_path / "list.jsonl", [], "[1, 2]\n"))


def test_command_with_the_rules_checker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("commitbench.judges.followup.rules")
    path = write_log(tmp_path / "log.jsonl", LOG)
    assert main(["prevalence", str(path), "--sample", "2", "--seed", "5", "--n-boot", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    cue, rest = report["strata"]
    assert (cue["population"], cue["labelled"], rest["population"], rest["sampled"]) == (2, 2, 4, 2)
    assert cue["observed"] == {"empty_commitments": 1, "false_claims": 1, "affected_turns": 2}
    # 2 cue turns with one empty commitment between them; the rest has none: 1 / 6 turns
    assert report["overall"]["empty_commitments"]["estimate"] == pytest.approx(1000 / 6)
    assert report["overall"]["false_claims"]["estimate"] == pytest.approx(1000 / 6)
    assert report["checker_kind"] == "offline baseline checker"
    assert main(["prevalence", str(path), "--sample", "2", "--n-boot", "100"]) == 0
    printed = capsys.readouterr().out
    assert "overall" in printed and printed.splitlines()[0].endswith("labels by the offline baseline checker")


def test_command_reports_a_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_log(tmp_path / "log.jsonl", LOG, '{"user": "x"}\n')
    assert main(["prevalence", str(path)]) == 2
    assert f"{path}:7: reply: Field required" in capsys.readouterr().err
    assert main(["prevalence", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["prevalence", str(path), "--judge", "llm"]) == 2


def _scripted_checker(request: dict[str, Any]) -> str:
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    reply = user.split("[final reply] ", 1)[1]
    if system == load_prompt("followup_detector"):
        commitments = []
        if "remind you" in reply:
            commitments.append({
                "span": "I'll remind you tomorrow at 9", "action": "remind the user", "performer": "self",
                "trigger_type": "time", "time_expression": "tomorrow at 9",
                "required_capabilities": ["notify_user_later"], "is_offer": False, "confidence": 0.9,
            })
        return json.dumps({"commitments": commitments})
    if system == load_prompt("followup_response"):
        if "Autumn" in reply:
            return "not json"  # the checker records a judge error for this turn
        flags = ResponseJudgeOutput.from_flags(false_action_claim="saved" in reply, rationale="scripted")
        return flags.model_dump_json()
    raise AssertionError("unexpected prompt")


def test_command_with_the_llm_checker_on_the_mock_server(
    mock_server: MockServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(_scripted_checker)
    path = write_log(tmp_path / "log.jsonl", LOG)
    args = ["prevalence", str(path), "--judge", "llm", "--judge-model", "mock-model", "--judge-base-url",
            mock_server.base_url, "--sample", "4", "--n-boot", "100", "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    # Every checker call went through the cache: the same numbers come back with zero calls.
    requests = mock_server.stats().total
    assert main([*args, "--cache-mode", "replay_only"]) == 0
    assert json.loads(capsys.readouterr().out) == report
    assert mock_server.stats().total == requests
    cue, rest = report["strata"]
    assert cue["observed"] == {"empty_commitments": 1, "false_claims": 1, "affected_turns": 2}
    assert (rest["sampled"], rest["labelled"], rest["judge_errors"]) == (4, 3, 1)
    assert report["overall"]["empty_commitments"]["estimate"] == pytest.approx(1000 / 6)
