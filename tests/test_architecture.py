"""The worked example of docs/architecture.md: a third suite, as written there, plays through the CLI."""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.rundir import read_manifest
from commitbench.suites import get_suite, unregister_suite

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _example_code() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Adding a suite: a worked example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "the worked example has no python block"
    return match.group(1)


@pytest.fixture(scope="module")
def echo_suite() -> Iterator[types.ModuleType]:
    module = types.ModuleType("echo_suite")
    sys.modules[module.__name__] = module
    exec(compile(_example_code(), str(DOC), "exec"), module.__dict__)
    yield module
    unregister_suite("echo")
    del sys.modules[module.__name__]


def test_the_documented_suite_runs_labels_and_reports_through_the_cli(
    echo_suite: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert get_suite("echo").env_id == echo_suite.ECHO_ENV_ID
    config = tmp_path / "echo.yaml"
    config.write_text(
        "env: commitbench-example/Echo-v0\nagents: [parrot]\nepisodes: {words: [apple, lantern]}\n", encoding="utf-8"
    )
    out = tmp_path / "run"
    assert main(["run", str(config), "--dry-run", "--out", str(out)]) == 0
    plan = capsys.readouterr().out
    assert "suite echo (commitbench-example/Echo-v0), 2 episodes" in plan and not out.exists()
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Echo accuracy" in printed and "1.00" in printed
    manifest = read_manifest(out)
    assert manifest is not None and manifest.suite == "echo" and manifest.cells_done == 2
    assert (out / ".lock").exists() and (out / "traces.jsonl").exists()
    assert main(["label", str(out)]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out / "labels-rules.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in records] == [True, True]
    assert main(["report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"suite": "echo", "runs": 2, "accuracy": 1.0, "files": {}}
    assert main(["annotate", "export", str(out), "--n", "1", "--out", str(tmp_path / "s.csv")]) == 2
    assert "the echo suite has no annotation sheet" in capsys.readouterr().err


def test_version_and_the_plan_of_both_built_in_suites(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and re.match(r"commitbench \d+\.\d+\.\d+", capsys.readouterr().out)
    assert main(["run", "standing", "--agent", "creditor-rule", "--agent", "chat", "--model", "m", "--base-url",
                 "http://127.0.0.1:9/v1", "--cells", "BASE", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "suite standing (commitbench/Standing-v0), 72 episodes" in plan
    assert "creditor-rule" in plan and "chat:m" in plan and "nothing was played" in plan
    assert main(["run", "followup", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--setups", "C0",
                 "--dry-run"]) == 0
    assert "suite followup (commitbench/FollowUp-v0)" in capsys.readouterr().out


def _diagram_rows(layer: int) -> str:
    """The text of one layer's rows in the diagram (its numbered line and the lines that continue it)."""
    text = DOC.read_text(encoding="utf-8")
    diagram = text.split("## The layers", 1)[1].split("```", 2)[1]
    rows: list[str] = []
    taking = False
    for line in diagram.splitlines():
        numbered = re.match(r"\s{2}(\d)\s", line)
        if numbered:
            taking = int(numbered.group(1)) == layer
        if taking:
            rows.append(line.split("(", 1)[0] if "(" in line else line)
    return "\n".join(rows)


def _named_modules(rows: str) -> set[str]:
    names = set()
    for token in re.findall(r"[\w/]+(?:\.py|/)", rows):
        parts = token.removesuffix(".py").strip("/").split("/")
        names.add("commitbench." + parts[-1])
    return names


@pytest.mark.parametrize(("layer", "entries"), [(0, "BOTTOM"), (6, "ORCHESTRATION"), (7, "TEST_TOOLS")])
def test_the_diagram_names_the_entries_the_layer_test_enforces(layer: int, entries: str) -> None:
    from test_layers import BOTTOM, ORCHESTRATION, TEST_TOOLS

    layers = {"BOTTOM": set(BOTTOM), "ORCHESTRATION": set(ORCHESTRATION), "TEST_TOOLS": set(TEST_TOOLS)}
    enforced = layers[entries] - {"commitbench"}
    assert _named_modules(_diagram_rows(layer)) == enforced


def test_the_suite_table_names_every_field_of_suite() -> None:
    from dataclasses import fields

    from commitbench.suites import Suite

    text = DOC.read_text(encoding="utf-8")
    table = text.split("## The `Suite` interface", 1)[1].split("\n## ", 1)[0]
    named = {m for row in table.splitlines() if row.startswith("| `")
             for m in re.findall(r"`(\w+)", row.split("|")[1])}
    assert {f.name for f in fields(Suite)} == named
