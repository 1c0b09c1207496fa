"""One read of a run's traces for the viewer's pages and the report's rows (commitbench.jointread)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from commitbench import jointread, traces
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.jointread import JointReadStopped, joint_read
from commitbench.runner import run_experiment
from commitbench.traces import (
    EpisodeTrace,
    append_traces,
    iter_traces,
    map_latest_batches,
    map_latest_traces,
    trace_file,
)

SLICE = [e for e in load_episodes() if e.split.value == "test" and e.variant == 0 and e.commitment_type in
         ("deploy_service", "send_report")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two reference agents on a slice of episodes, one cell whose last trace failed after a good one (the good one
    counts), and one whose only trace failed (its failed trace counts where failed runs are read)."""
    out = tmp_path_factory.mktemp("joint") / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "rank-wins"],
                              episodes={"ids": [e.id for e in SLICE]})
    run_experiment(config, out)
    first = next(iter_traces(out))
    second = list(iter_traces(out))[1]
    append_traces(out / "traces.jsonl", [first.model_copy(update={"infra_error": "timeout: a retry that failed"})])
    lines = (out / "traces.jsonl").read_bytes().splitlines(keepends=True)
    failed = second.model_copy(update={"infra_error": "timeout: every try failed"})
    (out / "traces.jsonl").write_bytes(b"".join(
        [line for line in lines if second.run_key.encode() not in line] + [failed.model_dump_json().encode() + b"\n"]))
    return out


