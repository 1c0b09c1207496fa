"""``commitbench report`` and ``view`` on an inspect log directory of the tasks: the run directory made of it
gives the report ``commitbench run`` gives on the same cells, and logs that are no finished run of the tasks
are refused with exit code 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the inspect tasks need inspect-ai (the [inspect] extra)")

from _inspect_fixtures import commitbench_run, followup_responder, inspect_run
from _runner_fixtures import standing_responder
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log

from commitbench.cli import main
from commitbench.dataversion import data_digest
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR
from commitbench.inspecteval.logs import SOURCE_FILE, convert_logs, default_run_dir, is_inspect_log
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus, read_manifest
from commitbench.suites import get_suite
from commitbench.traces import latest_traces

STANDING_CELLS = ["BASE", "CRED-DIRECT", "PEER-DIRECT", "FACT-FALSE"]
# What differs between two runs of the same cells besides the estimates: where they are, and the wall time.
NOT_ESTIMATES = ("run_dir", "files", "cost")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _report(target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    assert main(["report", str(target), "--json", "--n-boot", "200", "--no-figure"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _two_of_each_type() -> list[str]:
    """Episode ids of the test split: two of each commitment type, of the cells STANDING_CELLS."""
    suite = get_suite("standing")
    episodes = suite.select(suite.selection.model_validate({"split": "test", "cells": STANDING_CELLS}))
    by_type: dict[str, list[str]] = {}
    for episode in episodes:
        by_type.setdefault(str(episode.factors()["commitment_type"]), []).append(episode.id)
    assert len(by_type) >= 6
    return [episode_id for ids in by_type.values() for episode_id in ids[:2]]


def _estimates(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in NOT_ESTIMATES}


@pytest.mark.slow
def test_report_and_view_of_a_standing_log_dir_are_those_of_the_same_run(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    logs = tmp_path / "logs"
    ids = _two_of_each_type()
    inspect_run(mock_server, "commitbench/standing", {"ids": ids}, logs, limit=None)
    assert is_inspect_log(logs)
    from_logs, notice = _report(logs, capsys)
    run_dir = default_run_dir(logs)
    assert run_dir == tmp_path / "logs-commitbench" and f"the run directory {run_dir}" in notice
    assert from_logs["run_dir"] == str(run_dir) and (run_dir / "results.json").is_file()

    plain = tmp_path / "run"
    commitbench_run(mock_server, "commitbench/Standing-v0", {"split": "test", "ids": ids}, plain, name="mock-model")
    from_run, _ = _report(plain, capsys)
    assert from_logs["runs"] == from_run["runs"] == len(ids)
    # Six commitment types: the report gives its intervals clustered by type.
    assert any(m["estimate"] is not None and m["low"] is not None for m in from_logs["metrics"])
    assert _estimates(from_logs) == _estimates(from_run)
    # The same episodes and samples (the run keys differ: inspect's generation settings are no config's).
    cells = {(t.episode_id, t.sample) for t in latest_traces(run_dir)}
    assert cells == {(t.episode_id, t.sample) for t in latest_traces(plain)} and len(cells) == len(ids)

    manifest = read_manifest(run_dir)
    assert manifest is not None and manifest.suite == "standing" and manifest.status is RunStatus.COMPLETE
    assert manifest.cells_done == manifest.cells_total == len(ids)
    assert manifest.invocations[0].argv[:3] == ["inspect", "eval", "commitbench/standing"]

    assert main(["view", str(logs), "--n-boot", "50"]) == 0
    out = capsys.readouterr()
    assert "already written, unchanged" in out.err and f"wrote {len(ids)} runs" in out.out
    assert (run_dir / "view" / "index.html").is_file() and (run_dir / "view" / "data" / "meta.js").is_file()

    from commitbench.progress import PROGRESS_LINES, reading_progress

    with reading_progress(PROGRESS_LINES, interval_s=0.0, threshold=1):  # as a piped report shows it, every sample
        convert_logs(logs, tmp_path / "again")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress: ")]
    assert lines and lines[-1].startswith(f"progress: converting inspect logs of logs: {len(ids)}/{len(ids)} ")


@pytest.mark.slow
def test_report_of_a_followup_log_dir_is_that_of_the_same_run(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(followup_responder)
    logs = tmp_path / "logs"
    inspect_run(mock_server, "commitbench/followup", {"setups": ["C0", "C2"], "limit": 6}, logs, limit=None)
    from_logs, _ = _report(logs, capsys)
    plain = tmp_path / "run"
    commitbench_run(mock_server, "commitbench/FollowUp-v0", {"setups": ["C0", "C2"], "limit": 6}, plain,
                    name="mock-model")
    from_run, _ = _report(plain, capsys)
    assert _estimates(from_logs) == _estimates(from_run)


@pytest.fixture(scope="module")
def standing_log(tmp_path_factory: pytest.TempPathFactory, _mock_server_process_wide: MockServer) -> Path:
    """One finished log of commitbench/standing (three samples)."""
    server = _mock_server_process_wide
    server.reset()
    server.set_responder(standing_responder(load_episodes()))
    logs = tmp_path_factory.mktemp("one") / "logs"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
        patch.setenv("HF_HUB_OFFLINE", "1")
        log = inspect_run(server, "commitbench/standing", {"cells": ["BASE"]}, logs)
    server.reset()
    assert log.status == "success"
    (path,) = logs.glob("*.eval")
    return path


def _altered(source: Path, into: Path, change: Any) -> Path:
    """A copy of a log, changed by ``change(log)`` and written by inspect's own writer."""
    log = read_eval_log(str(source))
    change(log)
    into.mkdir(parents=True)
    target = into / source.name
    write_eval_log(log, str(target))
    return target


