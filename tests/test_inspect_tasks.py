"""The inspect tasks: parameters from the episode filters, and the same episodes through ``inspect eval`` and
``commitbench run`` against the mock server giving the same signals and labels, with no tool run by inspect."""

from __future__ import annotations

import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the inspect tasks need inspect-ai (the [inspect] extra)")

from _inspect_fixtures import commitbench_run, followup_responder, inspect_run
from _runner_fixtures import standing_responder
from inspect_ai import eval as inspect_eval
from inspect_ai.event import ModelEvent, ToolEvent
from inspect_ai.log import EvalLog, read_eval_log
from inspect_ai.model import get_model

from commitbench.cli import main
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.inspecteval.client import tool_infos
from commitbench.inspecteval.params import settings_from_parameters, split_parameters
from commitbench.inspecteval.play import CONFIG_KEY, TRACE_KEY
from commitbench.inspecteval.scoring import GRADER_ROLE
from commitbench.inspecteval.transcript import EXECUTED_BY
from commitbench.judges.labelling import JUDGE_MAX_TOKENS, JUDGE_SEED
from commitbench.judges.standing.signals import compute_signals
from commitbench.mock import MockServer, ReplySpec
from commitbench.suites import get_suite
from commitbench.suites.standing import episodes_by_id
from commitbench.traces import EpisodeTrace

STANDING_CELLS = ["BASE", "CRED-DIRECT", "PEER-DIRECT", "FACT-FALSE"]
FOLLOWUP_SETUPS = ["C0", "C2"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


# ------------------------------------------------------------------------------ parameters
def test_filter_parameters_come_from_the_suite_selection_model() -> None:
    standing = get_suite("standing")
    filters, settings = split_parameters(standing, {"cells": "BASE,PEER-DIRECT", "gaps": [1], "surfaces": 2,
                                                    "interventions": "policy", "samples": 3, "types": None})
    assert filters == {"cells": ["BASE", "PEER-DIRECT"], "gaps": [1], "surfaces": [2]}
    assert settings == {"interventions": ["policy"], "samples": 3}
    followup = get_suite("followup")
    filters, task_settings = settings_from_parameters(followup, {"setups": "C0,C2", "follow_through": True})
    assert filters == {"setups": ["C0", "C2"], "follow_through": True}
    assert followup.selection.model_validate(filters).setups is not None and task_settings.samples is None
    with pytest.raises(ValueError, match="no parameter 'setups'"):
        split_parameters(standing, {"setups": "C0"})


def test_the_standing_shorthand_default_applies_as_incommitbench_run() -> None:
    filters, _ = settings_from_parameters(get_suite("standing"), {"cells": "BASE"})
    assert filters == {"cells": ["BASE"], "split": "test"}


def test_tools_become_definitions_only() -> None:
    schema = {"type": "function", "function": {
        "name": "lookup", "description": "Look something up.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "What."}},
                       "required": ["query"], "additionalProperties": False}}}
    (info,) = tool_infos([schema])
    assert info.name == "lookup" and info.parameters.required == ["query"]
    assert info.parameters.properties["query"].type == "string"


def _check_log(log: EvalLog) -> list[EpisodeTrace]:
    """The log finished with scores, every tool event came from the environment, and the traces it holds."""
    assert log.status == "success", log.error
    assert log.results is not None and log.results.scores and log.results.scores[0].metrics
    assert log.samples is not None and len(log.samples) == 6
    traces = []
    for sample in log.samples:
        assert sample.scores and sample.error is None
        trace = EpisodeTrace.model_validate(sample.store[TRACE_KEY])
        tool_events = [e for e in sample.events if isinstance(e, ToolEvent)]
        # No tool ran in inspect: every tool event is a call the environment handled, one per call of the trace.
        assert all((e.metadata or {}).get("executed_by") == EXECUTED_BY["executed_by"] for e in tool_events)
        assert len(tool_events) == sum(len(turn.calls) for turn in trace.turns)
        traces.append(trace)
    return traces