@pytest.fixture(params=["here", "pool"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Read in this process, or by a pool of two processes with many short chunks."""
    if request.param == "pool":
        monkeypatch.setattr(traces, "POOL_THRESHOLD", 1)
        monkeypatch.setattr(traces, "POOL_CHUNK", 7)
        monkeypatch.setattr(traces, "pool_workers", lambda: 2)
    return str(request.param)


def host_item(trace: EpisodeTrace) -> tuple[str, int]:
    return trace.run_key, os.getpid()


def guest_item(trace: EpisodeTrace) -> tuple[str, int, bool]:
    return trace.run_key, os.getpid(), bool(trace.infra_error)


class Guest(threading.Thread):
    """A reader on another thread, as the viewer's report is: it reads the traces when ``start_reading`` is set."""

    def __init__(self, run_dir: Path, joint: jointread.JointRead, take: int | None = None,
                 include_failed: bool = True, reads: bool = True, batches: bool = False) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.joint, self.take, self.include_failed = run_dir, joint, take, include_failed
        self.reads, self.batches = reads, batches
        self.start_reading = threading.Event()
        self.items: list[Any] = []
        self.packs: list[tuple[int, list[Any]]] = []  # read in batches: each pack, as it came
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.start_reading.wait()
            if not self.reads:
                return
            if self.batches:
                for pack in map_latest_batches(self.run_dir, guest_item, packed, include_failed=self.include_failed):
                    self.packs.append(pack)
                    self.items.extend(pack[1])
                return
            for item in map_latest_traces(self.run_dir, guest_item, include_failed=self.include_failed):
                self.items.append(item)
                if self.take is not None and len(self.items) >= self.take:
                    break
        except BaseException as exc:
            self.error = exc
        finally:
            self.joint.guest_done()


def alone(run_dir: Path, convert: Callable[[EpisodeTrace], Any], include_failed: bool = True) -> list[Any]:
    return [convert(t)[:1] for t in traces.iter_latest_traces(run_dir, include_failed=include_failed)]


def packed(items: list[Any]) -> tuple[int, list[Any]]:
    """A chunk's items as a batch: with the process that packed it."""
    return os.getpid(), list(items)


def flat(batches: list[tuple[int, list[Any]]]) -> list[Any]:
    return [item for _, items in batches for item in items]


def test_batches_are_the_packed_chunks_of_what_a_read_converts(
    run_dir: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch packs the next chunk of at most POOL_CHUNK items, where they were converted (a read in this
    process too); together, in order, they are the items map_latest_traces gives."""
    monkeypatch.setattr(traces, "POOL_CHUNK", 7)
    batches = list(map_latest_batches(run_dir, host_item, packed, include_failed=True))
    items = flat(batches)
    assert [item[:1] for item in items] == alone(run_dir, host_item)
    assert [len(chunk) for _, chunk in batches[:-1]] == [traces.POOL_CHUNK] * (len(batches) - 1)
    assert 0 < len(batches[-1][1]) <= traces.POOL_CHUNK and len(batches) > 1
    assert all(pid == item[1] for pid, chunk in batches for item in chunk)  # packed where converted
    assert ({pid for pid, _ in batches} == {os.getpid()}) == (mode == "here")


def read_together(run_dir: Path, host_batches: bool, guest_batches: bool) -> tuple[list[Any], Guest]:
    """The host's read (items, or batches of ``packed``) and its guest (items or batches), sharing one read."""
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint, batches=guest_batches)
        guest.start()
        guest.start_reading.set()
        mine = list(map_latest_batches(run_dir, host_item, packed, include_failed=True) if host_batches
                    else map_latest_traces(run_dir, host_item, include_failed=True))
        joint.host_done()
        guest.join(timeout=60)
    assert guest.error is None and joint.shared
    return mine, guest


def test_a_host_reading_batches_shares_its_read_with_a_guest_reading_items(run_dir: Path, mode: str) -> None:
    batches, guest = read_together(run_dir, host_batches=True, guest_batches=False)
    mine = flat(batches)
    assert [m[:1] for m in mine] == alone(run_dir, host_item)
    assert [g[:1] for g in guest.items] == alone(run_dir, guest_item)
    assert [m[1] for m in mine] == [g[1] for g in guest.items]  # each trace converted once, for both
    assert all(pid == item[1] for pid, chunk in batches for item in chunk)


def test_a_guest_reading_batches_gets_the_hosts_items_packed_in_chunks(
    run_dir: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guest asking for batches has them packed where the host's read converted its chunks, of POOL_CHUNK
    traces (in this process too), while the host takes its items one at a time."""
    monkeypatch.setattr(traces, "POOL_CHUNK", 7)
    mine, guest = read_together(run_dir, host_batches=False, guest_batches=True)
    assert [g[:1] for g in guest.items] == alone(run_dir, guest_item)
    assert [m[1] for m in mine] == [g[1] for g in guest.items]
    assert [len(chunk) for _, chunk in guest.packs[:-1]] == [traces.POOL_CHUNK] * (len(guest.packs) - 1)
    assert all(pid == item[1] for pid, chunk in guest.packs for item in chunk)  # packed where the host converted
    assert ({pid for pid, _ in guest.packs} == {os.getpid()}) == (mode == "here")


def test_a_host_and_a_guest_both_reading_batches_each_get_theirs_packed_where_they_were_made(
    run_dir: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(traces, "POOL_CHUNK", 7)
    batches, guest = read_together(run_dir, host_batches=True, guest_batches=True)
    assert [m[:1] for m in flat(batches)] == alone(run_dir, host_item)
    assert [g[:1] for g in guest.items] == alone(run_dir, guest_item)
    assert [len(chunk) for _, chunk in batches] == [len(chunk) for _, chunk in guest.packs]
    assert [pid for pid, _ in batches] == [pid for pid, _ in guest.packs]  # each chunk packed for both in one place
    assert all(pid == item[1] for pid, chunk in [*batches, *guest.packs] for item in chunk)
    assert ({pid for pid, _ in batches} == {os.getpid()}) == (mode == "here")


def test_both_readers_get_what_they_would_read_alone_from_one_read(run_dir: Path, mode: str) -> None:
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint)
        guest.start()
        guest.start_reading.set()
        mine = list(map_latest_traces(run_dir, host_item, include_failed=True))
        guest.join(timeout=0.2)
        assert guest.is_alive()  # its read ends when the host says it is done (having let go of its own)
        joint.host_done()
        guest.join(timeout=60)
    assert guest.error is None and joint.shared
    assert [m[:1] for m in mine] == alone(run_dir, host_item)
    assert [g[:1] for g in guest.items] == alone(run_dir, guest_item)
    assert any(g[2] for g in guest.items)  # the failed run's trace came too
    # Each trace was converted for both in the process that parsed it.
    assert [m[1] for m in mine] == [g[1] for g in guest.items]
    assert (set(m[1] for m in mine) == {os.getpid()}) == (mode == "here")


def test_the_host_reads_alone_when_no_guest_comes(run_dir: Path) -> None:
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint, reads=False)
        guest.start()
        guest.start_reading.set()  # it ends without reading, and says so
        mine = list(map_latest_traces(run_dir, host_item, include_failed=True))
    assert not joint.shared and [m[:1] for m in mine] == alone(run_dir, host_item)


def test_a_guest_that_comes_late_or_reads_other_traces_reads_alone(run_dir: Path) -> None:
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        other = Guest(run_dir, joint, include_failed=False)  # not the traces the host reads
        other.start()
        other.start_reading.set()
        other.join(timeout=60)
        assert other.error is None and not joint.shared
        assert [g[:1] for g in other.items] == alone(run_dir, guest_item, include_failed=False)
        mine = list(map_latest_traces(run_dir, host_item, include_failed=True))
        late = list(map_latest_traces(run_dir, guest_item, include_failed=True))  # the host's thread: alone
    assert [m[:1] for m in mine] == alone(run_dir, host_item)
    assert [g[:1] for g in late] == alone(run_dir, guest_item)


@pytest.mark.parametrize("batches", [False, True])
def test_a_host_that_stops_stops_its_guest_with_an_error(run_dir: Path, mode: str, batches: bool) -> None:
    """Whether the host reads items or batches."""

    def failing(trace: EpisodeTrace) -> tuple[str, int]:
        if trace.run_key == keys[20]:
            raise RuntimeError("the page of this run failed")
        return host_item(trace)

    keys = [t.run_key for t in traces.iter_latest_traces(run_dir, include_failed=True)]
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint)
        guest.start()
        guest.start_reading.set()
        with pytest.raises(RuntimeError, match="the page of this run failed"):
            list(map_latest_batches(run_dir, failing, packed, include_failed=True) if batches
                 else map_latest_traces(run_dir, failing, include_failed=True))
        guest.join(timeout=60)
    assert isinstance(guest.error, JointReadStopped), guest.error
    assert "RuntimeError: the page of this run failed" in str(guest.error)
    assert len(guest.items) <= 20


def test_a_host_that_never_reads_stops_its_waiting_guest(run_dir: Path) -> None:
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint)
        guest.start()
        guest.start_reading.set()
        while joint._guest is None and guest.is_alive():  # the guest has handed its convert over
            threading.Event().wait(0.01)
    guest.join(timeout=60)
    assert not guest.is_alive() and isinstance(guest.error, JointReadStopped) and guest.items == []


def test_a_guest_that_stops_taking_never_holds_the_host_up(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jointread, "BATCH", 2)
    monkeypatch.setattr(jointread, "QUEUED_BATCHES", 1)  # the queue is full after one batch
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        guest = Guest(run_dir, joint, take=3)
        guest.start()
        guest.start_reading.set()
        mine = list(map_latest_traces(run_dir, host_item, include_failed=True))
        joint.host_done()
        guest.join(timeout=60)
    assert guest.error is None and [g[:1] for g in guest.items] == alone(run_dir, guest_item)[:3]
    assert [m[:1] for m in mine] == alone(run_dir, host_item)


def test_one_joint_read_at_a_time(run_dir: Path) -> None:
    file = trace_file(run_dir)
    with joint_read(file, include_failed=True), pytest.raises(RuntimeError, match="already open"), \
            joint_read(file, include_failed=True):
        pass
    assert jointread.active_joint() is None


def test_the_viewer_parses_each_trace_once_for_its_pages_and_its_report(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from commitbench.commands.view_cmd import build_site
    from commitbench.suites import ReportOptions
    from commitbench.suites.standing import report

    count = len(list(traces.iter_latest_traces(run_dir, include_failed=True)))
    parsed: list[int] = []
    real = traces._parse_trace

    def counted(file: Path, number: int, raw: bytes) -> EpisodeTrace | None:
        parsed.append(number)
        return real(file, number, raw)

    monkeypatch.setattr(traces, "_parse_trace", counted)
    summary = build_site(run_dir, tmp_path / "site", n_boot=50)
    assert summary.runs == count and len(parsed) == count  # one parse a trace, not one for each reader
    document = json.loads((tmp_path / "site" / "report.json").read_text())
    alone_report = report(run_dir, ReportOptions(n_boot=50, write_files=False)).model_dump(mode="json")
    assert {k: v for k, v in document.items() if k != "files"} == {
        k: v for k, v in alone_report.items() if k != "files"}


def test_a_row_asked_again_within_one_joint_conversion_is_made_once_and_elsewhere_each_time(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from commitbench.analysis.standing import metrics
    from commitbench.judges.standing.rules import RuleJudge
    from commitbench.suites.standing import episodes_of_run

    trace = next(t for t in iter_traces(run_dir) if not t.infra_error)
    episode = episodes_of_run(run_dir)[trace.episode_id]
    labels = RuleJudge().label(trace, episode)
    made: list[str] = []
    real = metrics._run_row

    def counted(*args: Any) -> dict[str, Any]:
        made.append(args[0].run_key)
        return real(*args)

    monkeypatch.setattr(metrics, "_run_row", counted)

    def page(t: EpisodeTrace) -> dict[str, Any]:
        row = metrics.run_row(t, episode, labels)
        row["status"] = "added by the page"
        return row

    def report_row(t: EpisodeTrace) -> dict[str, Any]:
        return metrics.run_row(t, episode, [label.model_copy() for label in labels])  # equal labels, parsed again

    first, second = jointread._Both(page, report_row)(trace)
    assert len(made) == 1 and "status" not in second and first == {**second, "status": "added by the page"}
    assert jointread.shared_work(trace) is None  # only while both convert it
    other = [label.model_copy(update={"error": "not labelled"}) for label in labels]
    _, third = jointread._Both(page, lambda t: metrics.run_row(t, episode, other))(trace)  # other labels: made
    assert len(made) == 3 and third["judge_errors"] == len(labels) > 0
    changed = [label.model_copy() for label in labels]

    def page_then_change(t: EpisodeTrace) -> dict[str, Any]:
        row = metrics.run_row(t, episode, changed)
        for label in changed:  # the same label objects, changed in place before the report asks
            label.error = "changed after the page"
        return row

    _, fourth = jointread._Both(page_then_change, lambda t: metrics.run_row(t, episode, changed))(trace)
    assert len(made) == 5 and fourth["judge_errors"] == len(labels)
    # Elsewhere every call makes its row: a label changed in place is seen.
    assert metrics.run_row(trace, episode, labels)["judge_errors"] == 0
    for label in labels:
        label.error = "not labelled"
    assert metrics.run_row(trace, episode, labels)["judge_errors"] == len(labels) and len(made) == 7


class CannedReply:
    """A follow-up player without a model: a promise, a false claim or a question, picked by the request."""

    REPLIES = ("I'll remind you tomorrow morning.", "Done: I have scheduled it for you.", "What time suits you?")

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self.reply = self.REPLIES[len(str(sorted(observation))) % len(self.REPLIES)]

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, str]:
        return {"reply": self.reply}


def test_the_follow_up_viewer_checks_each_reply_and_makes_its_metric_row_once_for_its_pages_and_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from commitbench.analysis.followup import rows as followup_rows
    from commitbench.commands.view_cmd import build_site
    from commitbench.judges.followup.rules import OfflineChecker
    from commitbench.suites import ReportOptions
    from commitbench.suites.followup import report

    config = ExperimentConfig.model_validate({"env": "commitbench/FollowUp-v0", "agents": [f"{__name__}:CannedReply"],
                                              "episodes": {"limit": 30}})
    run = tmp_path / "run"
    run_experiment(config, run)
    alone_report = report(run, ReportOptions(n_boot=50, write_files=False)).model_dump(mode="json")
    checked: list[str] = []
    real = OfflineChecker.check_now

    def counted(self: OfflineChecker, turn: Any) -> Any:
        checked.append(turn.request_id)
        return real(self, turn)

    made: list[str] = []
    real_row = followup_rows._row_values  # what makes a metric row's values, for the row and its plain dump

    def counted_row(record: Any) -> Any:
        made.append(record.run_key)
        return real_row(record)

    monkeypatch.setattr(OfflineChecker, "check_now", counted)
    monkeypatch.setattr(followup_rows, "_row_values", counted_row)
    summary = build_site(run, tmp_path / "site", n_boot=50)
    assert summary.finished == 30 and len(checked) == 30  # one check a reply, not one for each reader
    assert len(made) == len(set(made)) == 30  # and one metric row
    document = json.loads((tmp_path / "site" / "report.json").read_text())
    assert {k: v for k, v in document.items() if k != "files"} == {
        k: v for k, v in alone_report.items() if k != "files"}
    made.clear()
    report(run, ReportOptions(n_boot=50, write_files=False))  # outside a joint read: the one reader makes each
    assert len(made) == 30


def test_a_stored_labels_record_is_read_once_for_the_pages_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from commitbench.cli import main
    from commitbench.commands.view_cmd import build_site
    from commitbench.judges.followup.labellers import FollowupLabelRecord
    from commitbench.judges.labelling import labels_path
    from commitbench.judges.stored import StoredLabels
    from commitbench.suites import ReportOptions
    from commitbench.suites.followup import report

    config = ExperimentConfig.model_validate({"env": "commitbench/FollowUp-v0", "agents": [f"{__name__}:CannedReply"],
                                              "episodes": {"limit": 30}})
    run = tmp_path / "run"
    run_experiment(config, run)
    assert main(["label", str(run), "--judge", "rules", "--json"]) == 0
    capsys.readouterr()
    alone_report = report(run, ReportOptions(n_boot=50, write_files=False)).model_dump(mode="json")
    read: list[str] = []
    real = StoredLabels._read

    def counted(self: StoredLabels[Any], key: str, entry: int) -> Any:
        read.append(key)
        return real(self, key, entry)

    monkeypatch.setattr(StoredLabels, "_read", counted)
    summary = build_site(run, tmp_path / "site", n_boot=50)
    assert summary.finished == 30 and sorted(read) == sorted(set(read)) and len(read) == 30  # once a run
    document = json.loads((tmp_path / "site" / "report.json").read_text())
    assert {k: v for k, v in document.items() if k != "files"} == {
        k: v for k, v in alone_report.items() if k != "files"}
    pages = [p for path in sorted((tmp_path / "site" / "data" / "runs").glob("*.js"))
             for p in json.loads("[" + path.read_text()[len("commitbench.runs("):-len(");\n")] + "]")[1]]
    assert len(pages) == 30 and all(p["checks"][0][0] == "rules" and p["checks"][0][1]["result"]["outcome"]
                                    for p in pages)
    read.clear()
    records = StoredLabels(labels_path(run, "rules"), FollowupLabelRecord)
    key = next(iter(records))
    assert records[key] is not records[key] and len(read) == 2  # outside a joint read: read each time asked