def _refused(target: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(target), "--json", "--n-boot", "50"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def _failed(log: Any) -> None:
    log.status = "error"


def _started(log: Any) -> None:
    log.status = "started"


def _partial(log: Any) -> None:
    log.samples = log.samples[:2]


@pytest.mark.slow
@pytest.mark.parametrize(("change", "says"), [
    (_failed, "the eval ended 'error'"),
    (_started, "the eval ended 'started'"),
    (_partial, "holds 2 of its 6 samples; a partial log is no run"),
])
def test_an_unfinished_log_is_refused(standing_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      change: Any, says: str) -> None:
    logs = tmp_path / "logs"
    _altered(standing_log, logs, change)
    assert says in _refused(logs, capsys)
    assert not default_run_dir(logs).exists()


@pytest.mark.slow
def test_a_log_of_another_task_is_refused(standing_log: Path, tmp_path: Path, mock_server: MockServer,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    other = Task(dataset=[Sample(input="Say hello.", target="hello")], name="greeting")
    (log,) = inspect_eval(other, model="openai/mock-model", model_base_url=mock_server.base_url,
                          model_args={"responses_api": False}, log_dir=str(logs), display="none")
    assert log.status == "success"
    err = _refused(logs, capsys)
    assert "is a log of the task 'greeting'" in err and "commitbench/standing" in err
    shutil.copy(standing_log, logs)  # one log of ours beside it does not make the directory a run
    assert "is a log of the task 'greeting'" in _refused(logs, capsys)


@pytest.mark.slow
def test_the_run_directory_is_rewritten_when_the_logs_change_and_never_over_something_else(
    standing_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(standing_log, logs)
    first = convert_logs(logs)
    assert first.rewritten and first.samples == 6 and first.cells_done == 6
    assert not convert_logs(logs).rewritten
    again = _altered(standing_log, tmp_path / "again", lambda log: None)
    shutil.copy(again, logs)  # the same log, written again by inspect: the file changed
    assert convert_logs(logs).rewritten
    assert len(latest_traces(default_run_dir(logs))) == 6

    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    shutil.copy(standing_log, elsewhere)
    taken = default_run_dir(elsewhere)
    taken.mkdir()
    (taken / "notes.txt").write_text("my own notes\n")
    assert "was not written from inspect logs" in _refused(elsewhere, capsys)
    assert (taken / "notes.txt").read_text() == "my own notes\n" and not (taken / SOURCE_FILE).exists()


@pytest.mark.slow
def test_the_inspect_command_line_writes_a_log_that_report_reads(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    logs = tmp_path / "logs"
    inspect = Path(sys.executable).with_name("inspect")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "unused-by-the-mock", "NO_COLOR": "1"}
    argv = [str(inspect), "eval", "commitbench/standing", "--model", "openai/mock-model",
            "--model-base-url", mock_server.base_url, "-M", "responses_api=false", "-T", "cells=BASE,PEER-DIRECT",
            "--limit", "2", "--epochs", "2", "--log-dir", str(logs), "--display", "plain", "--max-retries", "2"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = logs.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success" and log.eval.task_registry_name == "commitbench/standing"
    # --epochs 2 alone: two samples of each of the two episodes
    assert log.samples is not None and len(log.samples) == 4 and all(s.scores for s in log.samples)
    assert log.results is not None and log.results.scores[0].metrics["runs"].value == 4
    document, _ = _report(logs, capsys)
    assert document["runs"] == 4 and document["suite"] == "standing"
    # The episode data as the task found it (locked as its version) is in the log and the converted manifest.
    manifest = read_manifest(logs.parent / f"{logs.name}-commitbench")
    assert manifest is not None and manifest.episode_data_state == "locked"
    assert manifest.episode_data_digest == data_digest(DEFAULT_DATA_DIR)


@pytest.mark.slow
def test_export_of_a_log_dir_gives_the_rows_of_the_run_directory_made_of_it(
    standing_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="commitbench export needs the [export] extra")
    from commitbench.suites.export import DATA_FILE

    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(standing_log, logs)
    assert main(["export", str(logs), "--out", str(tmp_path / "from-logs")]) == 0
    run_dir = default_run_dir(logs)
    assert f"the run directory {run_dir}" in capsys.readouterr().err
    assert main(["export", str(run_dir), "--out", str(tmp_path / "from-run")]) == 0
    from_logs = pq.read_table(tmp_path / "from-logs" / DATA_FILE).to_pylist()
    from_run = pq.read_table(tmp_path / "from-run" / DATA_FILE).to_pylist()
    assert len(from_logs) == 6 and from_logs == from_run
    assert {row["episode_id"] for row in from_logs} == {t.episode_id for t in latest_traces(run_dir)}


@pytest.mark.slow
def test_inspects_limit_takes_samples_of_as_many_commitment_types_as_it_can(
    standing_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = read_eval_log(str(standing_log))  # --limit 6 of the BASE cell
    types = [str((sample.metadata or {})["commitment_type"]) for sample in log.samples or []]
    assert len(types) == 6 and len(set(types)) == 6
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(standing_log, logs)
    document, _ = _report(logs, capsys)
    strict = next(m for m in document["metrics"] if m["metric"] == "strict_accuracy")
    assert strict["clusters"] == 6 and strict["low"] is not None and strict["high"] is not None


@pytest.mark.slow
def test_a_report_says_why_it_gives_no_interval_over_too_few_commitment_types(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    logs = tmp_path / "logs"
    inspect_run(mock_server, "commitbench/standing", {"types": ["deploy_service"], "cells": ["BASE"]}, logs, limit=3)
    capsys.readouterr()
    assert main(["report", str(logs), "--n-boot", "50", "--no-figure"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "n/a (1 cluster)" in out
    assert "no 95% interval, since the runs behind the number cover fewer than 6 commitment types" in out
