"""The run viewer (``commitbench view``), tested in headless Chromium on small mock-server runs of both suites.

The browser comes from the system (Debian's ``chromium``; ``.ci/run`` installs it when it is missing);
a test that cannot start one fails and says how to install it. Pages load from ``file://`` and once
through ``--serve``; each check names what the issue asks of the viewer: no console errors, the
overview's numbers equal ``commitbench report --json``, each number links to the runs behind it, a
filter reduces the list to the expected runs, a transcript shows the tool calls and the judge's reason,
side by side shows both columns. Screenshots go to the test's temporary directory (paths printed).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import Browser, browser_session, die_with_parent
from _viewer_fixtures import (
    capture_pages,
    first_href,
    followup_run,
    route_ready,
    serve_view,
    show,
    standing_run,
    stop_view,
)
from pydantic import BaseModel

from commitbench.analysis.followup.metrics import METRICS as FOLLOWUP_METRICS
from commitbench.analysis.followup.metrics import to_frame
from commitbench.analysis.followup.report import HEADLINE, OUTCOME_COLUMNS, responses_from_records
from commitbench.analysis.standing.report import SHORT
from commitbench.analysis.view import site as site_module
from commitbench.analysis.view.model import (
    ChatItem,
    CommitmentView,
    Fact,
    FollowupEntry,
    ItemKind,
    Overview,
    RunRecord,
    RunSource,
    Signal,
    ToolView,
    TranscriptPage,
    page_part,
)
from commitbench.analysis.view.site import page_json, shared_parts, speakers, with_parts
from commitbench.analysis.view.standing import SIGNAL_DESCRIPTIONS
from commitbench.analysis.view.transcript import (
    arguments_text,
    call_item,
    chat_items,
    clip,
    event_speakers,
    fact,
    said_item,
    settings_text,
    system_prompt,
)
from commitbench.cli import UsageError, main
from commitbench.commands.view_cmd import build_site
from commitbench.episodes.followup.setups import load_setups
from commitbench.episodes.followup.vocabulary import Persona, SetupId
from commitbench.judges.followup.labellers import FollowupLabelRecord
from commitbench.judges.labelling import labels_path, one_labeller_labels
from commitbench.judges.standing.labellers import StandingLabelRecord
from commitbench.judges.stored import StoredLabels
from commitbench.mock import MockServer
from commitbench.protocol import Event, EventKind, Revision, ToolCallRecord
from commitbench.suites.standing import episodes_by_id
from commitbench.traces import EpisodeTrace, ModelCallRecord, TurnRecord, iter_latest_traces, latest_traces

ROOT = Path(__file__).resolve().parent.parent
N_BOOT = 200
FOLLOWUP_JUDGE = "llm:mock-model"
SETUPS = load_setups()


# Where a commitment's span stands in the reply, as the page marks it (assets/pages.js), in UTF-16 units.
SPANS = [
    ("I'll remind you at 9.", "remind you at 9", [5, 20]),
    ("Sure. I'LL CALL YOU.", "I'll call you", [6, 19]),  # case ignored when lowering keeps positions
    ("👍 I'll write tomorrow", "I'll write tomorrow", [3, 22]),  # the emoji is two UTF-16 units
    ("Nothing promised here.", "I'll call", None),
    ("Any reply", "", None),
]


# ------------------------------------------------------------------------------ pure parts (no browser)
def _event(kind: EventKind, step: int, text: str = "", **fields: Any) -> Event:
    return Event(kind=kind, step=step, text=text, **fields)


def test_a_trace_becomes_a_chat_with_every_call_inline_and_the_reasoning_after_its_message() -> None:
    opened = _event(EventKind.MESSAGE, 2, "CI is green.", sender="Lena Park", role="coordinator", channel="#team",
                    act="trigger")
    call_ok = ToolCallRecord(step=2, turn=0, tool="deploy", arguments={"service": "api"}, call_id="c1", ok=True,
                             result="Deployed.", is_write=True)
    call_bad = ToolCallRecord(step=2, turn=0, tool="nope", arguments=None, raw_arguments="{oops", call_id="c2",
                              ok=False, result="unknown tool", error_kind="unknown_tool")
    lost = ToolCallRecord(step=2, turn=0, tool="lookup", arguments={"q": "x"}, call_id="c3", ok=True, result="...")
    trace = EpisodeTrace(
        env_id="commitbench/Standing-v0", episode_id="st-x", factors={}, run_key="k",
        events=[
            _event(EventKind.SYSTEM, 0, "You are Aide."),
            _event(EventKind.MESSAGE, 0, "Please deploy api.", sender="Alice Moreno", channel="#team", act="request"),
            _event(EventKind.ASSISTANT, 1, "I'll deploy it.", sender="Aide", channel="#team", act="promise"),
            opened,
            _event(EventKind.TOOL_RESULT, 2, "Deployed.", tool="deploy", call_id="c1"),
            _event(EventKind.TOOL_RESULT, 2, "unknown tool", tool="nope", call_id="c2", ok=False),
            _event(EventKind.ASSISTANT, 2, "Done, Alice.", sender="Aide", channel="dm:Alice Moreno"),
        ],
        turns=[TurnRecord(index=0, opened_by=opened, calls=[call_ok, call_bad, lost], reply="Done, Alice.",
                          revisions=[Revision(by="claim_guard", kind="claim_guarded", original="All done!")])],
        model_calls=[ModelCallRecord(turn=0, reasoning="The trigger came."), ModelCallRecord(turn=0)],
    )
    made = chat_items(trace, {"Alice Moreno": "creditor"}, lambda index: [])
    items = [ChatItem.model_validate(item) for item in made]
    assert [item.model_dump(mode="json", exclude_defaults=True) for item in items] == made  # each is its model's
    assert [(i.kind, i.tool or i.text) for i in items] == [
        (ItemKind.MESSAGE, "Please deploy api."),
        (ItemKind.ASSISTANT, "I'll deploy it."),
        (ItemKind.MESSAGE, "CI is green."),
        (ItemKind.REASONING, "The trigger came."),
        (ItemKind.CALL, "deploy"),
        (ItemKind.CALL, "nope"),
        (ItemKind.ASSISTANT, "Done, Alice."),
        (ItemKind.CALL, "lookup"),  # its result event is missing: still shown, at the end of its turn
        (ItemKind.REVISION, "Done, Alice."),
    ]
    assert items[0].party == "creditor" and items[1].message_index is None and items[6].message_index == 0
    assert items[4].arguments == '{\n  "service": "api"\n}' and items[4].write
    assert (items[5].ok, items[5].error_kind, items[5].arguments) == (False, "unknown_tool", "{oops")
    assert items[8].original == "All done!" and items[8].by == "claim_guard"


def test_a_page_part_is_its_model_dumped_without_defaults() -> None:
    """``page_part`` leaves out exactly what ``model_dump(exclude_defaults=True)`` leaves out: a value equal to
    its field's default (0.0 equals 0, an empty list its factory's), never a required field."""
    cases: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (ChatItem, {"kind": "call", "step": 0, "turn": None, "tool": "deploy", "ok": True, "verdicts": []}),
        (ChatItem, {"kind": "message", "step": 2, "turn": 0, "sender": "", "ok": False, "message_index": 0}),
        (Signal, {"name": "executed", "value": None, "description": "", "expected": False}),
        (Signal, {"name": "tool_calls", "value": 0, "expected": None}),
        (CommitmentView, {"span": "I'll", "start": None, "confidence": 0, "capabilities": [], "anchored": False}),
        (TranscriptPage, {"suite": "", "key": "k", "title": "", "facts": [], "twins": {}, "expected": None}),
    ]
    for model, values in cases:
        assert page_part(model, **values) == model(**values).model_dump(mode="json", exclude_defaults=True)
    assert page_part(Signal, name="x", value=None) == {"name": "x", "value": None}  # required: always kept
    # The parts made field by field (a page's most frequent) are what page_part makes, defaults or not.
    for step, turn, texts, index, verdicts in itertools.product(
            (0, 3), (None, 0, 2), (("",) * 7, ("Alice", "PM", "creditor", "#team", "Hi", "cancel", "peer")),
            (None, 0), ([], [{"judge": "rules", "labels": {}}])):
        fields = dict(zip(("sender", "title", "party", "channel", "text", "act", "subject"), texts, strict=True))
        assert said_item("message", step, turn, *texts, index, verdicts) == page_part(
            ChatItem, kind="message", step=step, turn=turn, **fields, message_index=index, verdicts=verdicts)
    for field, detail in itertools.product(("", "cell"), (False, True)):
        assert fact("cell", "BASE", field, detail) == page_part(Fact, label="cell", value="BASE", field=field,
                                                                detail=detail)
    for step, tool, arguments, raw, result, ok, kind, write in itertools.product(
            (0, 4), ("", "deploy"), (None, {}, {"env": "staging"}), (None, "", "{bad"), ("", "Deployed."),
            (True, False), ("", "failed"), (False, True)):
        call = ToolCallRecord(call_id="c1", step=step, turn=1, tool=tool, arguments=arguments, raw_arguments=raw,
                              ok=ok, result=result, is_write=write, error_kind=kind)
        assert call_item(call) == page_part(
            ChatItem, kind="call", step=step, turn=1, tool=tool, arguments=arguments_text(call), result=result, ok=ok,
            error_kind=kind, write=write)


# ------------------------------------------------------------------------------ runs, sites, reports
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, _mock_server_process_wide: MockServer) -> Iterator[dict[str, Path]]:
    server = _mock_server_process_wide
    base = tmp_path_factory.mktemp("viewer-runs")
    server.reset()
    try:
        standing = standing_run(server, base / "standing")
        server.reset()
        followup = followup_run(server, base / "followup")
    finally:
        server.reset()
    yield {"standing": standing, "followup": followup}


@pytest.fixture(scope="module")
def sites(runs: dict[str, Path]) -> dict[str, Path]:
    build_site(runs["standing"], runs["standing"] / "site", n_boot=N_BOOT)
    build_site(runs["followup"], runs["followup"] / "site", judge=FOLLOWUP_JUDGE, n_boot=N_BOOT)
    return {name: path / "site" for name, path in runs.items()}


def report_json(run_dir: Path, judge: str | None = None) -> dict[str, Any]:
    """What ``commitbench report RUN --json`` prints."""
    out = io.StringIO()
    args = ["report", str(run_dir), "--json", "--n-boot", str(N_BOOT), *(["--judge", judge] if judge else [])]
    with contextlib.redirect_stdout(out):
        assert main(args) == 0
    return dict(json.loads(out.getvalue()))


@pytest.fixture(scope="module")
def reports(runs: dict[str, Path], sites: dict[str, Path]) -> dict[str, dict[str, Any]]:
    return {"standing": report_json(runs["standing"]), "followup": report_json(runs["followup"], FOLLOWUP_JUDGE)}


def registered(path: Path) -> Any:
    """The data a site script file hands to the registry: ``commitbench.NAME(args...);``."""
    text = path.read_text(encoding="utf-8")
    match = re.fullmatch(r"commitbench\.\w+\((.*)\);\n", text, re.DOTALL)
    assert match, f"{path} is not a registry call"
    return json.loads("[" + match.group(1) + "]")


def index_rows(site: Path) -> list[dict[str, Any]]:
    """The run index as rows: column values decoded, metric names the run counts for."""
    (meta,) = registered(site / "data" / "meta.js")
    (index,) = registered(site / "data" / "index.js")
    metrics = [m["name"] for m in meta["metrics"]]
    rows = []
    for i, key in enumerate(index["keys"]):
        row: dict[str, Any] = {"key": key}
        for column in meta["columns"]:
            data = index["columns"][column["name"]]
            code = data["codes"][i]
            row[column["name"]] = data["values"][code] if column["kind"] == "facet" else code
        row["metrics"] = {name for bit, name in enumerate(metrics) if index["metrics"][i] >> bit & 1}
        rows.append(row)
    return rows


def test_shared_parts_leave_the_page_once_and_come_back_as_they_were() -> None:
    """A page's shared fields of 64 bytes or more as JSON leave it, named by key; put back, the page is the one
    made; the page without them is still its model's JSON; the same part is the same bytes object, so runs
    pickled together (from a worker process) carry it once."""
    prompt = "You are the team's assistant. Keep what you promise, and say when you cannot." * 3
    tools = [page_part(ToolView, name=f"tool_{i}", description="Does one thing, well." * 4, write=i % 2 == 0)
             for i in range(3)]
    page = page_part(TranscriptPage, suite="followup", key="k1", title="t", facts=[], system_prompt=prompt,
                     tools=tools, persists="Nothing.", reply="Done.")
    before = json.dumps(page)
    written, parts = shared_parts(page)
    assert json.dumps(page) == before  # the page handed in is left as it is
    assert written["parts"] == {name: key for name, (key, _) in zip(("system_prompt", "tools"), parts, strict=True)}
    assert "tools" not in written and "system_prompt" not in written and written["persists"] == "Nothing."
    assert all(key == hashlib.sha256(data).hexdigest()[:16] and json.loads(data) == page[name]
               for name, (key, data) in zip(("system_prompt", "tools"), parts, strict=True))
    assert page_json(written) == TranscriptPage.model_validate(written).model_dump_json(exclude_defaults=True).encode()
    back = with_parts(written, {key: json.loads(data) for key, data in parts})
    assert back == page and list(back) == list(page)  # the fields in their model's order
    other = {**page, "key": "k2"}
    _, again = shared_parts(other)
    assert [key for key, _ in again] == [key for key, _ in parts] and all(
        a[1] is b[1] for a, b in zip(again, parts, strict=True))
    alone = len(pickle.dumps(parts))
    assert len(pickle.dumps([parts, again])) < alone + 100  # the second run's parts pickle as references
    assert shared_parts({"suite": "s", "key": "k", "title": "", "facts": [], "persists": "short"})[1] == ()
    with pytest.raises(KeyError):
        with_parts(written, {})


def test_parts_past_the_limit_stay_on_their_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs whose pages each show a prompt of their own: data/parts.js takes parts up to PARTS_BYTES_KEPT, and the
    pages after that keep theirs (only those the file does not hold); every page reads as it was made."""
    tools = [page_part(ToolView, name="lookup", description="Looks one thing up, and says what it found." * 2)]
    pages = [page_part(TranscriptPage, suite="s", key=f"k{i}", title="t", facts=[],
                       system_prompt=f"Run {i}: keep every promise you make, and say so when you cannot." * 2,
                       tools=tools) for i in range(30)]
    records = [RunRecord(key=p["key"], episode="e", row={}, ok=True, text="", shared_text="", page=p) for p in pages]
    source = RunSource(suite="s", judge="j", judges=["j"], columns=[], metrics=[], records=iter(records),
                       members=lambda rows: {})
    tool_bytes, prompt_bytes = len(page_json(tools)), len(page_json(pages[0]["system_prompt"]))
    monkeypatch.setattr(site_module, "PARTS_BYTES_KEPT", tool_bytes + 10 * prompt_bytes)
    files = {name: site_module.file_bytes(data) for name, data in
             site_module.site_files(source, Overview(title="t", facts=[], summary=[], tables=[]), {})}
    text = files["data/parts.js"].decode()
    parts = json.loads(text[text.index("(") + 1:text.rindex(")")])
    assert len(parts) == 11 and sum(len(page_json(p)) for p in parts.values()) <= site_module.PARTS_BYTES_KEPT
    shard = files["data/runs/00000.js"].decode()
    written = json.loads("[" + shard[shard.index("(") + 1:shard.rindex(")")] + "]")[1]
    assert [set(p.get("parts", {})) for p in written] == [{"system_prompt", "tools"}] * 10 + [{"tools"}] * 20
    assert [with_parts(p, parts) for p in written] == pages
    assert all(page_json(p) == TranscriptPage.model_validate(p).model_dump_json(exclude_defaults=True).encode()
               for p in written)


