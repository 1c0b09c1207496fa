"""``commitbench export``: runs of both suites as datasets that the ``datasets`` library loads offline.

The runs are real: a reference agent's standing run, and follow-up runs (follow-through mode, an LLM
checker's stored labels) played by a scripted model on the mock server on 127.0.0.1. Each dataset is
loaded in a fresh Python process, as its user would load it, with the hub switched off.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pydantic import AwareDatetime

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.episodes.followup.requests import FOLLOWUP_DATA_DIR
from commitbench.judges.followup.llm import DELIVERY_PROMPT, LLM_CHECKER_VERSION, load_prompt
from commitbench.judges.followup.rules import OFFLINE_CHECKER_VERSION
from commitbench.judges.followup.schemas import ResponseJudgeOutput
from commitbench.judges.labelling import labels_path
from commitbench.judges.standing.rules import RULE_JUDGE_VERSION
from commitbench.labeljob import label_directory
from commitbench.mock import MockServer, ReplySpec, ToolCallSpec
from commitbench.rundir import RunStatus, read_manifest
from commitbench.rundir.reader import run_suite
from commitbench.runner import run_experiment
from commitbench.suites.dataset import arrow_type
from commitbench.suites.export import CARD_FILE, DATA_FILE, export_run
from commitbench.suites.kits import attribution_table, licence_id
from commitbench.traces import TRACES_FILE, latest_traces

FAST_RETRY = {"max_attempts": 3, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}
JUDGE = "llm:judge"
REPLY = "Noted, I will remind you then."
DELIVERY = "Here is your reminder."


# ------------------------------------------------------------------------------ runs
def standing_run(out: Path, tmp_path: Path) -> Path:
    config = ExperimentConfig.model_validate({
        "name": "standing-export", "env": STANDING_ENV_ID, "agents": ["creditor-rule"],
        "episodes": {"cells": ["BASE", "CRED-DIRECT"], "types": ["deploy_service"]},
        "cache": {"path": str(tmp_path / "standing-cache.sqlite")},
    })
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    return out


def responder(request: dict[str, Any]) -> ReplySpec | str:
    """The tested model schedules a task where it can and delivers it when it fires; the judge finds nothing."""
    messages = request["messages"]
    if request["model"] == "judge":
        system = messages[0]["content"]
        if system == load_prompt("followup_detector"):
            return json.dumps({"commitments": []})
        if system == load_prompt(DELIVERY_PROMPT):
            return json.dumps({"carries_promise": True, "rationale": "scripted"})
        return ResponseJudgeOutput.from_flags(rationale="scripted").model_dump_json()
    if messages[-1]["role"] == "tool":
        return ReplySpec(text=REPLY)
    if any(str(m["content"]).startswith("[notice]") for m in messages if m["role"] == "user"):
        return ReplySpec(text=DELIVERY)
    tools = {tool["function"]["name"] for tool in request.get("tools") or []}
    if "schedule_task" in tools:
        return ReplySpec(tool_calls=[ToolCallSpec(name="schedule_task", arguments={
            "run_at": "2026-10-01T11:00", "instruction": "Remind the user"})])
    return ReplySpec(text=REPLY)


def model(name: str, base_url: str, api_key_env: str | None = None) -> dict[str, Any]:
    return {"name": name, "base_url": base_url, "api_key_env": api_key_env,
            "settings": {"model": name, "timeout": 10.0}, "retry": FAST_RETRY}


def followup_run(out: Path, tmp_path: Path, base_url: str, api_key_env: str | None = None) -> Path:
    """Three shipped requests (one from each source) in C0 and C2, both personas, follow-through mode;
    labelled by the LLM checker."""
    config = ExperimentConfig.model_validate({
        "name": "followup-export", "env": FOLLOWUP_ENV_ID, "agents": ["chat"],
        "models": [model("mock-model", base_url, api_key_env)],
        "episodes": {"requests": ["rem-001", "cb-001", "mon-031"], "setups": ["C0", "C2"],
                     "variants": ["inferred"], "follow_through": True},
        "judge": {"kind": "llm", "model": model("judge", base_url, api_key_env)},
        "concurrency": 4, "cache": {"path": str(tmp_path / "followup-cache.sqlite")},
    })
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    label_directory(out, config.judge, cache_path=config.cache.path)
    return out


# ------------------------------------------------------------------------------ reading the dataset
LOADER = """
import json, sys
import datasets
import pyarrow.parquet as pq
folder = sys.argv[1]
rows = datasets.load_dataset(folder, split="train")
expected = datasets.Features.from_arrow_schema(pq.read_schema(folder + "/data/train-00000-of-00001.parquet"))
print(json.dumps({
    "rows": rows.num_rows,
    "features_match": rows.features == expected,
    "run_keys": list(rows["run_key"]),
    "labels": [[(label["labeller"], label["stored"]) for label in row] for row in rows["labels"]],
    "signals": [signals is not None for signals in rows["signals"]],
    "factors": list(rows["factors"]),
    "audit": [len(audit) for audit in rows["ledger_audit"]],
    "usage": list(rows["usage"]),
    "suite": sorted(set(rows["suite"])),
}))
"""


def load_offline(folder: Path, tmp_path: Path) -> dict[str, Any]:
    """``datasets.load_dataset(folder)`` in a fresh process, the hub switched off and its caches under tmp_path."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets")}
    done = subprocess.run([sys.executable, "-c", LOADER, str(folder)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def front_matter(folder: Path) -> dict[str, Any]:
    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    assert text.startswith("---\n")
    data: dict[str, Any] = yaml.safe_load(text.split("---\n", 2)[1])
    return data


# ------------------------------------------------------------------------------ both suites
@pytest.mark.slow
def test_a_standing_run_loads_as_one_row_per_trace_with_the_rule_judges_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = standing_run(tmp_path / "run", tmp_path)
    out = tmp_path / "dataset"
    assert main(["export", str(run), "--out", str(out)]) == 0
    assert "24 rows of the standing run standing-export" in capsys.readouterr().out
    loaded = load_offline(out, tmp_path)
    manifest = read_manifest(run)
    assert manifest is not None
    assert loaded["rows"] == manifest.cells_total == 24 and loaded["features_match"]
    assert sorted(loaded["run_keys"]) == sorted(t.run_key for t in latest_traces(run))
    assert loaded["labels"] == [[["rules", False]]] * 24  # computed during the export, none missing
    assert all(loaded["signals"]) and loaded["suite"] == ["standing"]
    assert {f["cell"] for f in loaded["factors"]} == {"BASE", "CRED-DIRECT"}
    assert {f["commitment_type"] for f in loaded["factors"]} == {"deploy_service"}
    assert all(u["model_calls"] == 0 for u in loaded["usage"])  # a reference agent calls no model
    card = (out / CARD_FILE).read_text(encoding="utf-8")
    front = front_matter(out)
    assert front["license"] == "apache-2.0"
    assert front["configs"] == [{"config_name": "default", "data_files": [{"split": "train", "path": DATA_FILE}]}]
    assert front["dataset_info"]["splits"][0]["num_examples"] == 24
    assert manifest.config_hash in card and f"`{manifest.episode_set_version}`" in card
    assert f"| `rules` | `{RULE_JUDGE_VERSION}` | computed during the export | 24 |" in card
    assert "written for this project" in card and "`standing` (`commitbench/Standing-v0`)" in card


@pytest.mark.slow
def test_a_follow_through_run_keeps_both_checkers_labels_its_ledger_and_the_licence_of_each_source(
    mock_server: MockServer, tmp_path: Path
) -> None:
    mock_server.set_responder(responder)
    run = followup_run(tmp_path / "run", tmp_path, mock_server.base_url)
    summary = export_run(run, tmp_path / "dataset", run_suite(run))
    assert summary.rows == 12 and summary.files[DATA_FILE] > 0
    loaded = load_offline(tmp_path / "dataset", tmp_path)
    assert loaded["rows"] == 12 and loaded["features_match"] and loaded["suite"] == ["followup"]
    assert loaded["labels"] == [[["rules", False], [JUDGE, True]]] * 12
    assert all(loaded["signals"])
    # C2 offers schedule_task: the scheduled task's ledger history is kept; C0 offers nothing to keep.
    audits = {(f["setup"], f["request_id"], f["persona"]): n for f, n in zip(loaded["factors"], loaded["audit"],
                                                                         strict=True)}
    assert all(n > 0 for (setup, _, _), n in audits.items() if setup == "C2")
    assert all(n == 0 for (setup, _, _), n in audits.items() if setup == "C0")
    assert all(u["model_calls"] >= 1 and u["prompt_tokens"] > 0 for u in loaded["usage"])
    assert {f["source"] for f in loaded["factors"]} == {"slurp", "bitext", "template"}
    front = front_matter(tmp_path / "dataset")
    assert front["license"] == ["apache-2.0", "cc-by-4.0", "cdla-sharing-1.0"]
    card = (tmp_path / "dataset" / CARD_FILE).read_text(encoding="utf-8")
    assert "| `slurp` | 4 |" in card and "CC BY 4.0 |" in card and "CDLA-Sharing-1.0 |" in card
    assert f"| `{JUDGE}` | `{LLM_CHECKER_VERSION}` | stored by `commitbench label` | 12 |" in card
    assert f"| `rules` | `{OFFLINE_CHECKER_VERSION}` | computed during the export | 12 |" in card
    assert [(s.name, s.rows) for s in summary.card.sources] == [("bitext", 4), ("slurp", 4), ("template", 4)]


# ------------------------------------------------------------------------------ secrets
SECRET_KEY = "sk-export-key-never-written-1234"
USER, PASSWORD = "exporter", "pa55-export-never-written"
TOKEN = "query-token-never-written-5678"


def secret_forms() -> dict[str, str]:
    basic = f"{USER}:{PASSWORD}"
    return {"API key": SECRET_KEY, "password": PASSWORD, "basic-auth base64": base64.b64encode(basic.encode()).decode(),
            "query token": TOKEN}


@pytest.mark.slow
def test_a_secret_of_a_models_url_or_key_never_reaches_the_exported_files(
    mock_server: MockServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPORT_TEST_KEY", SECRET_KEY)
    mock_server.set_responder(responder)
    url = mock_server.base_url.replace("http://", f"http://{USER}:{PASSWORD}@") + f"?token={TOKEN}"
    run = followup_run(tmp_path / "run", tmp_path, url, api_key_env="EXPORT_TEST_KEY")
    # A trace written by a harness that did not scrub: the key and the URL in a reply, as a model might echo them.
    leaked = f"my key is {SECRET_KEY}, the server {url}"
    traces = (run / TRACES_FILE).read_text(encoding="utf-8")
    assert REPLY in traces and not any(form in traces for form in secret_forms().values())
    (run / TRACES_FILE).write_text(traces.replace(REPLY, leaked), encoding="utf-8")
    out = tmp_path / "dataset"
    export_run(run, out, run_suite(run))
    rows = pq.read_table(out / DATA_FILE).to_pylist()
    written = json.dumps(rows, ensure_ascii=False) + (out / CARD_FILE).read_text(encoding="utf-8")
    raw = b"".join(path.read_bytes() for path in out.rglob("*") if path.is_file())
    leaks = [name for name, form in secret_forms().items() if form in written or form.encode() in raw]
    assert leaks == []
    replies = [turn["reply"] for row in rows for turn in row["turns"] if "my key is" in (turn["reply"] or "")]
    assert replies and all(reply.startswith("my key is ***, the server http://***@") for reply in replies)


# ------------------------------------------------------------------------------ errors
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("export-errors")
    return standing_run(base / "run", base)


def test_a_missing_foreign_or_unfinished_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished_run: Path
) -> None:
    assert main(["export", str(tmp_path / "missing"), "--out", str(tmp_path / "a")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a run", encoding="utf-8")
    assert main(["export", str(foreign), "--out", str(tmp_path / "b")]) == 2
    assert "holds neither manifest.json nor traces.jsonl" in capsys.readouterr().err
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / TRACES_FILE).write_bytes((finished_run / TRACES_FILE).read_bytes())
    assert main(["export", str(bare), "--out", str(tmp_path / "c")]) == 2
    assert "has no manifest.json" in capsys.readouterr().err
    running = tmp_path / "running"
    running.mkdir()
    (running / TRACES_FILE).write_bytes((finished_run / TRACES_FILE).read_bytes())
    manifest = json.loads((finished_run / "manifest.json").read_text(encoding="utf-8"))
    (running / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}), encoding="utf-8")
    assert main(["export", str(running), "--out", str(tmp_path / "d")]) == 2
    assert "is still running" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c", "d"))


def test_an_existing_output_is_refused_unless_forced_and_only_a_previous_export_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished_run: Path
) -> None:
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    assert main(["export", str(finished_run), "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["export", str(finished_run), "--out", str(out), "--force"]) == 2
    assert "holds what an export does not write (keep.txt)" in capsys.readouterr().err
    assert (out / "keep.txt").read_text(encoding="utf-8") == "mine"
    (out / "keep.txt").unlink()
    assert main(["export", str(finished_run), "--out", str(out)]) == 0  # an empty directory is fine
    first = (out / DATA_FILE).read_bytes()
    assert main(["export", str(finished_run), "--out", str(out)]) == 2
    assert main(["export", str(finished_run), "--out", str(out), "--force"]) == 0
    assert (out / DATA_FILE).read_bytes() == first  # the same run exports to the same bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset"]  # no building directory left behind
    assert main(["export", str(finished_run), "--out", str(finished_run.parent), "--force"]) == 2
    assert "holds the run directory" in capsys.readouterr().err


def test_stale_llm_labels_are_refused_as_the_report_refuses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], finished_run: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("manifest.json", TRACES_FILE):
        (run / name).write_bytes((finished_run / name).read_bytes())
    judge = "llm:some-model"
    records = [{"run_key": t.run_key, "labeller": judge, "labels": [], "labeller_version": "an-older-version"}
               for t in latest_traces(run)]
    labels_path(run, judge).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["report", str(run), "--judge", judge, "--n-boot", "10", "--no-figure"]) == 2
    refused = capsys.readouterr().err
    assert main(["export", str(run), "--out", str(tmp_path / "dataset")]) == 2
    said = capsys.readouterr().err
    assert "made by another version of the judge" in said and "--relabel-stale" in said
    assert said == refused
    assert not (tmp_path / "dataset").exists()


# ------------------------------------------------------------------------------ the pieces
class Colour(str, Enum):
    RED = "red"


@pytest.mark.parametrize(("annotation", "expected"), [
    (int, pa.int64()),
    (bool, pa.bool_()),
    (float, pa.float64()),
    (str | None, pa.string()),
    (Colour, pa.string()),
    (AwareDatetime, pa.string()),
    (list[str], pa.list_(pa.field("item", pa.string()))),
    (list[int] | None, pa.list_(pa.field("item", pa.int64()))),
    (dict[str, Any], pa.string()),  # JSON text
    (Any, pa.string()),  # JSON text
    (str | int, pa.string()),  # JSON text
])
def test_an_annotation_becomes_an_arrow_type(annotation: Any, expected: pa.DataType) -> None:
    assert arrow_type(annotation) == expected


def test_the_follow_up_sources_and_their_licences_come_from_the_attribution() -> None:
    table = attribution_table(Path(FOLLOWUP_DATA_DIR) / "ATTRIBUTION.md")
    assert {name: licence_id(licence) for name, (_, licence) in table.items()} == {
        "slurp": "cc-by-4.0", "bitext": "cdla-sharing-1.0", "template": "apache-2.0"}
    assert licence_id("a licence of its own") == "other"
