"""Report and viewer read a run a trace at a time: the same numbers as a table of every row held at once,
one trace alive at a time, rows kept as coded columns, and the viewer's metric links made a shard at a time."""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from commitbench.analysis.rowstore import RowStore, one_text_each, row_batch, rows_frame
from commitbench.analysis.standing.metrics import run_row
from commitbench.analysis.standing.report import build_standing_report
from commitbench.analysis.standing.results import load_rows, message_labels
from commitbench.analysis.view import site
from commitbench.analysis.view.model import (
    Column,
    ColumnKind,
    MetricInfo,
    Overview,
    RunRecord,
    RunSource,
    SiteBatch,
    TranscriptPage,
    each_run,
)
from commitbench.analysis.view.model import run_row as site_row
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.judges.standing.rules import RuleJudge
from commitbench.runner import run_experiment
from commitbench.suites.standing import episodes_of_run
from commitbench.suites.standing import view as standing_view
from commitbench.traces import EpisodeTrace, append_traces, iter_traces, latest_by_key

SLICE = [e for e in load_episodes() if e.split.value == "test" and e.variant == 0 and e.commitment_type in
         ("deploy_service", "send_report", "book_room")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three reference agents x two arms on 90 episodes, and one cell whose first trace failed."""
    out = tmp_path_factory.mktemp("streaming") / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "last-speaker-wins", "rank-wins"],
                              interventions=["none", "oracle:B3+"], episodes={"ids": [e.id for e in SLICE]})
    run_experiment(config, out)
    first = next(iter_traces(out))
    append_traces(out / "traces.jsonl", [first.model_copy(update={"infra_error": "timeout: a retry that failed"}),
                                         first])
    return out


def rows_held_at_once(run_dir: Path) -> pd.DataFrame:
    """The rows as the report made them before it streamed: every row a dict, all of them in one list."""
    episodes = episodes_of_run(run_dir)
    rules = RuleJudge()

    def row(trace: EpisodeTrace) -> dict[str, Any]:
        episode = episodes[trace.episode_id]
        return run_row(trace, episode, message_labels(trace, episode, None, "rules", rules))

    return pd.DataFrame(latest_by_key(iter_traces(run_dir), row))


def test_the_streamed_rows_and_report_equal_those_of_every_row_held_at_once(run_dir: Path) -> None:
    held = rows_held_at_once(run_dir)
    streamed = load_rows(run_dir, episodes=episodes_of_run(run_dir))
    assert len(streamed) == len(held) == 3 * 2 * len(SLICE)
    texts = [name for name in held.columns if held[name].dtype == "str"]
    assert texts and all(streamed[name].dtype == "category" for name in texts)  # the same texts, held once
    pd.testing.assert_frame_equal(streamed.astype({name: "str" for name in texts}).set_index("run_key").sort_index(),
                                  held.set_index("run_key").sort_index())
    old = build_standing_report(held, run_dir, "rules", n_boot=200, seed=3).model_dump()
    new = build_standing_report(streamed, run_dir, "rules", n_boot=200, seed=3).model_dump()
    assert new == old
    assert old["runs"] == len(held) and any(m["estimate"] not in (None, 0.0, 1.0) for m in old["metrics"])


def test_one_trace_is_alive_at_a_time_while_the_rows_are_made(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from commitbench.analysis.standing import results

    seen: list[weakref.ref[EpisodeTrace]] = []
    alive_before: list[int] = []
    head_of = results.call_head

    def count(trace: EpisodeTrace) -> Any:  # what the pass over the traces hands on of each, the trace in hand
        alive_before.append(sum(ref() is not None for ref in seen))
        seen.append(weakref.ref(trace))
        return head_of(trace)

    monkeypatch.setattr(results, "call_head", count)
    heads: list[Any] = []
    rows = load_rows(run_dir, episodes=episodes_of_run(run_dir), each_trace=heads.append)
    assert len(seen) == len(rows) == len(heads) and max(alive_before) == 0, alive_before


ROWS: list[dict[str, Any]] = [
    {"key": "a", "flag": True, "maybe": None, "count": 1, "share": 0.5, "word": "x", "mixed": 1},
    {"key": "b", "flag": False, "maybe": True, "count": 2, "share": None, "word": "y", "mixed": True, "later": 3},
    {"key": "c", "flag": True, "maybe": False, "count": 2, "share": math.nan, "mixed": 1.0, "items": [1, 2]},
]


@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], [{"only": None}], [{"a": 1}, {"b": "x"}],
                                  [{"big": 2**70, "flag": True, "share": 1.5, "n": 3},
                                   {"big": 1, "flag": False, "share": math.nan, "n": -4}]])
def test_coded_columns_make_the_frame_pandas_makes_of_the_dicts(rows: list[dict[str, Any]]) -> None:
    pd.testing.assert_frame_equal(rows_frame(rows), pd.DataFrame(rows))


def _shifting_rows(n: int) -> list[dict[str, Any]]:
    """Rows across several batches: fields that come and go, one first seen deep in a later batch, a column
    of mixed types, NaN, None and an unhashable value, and more than 256 distinct values."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {"key": f"k{i % 300}", "flag": i % 3 == 0, "count": i % 7}
        if i % 5:
            row["share"] = math.nan if i % 11 == 0 else i / 4
        if i >= 700:
            row["late"] = ("x", 1, True, 1.0, None)[i % 5]
        if i % 97 == 0:
            row["items"] = [i, i + 1]
        rows.append(row)
    return rows


@pytest.mark.parametrize("n", [1, 511, 512, 513, 1_300])
def test_rows_coded_a_batch_at_a_time_make_the_frame_pandas_makes(n: int) -> None:
    rows = _shifting_rows(n)
    pd.testing.assert_frame_equal(rows_frame(rows), pd.DataFrame(rows))
    store = RowStore()
    for row in rows:
        store.add(row)
    assert len(store) == n
    pd.testing.assert_frame_equal(store.frame(categorical=True).astype(str), pd.DataFrame(rows).astype(str))


@pytest.mark.parametrize("chunk", [1, 7, 250, 2_000])
def test_rows_added_as_batches_of_columns_make_the_frame_pandas_makes(chunk: int) -> None:
    """Rows turned into columns where they were made (row_batch) and added a batch at a time, between rows added
    one at a time: fields that come and go, a field first seen late, lists, NaN, rows in another order."""
    rows = _shifting_rows(1_300)
    for i in range(0, 1_300, 301):
        rows[i] = dict(reversed(list(rows[i].items())))
    store = RowStore()
    at = 0
    while at < len(rows):
        if at % 3 == 1:  # a row of its own now and then, before a batch
            store.add(rows[at])
            at += 1
        batch = row_batch(rows[at:at + chunk])
        assert batch.n == len(batch.columns[0]) == min(chunk, len(rows) - at) and len(batch.names) == len(batch.columns)
        store.add_batch(batch)
        at += chunk
    store.add_batch(row_batch([]))
    assert len(store) == len(rows)
    pd.testing.assert_frame_equal(store.frame(), pd.DataFrame(rows))
    pd.testing.assert_frame_equal(rows_frame(row_batch(rows[i:i + chunk]) for i in range(0, len(rows), chunk)),
                                  pd.DataFrame(rows))


def test_a_batch_with_shared_texts_holds_each_text_once_and_the_same_values() -> None:
    """Equal texts become one object (pickled once), within a column and across columns; nothing else changes."""
    import pickle

    rows = [{"model": "m" + "1" * (i % 2), "arm": "none", "copy": "m" + "1" * (i % 2), "n": i, "nan": math.nan}
            for i in range(50)]
    plain, shared = row_batch(rows), row_batch(rows, shared_texts=True)
    assert shared.names == plain.names and shared.columns == [list(c) for c in plain.columns]
    assert len({id(v) for c in shared.columns[:3] for v in c}) == 3  # "m", "m1" and "none", one object each
    assert len(pickle.dumps(shared)) < len(pickle.dumps(plain))
    seen: dict[str, str] = {}
    first, again = one_text_each(["a" + "b", 1, None], seen), one_text_each(["".join(["a", "b"])], seen)
    assert first == ["ab", 1, None] and again[0] is first[0]


def test_rows_of_one_shape_in_another_order_are_coded_by_name() -> None:
    """A batch whose rows all hold every column in one order is turned into columns at once; rows holding the
    same columns in another order (in the batch, or from one batch to the next) land in the right columns."""
    rows: list[dict[str, Any]] = []
    for i in range(1_300):
        row = {"key": f"k{i}", "flag": i % 2 == 0, "count": i}
        if 512 <= i < 1_024 or i % 300 == 7:  # a batch all in another order, and rows out of order elsewhere
            row = dict(reversed(list(row.items())))
        rows.append(row)
    store = RowStore()
    for row in rows:
        store.add(row)
    pd.testing.assert_frame_equal(store.frame(), pd.DataFrame(rows))


def test_a_column_holds_each_value_once_and_a_small_code_per_row() -> None:
    store = RowStore()
    for i in range(10_000):
        store.add({"agent": "chat:model", "cell": ("BASE", "PEER-DIRECT")[i % 2], "executed": i % 3 == 0})
    assert len(store) == 10_000
    store.frame()  # codes the rows still waiting in the last batch
    columns = store._columns  # what the store holds is the point of this test
    assert [len(c.values) for c in columns.values()] == [1, 2, 2]
    assert all(c.codes.itemsize == 1 and len(c.codes) == 10_000 for c in columns.values())
    assert len(store) == 10_000 and store.frame()["executed"].dtype == np.bool_
    for i in range(300):  # past 256 distinct values a code takes two bytes
        store.add({"agent": f"chat:{i}"})
    store.frame()
    assert columns["agent"].codes.itemsize == 2 and len(columns["cell"].codes) == 10_300
    frame = store.frame(categorical=True)
    assert frame["agent"].dtype == "category" and list(frame["agent"].cat.categories) == sorted(set(frame["agent"]))
    pd.testing.assert_frame_equal(frame.astype(str), store.frame().astype(str))
    assert rows_frame([]).empty


def test_a_categorical_column_keeps_no_lookup_table_until_a_lookup_needs_one() -> None:
    keys = [f"{i:064x}" for i in range(3_000)]
    rows = [{"run_key": key, "cell": ("BASE", "PEER-DIRECT")[i % 2]} for i, key in enumerate(keys)]
    frame = rows_frame(rows, categorical=True)
    categories = frame["run_key"].cat.categories
    assert "_engine" not in categories._cache  # each key again as a Python text, let go once the codes are checked
    # Lookups are what they are on the texts: the table is made again when one needs it.
    assert frame.index[frame["run_key"] == keys[17]].tolist() == [17]
    assert frame["run_key"].isin(keys[5:8]).sum() == 3
    assert frame.groupby("cell", observed=True).size().to_dict() == {"BASE": 1_500, "PEER-DIRECT": 1_500}
    pd.testing.assert_frame_equal(frame.astype(str), pd.DataFrame(rows).astype(str))


@pytest.mark.parametrize("named", [False, True])
def test_the_site_marks_metric_members_a_shard_at_a_time(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, named: bool
) -> None:
    """A suite naming no member columns is asked a batch of finished runs' rows at a time; the standing suite names
    them (``ROW_COLUMNS``) and is asked each combination of their values once. Either way every run's marks are
    those of every finished run asked at once."""
    source = standing_view(run_dir, "rules")
    runs = list(each_run(iter(list(source.records))))  # each run's row: its run-list and member columns
    source = replace(source, records=iter(runs), member_columns=source.member_columns if named else ())
    rows: list[dict[str, Any]] = []
    batches: list[int] = []
    members = source.members

    def batch_members(batch: list[dict[str, Any]]) -> Mapping[str, Any]:
        batches.append(len(batch))
        rows.extend(batch)
        return members(batch)

    source.members = batch_members
    monkeypatch.setattr(site, "MEMBER_BATCH", 16)
    files = dict(site.site_files(source, Overview(title="t", facts=[], summary=[], tables=[]), {}))
    script = site.file_bytes(files["data/index.js"]).decode()
    masks = json.loads(script[script.index("(") + 1:script.rindex(")")])["metrics"]
    if named:
        assert len(rows) < len(masks) and all(set(row) == set(source.member_columns) for row in rows)
    else:
        assert max(batches) == 16 and len(batches) > 3 and sum(batches) == len(rows) == len(masks)
    finished = [site_row(run) for run in runs if run.ok]
    assert len(finished) == len(masks)  # every run of the fixture finished
    at_once = members(finished)  # every finished run at once, as the site did before
    names = [m.name for m in source.metrics]
    expected = [sum(1 << bit for bit, name in enumerate(names) if at_once[name][i]) for i in range(len(finished))]
    assert masks == expected and any(masks)


def test_metric_bits_take_lists_and_arrays_of_any_length_a_batch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each metric's answer may be a list or a numpy array; a short one marks its first runs, a missing one none,
    and the runs with an infrastructure error get no bit."""
    n = 37
    ok = [i % 5 != 3 for i in range(n)]

    def answer(rows: list[dict[str, Any]]) -> dict[str, Any]:
        values = [row["v"] for row in rows]
        return {"even": [v % 2 == 0 for v in values], "third": np.array([v % 3 == 0 for v in values]),
                "short": [True] * (len(rows) // 2)}

    names = ["even", "third", "absent", "short"]
    records = [RunRecord(key=f"k{i}", episode="e", row={"v": i, "c": "x"}, ok=ok[i], text="", shared_text="",
                         page={"suite": "s", "key": f"k{i}", "title": "", "facts": []}) for i in range(n)]
    source = RunSource(suite="s", judge="j", judges=["j"], columns=[Column(name="c", label="c",
                       kind=ColumnKind.FACET, description="c")], metrics=[MetricInfo(name=m, description=m)
                       for m in names], records=iter(records), members=answer)
    monkeypatch.setattr(site, "MEMBER_BATCH", 8)
    files = dict(site.site_files(source, Overview(title="t", facts=[], summary=[], tables=[]), {}))
    script = site.file_bytes(files["data/index.js"]).decode()
    masks = json.loads(script[script.index("(") + 1:script.rindex(")")])["metrics"]
    expected, batch = [], []
    for i in range(n):  # the finished runs, 8 to a batch; a short answer covers the first half of its batch
        if ok[i]:
            batch.append(i)
        if len(batch) == 8 or (i == n - 1 and batch):
            for place, j in enumerate(batch):
                expected.append((j, (j % 2 == 0) | (j % 3 == 0) << 1 | (place < len(batch) // 2) << 3))
            batch = []
    want = [0] * n
    for j, bits in expected:
        want[j] = int(bits)
    assert masks == want and masks[3] == masks[8] == 0 and masks[0] == 0b1011 and masks[1] == 0b1000


@pytest.mark.parametrize("kept", [65_536, 2])
def test_a_suite_naming_its_member_columns_is_asked_once_per_combination_of_them(
    monkeypatch: pytest.MonkeyPatch, kept: int
) -> None:
    """With member columns, ``members`` sees rows of only those fields, each combination once while its bits are
    kept (at most ``kept`` of them); True and 1 stay apart, and an unhashable value is asked about on its own.
    Every finished run gets the bits ``members`` gives its own row; a run with an infrastructure error none."""
    values: list[Any] = [0, 1, 2, True, 1.0, [1], None, "x"]
    n = 60
    ok = [i % 7 != 5 for i in range(n)]
    rows = [{"v": values[i % len(values)], "w": i // len(values) % 2, "noise": i, "c": "x"} for i in range(n)]
    asked: list[dict[str, Any]] = []

    def answer(batch: list[dict[str, Any]]) -> dict[str, Any]:
        asked.extend(batch)
        return {"int": [type(r["v"]) is int and r["w"] == 1 for r in batch],
                "listed": np.array([isinstance(r["v"], list) for r in batch]), "bool": [r["v"] is True for r in batch]}

    names = ["int", "listed", "bool"]
    records = [RunRecord(key=f"k{i}", episode="e", row=rows[i], ok=ok[i], text="", shared_text="",
                         page={"suite": "s", "key": f"k{i}", "title": "", "facts": []}) for i in range(n)]
    source = RunSource(suite="s", judge="j", judges=["j"], columns=[Column(name="c", label="c",
                       kind=ColumnKind.FACET, description="c")], metrics=[MetricInfo(name=m, description=m)
                       for m in names], records=iter(records), members=answer, member_columns=("v", "w"))
    monkeypatch.setattr(site, "MEMBER_BATCH", 8)
    monkeypatch.setattr(site, "MEMBER_KEYS_KEPT", kept)
    files = dict(site.site_files(source, Overview(title="t", facts=[], summary=[], tables=[]), {}))
    script = site.file_bytes(files["data/index.js"]).decode()
    masks = json.loads(script[script.index("(") + 1:script.rindex(")")])["metrics"]
    seen = list(asked)  # what the site asked (the checks below ask too)
    assert all(set(r) == {"v", "w"} for r in seen)
    for i in range(n):
        one = {name: bool(flag[0]) for name, flag in answer([{"v": rows[i]["v"], "w": rows[i]["w"]}]).items()}
        assert masks[i] == (sum(1 << bit for bit, name in enumerate(names) if one[name]) if ok[i] else 0), i
    assert masks[9] == 0b001 and masks[11] == 0b100 and masks[13] == 0b010 and masks[12] == masks[17] == 0
    finished = [i for i in range(n) if ok[i]]
    listed = [i for i in finished if isinstance(rows[i]["v"], list)]
    combinations = {(type(rows[i]["v"]), rows[i]["v"], rows[i]["w"]) for i in finished if i not in listed}
    assert len(combinations) == 14 and len(listed) == 6
    if kept > 2:  # each combination once, the unhashable value once a run
        assert len(seen) == len(combinations) + len(listed)
    else:  # forgotten along the way, asked again: still once per combination and batch at most
        assert len(combinations) + len(listed) < len(seen) <= len(finished)


class CannedReply:
    """A follow-up player without a model: a promise, a false claim or a question, picked by the request."""

    REPLIES = ("I'll remind you tomorrow morning.", "Done: I have scheduled it for you.", "What time suits you?")

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self.reply = self.REPLIES[len(json.dumps(observation, default=str)) % len(self.REPLIES)]

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, str]:
        return {"reply": self.reply}


def test_the_follow_up_rows_streamed_equal_the_frame_of_every_row_held_at_once(tmp_path: Path) -> None:
    from commitbench.analysis.followup.metrics import REQUIRED_COLUMNS, source_kind, to_frame
    from commitbench.analysis.followup.report import response_frame, responses_from_records
    from commitbench.suites.followup import records_of

    config = ExperimentConfig.model_validate({"env": "commitbench/FollowUp-v0", "agents": [f"{__name__}:CannedReply"],
                                              "episodes": {"limit": 40}})
    run_experiment(config, tmp_path / "run")
    records = records_of(tmp_path / "run", "rules")
    rows, errors = responses_from_records(records)
    held = pd.DataFrame.from_records([row.model_dump(mode="json") for row in rows], columns=list(REQUIRED_COLUMNS))
    held["source_kind"] = [source_kind(str(s)) for s in held["source"]]
    streamed, streamed_errors = response_frame(iter(records), "rules")
    assert len(held) == 40 and errors == streamed_errors == 0 and held["outcome"].nunique() > 1
    texts = {name: "str" for name in held.columns if held[name].dtype == "str"}
    assert any(streamed[name].dtype == "category" for name in texts)  # texts without gaps, each held once
    pd.testing.assert_frame_equal(to_frame(iter(rows)).astype(texts), held)
    pd.testing.assert_frame_equal(streamed.astype(texts), held)


def test_rows_made_by_a_pool_of_processes_equal_those_made_here(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from commitbench import traces
    from commitbench.analysis.call_errors import CallErrorTally

    episodes = episodes_of_run(run_dir)
    tallies = CallErrorTally(), CallErrorTally()
    here = load_rows(run_dir, episodes=episodes, each_trace=tallies[0].add)
    monkeypatch.setattr(traces, "POOL_THRESHOLD", 1)
    monkeypatch.setattr(traces, "POOL_CHUNK", 7)  # many chunks, the last one short
    monkeypatch.setattr(traces, "pool_workers", lambda: 2)
    pooled = load_rows(run_dir, episodes=episodes, each_trace=tallies[1].add)
    pd.testing.assert_frame_equal(pooled, here)
    assert tallies[1].seen == tallies[0].seen == len(here) + 0 and tallies[1].rows() == tallies[0].rows()
    kept = [trace.run_key for trace in traces.iter_latest_traces(run_dir, include_failed=True)]
    converted = list(traces.map_latest_traces(run_dir, lambda trace: trace.run_key, include_failed=True))
    assert converted == kept and len(set(kept)) == len(kept)


def test_the_line_check_picks_the_traces_that_count_for_the_reads_after_it(run_dir: Path) -> None:
    from commitbench import traces
    from commitbench.rundir.reader import run_suite

    traces._SCANNED.clear()
    alone = [t.model_dump_json() for t in traces.iter_latest_traces(run_dir, include_failed=True)]
    run_suite(run_dir)  # checks every line, and keeps where the traces that count are
    assert len(traces._SCANNED) == 1
    assert [t.model_dump_json() for t in traces.iter_latest_traces(run_dir, include_failed=True)] == alone
    good = [t.run_key for t in traces.iter_latest_traces(run_dir)]
    assert sorted(good) == sorted(t.run_key for t in latest_by_key(iter_traces(run_dir), lambda t: t))
    with (run_dir / "traces.jsonl").open("rb") as handle:
        size = len(handle.read())
    try:  # a file changed since its check is read afresh
        append_traces(run_dir / "traces.jsonl", [next(iter_traces(run_dir)).model_copy(update={"infra_error": "x"})])
        assert [t.model_dump_json() for t in traces.iter_latest_traces(run_dir, include_failed=True)] == alone
    finally:
        with (run_dir / "traces.jsonl").open("rb+") as handle:
            handle.truncate(size)


def test_a_count_of_the_traces_that_count_serves_the_reads_after_it_until_the_file_changes(
    run_dir: Path, tmp_path: Path
) -> None:
    from commitbench import traces

    file = tmp_path / "traces.jsonl"
    file.write_bytes((run_dir / "traces.jsonl").read_bytes())
    traces._SCANNED.clear()
    expected = len(latest_by_key(iter_traces(file), lambda t: t, include_failed=True))
    assert traces.count_latest_traces(file, include_failed=True) == expected
    assert len(traces._SCANNED) == 1  # kept: the read that follows seeks the lines the count found
    assert sorted(t.model_dump_json() for t in traces.iter_latest_traces(file, include_failed=True)) == sorted(
        t.model_dump_json() for t in latest_by_key(iter_traces(file), lambda t: t, include_failed=True))
    first = next(iter_traces(file))
    append_traces(file, [first.model_copy(update={"run_key": "a-new-run"}),
                         first.model_copy(update={"run_key": "a-failed-run", "infra_error": "x"})])
    assert traces.count_latest_traces(file, include_failed=True) == expected + 2  # changed: counted afresh
    assert traces.count_latest_traces(file) == len(latest_by_key(iter_traces(file), lambda t: t))


def test_the_pools_processes_die_when_their_reader_is_killed(run_dir: Path, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    script = (
        "import os, pathlib, sys, time\n"
        "from commitbench import traces\n"
        "def convert(trace):\n"
        f"    pathlib.Path({str(pids)!r}, str(os.getpid())).touch()\n"
        "    time.sleep(120)\n"
        "    return trace.run_key\n"
        f"for _ in traces.map_latest_traces({str(run_dir)!r}, convert, include_failed=True, workers=2, threshold=1):\n"
        "    pass\n"
    )
    reader = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = [int(p.name) for p in pids.iterdir()]
        assert len(workers) == 2 and reader.pid not in workers
    finally:
        reader.send_signal(signal.SIGKILL)
        reader.wait(timeout=30)

    def alive(pid: int) -> bool:
        """Running (a zombie waiting for whoever adopted it to reap it has died)."""
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers)


def test_a_follow_up_report_reads_stored_offline_labels_and_makes_the_missing_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline labels stored for part of the run (a labelling pass before the run went on): each trace's stored
    record is read, the others are made now, and the report is the one made with none stored, in one process
    or a pool."""
    from commitbench import traces
    from commitbench.jsonl import append_lines
    from commitbench.judges.labelling import labels_path
    from commitbench.suites import ReportOptions
    from commitbench.suites.followup import records_of
    from commitbench.suites.followup import report as followup_report

    config = ExperimentConfig.model_validate({"env": "commitbench/FollowUp-v0", "agents": [f"{__name__}:CannedReply"],
                                              "episodes": {"limit": 40}})
    run = tmp_path / "run"
    run_experiment(config, run)
    options = ReportOptions(judge="rules", n_boot=50, write_files=False)
    alone = followup_report(run, options).model_dump(mode="json")
    records = records_of(run, "rules")
    append_lines(labels_path(run, "rules"), (r.model_dump_json() for r in records[::3]))
    assert followup_report(run, options).model_dump(mode="json") == alone
    monkeypatch.setattr(traces, "POOL_THRESHOLD", 1)
    monkeypatch.setattr(traces, "POOL_CHUNK", 7)
    monkeypatch.setattr(traces, "pool_workers", lambda: 2)
    assert followup_report(run, options).model_dump(mode="json") == alone
    assert alone["judge_errors"] == 0 and alone["headline"]


def test_the_run_index_written_in_pieces_is_the_index_as_one_json_document(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = standing_view(run_dir, "rules")
    batches = list(source.records)
    source.records = iter(batches)
    records = list(each_run(iter(batches)))
    monkeypatch.setattr(site, "KEYS_PER_PIECE", 3)
    monkeypatch.setattr(site, "INTS_PER_PIECE", 5)
    files = dict(site.site_files(source, Overview(title="t", facts=[], summary=[], tables=[]), {}))
    pieces = files["data/index.js"]
    assert not isinstance(pieces, bytes)
    script = site.file_bytes(pieces).decode()
    assert script.startswith("commitbench.index({") and script.endswith("});\n")
    index = json.loads(script[script.index("(") + 1:script.rindex(")")])
    n = len(records)
    assert n > 5 and index["n"] == n and index["keys"] == [r.key for r in records]
    assert len(index["off"]) == len(index["metrics"]) == len(index["differs"]) == len(index["episodes"]) == n
    names = index["offNames"]
    runs = [site.site_run(r) for r in records]
    # Each page is its model's JSON (the schema's fields, defaults left out), and the rest is read off it.
    assert all(TranscriptPage.model_validate_json(r.page).model_dump_json(exclude_defaults=True).encode() == r.page
               for r in runs)
    pages = [json.loads(r.page) for r in runs]
    assert [[names[i] for i in off] for off in index["off"]] == [site.off_expected(p["signals"]) for p in pages]
    assert [list(r.off) for r in runs] == [site.off_expected(p["signals"]) for p in pages]
    assert [r.verdict for r in runs] == [site.verdict(p["signals"]) for p in pages]
    assert [r.speakers for r in runs] == [site.speakers(p["items"]) for p in pages]
    for column in source.columns:
        entry = index["columns"][column.name]
        assert len(entry["codes"]) == n
        decoded = [entry["values"][c] for c in entry["codes"]] if "values" in entry else entry["codes"]
        if column.kind is ColumnKind.FACET:
            assert decoded == ["" if r.row.get(column.name) is None else str(r.row.get(column.name)) for r in records]
        elif column.kind is ColumnKind.FLAG:
            assert decoded == [site.FLAG_CODES[None if r.row.get(column.name) is None else bool(r.row[column.name])]
                               for r in records]


@pytest.mark.parametrize("piece", [1, 4, 100_000])
def test_a_list_of_integers_is_written_as_json_writes_it(monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    from array import array

    monkeypatch.setattr(site, "INTS_PER_PIECE", piece)
    for numbers in (array("b", [0, 1, 2, -1]), array("i", [5, -1, 2**31 - 1, 0, 7]), array("q", [-(2**63), 2**63 - 1]),
                    array("Q", [0, 2**64 - 1, 1 << 40]), [3, 4, 5, 6, 7, 8, 9], [], array("i")):
        assert "".join(site._int_list(numbers)) == json.dumps(list(numbers), separators=(",", ":"))


def test_a_count_column_past_32_bits_keeps_its_counts() -> None:
    column = site._Column("tool_errors", ColumnKind.COUNT)
    for value in (5, 2**40, None, float("nan"), 7):
        column.add(value)
    assert "".join(column.json_pieces()) == '{"codes":[5,1099511627776,-1,-1,7]}'
    flags = site._Column("executed", ColumnKind.FLAG)
    for value in (True, False, None, 1):
        flags.add(value)
    assert flags.codes.itemsize == 1 and "".join(flags.json_pieces()) == '{"codes":[1,0,2,1]}'


@pytest.mark.parametrize("kind", [ColumnKind.FACET, ColumnKind.FLAG, ColumnKind.COUNT])
def test_a_column_extended_by_a_list_codes_what_adding_each_value_codes(kind: ColumnKind) -> None:
    """The fast paths (texts, flags, counts of one type) and the mixed lists that go value by value, widening a
    count column past 32 bits (a batch taken back and coded again), give the codes and values add gives."""
    batches: list[list[Any]] = [
        [], [True, False, True], [3, 0, 7], [1, None, 2.0], [5, 2**40, 6], [float("nan"), 4, True], [False, None], [9],
    ]
    if kind is not ColumnKind.COUNT:  # texts: a count column takes numbers only
        batches[1:1] = [["a", "b", "a", "c"], ["b", "d", "d"], [1, None, "x"], ["z", 9]]
    one, many = site._Column("c", kind), site._Column("c", kind)
    for values in batches:
        for value in values:
            one.add(value)
        many.extend(list(values))
        assert "".join(many.json_pieces()) == "".join(one.json_pieces()) and many.values == one.values
        assert many.codes.typecode == one.codes.typecode
    assert len(many.codes) == sum(map(len, batches))


@pytest.mark.parametrize("suite", ["standing", "followup"])
def test_a_site_taken_in_batches_is_the_site_taken_run_by_run(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suite: str
) -> None:
    """The view reads a run a chunk at a time (SiteBatch); each shard, the run index, the parts and the membership
    are what the same runs give one at a time, with shards, texts and membership batches ending inside chunks."""
    from commitbench import traces
    from commitbench.suites.followup import view as followup_view

    monkeypatch.setattr(traces, "POOL_CHUNK", 7)
    if suite == "standing":
        source = standing_view(run_dir, "rules")
    else:
        config = ExperimentConfig.model_validate({"env": "commitbench/FollowUp-v0",
                                                  "agents": [f"{__name__}:CannedReply"], "episodes": {"limit": 30}})
        run_experiment(config, tmp_path / "run")
        source = followup_view(tmp_path / "run", "rules")
    batches = list(source.records)
    assert len(batches) > 3 and all(isinstance(b, SiteBatch) and 0 < len(b) <= 7 for b in batches)
    monkeypatch.setattr(site, "RUN_SHARD", 3)
    monkeypatch.setattr(site, "TEXT_SHARD", 6)
    monkeypatch.setattr(site, "MEMBER_BATCH", 5)
    taken: list[tuple[int, int]] = []

    def files(records: list[Any]) -> dict[str, bytes]:
        made = site.site_files(replace(source, records=iter(records)),
                               Overview(title="t", facts=[], summary=[], tables=[]), {},
                               on_run=lambda runs, failed: taken.append((runs, failed)))
        return {name: site.file_bytes(data) for name, data in made}

    by_batch = files(batches)
    counted = list(taken)
    runs = list(each_run(iter(batches)))
    by_run = files(runs)
    assert by_batch == by_run
    assert len([name for name in by_batch if name.startswith("data/runs/")]) == -(-len(runs) // 3)
    assert counted == [(len(b), b.ok.count(False)) for b in batches]
    assert taken[len(counted):] == [(1, 0 if run.ok else 1) for run in runs]
    index = json.loads(by_batch["data/index.js"].decode()[len("commitbench.index("):-3])
    assert index["keys"] == [run.key for run in runs] and any(index["metrics"])
    if suite == "followup":
        assert source.member_columns and all(len(m) == len(source.member_columns) for b in batches for m in b.members)


def test_differs_flags_the_runs_of_sample_groups_whose_finished_runs_disagree() -> None:
    from commitbench.analysis.view.model import RunSource

    # (key, sample group, finished, verdict), and whether its group differs, by hand:
    runs = [
        ("a1", "episode 1, player p", True, "kept"),        # group 1: kept, dropped -> differs
        ("b1", "episode 2, player p", True, "kept"),        # group 2: kept, kept, (failed: dropped) -> agrees
        ("a2", "episode 1, player p", True, "dropped"),
        ("b2", "episode 2, player p", True, "kept"),
        ("b3", "episode 2, player p", False, "dropped"),    # an infrastructure error is not a sample that disagrees
        ("c1", "", True, "kept"),                           # no group: the run is its own
        ("c2", "", True, "dropped"),
        ("d1", "episode 3, player p", False, "kept"),       # group 3: one failed, two finished that disagree
        ("d2", "episode 3, player p", True, "kept"),
        ("d3", "episode 3, player p", True, "dropped"),
    ]
    expected = [1, 0, 1, 0, 0, 0, 0, 1, 1, 1]
    source = RunSource(suite="s", judge="rules", judges=["rules"], columns=[], metrics=[], records=iter(()),
                       members=lambda rows: {})
    shards = site._Shards(source)
    for key, group, ok, said in runs:
        shards.add(site.SiteRun(key=key, episode="e", row={}, ok=ok, text="", shared_text="", page=b"{}",
                                speakers="", off=(), verdict=said, sample_group=site.group_digest(group)))
    assert shards.differs() == expected
    assert len(site.group_digest("episode 1, player p")) == 16 and site.group_digest("") == b""
    assert site.group_digest("episode 1, player p") != site.group_digest("episode 2, player p")
