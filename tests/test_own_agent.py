"""Agents of the user's own (``--agent module:Class``): played through run, report and view like any player."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.config import ConfigError, load_config
from commitbench.mock import MockServer, ReplySpec
from commitbench.tools import is_agent_error, was_attempted
from commitbench.traces import latest_traces

# The doc's sections whose code block the tests play exactly (written to a package, never copied here).
EXAMPLE = "## A complete example"
HARNESS_EXAMPLE = "## An agent that calls a model: through the harness"


@pytest.fixture
def agent_package(tmp_path: Path) -> Iterator[Path]:
    package = tmp_path / "pkg" / "myagents"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "eager.py").write_text(_doc_block(EXAMPLE), encoding="utf-8")
    (package / "onestep.py").write_text(_doc_block(HARNESS_EXAMPLE), encoding="utf-8")
    sys.path.insert(0, str(tmp_path / "pkg"))
    yield package
    uninstall(tmp_path / "pkg")


def uninstall(root: Path) -> None:
    """Take the package off the path and out of the imported modules, and delete its files."""
    if str(root) in sys.path:
        sys.path.remove(str(root))
    for name in [m for m in sys.modules if m == "myagents" or m.startswith("myagents.")]:
        del sys.modules[name]
    shutil.rmtree(root, ignore_errors=True)


def _doc_section(section: str) -> str:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "agents.md").read_text(encoding="utf-8")
    return doc.split(section, 1)[1].split("\n## ", 1)[0]


def _doc_block(section: str) -> str:
    return _doc_section(section).split("```python\n", 1)[1].split("```", 1)[0]


def test_the_documented_agent_plays_through_run_report_and_view(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["run", "standing", "--agent", "myagents.eager:Eager", "--cells", "BASE", "CRED-DIRECT", "--types",
            "deploy_service", "--gaps", "1", "--surfaces", "0", "--policies", "explicit", "--out", str(out),
            "--no-progress", "--no-report"]
    assert main(args) == 0
    traces = latest_traces(out)
    assert len(traces) == 2  # BASE and CRED-DIRECT (deploy_service is a type of the test split)
    assert {t.agent.name for t in traces} == {"myagents.eager:Eager"}
    assert {t.agent.kind for t in traces} == {"custom"}
    assert all(t.agent.settings["source_sha256"] for t in traces)
    assert all('"tool":"deploy"' in t.model_dump_json() for t in traces)  # it acted through env.step
    capsys.readouterr()

    assert main(["report", str(out), "--json", "--n-boot", "50"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "myagents.eager:Eager" in json.dumps(report)

    site = tmp_path / "site"
    assert main(["view", str(out), "--out", str(site), "--n-boot", "50"]) == 0
    pages = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*") if p.suffix in {".html", ".js", ".json"})
    assert "myagents.eager:Eager" in pages

    # Running it again resumes (nothing to play); editing the agent's source is another experiment: refused.
    assert main(args) == 0
    edited = _doc_block(EXAMPLE).replace("Noted.", "Noted!")
    assert edited != _doc_block(EXAMPLE)
    (agent_package / "eager.py").write_text(edited, encoding="utf-8")
    del sys.modules["myagents.eager"]
    capsys.readouterr()
    assert main(args) != 0
    assert "myagents.eager:Eager" in capsys.readouterr().err


def test_a_config_names_an_agent_of_its_own_and_bad_ones_are_refused_clearly(
    agent_package: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env: commitbench/Standing-v0\nagents: [myagents.eager:Eager, creditor-rule]\n", encoding="utf-8")
    assert load_config(path).agents == ["myagents.eager:Eager", "creditor-rule"]
    for agent, message in [("myagents.missing:Eager", "cannot import 'myagents.missing'"),
                           ("myagents.eager:Nope", "has no 'Nope'"),
                           ("json:dumps", "is not a class")]:
        path.write_text(f"env: commitbench/Standing-v0\nagents: ['{agent}']\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=message):
            load_config(path)


def test_the_documented_examples_are_short() -> None:
    assert len(_doc_block(EXAMPLE).strip().splitlines()) <= 15
    assert len(_doc_block(HARNESS_EXAMPLE).strip().splitlines()) <= 20


def test_the_documented_example_does_what_its_text_says(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every cell of one commitment type: the figures the doc quotes, read from the report."""
    out = tmp_path / "run"
    assert main(["run", "standing", "--agent", "myagents.eager:Eager", "--types", "deploy_service", "--gaps", "1",
                 "--surfaces", "0", "--policies", "explicit", "--out", str(out), "--no-progress", "--no-report"]) == 0
    traces = latest_traces(out)
    assert len(traces) == 15
    for trace in traces:  # one call of the promised action, in the first turn, that its schema accepts
        (call,) = [c for c in trace.tool_calls() if c.tool == "deploy"]
        assert was_attempted(call) and not is_agent_error(call) and call.turn == 0 and trace.tool_errors == 0
    capsys.readouterr()

    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tool_errors"] == 0 and report["call_errors"] == []
    metrics = {m["metric"]: m for m in report["metrics"]}
    assert metrics["premature_execution"]["n"] == 6  # the cells with a release by someone with standing
    assert metrics["premature_execution"]["estimate"] == pytest.approx(4 / 6)
    assert metrics["override"]["estimate"] == 0.0
    assert metrics["executions_with_other_arguments"]["estimate"] == 1.0
    assert metrics["strict_accuracy"]["estimate"] == 0.0
    by_cell = {v["group"]["cell"]: v["estimate"] for v in report["premature_by_cell"]}
    assert by_cell == {"CRED-DIRECT": 1.0, "CRED-IMPLICIT": 1.0, "DELEG-DIRECT": 1.0, "DELEG-IMPLICIT": 1.0,
                       "REINSTATE-CRED": 0.0, "REINSTATE-BYSTANDER": 0.0}

    def pct(metric: str) -> str:
        return f"{round(100 * metrics[metric]['estimate'])}%"

    text = " ".join(_doc_section(EXAMPLE).split())  # the figures as the doc quotes them
    for quoted in (f"premature execution, {round(100 * by_cell['CRED-DIRECT'])}% in each of those cells",
                   f"not premature there ({round(100 * by_cell['REINSTATE-CRED'])}%)",
                   f"override is {pct('override')}",
                   f"premature execution is {pct('premature_execution')}",
                   f"executions with other arguments are {pct('executions_with_other_arguments')}",
                   f"strict accuracy {pct('strict_accuracy')}",
                   "(no tool errors)", "the fifteen cells of one commitment type"):
        assert quoted in text