def matching(rows: list[dict[str, Any]], metric: str | None = None, **fields: str | list[str]) -> list[dict[str, Any]]:
    wanted = {k: [v] if isinstance(v, str) else v for k, v in fields.items()}
    return [r for r in rows
            if all(str(r[k]) in v for k, v in wanted.items()) and (metric is None or metric in r["metrics"])]


@pytest.mark.slow
def test_the_site_holds_every_run_and_each_metric_the_runs_it_was_computed_from(
    runs: dict[str, Path], sites: dict[str, Path], reports: dict[str, dict[str, Any]]
) -> None:
    for name, site in sites.items():
        traces = latest_traces(runs[name], include_failed=True)
        rows = index_rows(site)
        assert [r["key"] for r in rows] == [t.run_key for t in traces]
        pages = [p for path in sorted((site / "data" / "runs").glob("*.js")) for p in registered(path)[1]]
        assert [p["key"] for p in pages] == [t.run_key for t in traces]
        for number, path in enumerate(sorted((site / "data" / "runs").glob("*.js"))):  # each page: its model's JSON
            if name == "followup":  # what the browser makes a page of (assets/pages.js)
                assert all(FollowupEntry.model_validate(p).trace for p in registered(path)[1])
                continue
            models = [TranscriptPage.model_validate(p) for p in registered(path)[1]]
            written = ",".join(m.model_dump_json(exclude_defaults=True) for m in models)
            assert path.read_text(encoding="utf-8") == f"commitbench.runs({number},[{written}]);\n"
        (parts,) = registered(site / "data" / "parts.js")  # what many pages show alike, once
        named = [key for p in pages for key in p.get("parts", {}).values()]
        assert set(named) == set(parts) and len(parts) < len(pages) < len(named)
        assert all(key == hashlib.sha256(page_json(part)).hexdigest()[:16] for key, part in parts.items())
        for page in pages:  # each page, its parts put back, is its model's page with every shared field in place
            whole = with_parts(page, parts)
            assert "parts" not in whole and set(page.get("parts", {})) <= set(whole)
            model = FollowupEntry if name == "followup" else TranscriptPage
            assert whole == model.model_validate(whole).model_dump(mode="json", exclude_defaults=True)
        (meta,) = registered(site / "data" / "meta.js")  # each signal described once, there, not on every page
        signals = [s for p in pages for s in (p["signals"] if "signals" in p else [
            {"name": n, "value": v} for n, v in p["shown"]["signals"].items()])]
        assert signals and all(s["name"] in meta["signals"] and "description" not in s for s in signals)
        shown = json.loads((site / "report.json").read_text())
        # The site, written with --out, drew its figures in a scratch directory: its files are its own copies.
        figures = {key: [f"img/{Path(p).name}" for p in paths] for key, paths in reports[name]["files"].items()
                   if key in ("figure", "comparisons_figure")}
        assert shown.pop("files") == figures and all((site / p).is_file() for ps in figures.values() for p in ps)
        assert shown == {k: v for k, v in reports[name].items() if k != "files"}
        for asset in ("index.html", "assets/pages.js", "assets/app.js", "assets/style.css"):
            assert (site / asset).stat().st_size > 0
        page = (site / "index.html").read_text()
        assert "http://" not in page and "https://" not in page  # nothing from the network
    standing = index_rows(sites["standing"])
    doc = reports["standing"]
    checked = 0
    for value in doc["metrics"] + doc["by_gap"] + doc["by_cell"]:
        behind = matching(standing, value["metric"], **value["group"])
        assert len(behind) == value["n"] + value["excluded"], value
        checked += 1
    assert checked > 100
    followup = index_rows(sites["followup"])
    records = one_labeller_labels(labels_path(runs["followup"], FOLLOWUP_JUDGE), FollowupLabelRecord, FOLLOWUP_JUDGE)
    frame = to_frame(responses_from_records(list(records.values()))[0])
    group = ("setup", "variant", "persona", "model", "arm")
    for record in reports["followup"]["headline"]:
        part = frame
        for column in group:
            part = part[part[column].astype(str) == str(record[column])]
        for metric in HEADLINE:
            inside = int((FOLLOWUP_METRICS[metric].denominator(part).astype(float) > 0).sum())
            assert len(matching(followup, metric, **{c: str(record[c]) for c in group})) == inside
    for record in reports["followup"]["outcomes"]:
        for label in OUTCOME_COLUMNS:
            shown = matching(followup, **{c: str(record[c]) for c in group}, outcome=label)
            assert len(shown) == round(record[label] * record["n"])


