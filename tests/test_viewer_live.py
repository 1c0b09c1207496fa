"""The viewer on long runs, in headless Chromium: progress while it builds, a served site reused when
nothing changed, filler folded in transcripts, a search that says what it searches and finds speakers,
roles and cells, and the "failures only" and "differs across samples" filters.

The run is small and real: the chat agent on the mock server (it carries the promise out only when the
request's seed is even, so its two samples disagree) and two reference agents, on gap-20 episodes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import Browser, browser_session
from _runner_fixtures import standing_responder
from _viewer_fixtures import _chat_lines_only, route_ready, serve_view, show, stop_view

from commitbench.cli import main
from commitbench.commands.view_cmd import build_site
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.mock import MockServer
from commitbench.suites.standing import episodes_by_id
from commitbench.traces import EpisodeTrace, latest_traces

N_BOOT = 20
CELLS = ("BASE", "MGR-DIRECT", "PEER-DIRECT")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, _mock_server_process_wide: MockServer) -> Iterator[Path]:
    """A standing run on gap-20 episodes: chat (two samples that disagree), creditor-rule and always-execute."""
    server = _mock_server_process_wide
    out = tmp_path_factory.mktemp("viewer-live") / "run"
    server.reset()
    server.set_responder(_chat_lines_only(standing_responder(
        load_episodes(), executes=lambda request, _tool: int(request.get("seed", 0)) % 2 == 0)))
    try:
        code = main(["run", "standing", "--agent", "chat", "--agent", "creditor-rule", "--agent", "always-execute",
                     "--model", "mock-model", "--base-url", server.base_url, "--seed", "1", "--samples", "2",
                     "--cells", *CELLS, "--gaps", "20", "--types", "book_room", "--surfaces", "0",
                     "--policies", "explicit", "--out", str(out),
                     "--no-progress", "--no-report"])
    finally:
        server.reset()
    assert code == 0
    yield out


@pytest.fixture(scope="module")
def site(run: Path) -> Path:
    build_site(run, run.parent / "site", n_boot=N_BOOT)
    return run.parent / "site"


@pytest.fixture(scope="module")
def traces(run: Path) -> list[EpisodeTrace]:
    return latest_traces(run)


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    yield from browser_session()


def open_site(chrome: Browser, site: Path, route: str) -> None:
    chrome.goto((site / "index.html").resolve().as_uri() + route, ready=route_ready(route))


def keys_shown(chrome: Browser) -> set[str]:
    keys = chrome.evaluate("Array.from(document.querySelectorAll('#runs-table tbody tr')).map(r => r.dataset.key)")
    assert chrome.evaluate("document.getElementById('next-page').disabled"), "the test runs fit one page"
    return set(keys or [])


def _clean(chrome: Browser) -> None:
    assert chrome.problems() == [], "the page reported errors"


def test_the_build_prints_progress_lines_when_piped(run: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "commitbench.cli", "view", str(run), "--out", str(tmp_path / "s"),
                             "--n-boot", str(N_BOOT)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    total = len(latest_traces(run, include_failed=True))
    assert re.search(rf"^progress: {total}/{total} runs done, \d+ s elapsed, 0 failed$", result.stderr, re.M), \
        result.stderr
    quiet = subprocess.run([sys.executable, "-m", "commitbench.cli", "view", str(run), "--out", str(tmp_path / "q"),
                            "--n-boot", str(N_BOOT), "--no-progress"], capture_output=True, text=True, timeout=300,
                           check=False)
    assert quiet.returncode == 0 and "progress:" not in quiet.stderr


def _serve(run: Path, out: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``commitbench view RUN --out OUT --serve 0`` started; its address and the lines it printed first."""
    return serve_view([str(run), "--out", str(out), "--n-boot", str(N_BOOT), "--serve", "0"])


def test_serve_reuses_a_site_built_from_the_same_run_files(
    chrome: Browser, run: Path, traces: list[EpisodeTrace], tmp_path: Path
) -> None:
    out = tmp_path / "served"
    server, _, lines = _serve(run, out)
    stop_view(server)
    assert any(line.startswith("wrote ") for line in lines)
    built = (out / "data" / "meta.js").stat().st_mtime_ns
    stamp = json.loads((out / "data" / "stamp.json").read_text())
    assert str((run / "traces.jsonl").resolve()) in stamp["inputs"]

    server, url, lines = _serve(run, out)  # nothing changed: served as it is
    try:
        assert not any(line.startswith("wrote ") for line in lines)
        assert any("without a rebuild" in line for line in lines), lines
        assert (out / "data" / "meta.js").stat().st_mtime_ns == built
        chrome.goto(url + "#/runs", ready=route_ready("#/runs"))
        assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == len(traces)
        _clean(chrome)
    finally:
        chrome.goto("about:blank")  # leave the served page first: it asks the server for new runs every 2 s
        stop_view(server)

    server, _, lines = _serve(run, tmp_path / "elsewhere")  # another site directory: built there
    stop_view(server)
    assert any(line.startswith("wrote ") for line in lines)
    labels = run / "labels-rules.jsonl"  # a new labels file is a new input: the site is rebuilt
    assert main(["label", str(run)]) == 0 and labels.is_file()
    server, _, lines = _serve(run, out)
    stop_view(server)
    assert any(line.startswith("wrote ") for line in lines) and not any("without a rebuild" in x for x in lines)
    assert (out / "data" / "meta.js").stat().st_mtime_ns != built


