"""Follow-up runs end to end through the one runner: play, label with the LLM checker, metrics by hand, resume."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import pytest
import yaml
from followup_fixtures import REQUESTS

from commitbench.analysis.followup.metrics import rate_table, to_frame
from commitbench.analysis.followup.report import responses_from_records
from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.judges.followup.labellers import FollowupLabelRecord
from commitbench.judges.followup.llm import load_prompt
from commitbench.judges.followup.outcomes import PAPER_LABELS, OutcomeLabel
from commitbench.judges.followup.schemas import ResponseJudgeOutput
from commitbench.judges.labelling import labels_path, read_label_records
from commitbench.labeljob import label_directory
from commitbench.mock import MockServer, MockServerProcess, ReplySpec, ToolCallSpec
from commitbench.oracles import registry
from commitbench.oracles.base import Intervention, InterventionEntry
from commitbench.planning import expand_cells, select_config_episodes
from commitbench.rundir import MANIFEST_FILE, RunDirectoryBusyError, RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.traces import TRACES_FILE, latest_traces

ROOT = Path(__file__).resolve().parent.parent
FAST_RETRY = {"max_attempts": 5, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}
JUDGE = "llm:mock-model"


def promise(span: str, performer: str = "self", trigger: str = "time", caps: list[str] | None = None) -> dict:
    return {"span": span, "action": span, "performer": performer, "trigger_type": trigger, "time_expression": None,
            "required_capabilities": caps or [], "is_offer": False, "confidence": 0.9}


# (request id, setup has tools) -> (agent replies, detector commitments, response-judge flags, expected label)
SCRIPT: dict[tuple[str, bool], tuple[list[ReplySpec], list[dict], dict[str, bool], OutcomeLabel]] = {
    ("rem-001", False): ([ReplySpec(text="I'll remind you tomorrow at 9.")],
                         [promise("I'll remind you tomorrow at 9", caps=["notify_user_later"])], {},
                         OutcomeLabel.EMPTY),
    ("rem-001", True): ([ReplySpec(text="Sure, I'll remind you at 9 tomorrow.")],
                        [promise("I'll remind you at 9 tomorrow", caps=["notify_user_later"])], {},
                        OutcomeLabel.UNANCHORED),
    ("mon-001", False): ([ReplySpec(text="I can't watch it; check the tracking page yourself.")], [],
                         {"declines_request": True, "hands_back_to_user": True}, OutcomeLabel.DEFERRAL),
    ("mon-001", True): ([ReplySpec(text="Sorry, I can't do that.")], [], {"declines_request": True},
                        OutcomeLabel.OVER_REFUSAL),
    ("cb-001", False): ([ReplySpec(text="Someone from billing will call you back.")],
                        [promise("Someone from billing will call you back", performer="third_party",
                                 trigger="unspecified_future")], {}, OutcomeLabel.EMPTY),
    ("cb-001", True): ([ReplySpec(text="Could you tell me your account number?")], [],
                       {"asks_clarification": True}, OutcomeLabel.OTHER),
    ("del-001", False): ([ReplySpec(text="Here is the packing list: clothes, chargers, documents.")], [],
                         {"did_task_now": True}, OutcomeLabel.DONE_NOW),
    ("del-001", True): ([ReplySpec(tool_calls=[ToolCallSpec(name="create_reminder", arguments={
                            "remind_at": "2026-10-02T08:00", "message": "Packing list"})]),
                         ReplySpec(text="I'll send you the list on Friday morning.")],
                        [promise("I'll send you the list on Friday morning", caps=["notify_user_later"])], {},
                        OutcomeLabel.ANCHORED),
    ("mem-001", False): ([ReplySpec(text="Saved! Your flat number is stored.")], [],
                         {"false_action_claim": True}, OutcomeLabel.FALSE_CLAIM),
    ("mem-001", True): ([ReplySpec(text="Which flat number did you mean?")], [], {"asks_clarification": True},
                        OutcomeLabel.OTHER),
}
BY_TEXT = {replies[-1].text: (commitments, flags) for replies, commitments, flags, _ in SCRIPT.values()}


def responder(request: dict[str, Any]) -> ReplySpec | str:
    messages = request["messages"]
    system = messages[0]["content"]
    if system in (load_prompt("followup_detector"), load_prompt("followup_response")):
        reply_text = messages[1]["content"].split("[final reply] ", 1)[1].strip()
        commitments, flags = BY_TEXT[reply_text]
        if system == load_prompt("followup_detector"):
            return json.dumps({"commitments": commitments})
        return ResponseJudgeOutput.from_flags(rationale="scripted", **flags).model_dump_json()
    user = next(m["content"] for m in messages if m["role"] == "user")
    request_id = next(r.id for r in REQUESTS if r.user_message == user)
    replies = SCRIPT[(request_id, bool(request.get("tools")))][0]
    step = sum(1 for m in messages if m["role"] == "assistant")
    return replies[step]


def write_requests(path: Path) -> Path:
    path.write_text("".join(r.model_dump_json() + "\n" for r in REQUESTS), encoding="utf-8")
    return path


def model(base_url: str) -> dict[str, Any]:
    return {"name": "mock", "base_url": base_url, "api_key_env": None,
            "settings": {"model": "mock-model", "timeout": 10.0}, "retry": FAST_RETRY}


def followup_config(base_url: str, tmp_path: Path, **fields: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "name": "followup-mock",
        "env": FOLLOWUP_ENV_ID,
        "agents": ["chat"],
        "models": [model(base_url)],
        "episodes": {"setups": ["C0", "C2"], "variants": ["inferred"], "personas": ["generic"],
                     "request_file": str(write_requests(tmp_path / "requests.jsonl"))},
        # The scripted mock plays the tested model and the judge, on purpose.
        "judge": {"kind": "llm", "model": model(base_url), "allow_tested_model": True},
        "concurrency": 3,
        "cache": {"path": str(tmp_path / "cache.sqlite")},
    }
    data.update(fields)
    return ExperimentConfig.model_validate(data)


def play_and_label(config: ExperimentConfig, out: Path) -> tuple[list[Any], list[FollowupLabelRecord]]:
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    label_directory(out, config.judge, cache_path=config.cache.path)
    labels = read_label_records(labels_path(out, JUDGE), FollowupLabelRecord)
    return latest_traces(out), labels


def test_every_label_and_every_metric_by_hand(mock_server: MockServer, tmp_path: Path) -> None:
    mock_server.set_responder(responder)
    traces, labels = play_and_label(followup_config(mock_server.base_url, tmp_path), tmp_path / "run")
    assert len(traces) == 10 and not any(t.infra_error for t in traces)
    got = {(r.turn.request_id, r.turn.setup.value == "C2"): r.result.outcome for r in labels}
    assert got == {key: value[3] for key, value in SCRIPT.items()}
    assert {label for label in got.values()} == set(PAPER_LABELS)  # a single-turn run: the original eight
    rows, errors = responses_from_records(labels)
    assert errors == 0
    frame = to_frame(rows)

    def rate(metric: str) -> dict[str, tuple[float, float, float]]:
        table = rate_table(frame, metric, by=["setup"], intervals=False)
        return {r.setup: (r.numerator, r.denominator, r.estimate) for r in table.itertuples()}

    # C0: nothing doable; empty x2 + false_claim; deferral among the 5 not-doable responses.
    # C2: rem, mon, del doable (3); cb, mem not doable (2).
    assert rate("failure_rate") == {"C0": (3, 5, 0.6), "C2": (1, 5, 0.2)}
    deferral = rate("deferral_rate")
    assert deferral == {"C0": (1, 5, 0.2), "C2": (0, 2, 0.0)}
    over = rate("over_refusal_rate")
    assert over["C2"] == (1, 3, pytest.approx(1 / 3))
    assert over["C0"][:2] == (0, 0) and math.isnan(over["C0"][2])
    assert rate("false_claim_rate") == {"C0": (1, 5, 0.2), "C2": (0, 5, 0.0)}
    assert rate("ecr") == {"C0": (2, 2, 1.0), "C2": (0, 2, 0.0)}
    assert rate("ecr_temporal")["C0"] == (1, 2, 0.5) and rate("ecr_agentive")["C0"] == (1, 2, 0.5)
    assert rate("unanchored_rate") == {"C0": (0, 0, pytest.approx(float("nan"), nan_ok=True)),
                                       "C2": (1, 2, 0.5)}
    assert rate("incidence") == {"C0": (2, 5, 0.4), "C2": (2, 5, 0.4)}


def test_resume_plays_and_labels_nothing_twice(mock_server: MockServer, tmp_path: Path) -> None:
    mock_server.set_responder(responder)
    config = followup_config(mock_server.base_url, tmp_path)
    out = tmp_path / "run"
    play_and_label(config, out)
    before = mock_server.stats().chat_completions
    lines = (out / TRACES_FILE).read_text().splitlines()
    with (out / TRACES_FILE).open("a") as handle:
        handle.write('{"torn')  # a crash in mid-write
    traces, labels = play_and_label(config, out)
    assert len(traces) == 10 and len(labels) == 10
    assert (out / TRACES_FILE).read_text().splitlines() == lines
    assert mock_server.stats().chat_completions == before  # every cell and every label was already there


def test_report_and_label_commands_take_the_suite_from_the_manifest(
    mock_server: MockServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(responder)
    out = tmp_path / "run"
    play_and_label(followup_config(mock_server.base_url, tmp_path), out)
    assert read_manifest(out).suite == "followup"
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "50"]) == 0
    printed = capsys.readouterr().out
    assert "failure" in printed and "over-refusal" in printed and "judge errors (left out): 0" in printed
    assert (out / "report" / "outcomes.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["report", str(out), "--judge", JUDGE, "--n-boot", "50", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["suite"] == "followup" and document["responses"] == 10 and document["checker_kind"] == "LLM checker"
    assert main(["label", str(out), "--judge", "rules"]) == 0
    capsys.readouterr()
    assert len(read_label_records(labels_path(out, "rules"), FollowupLabelRecord)) == 10
    # Without --judge the report reads the configured judge's labels, never silently the offline ones.
    assert main(["report", str(out), "--n-boot", "20", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["judge"] == JUDGE and default["checker_kind"] == "LLM checker"
    assert main(["report", str(out), "--judge", "rules", "--n-boot", "20", "--json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    assert offline["judge"] == "rules" and offline["checker_kind"] == "offline baseline checker"
    assert offline["title"] == "Follow-up report (labels by the offline baseline checker)"
    assert main(["report", str(tmp_path / "missing")]) == 2


class Crashing(Intervention):
    """A test intervention whose environment raises in one episode: a harness bug in one cell."""

    kind = "crash"
    slot = "crash"
    env_ids: ClassVar[frozenset[str]] = frozenset({FOLLOWUP_ENV_ID})
    target = "mem-001:C0:inferred:generic"

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.broken = False

    def begin(self, info: dict[str, Any]) -> None:
        self.broken = info["episode_id"] == self.target

    def act(self, action: Any) -> Any:
        if self.broken:
            raise RuntimeError("the environment broke")
        return action


def test_a_cell_whose_environment_raises_fails_alone_and_plays_again(
    mock_server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock_server.set_responder(responder)
    entry = InterventionEntry("crash", Crashing, lambda env, params, services: Crashing(env))
    monkeypatch.setitem(registry.INTERVENTIONS, "crash", entry)
    config = followup_config(mock_server.base_url, tmp_path, interventions=["crash"], judge={"kind": "rules"})
    out = tmp_path / "run"
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.INCOMPLETE
    assert (summary.cells_done, summary.cells_failed, summary.cells_remaining) == (9, 1, 1)
    assert "RuntimeError: the environment broke" in summary.failures[0]
    failed = [t for t in latest_traces(out, include_failed=True) if t.infra_error]
    assert [t.episode_id for t in failed] == [Crashing.target]
    monkeypatch.setattr(Crashing, "target", "nothing")  # the bug is fixed: a rerun plays the failed cell only
    again = run_experiment(config, out)
    assert again.status is RunStatus.COMPLETE and (again.cells_done, again.cells_skipped) == (1, 9)


def test_the_cli_exits_1_when_a_cell_failed(mock_server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    mock_server.set_responder(responder)
    entry = InterventionEntry("crash", Crashing, lambda env, params, services: Crashing(env))
    monkeypatch.setitem(registry.INTERVENTIONS, "crash", entry)
    config = followup_config(mock_server.base_url, tmp_path, interventions=["crash"], judge={"kind": "rules"})
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--no-progress", "--no-report"]) == 1
    assert "1 cells have no good trace" in capsys.readouterr().err


# ------------------------------------------------------------------------------ crashes, in a subprocess
def _start_run(config: Path, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "commitbench.cli", "run", str(config), "--out", str(out), "--no-progress",
         "--no-report"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
    )


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.slow
def test_a_followup_config_run_holds_the_lock_and_resumes_after_sigkill(tmp_path: Path) -> None:
    with MockServerProcess(latency_ms=25) as server:
        config = followup_config(server.base_url, tmp_path, judge={"kind": "rules"}, concurrency=2,
                                 episodes={"setups": ["C0", "C1", "C2", "C3"], "variants": ["inferred", "stated"],
                                           "personas": ["generic"], "limit": 30})
        path = tmp_path / "experiment.yaml"
        path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
        out = tmp_path / "run"
        proc = _start_run(path, out)
        deadline = time.monotonic() + 60
        while len(_lines(out / TRACES_FILE)) < 6:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run wrote no traces"
            time.sleep(0.05)
        assert (out / MANIFEST_FILE).exists()
        with pytest.raises(RunDirectoryBusyError, match="in use"):
            run_experiment(config, out)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = len(_lines(out / TRACES_FILE))
        assert 6 <= killed_at < 30
        rerun = _start_run(path, out)
        assert rerun.wait(120) == 0, rerun.stderr.read().decode() if rerun.stderr else ""
    keys = [json.loads(line)["run_key"] for line in _lines(out / TRACES_FILE)]
    expected = {c.run_key for c in expand_cells(config, select_config_episodes(config))}
    assert len(keys) == len(set(keys)) == 30 and set(keys) == expected  # no duplicate, no missing cell
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status is RunStatus.COMPLETE and manifest.suite == "followup"
    assert [i.status for i in manifest.invocations] == [RunStatus.KILLED, RunStatus.COMPLETE]  # marked by the rerun


@pytest.mark.slow
@pytest.mark.usefixtures("embedded_model")
def test_local_model_c0_and_c2_end_to_end_with_the_offline_checker(tmp_path: Path) -> None:
    from commitbench.analysis.followup.metrics import outcome_distribution

    out = tmp_path / "run"
    args = ["run", "followup", "--model", "local", "--max-tokens", "128", "--setups", "C0", "C2", "--variants",
            "inferred", "--personas", "generic", "--limit", "16", "--concurrency", "1", "--out", str(out),
            "--no-progress", "--no-report"]
    assert main(args) == 0
    traces = latest_traces(out)
    assert len(traces) == 16 and not any(t.infra_error for t in traces)
    assert main(["label", str(out), "--judge", "rules"]) == 0
    labels = read_label_records(labels_path(out, "rules"), FollowupLabelRecord)
    rows, _ = responses_from_records(labels)
    assert len(rows) >= 12
    table = outcome_distribution(to_frame(rows), ["setup"], intervals=False)
    print(table.to_string(index=False))
    assert set(table["setup"]) == {"C0", "C2"}