@pytest.mark.slow
def test_a_followup_entry_holds_the_trace_the_records_and_the_turn_only_where_no_record_has_it(
    runs: dict[str, Path]
) -> None:
    from commitbench.analysis.view.followup import SetupViews, followup_run
    from commitbench.analysis.view.transcript import search_text

    traces = latest_traces(runs["followup"])
    records = one_labeller_labels(labels_path(runs["followup"], FOLLOWUP_JUDGE), FollowupLabelRecord, FOLLOWUP_JUDGE)
    views = SetupViews(SETUPS)
    trace = next(t for t in traces if any(True for _ in t.tool_calls()))
    record = records[trace.run_key]
    labelled = followup_run(trace, [(FOLLOWUP_JUDGE, record), ("other", None)], views)
    entry = FollowupEntry.model_validate_json(labelled.page)
    assert entry.key == trace.run_key and entry.checks[1] == ("other", None) and "turn" not in entry.shown
    # Parsed elsewhere: the trace and the record as their JSON made now.
    assert entry.trace == json.loads(trace.model_dump_json())
    assert entry.checks[0] == (FOLLOWUP_JUDGE, json.loads(record.model_dump_json()))
    shared = dict(labelled.parts)
    assert json.loads(shared[entry.parts["settings"]]) == settings_text(trace.agent.settings)
    assert labelled.text == search_text(trace, frozenset({record.turn.user_message}))
    assert labelled.shared_text == record.turn.user_message and labelled.speakers == "User · user"
    assert entry.shown["signals"]["outcome"] == record.result.outcome.value
    # Just read from the run's files: their lines as they are (nothing is written anew).
    stored = StoredLabels(labels_path(runs["followup"], FOLLOWUP_JUDGE), FollowupLabelRecord)
    for read in iter_latest_traces(runs["followup"]):
        if read.run_key == trace.run_key:
            fresh = stored[read.run_key]
            page = followup_run(read, [(FOLLOWUP_JUDGE, fresh)], views).page
            break
    label_line = next(line for line in labels_path(runs["followup"], FOLLOWUP_JUDGE).read_bytes().splitlines()
                      if json.loads(line)["run_key"] == trace.run_key)
    trace_line = next(line for line in (runs["followup"] / "traces.jsonl").read_bytes().splitlines()
                      if json.loads(line)["run_key"] == trace.run_key)
    assert b',"trace":' + trace_line + b',"checks":[["' + FOLLOWUP_JUDGE.encode() + b'",' + label_line + b"]]" in page
    # A trace too long to hold whole: its long texts cut as a transcript cuts them, the rest as it was.
    huge = "x" * 300_000
    long = trace.model_copy(update={"events": [*trace.events[:-1], trace.events[-1].model_copy(update={"text": huge})]})
    cut = FollowupEntry.model_validate_json(followup_run(long, [(FOLLOWUP_JUDGE, record)], views).page)
    assert cut.trace["events"][-1]["text"] == clip(huge) and len(cut.model_dump_json()) < 64_000
    assert cut.trace["events"][:-1] == json.loads(trace.model_dump_json())["events"][:-1]
    again = followup_run(trace, [(FOLLOWUP_JUDGE, record)], views)
    assert all(a[1] is b[1] for a, b in zip(again.parts, labelled.parts, strict=True))  # the same bytes: pickled once
    # No record: the turn the checkers would read, from the trace; its outcome says it was not labelled.
    alone = FollowupEntry.model_validate_json(followup_run(trace, [(FOLLOWUP_JUDGE, None)], views).page)
    assert alone.shown["turn"]["user_message"] == record.turn.user_message
    assert alone.shown["turn"]["reply"] == record.turn.reply and alone.shown["outcome"] == "not labelled"
    broken = trace.model_copy(update={"infra_error": "timeout", "turns": []})
    failed = FollowupEntry.model_validate_json(followup_run(broken, [(FOLLOWUP_JUDGE, None)], views).page)
    assert "turn" not in failed.shown and failed.trace["infra_error"] == "timeout"
    assert failed.shown["outcome"] == "infra error"