def _filler_runs(trace: EpisodeTrace) -> list[int]:
    """The lengths of the runs of two or more consecutive filler or closing messages of a trace's script."""
    runs: list[int] = []
    count = 0
    for event in trace.events:
        if event.kind.value == "message" and event.act in ("filler", "closing"):
            count += 1
        elif event.kind.value in ("message", "assistant") or (event.kind.value == "tool_result"
                                                              and event.tool != "end_turn"):
            if count >= 2:
                runs.append(count)
            count = 0
    if count >= 2:
        runs.append(count)
    return runs


def test_filler_messages_are_folded_into_one_row_that_opens(
    chrome: Browser, site: Path, traces: list[EpisodeTrace]
) -> None:
    trace = next(t for t in traces if t.agent and t.agent.name == "creditor-rule")
    expected = _filler_runs(trace)
    assert expected and max(expected) >= 5, expected  # gap 20: long stretches of chatter
    open_site(chrome, site, f"#/run/{trace.run_key}")
    rows = chrome.evaluate("Array.from(document.querySelectorAll('ol.chat > li.fold')).map(li => li.textContent)")
    assert [int(re.search(r"(\d+) filler messages", row).group(1)) for row in rows] == expected  # type: ignore[union-attr]
    hidden = "Array.from(document.querySelectorAll('ol.chat > li[data-fold=\"0\"]:not(.fold)')).map(li => li.hidden)"
    assert set(chrome.evaluate(hidden)) == {True}
    visible_text = str(chrome.evaluate("document.querySelector('ol.chat').innerText"))
    first_filler = next(e.text for e in trace.events if e.act == "filler")
    assert first_filler not in visible_text
    chrome.evaluate("document.querySelector('ol.chat > li.fold button').click()")
    assert chrome.evaluate("document.querySelector('ol.chat > li.fold button').getAttribute('aria-expanded')") == "true"
    assert set(chrome.evaluate(hidden)) == {False}
    assert first_filler in str(chrome.evaluate("document.querySelector('ol.chat').innerText"))
    trigger = next(e.text for e in trace.events if e.act == "trigger")
    assert trigger in visible_text  # what matters is never folded
    _clean(chrome)


def _speaks(trace: EpisodeTrace, part: str | None = None, name: str | None = None) -> bool:
    people = {p.name: p.role for p in episodes_by_id()[trace.episode_id].people}
    senders = {e.sender for e in trace.events if e.kind.value == "message"}
    return any((part is None or people.get(s) == part) and (name is None or name in s) for s in senders)


def test_search_names_its_fields_and_finds_speakers_roles_and_cells(
    chrome: Browser, site: Path, traces: list[EpisodeTrace]
) -> None:
    open_site(chrome, site, "#/runs")
    hint = str(chrome.evaluate("document.getElementById('search-hint').textContent"))
    assert all(word in hint for word in ("messages", "tool calls", "reasoning", "who speaks", "cell"))
    assert "speakers" in str(chrome.evaluate("document.getElementById('q').placeholder"))

    show(chrome, "#/runs?q=manager")
    managers = {t.run_key for t in traces if _speaks(t, part="manager")}
    assert managers and managers == {t.run_key for t in traces if t.factors["cell"] == "MGR-DIRECT"}
    assert keys_shown(chrome) == managers
    note = str(chrome.evaluate("document.getElementById('search-matches').textContent"))
    assert f"speakers in {len(managers)} runs" in note, note
    assert set(chrome.evaluate("Array.from(document.querySelectorAll('#runs-table td.matched'))"
                               ".map(td => td.textContent)")) == {"speakers"}

    show(chrome, "#/runs?q=alice")
    alice = {t.run_key for t in traces if _speaks(t, name="Alice")}
    assert alice and keys_shown(chrome) == alice

    show(chrome, "#/runs?q=PEER-DIRECT")
    peer = {t.run_key for t in traces if t.factors["cell"] == "PEER-DIRECT"}
    assert peer and keys_shown(chrome) == peer
    assert "cell in" in str(chrome.evaluate("document.getElementById('search-matches').textContent"))
    _clean(chrome)


def _executed(trace: EpisodeTrace) -> bool:
    action = episodes_by_id()[trace.episode_id].action_tool.name
    return any(c.tool == action and c.ok for c in trace.tool_calls())