PLAY = ["--cells", "BASE", "CRED-DIRECT", "--types", "deploy_service", "--gaps", "1", "--surfaces", "0",
        "--policies", "explicit", "--no-progress", "--no-report"]


def test_a_finished_run_reads_without_the_agents_code(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["run", "standing", "--agent", "myagents.eager:Eager", "--out", str(out), *PLAY]) == 0
    assert (out / "cells.jsonl").exists()
    uninstall(tmp_path / "pkg")
    with pytest.raises(ImportError):
        importlib.import_module("myagents.eager")
    capsys.readouterr()

    assert main(["label", str(out)]) == 0
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0
    assert "myagents.eager:Eager" in capsys.readouterr().out
    assert main(["view", str(out), "--out", str(tmp_path / "site"), "--n-boot", "20"]) == 0
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), str(out)]) == 0
    assert "complete: 2 of 2 cells" in capsys.readouterr().out
    assert main(["report", str(merged), "--json", "--n-boot", "20"]) == 0
    if importlib.util.find_spec("pyarrow") is not None:
        assert main(["export", str(out), "--out", str(tmp_path / "dataset")]) == 0
    assert not [m for m in sys.modules if m.startswith("myagents")]  # nothing imported it


def test_an_older_run_directory_reads_without_writes_and_upgrade_writes_its_table(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["run", "standing", "--agent", "myagents.eager:Eager", "--out", str(out), *PLAY]) == 0
    assert main(["label", str(out)]) == 0
    table = (out / "cells.jsonl").read_text(encoding="utf-8")
    (out / "cells.jsonl").unlink()  # as a directory played before cell tables
    capsys.readouterr()
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0  # the config is expanded: its agent imported
    assert main(["view", str(out), "--out", str(tmp_path / "site"), "--n-boot", "20"]) == 0
    assert not (out / "cells.jsonl").exists()  # reading writes no table (read-only storage: tests/test_drills_*)

    uninstall(tmp_path / "pkg")
    capsys.readouterr()
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 2
    assert "commitbench upgrade" in capsys.readouterr().err
    assert main(["upgrade", str(out)]) == 2  # its players cannot be imported here: nothing is written
    assert "cannot expand the config" in capsys.readouterr().err and not (out / "cells.jsonl").exists()

    sys.path.insert(0, str(tmp_path / "pkg2"))
    try:
        (tmp_path / "pkg2" / "myagents").mkdir(parents=True)
        (tmp_path / "pkg2" / "myagents" / "__init__.py").write_text("", encoding="utf-8")
        (tmp_path / "pkg2" / "myagents" / "eager.py").write_text(_doc_block(EXAMPLE), encoding="utf-8")
        assert main(["upgrade", str(out)]) == 0
        assert "2 cells" in capsys.readouterr().out
        assert (out / "cells.jsonl").read_text(encoding="utf-8") == table  # the table run would have written
        assert main(["upgrade", str(out)]) == 2
        assert "already has" in capsys.readouterr().err
    finally:
        uninstall(tmp_path / "pkg2")
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0  # read from the table alone