@pytest.mark.slow
def test_runs_that_all_failed_are_listed_and_a_foreign_directory_is_left_alone(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing
    import tempfile

    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "manifest.json").write_bytes((runs["followup"] / "manifest.json").read_bytes())
    broken = [t.model_copy(update={"infra_error": "timeout: the endpoint did not answer", "turns": []})
              for t in latest_traces(runs["followup"])]
    (failed / "traces.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in broken))
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    build_site(failed, failed / "site", n_boot=20)
    # The report failed (no labelled run) after starting its figure on another core: that drawing was stopped
    # before the build removed its scratch directory, and makes no folder there afterwards.
    assert not [p.name for p in multiprocessing.active_children() if p.name.startswith("aside")]
    assert list(scratch_root.iterdir()) == []
    monkeypatch.undo()
    rows = index_rows(failed / "site")
    assert len(rows) == len(broken) and {r["status"] for r in rows} == {"infra error"}
    assert all(not r["metrics"] for r in rows)
    (meta,) = registered(failed / "site" / "data" / "meta.js")
    assert meta["overview"]["summary"][0].startswith("No report:") and meta["finished"] == 0
    pages = registered(failed / "site" / "data" / "runs" / "00000.js")[1]
    assert {p["trace"]["infra_error"] for p in pages} == {"timeout: the endpoint did not answer"}

    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "data").mkdir()
    (foreign / "data" / "mine.txt").write_text("keep me")
    assert main(["view", str(runs["followup"]), "--out", str(foreign), "--n-boot", "20"]) == 2
    assert "holds no site written by commitbench view" in capsys.readouterr().err
    assert (foreign / "data" / "mine.txt").read_text() == "keep me"


def _report_threads_ended() -> None:
    """Wait for every report thread of a build (``commitbench-view-report``) to end."""
    import threading

    for thread in threading.enumerate():
        if thread.name == "commitbench-view-report":
            thread.join(timeout=120)
            assert not thread.is_alive()


