"""A run in both languages on the mock server: the report pairs each Turkish run with its English twin (the
hand-computed difference, with intervals, in the text report and --json), and the viewer opens a run beside its
twin in headless Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import Browser, browser_session
from _runner_fixtures import standing_responder
from _viewer_fixtures import route_ready, show

from commitbench.cli import main
from commitbench.commands.view_cmd import build_site
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.mock import MockServer
from commitbench.traces import latest_traces

CELLS = ("BASE", "CRED-DIRECT", "CRED-IMPLICIT", "DELEG-DIRECT", "DELEG-IMPLICIT")
ENGLISH = [e for e in load_episodes() if e.split.value == "test" and e.variant == 0 and e.gap == 1
           and e.cell in CELLS]
TWINS = {e.twins["tr"] for e in ENGLISH}
TURKISH = [e for e in load_episodes(languages="tr") if e.id in TWINS]
TYPES = sorted({e.commitment_type for e in ENGLISH})
HALF = {e.action_tool.name for e in ENGLISH if e.commitment_type in TYPES[:3]}


def _turkish(request: dict[str, Any]) -> bool:
    system = request["messages"][0]["content"] if request["messages"][0]["role"] == "system" else ""
    return "asistanısınız" in system


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, _mock_server_process_wide: MockServer) -> Iterator[Path]:
    """The chat agent on 60 English episodes (six types, five cells, two policies) and their 60 Turkish twins: in
    English it acts at the trigger in every episode; in Turkish only in the first three of the six types."""
    server = _mock_server_process_wide
    out = tmp_path_factory.mktemp("languages") / "run"
    server.reset()
    server.set_responder(standing_responder(
        [*ENGLISH, *TURKISH], executes=lambda request, tool: not _turkish(request) or tool in HALF))
    try:
        code = main(["run", "standing", "--agent", "chat", "--model", "mock-model", "--base-url", server.base_url,
                     "--language", "en", "tr", "--ids", *(e.id for e in [*ENGLISH, *TURKISH]),
                     "--out", str(out), "--no-progress", "--no-report"])
    finally:
        server.reset()
    assert code == 0
    yield out


def test_the_run_plays_both_languages_and_records_them(run: Path) -> None:
    traces = latest_traces(run)
    assert len(traces) == 2 * len(ENGLISH) == 120
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["episodes"]["language"] == ["en", "tr"]
    assert manifest["episode_set_version"] == "4, 4/tr-1"


def test_report_pairs_turkish_with_english_twins(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["report", str(run), "--json", "--n-boot", "200"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(report["agents"]) == ["chat:mock-model", "chat:mock-model [tr]"]
    language = {(c["metric"], c["group"]["policy"]): c for c in report["comparisons"] if c["kind"] == "language"}
    for policy in ("explicit", "silent"):
        override = language["override", policy]
        assert (override["a"], override["b"]) == ("chat:mock-model [tr]@none", "chat:mock-model@none")
        # English overrides all 24 CRED/DELEG releases per policy, Turkish the 12 of its first three types.
        assert override["a_value"] == 0.5 and override["b_value"] == 1.0
        assert override["estimate"] == pytest.approx(-0.5) and override["n_pairs"] == 30
        assert override["low"] <= -0.5 <= override["high"] and override["low"] < override["high"]
    by_cell = {(c["group"]["policy"], c["group"]["cell"]): c for c in report["comparisons_by_cell"]
               if c["kind"] == "language"}
    assert by_cell["explicit", "BASE"]["estimate"] == pytest.approx(-0.5)  # acting is right in BASE
    assert by_cell["explicit", "CRED-DIRECT"]["estimate"] == pytest.approx(0.5)  # and wrong after a release
    capsys.readouterr()
    assert main(["report", str(run), "--n-boot", "200"]) == 0
    text = capsys.readouterr().out
    assert "chat:mock-model [tr]@none" in text and "language" in text


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    yield from browser_session()


def test_the_viewer_shows_a_run_beside_its_twin(run: Path, chrome: Browser, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(run, site, n_boot=20)
    turkish = next(t for t in latest_traces(run) if t.episode_id in TWINS)
    route = f"#/run/{turkish.run_key}"
    chrome.goto((site / "index.html").resolve().as_uri() + route, ready=route_ready(route))
    links = chrome.evaluate("Array.from(document.querySelectorAll('a.twin-link')).map(a => a.getAttribute('href'))")
    assert len(links) == 1 and links[0].startswith(f"#/compare/{turkish.run_key}/"), links
    assert "the en twin" in chrome.evaluate("document.querySelector('a.twin-link').textContent")
    show(chrome, links[0])
    columns = chrome.evaluate("Array.from(document.querySelectorAll('section.side')).map(s => s.textContent)")
    assert len(columns) == 2
    english = next(e for e in ENGLISH if e.twins["tr"] == turkish.episode_id)
    twin = next(e for e in TURKISH if e.id == turkish.episode_id)
    turkish_request = next(m.text for m in twin.script if m.act.value == "request")
    english_request = next(m.text for m in english.script if m.act.value == "request")
    assert turkish_request in columns[0] and english_request in columns[1]
    assert chrome.problems() == []