def test_the_documented_harness_agent_is_cached_traced_and_costed(
    agent_package: Path, tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(lambda request: ReplySpec(text="Noted, I will keep to what was agreed."))
    out = tmp_path / "run"
    model = ["--model", "mock-model", "--base-url", mock_server.base_url]
    assert main(["run", "standing", "--agent", "myagents.onestep:OneStep", *model, "--out", str(out), *PLAY]) == 0
    traces = latest_traces(out)
    assert {t.agent.name for t in traces} == {"myagents.onestep:OneStep@mock-model"}
    assert all(t.agent.settings["model"]["model"] == "mock-model" for t in traces)
    played = mock_server.stats().chat_completions
    calls = [c for t in traces for c in t.model_calls]
    assert played > 0 and len(calls) == played and not any(c.cache_hit for c in calls)
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls)
    capsys.readouterr()
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0
    (cost,) = json.loads(capsys.readouterr().out)["cost"]
    assert cost["model_calls"] == played and cost["cache_hits"] == 0 and not cost["calls_unrecorded"]
    assert cost["prompt_tokens"] == sum(c.prompt_tokens for c in calls) > 0

    again = tmp_path / "again"  # the same cells from the first run's cache: no call reaches the server
    assert main(["run", "standing", "--agent", "myagents.onestep:OneStep", *model, "--out", str(again),
                 "--cache", str(out / "cache.sqlite"), "--replay", *PLAY]) == 0
    assert mock_server.stats().chat_completions == played
    capsys.readouterr()
    assert main(["report", str(again), "--json", "--n-boot", "20"]) == 0
    (cost,) = json.loads(capsys.readouterr().out)["cost"]
    assert cost["model_calls"] == played and cost["cache_hits"] == played
    assert main(["report", str(again), "--n-boot", "20"]) == 0
    printed = capsys.readouterr().out
    assert "cache hits" in printed and "myagents.onestep:OneStep@mock-model" in printed


def test_an_agent_with_a_client_of_its_own_is_reported_as_unrecorded(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["run", "standing", "--agent", "myagents.eager:Eager", "--out", str(out), *PLAY]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0
    (cost,) = json.loads(capsys.readouterr().out)["cost"]
    assert cost["calls_unrecorded"] and cost["model_calls"] == 0
    assert main(["report", str(out), "--n-boot", "20"]) == 0
    printed = capsys.readouterr().out
    assert "unrecorded" in printed and "uses_model = True" in printed
