"""The worked example of docs/architecture.md: a third suite, as written there, plays through the CLI."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from commitbench import plugins
from commitbench.analysis.view.model import TranscriptPage
from commitbench.cli import main
from commitbench.identity import arm_label
from commitbench.mock import MockServer, ReplySpec
from commitbench.rundir import read_manifest
from commitbench.suites import get_suite, suites
from commitbench.traces import latest_traces

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _example(language: str) -> str:
    """The worked example's first block of a language (its module, its pyproject's entry points)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Adding a suite, a player and an intervention: a worked example", 1)[1]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"the worked example has no {language} block"
    return match.group(1)


def install_plugin(site: Path, name: str, module: str, entry_points: dict[str, dict[str, str]]) -> None:
    """Install a one-module package into ``site`` as pip would lay it out: the module and a dist-info
    directory whose entry_points.txt declares ``entry_points`` (group -> name -> module:attribute)."""
    (site / f"{name}.py").write_text(module, encoding="utf-8")
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 0.1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
                for group, points in entry_points.items()), encoding="utf-8")


@pytest.fixture
def echo_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The documented package, installed into a scratch site directory on the path; removed afterwards."""
    site = tmp_path_factory.mktemp("site")
    points = tomllib.loads(_example("toml"))["project"]["entry-points"]
    install_plugin(site, "echo_plugin", _example("python"), points)
    sys.path.insert(0, str(site))
    plugins.refresh()
    yield site
    sys.path.remove(str(site))
    sys.modules.pop("echo_plugin", None)
    plugins.refresh()


def _echo_config(tmp_path: Path) -> Path:
    config = tmp_path / "echo.yaml"
    config.write_text(
        "env: commitbench-example/Echo-v0\nagents: [parrot]\ninterventions: [none, shout]\n"
        "episodes: {words: [apple, lantern]}\n", encoding="utf-8")
    return config


def test_the_documented_plugin_is_listed_with_its_package(echo_plugin: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    mine = {(row["group"], row["name"]): row for row in listed["plugins"] if row["package"] == "echo-plugin"}
    assert set(mine) == {("suites", "echo"), ("agents", "parrot"), ("interventions", "shout")}
    assert mine[("suites", "echo")]["version"] == "0.1.0"
    assert mine[("suites", "echo")]["target"] == "echo_plugin:SUITE"
    assert listed["broken"] == []


def test_the_documented_suite_plays_labels_reports_views_exports_and_merges(
    echo_plugin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import echo_plugin as module  # type: ignore[import-not-found]

    assert get_suite("echo").env_id == module.ECHO_ENV_ID
    config = _echo_config(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(config), "--dry-run", "--out", str(out)]) == 0
    plan = capsys.readouterr().out
    assert "suite echo (commitbench-example/Echo-v0), 2 episodes" in plan and not out.exists()
    assert main(["run", str(config), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Echo accuracy" in printed and "1.00" in printed
    manifest = read_manifest(out)
    assert manifest is not None and manifest.suite == "echo" and manifest.cells_done == 4
    assert (out / ".lock").exists() and (out / "traces.jsonl").exists() and (out / "cells.jsonl").exists()
    replies = {(t.episode_id, arm_label(t.interventions)): t.turns[0].reply for t in latest_traces(out)}
    assert replies == {("apple", "none"): "apple", ("lantern", "none"): "lantern",
                       ("apple", "shout"): "APPLE", ("lantern", "shout"): "LANTERN"}
    assert main(["label", str(out)]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out / "labels-rules.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in records] == [True] * 4
    assert main(["report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"suite": "echo", "runs": 4, "accuracy": 1.0, "files": {}}
    assert main(["annotate", "export", str(out), "--n", "1", "--out", str(tmp_path / "s.csv")]) == 2
    assert "the echo suite has no annotation sheet" in capsys.readouterr().err

    site = tmp_path / "site"
    assert main(["view", str(out), "--out", str(site)]) == 0
    capsys.readouterr()
    written = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in site.rglob("*") if p.is_file()
                         and p.suffix in {".json", ".js", ".html"})
    assert "LANTERN" in written and "correct" in written
    for path in sorted((site / "data" / "runs").glob("*.js")):  # each page is its model's JSON
        text = path.read_text(encoding="utf-8")
        pages = json.loads("[" + text[text.index("(") + 1:text.rindex(")")] + "]")[1]
        dumped = ",".join(TranscriptPage.model_validate(p).model_dump_json(exclude_defaults=True) for p in pages)
        assert text == f"commitbench.runs({int(path.stem)},[{dumped}]);\n"
        assert pages and all(s["description"] for p in pages for s in p["signals"])  # a plug-in's own words

    pytest.importorskip("pyarrow", reason="the export needs pyarrow (the [export] extra)")
    import pyarrow.parquet as pq

    exported = tmp_path / "dataset"
    assert main(["export", str(out), "--out", str(exported)]) == 0
    capsys.readouterr()
    table = pq.read_table(next(exported.rglob("*.parquet"))).to_pylist()
    assert sorted(row["episode_id"] for row in table) == ["apple", "apple", "lantern", "lantern"]
    assert all(any(label.get("correct") for label in _label_values(row["labels"])) for row in table)

    shards = [tmp_path / "shard-0", tmp_path / "shard-1"]
    for index, shard in enumerate(shards):
        assert main(["run", str(config), "--out", str(shard), "--shard", f"{index}/2", "--no-progress"]) == 0
    capsys.readouterr()
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), *map(str, shards)]) == 0
    assert "complete: 4 of 4 cells" in capsys.readouterr().out


def _label_values(labels: object) -> list[dict[str, object]]:
    """The label records of an exported row, whatever their nesting (one record per judge)."""
    found: list[dict[str, object]] = []
    if isinstance(labels, dict):
        if "correct" in labels:
            found.append(labels)
        for value in labels.values():
            found.extend(_label_values(value))
    elif isinstance(labels, list):
        for value in labels:
            found.extend(_label_values(value))
    elif isinstance(labels, str) and labels.startswith("{"):
        found.extend(_label_values(json.loads(labels)))
    return found


def test_the_documented_suite_is_an_inspect_task(echo_plugin: Path, tmp_path: Path, mock_server: MockServer,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("inspect_ai", reason="the inspect tasks need inspect-ai (the [inspect] extra)")
    from inspect_ai import eval as inspect_eval

    from commitbench.inspecteval.tasks import build_task, suite_task

    monkeypatch.setenv("OPENAI_API_KEY", "unused-by-the-mock")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    def echo(request: dict[str, object]) -> ReplySpec:
        said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]  # type: ignore[index, union-attr]
        return ReplySpec(text=str(said).split()[-1])

    mock_server.set_responder(echo)
    assert suite_task(get_suite("echo")).__name__ == "echo"
    (log,) = inspect_eval(build_task("echo", {"words": ["apple", "meadow"]}), model="openai/mock-model",
                          model_base_url=mock_server.base_url, model_args={"responses_api": False},
                          log_dir=str(tmp_path / "logs"), display="none", max_retries=2)
    assert log.status == "success" and log.results is not None
    scores = {s.id: s.scores for s in log.samples or []}
    assert set(scores) == {"apple", "meadow"}
    metrics = log.results.scores[0].metrics
    assert metrics["correct"].value == 1.0 and metrics["runs"].value == 2.0


def test_without_the_plugin_the_suite_is_unknown_and_nothing_else_changes(tmp_path: Path) -> None:
    import importlib.metadata

    assert "echo_plugin" not in sys.modules
    assert not [p for p in importlib.metadata.entry_points(group="commitbench.suites") if p.name == "echo"]
    with pytest.raises(ValueError, match="echo"):
        get_suite("echo")
    assert {s.name for s in suites()} >= {"standing", "followup"}


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
    """The modules a layer's rows name: ``x.py`` and ``x/`` are commitbench.x, ``x/y.py`` commitbench.x.y."""
    names = set()
    for token in re.findall(r"[\w/]+(?:\.py|/)", rows):
        parts = token.removesuffix(".py").strip("/").split("/")
        parts = parts[1:] if parts[0] == "commitbench" and len(parts) > 1 else parts
        names.add("commitbench." + ".".join(parts))
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