@pytest.mark.slow
def test_a_build_stopped_after_the_read_leaves_nothing_in_tmp_and_is_replaced_by_the_next(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while data/parts.js is written: every trace has been read, so the report goes on being built
    beside the failing site. Its files go to a scratch directory, which must not outlive the build (the report
    may not make it again once it is removed), and the half-written site is replaced by the next build."""
    import tempfile

    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))

    def disk_full(parts: dict[str, bytes]) -> Iterator[bytes]:
        raise OSError(28, "No space left on device", "data/parts.js")

    monkeypatch.setattr(site_module, "_parts_script", disk_full)
    out = tmp_path / "site"
    with pytest.raises(UsageError, match="No space left on device"):
        build_site(runs["followup"], out, judge=FOLLOWUP_JUDGE, n_boot=20)
    _report_threads_ended()
    assert list(scratch_root.iterdir()) == []
    assert (out / "unfinished.txt").is_file() and not (out / "data" / "meta.js").exists()
    assert (out / "data" / "runs").is_dir()  # pages were written before the disk filled

    monkeypatch.undo()
    summary = build_site(runs["followup"], out, judge=FOLLOWUP_JUDGE, n_boot=20)
    assert summary.runs == len(latest_traces(runs["followup"], include_failed=True))
    assert (out / "data" / "meta.js").is_file() and not (out / "unfinished.txt").exists()


STOPPED_BUILD = """
import sys, time
from commitbench.analysis.view import site
from commitbench.cli import main

real_site_run = site.site_run

def slow_site_run(record):
    print("writing", flush=True)  # the earlier site is cleared and the traces are being read: stop here
    time.sleep(120)
    return real_site_run(record)

site.site_run = slow_site_run
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("stop,code,said", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_build_stopped_by_a_signal_cleans_up_and_the_next_build_replaces_it(
    runs: dict[str, Path], tmp_path: Path, stop: signal.Signals, code: int, said: str
) -> None:
    """SIGTERM stops 'commitbench view' as Ctrl-C does: its scratch directory is removed, and the directory it
    was writing holds a site marked unfinished, which the next build replaces (instead of refusing it)."""
    out = tmp_path / "site"
    build_site(runs["followup"], out, judge=FOLLOWUP_JUDGE, n_boot=20)  # an earlier site, to be replaced
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    script = tmp_path / "stopped_build.py"
    script.write_text(STOPPED_BUILD)
    child = subprocess.Popen(
        [sys.executable, str(script), "view", str(runs["followup"]), "--out", str(out), "--judge", FOLLOWUP_JUDGE,
         "--n-boot", "20", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=die_with_parent,
        env={**os.environ, "TMPDIR": str(scratch_root)})
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "writing\n", child.stderr.read() if child.stderr else ""
        child.send_signal(stop)
        _, error = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == code, error
    assert f"commitbench: {said}" in error and "Traceback" not in error
    assert list(scratch_root.iterdir()) == []
    assert (out / "unfinished.txt").is_file() and not (out / "data" / "meta.js").exists()
    assert main(["view", str(runs["followup"]), "--out", str(out), "--judge", FOLLOWUP_JUDGE, "--n-boot", "20",
                 "--no-progress"]) == 0
    assert (out / "data" / "meta.js").is_file() and not (out / "unfinished.txt").exists()


# ------------------------------------------------------------------------------ the browser
@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    yield from browser_session()


def page_url(site: Path, route: str = "#/") -> str:
    return (site / "index.html").resolve().as_uri() + route


def open_site(chrome: Browser, site: Path, route: str = "#/") -> None:
    chrome.goto(page_url(site, route), ready=route_ready(route))


def assert_clean(chrome: Browser) -> None:
    assert chrome.problems() == [], "the page reported errors"


def shot(chrome: Browser, path: Path, capsys: pytest.CaptureFixture[str], full_page: bool = True) -> Path:
    written = chrome.screenshot(path, full_page=full_page)
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written.stat().st_size > 5_000
    with capsys.disabled():
        print(f"\nscreenshot: {written}")
    return written


TABLES_JS = """Array.from(document.querySelectorAll('main table.data')).map(t => ({
  caption: t.caption ? t.caption.textContent : '',
  head: Array.from(t.tHead.rows[0].cells).map(c => c.textContent.trim()),
  rows: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => c.textContent.trim())),
  links: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => {
    const a = c.querySelector('a'); return a ? a.getAttribute('href') : null; })),
}))"""


def number(value: float, signed: bool = False) -> str:
    return f"{100 * value:+.0f}" if signed else f"{100 * value:.0f}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{number(value)}%"


def interval(estimate: float | None, low: float | None, high: float | None, signed: bool = False,
             clusters: int | None = None) -> str:
    """Every table's format: ``62% [40, 81]``, a difference ``+12 pp [-3, +25]``."""
    if estimate is None:
        return "-"
    text = f"{number(estimate, signed=True)} pp" if signed else pct(estimate)
    if low is None and high is None and clusters is not None and clusters < 6:
        return f"{text} n/a ({clusters} cluster{'' if clusters == 1 else 's'})"  # too few clusters for an interval
    if low is None or high is None:
        return text
    return f"{text} [{number(low, signed)}, {number(high, signed)}]"


def cell(tables: list[dict[str, Any]], caption: str, row_key: tuple[str, ...], column: str) -> tuple[str, str | None]:
    table = next(t for t in tables if t["caption"] == caption)
    j = table["head"].index(column)
    for row, links in zip(table["rows"], table["links"], strict=True):
        if tuple(row[: len(row_key)]) == row_key:
            return row[j], links[j]
    raise AssertionError(f"no row {row_key} in {caption!r}")


@pytest.mark.slow
def test_overview_numbers_equal_report_json_and_link_to_their_runs(
    chrome: Browser, sites: dict[str, Path], reports: dict[str, dict[str, Any]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = reports["standing"]
    open_site(chrome, sites["standing"])
    tables = chrome.evaluate(TABLES_JS)
    links: list[tuple[str, int]] = []
    for v in doc["metrics"]:
        g = v["group"]
        text, link = cell(tables, f"{g['agent']}: metrics (%)", (g["interventions"], g["policy"]), SHORT[v["metric"]])
        expected = interval(v["estimate"], v["low"], v["high"], clusters=v.get("clusters"))
        assert text == expected + (f" +{v['excluded']}" if v["excluded"] else "")
        if link:
            links.append((link, v["n"] + v["excluded"]))
    for v in doc["by_gap"]:
        g = v["group"]
        caption = f"{g['agent']}: metrics per gap (%)"
        text, _ = cell(tables, caption, (g["interventions"], g["policy"], g["gap"]), SHORT[v["metric"]])
        expected = interval(v["estimate"], v["low"], v["high"], clusters=v.get("clusters"))
        assert text == expected + (f" +{v['excluded']}" if v["excluded"] else "")
    for v in doc["by_cell"]:
        g = v["group"]
        text, link = cell(tables, f"{g['agent']}: strict accuracy by cell (%)", (g["cell"],),
                          f"{g['interventions']} ({g['policy'][:4]})")
        assert text == pct(v["estimate"])
        links.append((str(link), v["n"] + v["excluded"]))
    assert doc["paired"] and doc["policy_effect"]
    for p in doc["paired"]:
        g = p["group"]
        text, _ = cell(tables, f"{g['agent']}: difference from '{doc['baseline']}' on the same episodes (pp)",
                       (p["arm"], g["policy"]), SHORT[p["metric"]])
        assert text == interval(p["estimate"], p["low"], p["high"], signed=True, clusters=p.get("clusters"))
    for p in doc["policy_effect"]:
        g = p["group"]
        text, _ = cell(tables, "Explicit minus silent policy, same chats (pp)", (g["agent"], g["interventions"]),
                       SHORT[p["metric"]])
        assert text == interval(p["estimate"], p["low"], p["high"], signed=True, clusters=p.get("clusters"))
    assert chrome.evaluate("document.querySelector('figure img').naturalWidth") > 100  # the heatmap
    shot(chrome, tmp_path / "standing-overview.png", capsys)
    assert len(links) > 50
    for href, expected in links[:: max(1, len(links) // 40)]:  # follow a spread of them
        show(chrome, href)
        assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == expected, href
    assert_clean(chrome)

    doc = reports["followup"]
    open_site(chrome, sites["followup"])
    tables = chrome.evaluate(TABLES_JS)
    group = ("setup", "variant", "persona", "model", "arm")
    for r in doc["headline"]:
        for metric, label in HEADLINE.items():
            text, _ = cell(tables, "Headline rates (%, 95% intervals clustered by request), labels by the LLM checker",
                           tuple(str(r[c]) for c in group), label)
            clusters = r.get(f"{metric}_clusters")
            assert text == interval(r[metric], r[f"{metric}_low"], r[f"{metric}_high"], clusters=clusters)
    for r in doc["outcomes"]:
        caption = "Outcomes (%), labels by the LLM checker"
        text, link = cell(tables, caption, tuple(str(r[c]) for c in group), "n")
        assert text == str(r["n"])
        show(chrome, str(link))
        assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == r["n"]
        show(chrome, "#/")
        for label in OUTCOME_COLUMNS:
            text, _ = cell(tables, caption, tuple(str(r[c]) for c in group), label)
            assert text == pct(r[label])
    assert doc["fix_differences"]
    for r in doc["fix_differences"]:
        text, _ = cell(tables, "Each arm minus 'none' on the same requests (pp, paired bootstrap), labels by the "
                       "LLM checker",
                       (*(str(r[c]) for c in group[:4]), r["arm_a"], r["metric"]), "difference")
        assert text == interval(r["difference"], r["low"], r["high"], signed=True, clusters=r.get("clusters"))
    assert chrome.evaluate("document.querySelector('figure img').naturalWidth") > 100
    assert_clean(chrome)


def keys_shown(chrome: Browser) -> list[str]:
    """The runs the list shows, on every one of its pages."""
    rows = "Array.from(document.querySelectorAll('#runs-table tbody tr')).map(r => r.dataset.key)"
    keys = list(chrome.evaluate(rows))
    while chrome.evaluate("!!document.getElementById('next-page') && !document.getElementById('next-page').disabled"):
        before = chrome.evaluate("document.getElementById('main').dataset.renderedAt")
        chrome.evaluate("document.getElementById('next-page').click()")
        chrome.wait_for(f"document.getElementById('main').dataset.renderedAt !== {before!r}")
        keys += chrome.evaluate(rows)
    assert len(keys) == chrome.evaluate("Number(document.getElementById('run-count').dataset.count)")
    return keys


@pytest.mark.slow
def test_filters_reduce_the_list_to_the_expected_runs(
    chrome: Browser, runs: dict[str, Path], sites: dict[str, Path]
) -> None:
    traces = latest_traces(runs["standing"])
    open_site(chrome, sites["standing"], "#/runs")
    assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == len(traces)

    route = "#/runs?agent=chat%3Amock-thinking&cell=PEER-DIRECT,CRED-DIRECT"
    show(chrome, route)
    expected = {t.run_key for t in traces if t.agent and t.agent.name == "chat:mock-thinking"
                and t.factors["cell"] in ("PEER-DIRECT", "CRED-DIRECT")}
    assert 0 < len(expected) < len(traces)
    assert set(keys_shown(chrome)) == expected

    # A click in the filter panel narrows further; the address keeps the state, so a link reproduces the view.
    box = chrome.evaluate("""(() => { const f = Array.from(document.querySelectorAll('fieldset.facet'))
        .find(f => f.querySelector('legend').textContent === 'arm');
      const label = Array.from(f.querySelectorAll('label')).find(l => l.querySelector('.value').textContent === 'none');
      return label.getAttribute('for'); })()""")
    chrome.evaluate(f"document.getElementById({box!r}).click()")
    chrome.wait_for("location.hash.includes('interventions=none')")
    chrome.wait_for(route_ready(chrome.evaluate("location.hash")))
    narrowed = {t.run_key for t in traces if t.run_key in expected and not t.interventions}
    assert set(keys_shown(chrome)) == narrowed and 0 < len(narrowed) < len(expected)
    link = chrome.evaluate("location.hash")
    open_site(chrome, sites["standing"], link)  # a fresh load of the same address
    assert set(keys_shown(chrome)) == narrowed
    counts = chrome.evaluate("""Object.fromEntries(Array.from(Array.from(document.querySelectorAll('fieldset.facet'))
        .find(f => f.querySelector('legend').textContent === 'arm').querySelectorAll('.option'))
        .map(o => [o.querySelector('.value').textContent, Number(o.querySelector('.count').textContent)]))""")
    assert counts == {"none": len(narrowed), "oracle:B3+": len(expected) - len(narrowed)}  # counts follow the filter

    # Free text over the messages, tool calls and reasoning (search text loads on demand).
    show(chrome, "#/runs?q=promise%20is%20met")
    hits = {t.run_key for t in traces if any("promise is met" in c.reasoning for c in t.model_calls)}
    assert hits and set(keys_shown(chrome)) == hits
    show(chrome, "#/runs?q=running%20club&agent=creditor-rule")  # words of the script, shared by an episode's runs
    club = {t.run_key for t in traces if t.agent and t.agent.name == "creditor-rule"
            and any("running club" in e.text.lower() for e in t.events)}
    assert club and set(keys_shown(chrome)) == club

    # A signal filter and a sort.
    show(chrome, "#/runs?executed=yes&sort=-tool_errors")
    episodes = episodes_by_id()
    executed = {t.run_key for t in traces if any(c.tool == episodes[t.episode_id].action_tool.name
                                                  and c.error_kind in ("", "failed") for c in t.tool_calls())}
    assert 0 < len(executed) < len(traces) and set(keys_shown(chrome)) == executed
    assert_clean(chrome)


@pytest.mark.slow
def test_the_keyboard_reaches_the_search_a_run_and_back(chrome: Browser, sites: dict[str, Path]) -> None:
    open_site(chrome, sites["standing"], "#/runs")

    def press(key: str, code: str, text: str = "", key_code: int = 0) -> None:
        for kind in ("keyDown", "keyUp"):
            event = {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code,
                     "text": text if kind == "keyDown" else ""}
            chrome.command("Input.dispatchKeyEvent", event)

    press("/", "Slash", "/", 191)
    assert chrome.evaluate("document.activeElement.id") == "q"
    press("Escape", "Escape", "", 27)
    press("j", "KeyJ", "j", 74)
    first = chrome.evaluate("document.activeElement.getAttribute('href')")
    assert first and first.startswith("#/run/")
    press("Enter", "Enter", "\r", 13)
    chrome.wait_for(route_ready(first))
    press("u", "KeyU", "u", 85)
    chrome.wait_for("document.getElementById('main').dataset.route.startsWith('#/runs')")
    assert_clean(chrome)


def _text(chrome: Browser) -> str:
    return str(chrome.evaluate("document.getElementById('main').innerText"))


@pytest.mark.slow
def test_transcripts_show_the_calls_the_judges_reasons_and_what_the_cell_expects(
    chrome: Browser, runs: dict[str, Path], sites: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = latest_traces(runs["standing"])
    run = next(t for t in traces if t.agent and t.agent.kind == "chat" and t.model_calls
               and any(c.is_write and c.tool != "post_message" for c in t.tool_calls()))
    stored = one_labeller_labels(labels_path(runs["standing"], "rules"), StandingLabelRecord, "rules")
    labels = stored[run.run_key].labels
    open_site(chrome, sites["standing"], f"#/run/{run.run_key}")
    text = _text(chrome)
    for call in run.tool_calls():  # every call inline, with its arguments and result (a silent end of turn in brief)
        assert call.tool in text
        if call.tool != "end_turn":
            assert call.result in text and all(str(value) in text for value in (call.arguments or {}).values())
    shown = chrome.evaluate("document.querySelectorAll('ol.chat > li[data-kind=call]').length")
    assert shown == sum(1 for _ in run.tool_calls())
    assert labels and all(label.rationale in text for label in labels)
    assert "Expected behaviour" in text and run.factors["cell"] in text
    rows = chrome.evaluate("document.querySelectorAll('#model-calls tbody tr').length")
    assert rows == len(run.model_calls)
    assert chrome.evaluate("document.querySelectorAll('.item.reasoning details').length") >= 1
    assert chrome.evaluate("document.querySelector('details.system-prompt summary').textContent") == "System prompt"
    assert chrome.evaluate("document.querySelectorAll('#labels-table tbody tr').length") == len(labels)
    meaning = "document.querySelector('table.signals tr[data-signal=executed] th').getAttribute('title')"
    assert chrome.evaluate(meaning) == SIGNAL_DESCRIPTIONS["executed"]  # the site's words for it
    shot(chrome, tmp_path / "standing-transcript.png", capsys)

    # Channels and direct messages apart: pick the DM thread, and only it is shown.
    dm_run = next(t for t in traces if any(e.channel.startswith("dm:") for e in t.events))
    dm = next(e.channel for e in dm_run.events if e.channel.startswith("dm:"))
    open_site(chrome, sites["standing"], f"#/run/{dm_run.run_key}")
    chrome.evaluate(f"document.querySelector('.channels button[data-channel=\"{dm}\"]').click()")
    visible = chrome.evaluate("""Array.from(document.querySelectorAll('ol.chat > li')).filter(li => !li.hidden)
        .map(li => li.querySelector('.channel') ? li.querySelector('.channel').textContent : '')""")
    assert visible and set(visible) <= {dm, ""}
    assert len(visible) >= sum(1 for e in dm_run.events if e.channel == dm)
    assert chrome.evaluate(f"document.querySelector('.channels button[data-channel=\"{dm}\"]')"
                           ".getAttribute('aria-pressed')") == "true"
    assert_clean(chrome)

    followup = latest_traces(runs["followup"])
    records = one_labeller_labels(labels_path(runs["followup"], FOLLOWUP_JUDGE), FollowupLabelRecord, FOLLOWUP_JUDGE)
    anchored = next(t for t in followup if t.episode_id.startswith("del-001:C2") and not t.interventions)
    record = records[anchored.run_key]
    open_site(chrome, sites["followup"], f"#/run/{anchored.run_key}")
    text = _text(chrome)
    assert record.turn.user_message in text and "create_reminder" in text and "remind_at" in text
    assert record.result.outcome is not None and record.result.rule in text
    assert chrome.evaluate("document.querySelector('.outcome-label').textContent") == record.result.outcome.value
    assert chrome.evaluate(meaning.replace("executed", "outcome")) == "The outcome label of the report's checker."
    marks = chrome.evaluate(
        "Array.from(document.querySelectorAll('blockquote.reply mark')).map(m => m.lastChild.textContent)")
    assert marks == [c.commitment.span for c in record.result.commitments]
    assert record.result.response is not None
    assert record.result.response.false_action_claim.rationale in text
    tools = chrome.evaluate("Array.from(document.querySelectorAll('#tools-table tbody th')).map(c => c.textContent)")
    assert "create_reminder" in tools and "schedule_task" in tools
    shot(chrome, tmp_path / "followup-transcript.png", capsys)

    guarded = next(t for t in followup if any(turn.revisions for turn in t.turns))
    open_site(chrome, sites["followup"], f"#/run/{guarded.run_key}")
    revision = guarded.turns[-1].revisions[0]
    assert revision.original in _text(chrome)
    assert chrome.evaluate("document.querySelectorAll('.item.revision').length") == 1
    assert_clean(chrome)


@pytest.mark.slow
def test_spans_are_located_and_texts_cut_in_browser_units(chrome: Browser, sites: dict[str, Path]) -> None:
    open_site(chrome, sites["followup"])
    for reply, span, expected in SPANS:
        assert chrome.evaluate(f"commitbenchPages.locate({json.dumps(reply)}, {json.dumps(span)})") == expected
        if expected is not None:
            units = reply.encode("utf-16-le")[2 * expected[0]: 2 * expected[1]].decode("utf-16-le")
            assert units.lower() == span.lower()
    # A text is cut past 20,000 characters, counted as code points (an emoji is one, not two UTF-16 units).
    assert chrome.evaluate("commitbenchPages.clip('😀'.repeat(20000)).length") == 40000
    assert chrome.evaluate("commitbenchPages.clip('a'.repeat(20003))") == "a" * 20000 + " [... 3 more characters]"
    cut = clip("b" * 300_000)  # cut already where the site holds it (a trace too long to hold whole): kept as it is
    assert chrome.evaluate(f"commitbenchPages.clip({json.dumps(cut)})") == cut


def _utf16_span(reply: str, span: str) -> tuple[int | None, int | None]:
    """Where the page should mark ``span`` in ``reply``: exactly, else ignoring case (UTF-16 units)."""
    data, wanted = reply.encode("utf-16-le"), span.encode("utf-16-le")
    at = next((i for i in range(0, len(data) - len(wanted) + 1, 2) if data[i:i + len(wanted)] == wanted), None)
    if at is None and len(reply.lower()) == len(reply):
        lowered = reply.lower().encode("utf-16-le")
        wanted = span.lower().encode("utf-16-le")
        at = next((i for i in range(0, len(lowered) - len(wanted) + 1, 2) if lowered[i:i + len(wanted)] == wanted),
                  None)
    return (None, None) if at is None or not span else (at // 2, at // 2 + len(span.encode("utf-16-le")) // 2)


@pytest.mark.slow
def test_every_followup_page_made_in_the_browser_is_its_trace_and_records(
    chrome: Browser, runs: dict[str, Path], sites: dict[str, Path]
) -> None:
    """The site holds what a follow-up page is made of; the page the browser makes of it shows the trace's chat
    as ``chat_items`` makes it (the standing suite's pages are made of it in Python), and each checker's
    verdict as its stored record says, for every run of the follow-up run (failed ones too)."""
    site = sites["followup"]
    (parts,) = registered(site / "data" / "parts.js")
    entries = [e for path in sorted((site / "data" / "runs").glob("*.js")) for e in registered(path)[1]]
    traces = {t.run_key: t for t in latest_traces(runs["followup"], include_failed=True)}
    assert [e["key"] for e in entries] == list(traces)
    records = one_labeller_labels(labels_path(runs["followup"], FOLLOWUP_JUDGE), FollowupLabelRecord, FOLLOWUP_JUDGE)
    open_site(chrome, site)
    whole = [with_parts(e, parts) for e in entries]
    pages = json.loads(chrome.evaluate(f"JSON.stringify({json.dumps(whole)}.map(commitbenchPages.page))"))
    checked_spans = 0
    for page in pages:
        trace = traces[page["key"]]
        assert page["suite"] == "followup" and page["items"] == chat_items(trace)
        assert page["system_prompt"] == system_prompt(trace)
        assert [(c["turn"], c["prompt_tokens"]) for c in page["model_calls"]] == [
            (c.turn, c.prompt_tokens) for c in trace.model_calls]
        assert page["infra_error"] == (trace.infra_error or "")
        facts = {f["label"]: f["value"] for f in page["facts"]}
        assert facts["episode"] == trace.episode_id and facts["run key"] == trace.run_key
        assert facts["sample"] == str(trace.sample) and facts["request"] == trace.factors["request_id"]
        assert facts["agent settings"] == settings_text(trace.agent.settings)
        assert facts["status"] == ("infra error" if trace.infra_error else "finished")
        record = records.get(trace.run_key)
        check = page["checks"][0]
        assert check["judge"] == FOLLOWUP_JUDGE
        if record is None:
            assert check == {"judge": FOLLOWUP_JUDGE, "error": "not labelled"} and trace.infra_error
            continue
        result = record.result
        outcome = result.outcome.value if result.outcome else ""
        assert page["title"] == " · ".join([record.turn.request_id, record.turn.setup, record.model, record.arm,
                                            outcome or "judge error"])
        assert check["outcome"] == outcome and check["rule"] == result.rule
        assert check["error"] == (record.error or result.error or "")
        assert page["reply"] == record.turn.reply and page["request"]["user_message"] == record.turn.user_message
        assert page["request"]["capabilities"] == [c.value for c in record.turn.required_capabilities]
        assert [c["span"] for c in check["commitments"]] == [c.commitment.span for c in result.commitments]
        for shown, item in zip(check["commitments"], result.commitments, strict=True):
            assert (shown["start"], shown["end"]) == _utf16_span(record.turn.reply, item.commitment.span)
            assert shown["feasible"] == item.feasibility.feasible and shown["anchored"] == item.anchored
            assert shown["missing"] == [c.value for c in item.feasibility.missing_capabilities]
            checked_spans += shown["start"] is not None
        if result.response is not None:
            assert {a["name"]: a["value"] for a in check["answers"]} == {
                name: getattr(result.response, name).value for name in
                ("false_action_claim", "declines_request", "hands_back_to_user", "did_task_now", "asks_clarification")}
        signals = {s["name"]: s["value"] for s in page["signals"]}
        assert signals["outcome"] == (outcome or "judge error")
        assert signals["tool_calls"] == sum(1 for _ in trace.tool_calls())
        assert [t["name"] for t in page["tools"]] == [
            t.name for t in SETUPS.tool_definitions(SetupId(trace.factors["setup"]), Persona(trace.factors["persona"]))]
    assert checked_spans > 0 and any(p["items"] and any(i["kind"] == "call" for i in p["items"]) for p in pages)
    assert any(i["kind"] == "revision" for p in pages for i in p["items"])


def _unusual_traces() -> list[EpisodeTrace]:
    """Traces shaped as a chat seldom is: results without their call and calls without their result, notices,
    a turn whose opening message is missing, a message that looks like an opening on another channel, a text
    past the transcript's limit, reasoning of two calls, a replaced reply, words outside the BMP."""
    opened = _event(EventKind.MESSAGE, 2, "CI is green 😀.", sender="Lena Park", role="coordinator", channel="#team",
                    act="trigger")
    second = _event(EventKind.MESSAGE, 4, "And staging?", sender="Lena Park", role="coordinator", channel="#team")
    unseen = _event(EventKind.MESSAGE, 9, "never logged", sender="Bo", channel="#team")
    calls = [
        ToolCallRecord(step=2, turn=0, tool="deploy", arguments={"service": "api", "n": 2, "deep": {"a": [1, None]}},
                       call_id="c1", ok=True, result="Deployed.", is_write=True),
        ToolCallRecord(step=2, turn=0, tool="nope", arguments=None, raw_arguments="{oops", call_id="c2", ok=False,
                       result="unknown tool", error_kind="unknown_tool"),
        ToolCallRecord(step=2, turn=0, tool="lookup", arguments={"q": "ü"}, call_id="c3", ok=True, result="x" * 20_010),
        ToolCallRecord(step=2, turn=0, tool="end_turn", arguments={}, call_id="", ok=True, result=""),
    ]
    events = [
        _event(EventKind.SYSTEM, 0, "You are Aide."),
        _event(EventKind.MESSAGE, 0, "Please deploy api.", sender="Alice Moreno", role="lead", channel="#team",
               act="request", subject="Alice Moreno"),
        _event(EventKind.ASSISTANT, 1, "I'll deploy it.", sender="Aide", channel="#team", act="promise"),
        _event(EventKind.MESSAGE, 2, "CI is green 😀.", sender="Lena Park", role="coordinator", channel="#other"),
        opened,
        _event(EventKind.TOOL_RESULT, 2, "Deployed.", tool="deploy", call_id="c1"),
        _event(EventKind.TOOL_RESULT, 2, "unknown tool", tool="nope", call_id="c2", ok=False),
        _event(EventKind.TOOL_RESULT, 2, "orphan result", tool="ghost", call_id="zz", ok=False),
        _event(EventKind.TOOL_RESULT, 2, "no id at all", tool="ghost"),
        _event(EventKind.NOTICE, 2, "The turn's tool budget is spent."),
        _event(EventKind.REVISION_REQUEST, 2, "Rewrite your reply."),
        _event(EventKind.ASSISTANT, 2, "Done, Alice.", sender="Aide", channel="dm:Alice Moreno"),
        second,
        _event(EventKind.ASSISTANT, 4, "Staging too.", sender="Aide", channel="#team"),
    ]
    full = EpisodeTrace(
        env_id="commitbench/Standing-v0", episode_id="st-x", factors={}, run_key="k", events=events,
        turns=[TurnRecord(index=0, opened_by=opened, calls=calls, reply="Done, Alice.",
                          revisions=[Revision(by="claim_guard", kind="claim_guarded", original="All done!")]),
               TurnRecord(index=1, opened_by=second, reply="Staging too.", reply_channel="#team"),
               TurnRecord(index=2, opened_by=unseen, calls=[calls[0].model_copy(update={"turn": 2, "call_id": "c9"})],
                          revisions=[Revision(by="rewrite", kind="rewritten", original="y" * 20_001)])],
        model_calls=[ModelCallRecord(turn=0, reasoning="  The trigger came.  "), ModelCallRecord(turn=0),
                     ModelCallRecord(turn=0, reasoning="Deploy now."), ModelCallRecord(turn=1, reasoning=" ")],
    )
    return [full, full.model_copy(update={"turns": []}), full.model_copy(update={"events": []}),
            full.model_copy(update={"events": events[:4]})]


@pytest.mark.slow
def test_the_browser_makes_the_chat_of_unusual_traces_as_chat_items_does(
    chrome: Browser, sites: dict[str, Path]
) -> None:
    open_site(chrome, sites["followup"])
    for trace in _unusual_traces():
        made = json.loads(chrome.evaluate(f"JSON.stringify(commitbenchPages.chatItems({trace.model_dump_json()}))"))
        # The same JSON with its defaults left out, as the trace file holds it from an older writer.
        sparse = trace.model_dump_json(exclude_defaults=True)
        assert json.loads(chrome.evaluate(f"JSON.stringify(commitbenchPages.chatItems({sparse}))")) == made
        assert made == chat_items(trace)
        assert event_speakers(trace) == speakers(made)  # who speaks, for search, read from the events alike


@pytest.mark.slow
def test_a_page_whose_shared_part_is_missing_says_so(chrome: Browser, sites: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(sites["followup"], site)
    page = next(p for path in sorted((site / "data" / "runs").glob("*.js")) for p in registered(path)[1]
                if "tools" in p.get("parts", {}))
    (site / "data" / "parts.js").write_text("commitbench.parts({});\n", encoding="utf-8")
    open_site(chrome, site, f"#/run/{page['key']}")
    assert chrome.evaluate("document.querySelector('.error-box h1').textContent") == "Cannot show this page"
    first = next(iter(page["parts"].items()))  # the first part named is the first found missing
    assert f"the site holds no part {first[1]} ({first[0]} of run {page['key']})" in _text(chrome)


@pytest.mark.slow
def test_side_by_side_shows_one_episode_in_two_columns(
    chrome: Browser, runs: dict[str, Path], sites: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = latest_traces(runs["standing"])
    thinking = next(t for t in traces if t.agent and t.agent.name == "chat:mock-thinking" and t.model_calls
                    and any(c.reasoning for c in t.model_calls))
    other = next(t for t in traces if t.agent and t.agent.name == "chat:mock-no-thinking"
                 and t.episode_id == thinking.episode_id and t.interventions == thinking.interventions)
    open_site(chrome, sites["standing"], f"#/run/{thinking.run_key}")
    link = first_href(chrome, ".compare-link")  # the transcript offers the same episode in the other runs
    assert link.startswith(f"#/compare/{thinking.run_key}/")
    route = f"#/compare/{thinking.run_key}/{other.run_key}"
    show(chrome, route)
    sides = chrome.evaluate("""['left', 'right'].map(s => ({
        title: document.querySelector('#side-' + s + ' h2').textContent,
        items: document.querySelectorAll('#side-' + s + ' ol.chat > li').length }))""")
    assert "chat:mock-thinking" in sides[0]["title"] and "chat:mock-no-thinking" in sides[1]["title"]
    assert all(side["items"] > 3 for side in sides)
    columns = "getComputedStyle(document.querySelector('.columns')).gridTemplateColumns.split(' ').length"
    assert chrome.evaluate(columns) == 2
    shot(chrome, tmp_path / "side-by-side.png", capsys)
    # Every page, through the code that draws the README's pictures (scripts/viewer_screenshots.py).
    pages = capture_pages(chrome, page_url(sites["standing"], ""), tmp_path / "pages", "standing",
                          f"#/run/{thinking.run_key}", route)
    assert sorted(pages) == ["compare", "overview", "runs", "transcript"]
    with capsys.disabled():
        for path in pages.values():
            assert path.read_bytes()[:4] == b"\x89PNG"
            print(f"\nscreenshot: {path}")

    followup = latest_traces(runs["followup"])
    plain = next(t for t in followup if not t.interventions and t.episode_id.startswith("mem-001:C0"))
    guarded = next(t for t in followup if t.interventions and t.episode_id == plain.episode_id)
    open_site(chrome, sites["followup"], f"#/compare/{plain.run_key}/{guarded.run_key}")
    assert chrome.evaluate("document.querySelectorAll('.side').length") == 2
    assert "claim_guard" in chrome.evaluate("document.querySelector('#side-right h2').textContent")
    assert_clean(chrome)


@pytest.mark.slow
def test_the_served_site_works_and_the_server_stops_with_the_test(
    chrome: Browser, runs: dict[str, Path], tmp_path: Path
) -> None:
    server, url, _ = serve_view([str(runs["followup"]), "--out", str(tmp_path / "site"), "--judge", FOLLOWUP_JUDGE,
                                 "--n-boot", "50", "--serve", "0"])
    try:
        chrome.goto(url + "#/", ready=route_ready("#/"))
        show(chrome, "#/runs")
        assert chrome.evaluate("Number(document.getElementById('run-count').dataset.count)") == len(
            latest_traces(runs["followup"], include_failed=True))
        key = latest_traces(runs["followup"])[0].run_key
        show(chrome, f"#/run/{key}")
        assert chrome.evaluate("document.querySelectorAll('ol.chat > li').length") >= 2
        assert_clean(chrome)
    finally:
        stop_view(server)
    assert server.returncode is not None


@pytest.mark.slow
def test_a_followup_run_appended_to_a_watched_run_gets_its_page_made_in_the_browser(
    chrome: Browser, runs: dict[str, Path], tmp_path: Path
) -> None:
    """A run the page picks up while it watches comes as its entry with its parts in place (``live.json``); the
    browser makes its page as it makes those of the site's files."""
    source = runs["followup"]
    live = tmp_path / "live-run"
    live.mkdir()
    for path in [source / "manifest.json", source / "cells.jsonl", *sorted(source.glob("labels-*.jsonl"))]:
        (live / path.name).write_bytes(path.read_bytes())
    lines = (source / "traces.jsonl").read_bytes().splitlines(keepends=True)
    held = next(i for i, line in enumerate(lines) if b'"calls":[{' in line)  # a run that calls a tool
    new = EpisodeTrace.model_validate_json(lines[held])
    (live / "traces.jsonl").write_bytes(b"".join(lines[:held] + lines[held + 1:]))
    records = one_labeller_labels(labels_path(source, FOLLOWUP_JUDGE), FollowupLabelRecord, FOLLOWUP_JUDGE)
    server, url, _ = serve_view([str(live), "--out", str(tmp_path / "site"), "--judge", FOLLOWUP_JUDGE,
                                 "--n-boot", "20", "--serve", "0", "--watch"])
    try:
        chrome.goto(url + "#/runs", ready=route_ready("#/runs"))
        chrome.wait_for("!document.getElementById('live').hidden")
        with (live / "traces.jsonl").open("ab") as handle:
            handle.write(lines[held])
        chrome.wait_for(f"!!document.querySelector('tr[data-key=\"{new.run_key}\"]')", timeout=30)
        show(chrome, f"#/run/{new.run_key}")
        record = records[new.run_key]
        assert chrome.evaluate("document.querySelector('.outcome-label').textContent") == record.result.outcome.value
        text = _text(chrome)
        assert record.turn.user_message in text and record.result.rule in text
        assert all(call.tool in text for call in new.tool_calls())
        tools = chrome.evaluate("document.querySelectorAll('#tools-table tbody tr').length")
        assert tools == len(SETUPS.tool_definitions(SetupId(new.factors["setup"]), Persona(new.factors["persona"])))
        assert_clean(chrome)
    finally:
        chrome.goto("about:blank")  # leave the served page first: it asks the server for new runs every 2 s
        stop_view(server)


def test_view_refuses_a_directory_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path)]) == 2
    assert "neither manifest.json nor traces.jsonl" in capsys.readouterr().err


def test_the_agent_settings_fact_is_json_text_of_the_settings_whatever_they_hold() -> None:
    """The "agent settings" fact is ``json.dumps(settings, sort_keys=True)``, also when it is served from the
    texts made before (settings alike in orjson's text but not in json's: NaN against null, 1 against 1.0)."""
    cases: list[dict[str, Any]] = [
        {"b": 1, "a": "x"}, {"a": "x", "b": 1}, {"b": 1.0, "a": "x"}, {"t": float("nan")}, {"t": None},
        {"t": float("inf")}, {"big": 1 << 70}, {"nested": {"z": [1, 2], "y": "é"}}, {"t": True}, {"t": 1},
    ]
    for _ in range(2):  # the second time from the kept texts
        for settings in cases:
            assert settings_text(settings) == json.dumps(settings, sort_keys=True)