def test_failures_only_and_differs_across_samples(chrome: Browser, site: Path, traces: list[EpisodeTrace]) -> None:
    episodes = episodes_by_id()
    wrong = {t.run_key for t in traces if _executed(t) != episodes[t.episode_id].expects_execute}
    open_site(chrome, site, "#/runs")
    chrome.evaluate("document.getElementById('only-failures').click()")
    chrome.wait_for("location.hash.includes('only=failures')")
    chrome.wait_for(route_ready(str(chrome.evaluate("location.hash"))))
    failures = keys_shown(chrome)
    assert wrong and wrong <= failures and len(failures) < len(traces)
    columns = chrome.evaluate("Array.from(document.querySelectorAll('#runs-table td.off')).map(td => td.textContent)")
    assert columns and all(columns)  # each row says which signals differ
    key = sorted(wrong)[0]
    show(chrome, f"#/run/{key}")
    assert "≠ expected" in str(chrome.evaluate("document.querySelector('table.signals').innerText"))

    groups: dict[tuple[str, str], set[bool]] = {}
    for t in traces:
        groups.setdefault((t.episode_id, t.agent.name if t.agent else ""), set()).add(_executed(t))
    differ = {t.run_key for t in traces if len(groups[(t.episode_id, t.agent.name if t.agent else "")]) > 1}
    show(chrome, "#/runs?only=differs")
    assert differ and keys_shown(chrome) == differ
    assert {t.agent.name for t in traces if t.run_key in differ and t.agent} == {"chat:mock-model"}
    _clean(chrome)



def test_watch_adds_a_trace_appended_to_a_served_run(chrome: Browser, run: Path, tmp_path: Path) -> None:
    live = tmp_path / "live-run"
    live.mkdir()
    for name in ("manifest.json", "cells.jsonl"):
        (live / name).write_bytes((run / name).read_bytes())
    lines = (run / "traces.jsonl").read_bytes().splitlines(keepends=True)
    held_back = lines[-1]  # the run has not written its last trace yet
    (live / "traces.jsonl").write_bytes(b"".join(lines[:-1]))
    new = EpisodeTrace.model_validate_json(held_back)
    server, url, _ = serve_view([str(live), "--out", str(tmp_path / "site"), "--n-boot", str(N_BOOT), "--serve", "0",
                                 "--watch"])
    try:
        chrome.goto(url + "#/runs", ready=route_ready("#/runs"))
        count = "Number(document.getElementById('run-count').dataset.count)"
        assert chrome.evaluate(count) == len(lines) - 1
        chrome.wait_for("!document.getElementById('live').hidden")  # the page follows the run
        assert chrome.evaluate(f"!!document.querySelector('tr[data-key=\"{new.run_key}\"]')") is False
        with (live / "traces.jsonl").open("ab") as handle:  # the run writes one more trace
            handle.write(held_back)
        chrome.wait_for(f"{count} === {len(lines)}", timeout=30)
        assert chrome.evaluate(f"!!document.querySelector('tr[data-key=\"{new.run_key}\"]')")
        assert "1 new run" in str(chrome.evaluate("document.getElementById('live').textContent"))
        show(chrome, f"#/run/{new.run_key}")
        assert new.factors["cell"] in str(chrome.evaluate("document.querySelector('h1').textContent"))
        assert chrome.evaluate("document.querySelectorAll('ol.chat > li').length") > 5
        _clean(chrome)
    finally:
        chrome.goto("about:blank")  # leave the served page first: it asks the server for new runs every 2 s
        stop_view(server)


def test_several_runs_make_one_site_with_a_run_picker(chrome: Browser, run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    second = runs / "b-reference"
    second.mkdir(parents=True)
    assert main(["run", "standing", "--agent", "creditor-rule", "--cells", "BASE", "--gaps", "1", "--types",
                 "book_room", "--surfaces", "0", "--policies", "explicit", "--out", str(second),
                 "--no-progress", "--no-report"]) == 0
    (runs / "a-mixed").symlink_to(run.resolve(), target_is_directory=True)
    out = tmp_path / "site"
    assert main(["view", str(runs), "--out", str(out), "--n-boot", str(N_BOOT), "--no-progress"]) == 0
    chrome.goto((out / "index.html").resolve().as_uri())
    chrome.wait_for("!!document.getElementById('run-picker')")
    chrome.wait_for("document.getElementById('main').dataset.route !== undefined")
    picker = chrome.evaluate(
        "Array.from(document.querySelectorAll('#run-picker option')).map(o => [o.textContent, o.selected])")
    assert picker == [["a-mixed", True], ["b-reference", False]]
    assert "/runs/a-mixed/" in str(chrome.evaluate("location.pathname"))
    chrome.evaluate("location.hash = '#/runs'")
    chrome.wait_for(route_ready("#/runs"))
    assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == len(latest_traces(run))
    chrome.evaluate("const s = document.getElementById('run-picker'); s.value = s.options[1].value; "
                    "s.dispatchEvent(new Event('change'))")
    chrome.wait_for("location.pathname.includes('/runs/b-reference/')")
    chrome.wait_for("!!document.getElementById('run-picker') && "
                    "document.getElementById('main').dataset.route !== undefined")
    assert chrome.evaluate("document.getElementById('run-picker').selectedOptions[0].textContent") == "b-reference"
    chrome.evaluate("location.hash = '#/runs'")
    chrome.wait_for(route_ready("#/runs"))
    assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == len(latest_traces(second))
    _clean(chrome)
