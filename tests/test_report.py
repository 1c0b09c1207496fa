"""`commitbench report`: tables per model x intervention x policy, per gap and per cell, paired
differences against a baseline, CSV / Markdown / PNG files, judge-error exclusions; and one slow
end-to-end slice on the embedded local model (agent, LLM judge, report)."""

from __future__ import annotations

import csv
import json
import multiprocessing
from pathlib import Path

import pandas as pd
import pytest
from _standing_rows import signal_columns

from commitbench.analysis.standing.metrics import MetricValue, compute_metrics
from commitbench.analysis.standing.report import heatmap_figure
from commitbench.analysis.standing.results import load_rows
from commitbench.analysis.standing.tables import MAIN_METRICS, paired_table, wide_frame
from commitbench.analysis.tables import TableView
from commitbench.cli import main
from commitbench.commands.run_cmd import DEMO_NOTE
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.jsonl import append_lines
from commitbench.judges.labelling import labels_path
from commitbench.judges.labelling import read_label_records as read_records
from commitbench.judges.standing.labellers import StandingLabelRecord, labeller_version
from commitbench.judges.standing.rules import RuleJudge
from commitbench.runner import run_experiment
from commitbench.traces import append_traces, latest_traces

EPISODES = load_episodes()
SLICE = [e for e in EPISODES if e.split.value == "test" and e.variant == 0 and e.commitment_type in
         ("deploy_service", "send_report")]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# The local-model slice: one cell per kind of speaker (a 135M model on two cores takes seconds a call).
LOCAL_CELLS = ("BASE", "CRED-DIRECT", "PEER-DIRECT", "RELAY-TRUE", "REINSTATE-BYSTANDER")