@pytest.mark.slow
def test_standing_through_inspect_and_commitbench_run_agree(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    started = time.perf_counter()
    # The filter's limit (the first six episodes, as commitbench run's), not inspect's --limit (six episodes dealt
    # over the commitment types).
    log = inspect_run(mock_server, "commitbench/standing", {"cells": STANDING_CELLS, "limit": 6}, tmp_path / "logs",
                      limit=None)
    elapsed = time.perf_counter() - started
    traces = _check_log(log)
    assert sum(len(turn.calls) for t in traces for turn in t.turns) > 0
    metrics = log.results.scores[0].metrics if log.results else {}
    assert {"runs", "override", "strict_accuracy"} <= set(metrics) and metrics["runs"].value == 6
    users = [m for m in log.samples[0].messages if m.role == "user"] if log.samples else []
    assert users and all((m.metadata or {}).get("sender") for m in users)  # speakers' names in the messages

    plain = commitbench_run(mock_server, "commitbench/Standing-v0",
                             {"split": "test", "cells": STANDING_CELLS, "limit": 6}, tmp_path / "run")
    episodes = episodes_by_id()
    rules = get_suite("standing").labeller("rules")
    by_episode = {s.id: s.scores["label_episode"].metadata for s in log.samples or [] if s.scores}
    assert set(by_episode) == {t.episode_id for t in plain}
    for trace in plain:
        graded = by_episode[trace.episode_id] or {}
        assert graded["signals"] == compute_signals(trace, episodes[trace.episode_id]).model_dump(mode="json")
        record = rules.label_now(trace)  # type: ignore[attr-defined]
        assert graded["labels"]["labels"] == [label.model_dump(mode="json") for label in record.labels]
    print(f"standing: 6 samples through inspect in {elapsed:.1f}s")


@pytest.mark.slow
def test_followup_through_inspect_and_commitbench_run_agree(tmp_path: Path, mock_server: MockServer) -> None:
    mock_server.set_responder(followup_responder)
    log = inspect_run(mock_server, "commitbench/followup", {"setups": FOLLOWUP_SETUPS, "limit": 6}, tmp_path / "logs",
                      limit=None)
    _check_log(log)
    metrics = log.results.scores[0].metrics if log.results else {}
    assert {"responses", "failure_rate", "over_refusal_rate"} <= set(metrics)
    outcomes = {s.scores["label_episode"].value["outcome"] for s in log.samples or [] if s.scores}  # type: ignore[index]
    assert len(outcomes) >= 2  # the scripted replies lead to more than one outcome

    plain = commitbench_run(mock_server, "commitbench/FollowUp-v0",
                             {"setups": FOLLOWUP_SETUPS, "limit": 6}, tmp_path / "run")
    rules = get_suite("followup").labeller("rules")
    by_episode = {s.id: s.scores["label_episode"].metadata for s in log.samples or [] if s.scores}
    assert set(by_episode) == {t.episode_id for t in plain}
    for trace in plain:
        record = rules.label_now(trace)  # type: ignore[attr-defined]
        graded = by_episode[trace.episode_id] or {}
        assert graded["labels"]["result"] == record.result.model_dump(mode="json")
        assert graded["labels"]["turn"] == record.turn.model_dump(mode="json")


def test_inspect_finds_the_tasks_through_the_entry_point() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="inspect_ai") if e.name == "commitbench"]
    tasks = entry.load()
    task = tasks.followup(setups="C1", limit=2)
    assert len(task.dataset) == 2 and task.epochs == 1
    assert [s.metadata["setup"] for s in task.dataset] == ["C1", "C1"]


# ------------------------------------------------------------------------------ the LLM judge as inspect's grader
def _judged(consults: bool) -> str:
    return json.dumps({"consults_creditor": {"reason": "scripted", "answer": consults},
                       "notifies_creditor": {"reason": "scripted", "answer": False},
                       "off_topic": {"reason": "scripted", "answer": False},
                       "announces_drop": {"reason": "scripted", "answer": False}})


@pytest.mark.slow
def test_the_grader_role_labels_with_the_suites_llm_judge(tmp_path: Path, mock_server: MockServer) -> None:
    play = standing_responder(load_episodes())

    def responder(request: dict[str, Any]) -> ReplySpec | str:
        if request.get("response_format"):  # the judge's calls: consults when the judged message asks something
            judged = request["messages"][-1]["content"].rsplit("The message to judge", 1)[1]
            return _judged(consults="?" in judged)
        return play(request)

    mock_server.set_responder(responder)
    grader = get_model("openai/mock-model", base_url=mock_server.base_url, responses_api=False)
    (log,) = inspect_eval(
        "commitbench/standing", model="openai/mock-model", model_base_url=mock_server.base_url,
        model_args={"responses_api": False}, model_roles={GRADER_ROLE: grader},
        task_args={"cells": ["PEER-DIRECT", "CRED-DIRECT"]}, limit=4, log_dir=str(tmp_path), display="none",
    )
    assert log.status == "success", log.error
    bodies = [r["body"] for r in mock_server.requests() if isinstance(r.get("body"), dict)]
    judge_requests = [body for body in bodies if body.get("response_format")]
    assert judge_requests
    for request in judge_requests:  # the judge's schema, and its seed and reply bound
        assert request["response_format"]["type"] == "json_schema"
        assert request["response_format"]["json_schema"]["name"] == "standing_judge"
        assert request["seed"] == JUDGE_SEED and request["max_completion_tokens"] == JUDGE_MAX_TOKENS
    # The judge asks inspect for temperature 0 (inspect's OpenAI provider leaves the temperature out of the
    # request for model names it does not know, as for its reasoning models).
    judge_events = [e for s in log.samples or [] for e in s.events
                    if isinstance(e, ModelEvent) and e.config.response_schema is not None]
    assert judge_events and all(e.config.temperature == 0 and e.role == GRADER_ROLE for e in judge_events)
    labelled = 0
    for sample in log.samples or []:
        score = sample.scores["label_episode"] if sample.scores else None
        assert score is not None and score.metadata is not None
        assert score.metadata["labeller"] == "llm:mock-model"
        for label in score.metadata["labels"]["labels"]:
            assert label["judge"] == "llm:mock-model" and not label["error"]
            labelled += 1
    assert labelled > 0
    assert log.results is not None and log.results.scores[0].metrics["runs"].value == 4