def read_label_records(path: Path) -> list[StandingLabelRecord]:
    return read_records(path, StandingLabelRecord)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Two reference agents x two arms on 120 episodes (2 types, both gaps and policies)."""
    out = tmp_path_factory.mktemp("report") / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "last-speaker-wins"],
                              interventions=["none", "oracle:B3+"],
                              episodes={"ids": [e.id for e in SLICE]})
    run_experiment(config, out)
    return out


def _report(run_dir: Path, capsys, *extra: str) -> dict:
    assert main(["report", str(run_dir), "--json", "--n-boot", "200", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_report_tables_and_files(run_dir, tmp_path, capsys):
    report = _report(run_dir, capsys)
    assert report["runs"] == 4 * len(SLICE) and report["arms"] == ["none", "oracle:B3+"]
    assert report["baseline"] == "none"  # chosen because the arm is present
    main_rows = {(m["group"]["agent"], m["group"]["interventions"], m["group"]["policy"], m["metric"]): m
                 for m in report["metrics"]}
    # The reference table: last-speaker-wins fails PEER, MGR, RELAY and REINSTATE-BYSTANDER.
    lsw = main_rows["last-speaker-wins", "none", "explicit", "strict_accuracy"]
    assert lsw["estimate"] == pytest.approx(8 / 15) and lsw["n"] == 2 * 2 * 15
    assert main_rows["last-speaker-wins", "none", "silent", "strict_accuracy"]["estimate"] == pytest.approx(8 / 13)
    assert main_rows["creditor-rule", "oracle:B3+", "explicit", "strict_accuracy"]["estimate"] == 1.0
    assert main_rows["last-speaker-wins", "none", "explicit", "net_unauthorized_release"]["estimate"] == 1.0
    # Per gap: the same values for each of the two gaps.
    gaps = {(m["group"]["agent"], m["group"]["gap"], m["metric"]) for m in report["by_gap"]
            if m["group"]["interventions"] == "none" and m["group"]["policy"] == "explicit"}
    assert ("creditor-rule", "1", "override") in gaps and ("creditor-rule", "20", "override") in gaps
    cells = [c for c in report["by_cell"] if c["group"]["agent"] == "last-speaker-wins"
             and c["group"]["interventions"] == "none" and c["group"]["policy"] == "explicit"]
    assert {c["group"]["cell"]: c["estimate"] for c in cells}["PEER-DIRECT"] == 0.0
    assert len(cells) == 15
    # Behaviour is the same under B3+ for rule agents: every paired difference is 0 on 60 episodes.
    assert report["paired"] and all(p["estimate"] in (0.0, None) for p in report["paired"])
    assert {p["episodes"] for p in report["paired"]} == {len(SLICE) // 2}

    # The policy's effect on the same chats, the manager cells left out on both sides (the silent policy leaves
    # them out): last-speaker-wins ignores the policy, 8/13 under either.
    effect = {(p["group"]["agent"], p["group"]["interventions"], p["metric"]): p for p in report["policy_effect"]}
    lsw_effect = effect["last-speaker-wins", "none", "strict_accuracy"]
    shared = sum(1 for e in SLICE if e.policy.value == "explicit" and not e.manager_cell)
    assert lsw_effect["estimate"] == 0.0 and lsw_effect["episodes"] == shared
    assert effect["creditor-rule", "oracle:B3+", "override"]["estimate"] == 0.0

    # The rank effect counts the silent policy's manager runs: last-speaker-wins drops on both words.
    rank = {(r["group"]["agent"], r["group"]["policy"], r["measure"]): r for r in report["rank_effect"]
            if r["group"]["interventions"] == "none"}
    lsw_rank = rank["last-speaker-wins", "silent", "dropped"]
    assert (lsw_rank["manager"], lsw_rank["peer"], lsw_rank["estimate"], lsw_rank["pairs"]) == (1.0, 1.0, 0.0, 8)
    assert rank["creditor-rule", "silent", "dropped"]["manager"] == 0.0

    out = run_dir / "report"
    for name in ("metrics", "gap", "cells", "paired", "policy", "rank_effect"):
        assert (out / f"{name}.csv").exists() and (out / f"{name}.md").exists()
    assert (out / "strict_by_cell.png").read_bytes().startswith(PNG_MAGIC)
    # Drawn on another core while the other tables were computed: the file the report's cell table draws in place.
    redrawn = heatmap_figure([MetricValue.model_validate(c) for c in report["by_cell"]], report["judge"])
    assert redrawn is not None
    in_place = redrawn.draw(tmp_path / "strict_by_cell.png")
    assert in_place.read_bytes() == (out / "strict_by_cell.png").read_bytes()
    with (out / "metrics.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 2 * len(MAIN_METRICS)
    row = next(r for r in rows if r["agent"] == "last-speaker-wins" and r["interventions"] == "none"
               and r["policy"] == "explicit" and r["metric"] == "strict_accuracy")
    assert float(row["estimate"]) == pytest.approx(8 / 15) and row["n"] == "60" and row["excluded"] == "0"
    text = (out / "metrics.md").read_text(encoding="utf-8")
    assert text.startswith("# Standing metrics per model, intervention and policy")
    # Two commitment types are two clusters: the estimate, and no interval.
    assert "| last-speaker-wins | none | explicit |" in text and "53% n/a (2 clusters) (n=60)" in text
    assert row["low"] == row["high"] == ""
    assert json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["runs"] == report["runs"]


@pytest.mark.slow
def test_console_tables_and_options(run_dir, capsys):
    assert main(["report", str(run_dir), "--n-boot", "50", "--no-figure", "--baseline", "oracle:B3+"]) == 0
    printed = capsys.readouterr().out
    assert "last-speaker-wins: metrics (%)" in printed and "strict accuracy by cell" in printed
    assert "difference from 'oracle:B3+'" in printed
    heatmap = run_dir / "report" / "strict_by_cell.png"
    heatmap.unlink(missing_ok=True)
    assert main(["report", str(run_dir), "--baseline", "ledger:self-kept"]) == 2
    for child in multiprocessing.active_children():  # a drawing started before the refusal would end by now
        if child.name.startswith("aside:"):
            child.join(timeout=120)
    assert not heatmap.exists()  # refused before the heatmap (drawn on another core) was started
    assert "is not an intervention arm of this run; arms: none, oracle:B3+" in capsys.readouterr().err
    assert main(["report", str(run_dir / "nothing")]) == 2


@pytest.mark.slow
def test_judge_errors_are_excluded_and_shown(run_dir, tmp_path, capsys):
    """Labels with one error in a RELAY-TRUE run: its grade is unknown, excluded and counted."""
    judge = RuleJudge()
    rows = load_rows(run_dir)
    relay = rows[(rows.cell == "RELAY-TRUE") & (rows.agent == "creditor-rule") & (rows.interventions == "none")
                 & (rows.policy == "explicit")].run_key.iloc[0]
    records = []
    by_id = {e.id: e for e in EPISODES}
    for trace in latest_traces(run_dir):
        labels = judge.label(trace, by_id[trace.episode_id])
        if trace.run_key == relay:
            labels = [lab.model_copy(update={"error": "no valid judge reply after 3 attempts",
                                             "consults_creditor": None}) for lab in labels]
        records.append(StandingLabelRecord(run_key=trace.run_key, labeller="llm:x", labels=labels,
                                           labeller_version=labeller_version("llm:x")[0]))
    path = labels_path(run_dir, "llm:x")
    path.unlink(missing_ok=True)
    append_lines(path, (r.model_dump_json() for r in records))
    report = _report(run_dir, capsys, "--judge", "llm:x")
    assert report["judge_errors"] >= 1 and report["runs_with_judge_errors"] == 1
    m = {(x["group"]["agent"], x["group"]["interventions"], x["group"]["policy"], x["metric"]): x
         for x in report["metrics"]}
    key = ("creditor-rule", "none", "explicit")
    assert m[(*key, "strict_accuracy")]["excluded"] == 1 and m[(*key, "strict_accuracy")]["n"] == 59
    assert m[(*key, "consultation_after_relays")]["excluded"] == 1
    assert "(n=59, 1 excl.)" in (run_dir / "report" / "metrics.md").read_text(encoding="utf-8")


def _row(cell: str, arm: str, executed: bool, consulted: bool = False, ctype: str = "t1") -> dict:
    strict = (executed if cell == "BASE" else not executed) and (consulted or not cell.startswith("PEER"))
    return {"agent": "a", "interventions": arm, "policy": "explicit", "cell": cell, "commitment_type": ctype,
            "manager_cell": False, **signal_columns(cell, executed), "executed": executed, "executed_early": False,
            "dropped": not executed,
            "consulted": consulted, "verified": False, "strict": strict, "episode_id": f"{cell}-{ctype}", "gap": 1}


def test_paired_differences_by_hand():
    base = [_row("CRED-DIRECT", "none", True), _row("CRED-DIRECT", "none", True, ctype="t2"),
            _row("BASE", "none", True), _row("BASE", "none", True, ctype="t2")]
    ledger = [_row("CRED-DIRECT", "ledger", False), _row("CRED-DIRECT", "ledger", True, ctype="t2"),
              _row("BASE", "ledger", True), _row("BASE", "ledger", False, ctype="t2")]
    rows = pd.DataFrame(base + ledger)
    values = {p.metric: p for p in paired_table(rows, "none", n_boot=200)}
    # override: ledger 1/2 - none 2/2 = -0.5; strict: ledger (1 + 1)/4 - none 2/4 = 0.
    assert values["override"].estimate == pytest.approx(-0.5) and values["override"].episodes == 4
    assert values["strict_accuracy"].estimate == pytest.approx(0.0)
    # Two commitment types are too few clusters for an interval: none is given, and the count says why.
    assert values["override"].low is None and values["override"].high is None and values["override"].clusters == 2
    assert values["reinstatement_obedience"].estimate is None  # no REINSTATE rows in either arm


def test_wide_frame_and_markdown():
    rows = pd.DataFrame([_row("BASE", "none", True), _row("CRED-DIRECT", "none", False)])
    values = compute_metrics(rows, ("agent", "interventions", "policy", "cell"), ("strict_accuracy",), n_boot=20)
    frame = wide_frame(values, ("agent", "interventions", "policy"), column="cell")
    assert list(frame.columns) == ["agent", "interventions", "policy", "BASE", "CRED-DIRECT"]
    text = TableView.from_frame("cells", frame).markdown()
    assert text.splitlines()[1] == "|---|---|---|---|---|"
    assert "100% n/a (1 cluster) (n=1)" in text
    assert TableView.from_frame("none", pd.DataFrame()).markdown() == "_no rows_\n"


# ------------------------------------------------------------------------------- end to end, local model
@pytest.mark.slow
@pytest.mark.usefixtures("embedded_model")
def test_local_model_end_to_end_agent_judge_report(tmp_path, capsys):
    config = tmp_path / "slice.yaml"
    config.write_text(
        "name: local-slice\n"
        "env: commitbench/Standing-v0\nagents: [chat]\n"
        "models:\n"
        "  - name: smollm2\n"
        "    local: true\n"
        "    settings: {max_tokens: 32, seed: 0}\n"
        "interventions: [none, 'oracle:B3+']\n"
        "episodes: {split: test, types: [deploy_service], gaps: [1], surfaces: [0], policies: [explicit],\n"
        f"           cells: [{', '.join(LOCAL_CELLS)}]}}\n"
        "max_model_calls_per_turn: 1\n"
        "concurrency: 1\n",  # one request at a time keeps llama.cpp's prompt cache warm
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    assert main(["run", str(config), "--out", str(run_dir), "--no-report", "--no-progress"]) == 0
    assert DEMO_NOTE not in capsys.readouterr().out  # no table, no note
    # Run again (every cell is done): the table comes, and one line before it says it is no measurement.
    assert main(["run", str(config), "--out", str(run_dir), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == DEMO_NOTE and "Standing report (labels by the offline baseline judge): 10 runs" in lines[1]
    traces = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(traces) == 2 * len(LOCAL_CELLS) and {t["factors"]["cell"] for t in traces} == set(LOCAL_CELLS)
    assert {tuple(t["interventions"]) for t in traces} == {(), ("oracle:B3+",)}

    # Judging every message of the slice would take minutes on two cores (a local judge call is a
    # second or more); three runs exercise the same path. The other runs stay unlabelled, which the
    # report must show as judge errors, never as "no".
    code = main(["label", str(run_dir), "--judge-model", "local", "--max-tokens", "160", "--max-attempts", "1",
                 "--concurrency", "1", "--limit", "3", "--json"])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert code == 0, summary
    assert summary["labeller"] == "llm:smollm2" and summary["runs_labelled"] == 3 and summary["runs_total"] == 10
    records = {r.run_key: r for r in read_label_records(labels_path(run_dir, "llm:smollm2"))}
    assert len(records) == 3
    messages = {t["run_key"]: [e for e in t["events"] if e["kind"] == "assistant" and e["act"] != "promise"]
                for t in traces}
    for key, record in records.items():
        assert len(record.labels) == len(messages[key])
        assert all(label.prompt_hash and (label.error or label.consults_creditor is not None)
                   for label in record.labels)
    unlabelled = sum(len(m) for key, m in messages.items() if key not in records)

    assert main(["report", str(run_dir), "--judge", "llm:smollm2", "--n-boot", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 10 and report["arms"] == ["none", "oracle:B3+"]
    assert report["judge_errors"] >= unlabelled
    assert {m["metric"] for m in report["metrics"]} >= {"override", "strict_accuracy"}
    assert (run_dir / "report" / "strict_by_cell.png").read_bytes().startswith(PNG_MAGIC)


def test_the_full_study_config_loads_and_expands():
    from commitbench.config import load_config
    from commitbench.planning import expand_cells, select_config_episodes

    config = load_config(Path(__file__).parents[1] / "configs" / "standing-full.yaml")
    episodes = select_config_episodes(config)
    assert len(episodes) == 1080
    arms = [arm.label() for arm in config.interventions]
    assert arms[0] == "none" and {"oracle:B3+", "ledger:self-kept", "policy:paraphrase-2"} <= set(arms)
    thinking = {m.name: m.settings.extra_body.get("chat_template_kwargs", {}).get("enable_thinking")
                for m in config.models}
    assert thinking["qwen3-8b"] is False and thinking["qwen3-8b-thinking"] is True
    cells = expand_cells(config, episodes)
    assert len(cells) == 1080 * len(arms) * len(config.models)
    assert len({c.run_key for c in cells}) == len(cells)


def test_rows_stream_the_trace_file_keep_the_last_good_trace_and_skip_a_torn_tail(tmp_path):
    from commitbench.traces import TraceFileError

    episode = SLICE[0]
    played = tmp_path / "played"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": [episode.id]})
    run_experiment(config, played)
    (good,) = latest_traces(played)
    good.run_key = "k1"
    failed = good.model_copy(update={"infra_error": "timeout", "run_key": "k1"})
    other_failed = good.model_copy(update={"infra_error": "timeout", "run_key": "k2"})
    retried = good.model_copy(update={"run_key": "k2", "sample": 0})
    run_dir = tmp_path / "run"
    append_traces(run_dir / "traces.jsonl", [good, failed, other_failed, retried])
    with (run_dir / "traces.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(good.model_dump_json()[:100])  # a crash in mid-write
    rows = load_rows(run_dir)
    assert list(rows["run_key"]) == ["k1", "k2"] and (rows["infra_error"] == "").all()
    lines = (run_dir / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    (run_dir / "traces.jsonl").write_text("\n".join([lines[0], "{oops", lines[1]]) + "\n", encoding="utf-8")
    with pytest.raises(TraceFileError, match=r"traces\.jsonl:2: not a valid trace"):
        load_rows(run_dir)


def test_a_piped_report_prints_progress_lines_while_it_reads(run_dir, capsys, monkeypatch):
    from commitbench import progress
    from commitbench.commands.report_cmd import print_report

    monkeypatch.setattr(progress, "READING_THRESHOLD", 1)  # this run is small: show its progress all the same
    assert progress.PROGRESS_INTERVAL_S <= 30  # a log shows a line at least every 30 s
    traces = len(latest_traces(run_dir, include_failed=True))
    assert print_report(run_dir, as_json=True, n_boot=20, figure=False, progress=progress.PROGRESS_LINES,
                        progress_interval_s=0.0) == 0  # the interval, shortened for the test
    captured = capsys.readouterr()
    assert json.loads(captured.out)["runs"] == traces
    lines = [line for line in captured.err.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 2  # some while reading, one at the end
    assert f"/{traces} traces read, " in lines[0] and " s elapsed" in lines[0]
    assert f" {traces}/{traces} traces read, " in lines[-1] and "left" not in lines[-1]
    assert print_report(run_dir, as_json=True, n_boot=20, figure=False, progress=False) == 0
    assert "progress: " not in capsys.readouterr().err  # asked for none


def test_a_small_report_prints_no_progress(run_dir, capsys):
    assert main(["report", str(run_dir), "--json", "--n-boot", "20", "--no-figure"]) == 0  # not a terminal: lines
    assert "progress: " not in capsys.readouterr().err  # under the threshold: over in a moment


def test_the_tables_made_on_another_core_are_those_made_here(run_dir, monkeypatch):
    """The policy and rank tables are computed in a forked process while the others are computed here: the report
    is the one made in one process, and a failure in this process's tables waits for the other's."""
    import functools

    from commitbench import aside as aside_module
    from commitbench.analysis.standing import report as report_module
    from commitbench.analysis.standing import tables as standing_tables

    rows = load_rows(run_dir)
    started: list[bool] = []

    def forking(work, fork=None):
        started.append(True)
        return aside_module.aside(work, fork=True)

    monkeypatch.setattr(report_module, "aside", forking)
    forked = report_module.build_standing_report(rows, run_dir, "rules", n_boot=100)
    monkeypatch.setattr(report_module, "aside", functools.partial(aside_module.aside, fork=False))
    here = report_module.build_standing_report(rows, run_dir, "rules", n_boot=100)
    assert started == [True] and forked.model_dump() == here.model_dump() and forked.policy_effect
    monkeypatch.setattr(report_module, "aside", forking)
    monkeypatch.setattr(standing_tables, "gap_table", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("gap")))
    with pytest.raises(RuntimeError, match="gap"):
        report_module.build_standing_report(rows, run_dir, "rules", n_boot=100)
    assert multiprocessing.active_children() == []  # the other core's work was waited for