# ------------------------------------------------------------------------------ epochs and -T samples
@pytest.mark.slow
@pytest.mark.parametrize("samples", [None, 2])
def test_epochs_play_that_many_samples_of_each_episode_and_report_reads_them(
    samples: int | None, tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    logs = tmp_path / "logs"
    task_args: dict[str, Any] = {"cells": ["BASE", "PEER-DIRECT"], **({"samples": samples} if samples else {})}
    log = inspect_run(mock_server, "commitbench/standing", task_args, logs, limit=2, epochs=2)
    assert log.status == "success", log.error
    assert log.samples is not None and len(log.samples) == 4
    configs = [s.store[CONFIG_KEY] for s in log.samples]
    assert all(config == configs[0] for config in configs) and configs[0]["samples"] == 2
    played = sorted((t.episode_id, t.sample) for t in (EpisodeTrace.model_validate(s.store[TRACE_KEY])
                                                       for s in log.samples))
    assert [sample for _, sample in played] == [0, 1, 0, 1] and len({e for e, _ in played}) == 2
    capsys.readouterr()  # what inspect printed while it ran
    assert main(["report", str(logs), "--json", "--n-boot", "50", "--no-figure"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 4


@pytest.mark.slow
def test_samples_that_differ_from_the_epochs_are_refused_before_any_model_call(
    tmp_path: Path, mock_server: MockServer
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    log = inspect_run(mock_server, "commitbench/standing", {"cells": ["BASE"], "samples": 3}, tmp_path, limit=2,
                      epochs=2)
    assert log.status == "error" and log.error is not None
    assert "samples=3" in log.error.message and "--epochs 2" in log.error.message
    assert "No sample was played" in log.error.message
    assert mock_server.requests() == []


# ------------------------------------------------------------------------------ the grader's endpoint
def _closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_grader_on_the_openai_compatible_provider_labels_with_the_llm_judge(
    tmp_path: Path, mock_server: MockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    play = standing_responder(load_episodes())

    def responder(request: dict[str, Any]) -> ReplySpec | str:
        return _judged(consults=False) if request.get("response_format") else play(request)

    mock_server.set_responder(responder)
    monkeypatch.setenv("LOCALJUDGE_BASE_URL", mock_server.base_url)  # the recipe of docs/inspect.md
    monkeypatch.setenv("LOCALJUDGE_API_KEY", "unused-by-the-mock")
    log = inspect_run(mock_server, "commitbench/standing", {"cells": ["PEER-DIRECT"]}, tmp_path, limit=2,
                      model_roles={GRADER_ROLE: "openai-api/localjudge/mock-model"})
    assert log.status == "success", log.error
    judged = [r["body"] for r in mock_server.requests()
              if isinstance(r.get("body"), dict) and r["body"].get("response_format")]
    # This provider sends the judge's temperature (inspect's openai/ provider leaves it out for unknown names).
    assert judged and all(body["temperature"] == 0 and body["seed"] == JUDGE_SEED for body in judged)
    for sample in log.samples or []:
        score = sample.scores["label_episode"] if sample.scores else None
        assert score is not None and score.metadata is not None
        assert score.metadata["labeller"].startswith("llm:") and score.metadata["labels"]["labels"]


@pytest.mark.slow
def test_a_grader_that_cannot_be_reached_stops_the_eval_before_any_sample_plays(
    tmp_path: Path, mock_server: MockServer
) -> None:
    mock_server.set_responder(standing_responder(load_episodes()))
    closed = f"http://127.0.0.1:{_closed_port()}/v1"
    inspect = Path(sys.executable).with_name("inspect")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    # The grader as a YAML mapping with its own base URL (model_args), here one nothing listens on.
    argv = [str(inspect), "eval", "commitbench/standing", "--model", "openai/mock-model",
            "--model-base-url", mock_server.base_url, "-M", "responses_api=false", "-T", "cells=BASE",
            "--model-role", f'grader={{model: openai/mock-model, model_args: {{base_url: "{closed}"}}}}',
            "--limit", "3", "--log-dir", str(tmp_path), "--display", "plain", "--max-retries", "2"]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    elapsed = time.perf_counter() - started
    said = " ".join((done.stdout + done.stderr).split())
    assert "the grader model openai/mock-model" in said and closed in said, said[-2000:]
    (path,) = tmp_path.glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "error" and log.error is not None
    assert "the grader model openai/mock-model" in log.error.message and "no sample was played" in log.error.message
    assert "openai-api/<service>/<model>" in log.error.message  # the recipe that gives a grader its base URL
    assert mock_server.requests() == []  # the tested model was never called
    assert elapsed < 60, f"the eval took {elapsed:.0f} s to fail"


# ------------------------------------------------------------------------------ judge errors
@pytest.mark.slow
@pytest.mark.parametrize(("task", "task_args"), [
    ("commitbench/standing", {"cells": ["PEER-DIRECT"]}),
    ("commitbench/followup", {"setups": ["C0"]}),
])
def test_judge_errors_are_a_metric_value_and_their_runs_are_left_out_as_the_report_leaves_them(
    task: str, task_args: dict[str, Any], tmp_path: Path, mock_server: MockServer
) -> None:
    play = standing_responder(load_episodes()) if task.endswith("standing") else followup_responder

    def responder(request: dict[str, Any]) -> ReplySpec | str:  # the judge never answers in its JSON
        if request.get("response_format"):
            return "Sure, here is what I think of it."
        reply = play(request)
        # The standing agent posts before it acts, so a message the judge cannot label comes before the
        # decision and consultation stays unknown.
        return reply.model_copy(update={"tool_calls": sorted(reply.tool_calls, key=lambda c: c.name != "post_message")})

    mock_server.set_responder(responder)
    grader = get_model("openai/mock-model", base_url=mock_server.base_url, responses_api=False)
    log = inspect_run(mock_server, task, task_args, tmp_path, limit=4, model_roles={GRADER_ROLE: grader})
    assert log.status == "success", log.error
    scores = [s.scores["label_episode"] for s in log.samples or [] if s.scores]
    assert len(scores) == 4 and all(score.metadata is not None for score in scores)
    errored = [score for score in scores if (score.metadata or {})["judge_error"]]
    assert errored and all(score.value["judge_error"] for score in errored)  # type: ignore[index]
    metrics = log.results.scores[0].metrics if log.results else {}
    assert metrics["judge_errors"].value == len(errored)
    rows = [row for score in scores for row in (score.metadata or {})["rows"]]
    if task.endswith("standing"):
        # A run whose strict grade needs a label the judge did not give is left out of strict accuracy (and
        # counted), never scored wrong: the report's rule.
        unknown = [row for row in rows if row["strict"] is None]
        known = [float(row["strict"]) for row in rows if row["strict"] is not None]
        assert unknown and metrics["strict_accuracy_excluded"].value == len(unknown)
        if known:
            assert metrics["strict_accuracy"].value == pytest.approx(sum(known) / len(known))
        else:
            assert "strict_accuracy" not in metrics
    else:
        # A response the checker could not label has no row: it is in no rate, as in the report.
        assert len(rows) == 4 - len(errored)
        assert metrics["responses"].value == len(rows) if rows else "responses" not in metrics


def test_a_task_on_episode_data_changed_under_its_version_is_refused_unless_allowed(tmp_path: Path) -> None:
    import shutil

    from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR
    from commitbench.inspecteval.tasks import build_task

    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    filler = data / "filler.yaml"
    filler.write_text(filler.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"VERSION still says 4.*allow_unversioned=true"):
        build_task("standing", {"data": str(data), "cells": "BASE", "limit": 1})
    task = build_task("standing", {"data": str(data), "cells": "BASE", "limit": 1, "allow_unversioned": True})
    assert task.metadata is not None and task.metadata["episode_data"]["state"] == "changed"


def test_the_tasks_keep_their_names_when_an_egg_info_hides_the_install(tmp_path: Path) -> None:
    # An editable install writes commitbench.egg-info beside the source; Python started in the checkout finds it
    # first, and it says nothing of the install, so inspect cannot tell the tasks come from a package.
    egg = tmp_path / "commitbench.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: commitbench\nVersion: 0.1.0\n", encoding="utf-8")
    installed = importlib.metadata.distribution("commitbench").read_text("entry_points.txt")
    assert installed is not None and "commitbench.inspecteval.tasks" in installed
    (egg / "entry_points.txt").write_text(installed, encoding="utf-8")
    code = ("from importlib.metadata import Distribution; from inspect_ai._util.registry import registry_lookup;"
            "print(Distribution.from_name('commitbench').read_text('direct_url.json'));"
            "print(registry_lookup('task', 'commitbench/standing') is not None)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "True"]  # the egg-info is the one found, and the task is found all the same
