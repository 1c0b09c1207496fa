"""Drills: hostile model output, damaged files, a full disk, leaked secrets, orphaned processes.

Each test reproduces one way a run could stall, crash or leak, and states what must happen instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from commitbench.cli import main as cli_main
from commitbench.config import CacheConfig, ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.llm import parse_completion, parse_tool_arguments
from commitbench.mock import MockServer, ReplySpec, ToolCallSpec
from commitbench.oracles import registry
from commitbench.oracles.base import Intervention, InterventionEntry
from commitbench.protocol import MAX_JSON_DEPTH, ActionKind, ToolCallRecord, parse_action
from commitbench.rundir import RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.traces import TRACES_FILE, latest_traces, read_traces

ROOT = Path(__file__).resolve().parent.parent
FAST_RETRY = {"max_attempts": 4, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}


# ==================================================================================== runtime
def chat_config(base_url: str, limit: int, **fields: Any) -> ExperimentConfig:
    data: dict[str, Any] = {
        "name": "drill",
        "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [{"name": "mock", "base_url": base_url, "api_key_env": None,
                    "settings": {"model": "mock-model", "timeout": 10.0}, "retry": FAST_RETRY}],
        "episodes": {"split": "test", "limit": limit},
        "concurrency": 4,
    }
    data.update(fields)
    return ExperimentConfig.model_validate(data)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# Tool-call arguments as a model may send them: valid JSON, but unfit to record as they are.
HOSTILE_ARGUMENTS = {
    "lone surrogate": ('{"query": "\\udcff"}', "lone surrogate"),
    "surrogate in a key": ('{"\\ud800": 1}', "lone surrogate"),
    "900 deep": ('{"query": ' + nested(900) + "}", f"deeper than {MAX_JSON_DEPTH}"),
    "5,000 deep": ('{"query": ' + nested(5000) + "}", f"deeper than {MAX_JSON_DEPTH}"),
    "65 deep": ('{"q": ' + nested(64) + "}", f"deeper than {MAX_JSON_DEPTH}"),
}


@pytest.mark.parametrize("raw,reason", HOSTILE_ARGUMENTS.values(), ids=list(HOSTILE_ARGUMENTS))
def test_hostile_tool_arguments_become_a_parse_error(raw: str, reason: str) -> None:
    arguments, error = parse_tool_arguments(raw)
    assert arguments is None and error is not None and reason in error


def test_arguments_at_the_depth_bound_are_kept() -> None:
    arguments, error = parse_tool_arguments('{"q": ' + nested(MAX_JSON_DEPTH - 1) + "}")
    assert error is None and arguments is not None


@pytest.mark.parametrize("raw,reason", HOSTILE_ARGUMENTS.values(), ids=list(HOSTILE_ARGUMENTS))
def test_parse_action_records_hostile_arguments_and_never_raises(raw: str, reason: str) -> None:
    for wire in (json.dumps({"tool": "lookup", "arguments": raw}), {"tool": "lookup", "arguments": raw}):
        action = parse_action(wire)
        assert action.kind is ActionKind.TOOL_CALL and action.arguments is None
        assert action.arguments_error is not None and reason in action.arguments_error
        action.model_dump_json()  # what enters a trace can be written


def test_parse_action_bounds_arguments_given_as_objects() -> None:
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    for arguments in ({"q": deep}, {"q": "\udcff"}, {"\udcff": 1}, {"q": {1, 2}}):
        action = parse_action({"tool": "lookup", "arguments": arguments})
        assert action.arguments is None and action.arguments_error
        record = ToolCallRecord(step=0, turn=0, tool=action.tool or "", arguments=action.arguments,
                                raw_arguments=action.raw_arguments, ok=False, result=action.arguments_error)
        record.model_dump_json()


@pytest.mark.parametrize("wire", [
    {"reply": "done \udcff"}, json.dumps({"reply": "done \\udcff"}), {"tool": "look\udcffup", "id": "c\udcff"},
    '{"reply": ' + nested(5000) + "}", nested(5000),
])
def test_parse_action_escapes_lone_surrogates_in_text_and_names(wire: Any) -> None:
    action = parse_action(wire)
    action.model_dump_json().encode("utf-8")
    if action.kind is ActionKind.REPLY:
        assert action.text == "done \\udcff"


def test_a_completion_with_lone_surrogates_in_its_text_is_escaped() -> None:
    payload = {"model": "m\udcff", "choices": [{"message": {
        "content": "ok \udcff", "reasoning": "\ud800hm", "refusal": None,
        "tool_calls": [{"id": "c\udcff", "function": {"name": "lookup\udcff", "arguments": '{"q": "\udcff"}'}}]},
        "finish_reason": "stop\udcff"}], "usage": {"prompt_tokens": "many", "completion_tokens": [1]}}
    fields, error = parse_completion(payload, fallback_model="x")
    assert error is None
    assert fields["text"] == "ok \\udcff" and fields["reasoning"] == "\\ud800hm"
    call = fields["tool_calls"][0]
    assert call.name == "lookup\\udcff" and call.arguments is None and "lone surrogate" in call.parse_error
    assert call.arguments_raw == '{"q": "\\udcff"}'
    json.dumps(fields, default=str).encode("utf-8")
    assert fields["usage"].prompt_tokens == 0


def hostile_responder(arguments: str) -> Any:
    """A 'model' that answers every message with one hostile lookup call, then a reply with a lone surrogate."""

    def respond(request: dict[str, Any]) -> ReplySpec:
        if request["messages"][-1]["role"] == "tool":
            return ReplySpec(text="Looked it up \udcff for you.", reasoning="thinking \ud800")
        return ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments=arguments)])

    return respond


@pytest.mark.parametrize("raw,reason", [HOSTILE_ARGUMENTS["lone surrogate"], HOSTILE_ARGUMENTS["900 deep"],
                                        HOSTILE_ARGUMENTS["5,000 deep"]], ids=["surrogate", "900", "5000"])
def test_hostile_model_output_is_a_recorded_tool_error_and_replays_from_the_cache(
    tmp_path: Path, mock_server: MockServer, raw: str, reason: str
) -> None:
    mock_server.set_responder(hostile_responder(raw))
    cache = tmp_path / "cache.sqlite"
    config = chat_config(mock_server.base_url, 3, cache={"path": str(cache)})
    first = run_experiment(config, tmp_path / "live")
    assert first.status is RunStatus.COMPLETE and first.cells_done == 3, first.failures
    traces = latest_traces(tmp_path / "live")
    assert len(traces) == 3 and not any(t.infra_error for t in traces)
    bad = [c for t in traces for c in t.tool_calls() if c.tool == "lookup"]
    assert bad and all(not c.ok and c.error_kind == "bad_arguments" and reason in c.result for c in bad)
    replies = [turn.reply for t in traces for turn in t.turns if turn.reply]
    assert replies and all("\\udcff" in r for r in replies)

    # The replies are cached: a replay in a fresh directory plays the same output and does not stop either.
    replay = config.model_copy(update={"cache": CacheConfig(path=cache, mode="replay_only")})
    served = mock_server.stats().chat_completions
    again = run_experiment(replay, tmp_path / "replay")
    assert again.status is RunStatus.COMPLETE and again.cells_done == 3 and again.http_requests == 0
    assert mock_server.stats().chat_completions == served
    replayed = latest_traces(tmp_path / "replay")
    assert [c.result for t in replayed for c in t.tool_calls()] == [c.result for t in traces for c in t.tool_calls()]


class SpoilsOneTrace(Intervention):
    """A test intervention that leaves a value no JSON file can hold in the trace of one episode."""

    kind = "spoil"
    slot = "spoil"
    env_ids: ClassVar[frozenset[str]] = frozenset({STANDING_ENV_ID})
    target = ""

    def begin(self, info: dict[str, Any]) -> None:
        if info["episode_id"] == SpoilsOneTrace.target:
            self.env.unwrapped.trace.prompt_hashes["spoiled"] = "\udcff"


@pytest.fixture
def spoiling(monkeypatch: pytest.MonkeyPatch) -> type[SpoilsOneTrace]:
    entry = InterventionEntry("spoil", SpoilsOneTrace, lambda env, params, services: SpoilsOneTrace(env))
    monkeypatch.setitem(registry.INTERVENTIONS, "spoil", entry)
    return SpoilsOneTrace


def test_a_trace_that_cannot_be_written_fails_its_cell_alone(
    tmp_path: Path, spoiling: type[SpoilsOneTrace], capsys: pytest.CaptureFixture[str]
) -> None:
    config = ExperimentConfig.model_validate(
        {"name": "spoil", "env": "commitbench/Standing-v0",
                          "agents": ["always-execute"], "episodes": {"split": "test", "limit": 6},
         "interventions": [["spoil"]], "concurrency": 1}
    )
    from commitbench.planning import select_config_episodes

    episodes = select_config_episodes(config)
    spoiling.target = episodes[2].id
    summary = run_experiment(config, tmp_path / "run")
    assert summary.status is RunStatus.INCOMPLETE and summary.cells_done == 5 and summary.cells_failed == 1
    traces = read_traces(tmp_path / "run" / TRACES_FILE)
    assert len(traces) == 6
    failed = [t for t in traces if t.infra_error]
    assert [t.episode_id for t in failed] == [episodes[2].id]
    assert failed[0].infra_error.startswith("unwritable_trace:") and "surrogate" in failed[0].infra_error
    assert failed[0].run_key and failed[0].agent is not None

    # Through the command line: some cells failed is exit 1, never the usage/config error code 2.
    config_path = tmp_path / "spoil.yaml"
    config_path.write_text(json.dumps(config.model_dump(mode="json")))
    code = cli_main(["run", str(config_path), "--out", str(tmp_path / "cli"), "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert code == 1 and "unwritable_trace" in err and "commitbench: error" not in err
    manifest = read_manifest(tmp_path / "cli")
    assert manifest is not None and manifest.status is RunStatus.INCOMPLETE and manifest.cells_done == 5



def test_finished_traces_do_not_pile_up_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Players that never wait (reference agents, a replay from the cache) must not outrun the writer."""
    import weakref

    from commitbench import jsonl, traces, tracewriter

    # Traces made during the run, held weakly (scanning gc.get_objects() from the writer's thread could catch
    # another thread's tuple half-built and break it).
    made: weakref.WeakValueDictionary[int, traces.EpisodeTrace] = weakref.WeakValueDictionary()
    real_init = traces.EpisodeTrace.__init__

    def counting_init(self: traces.EpisodeTrace, **fields: Any) -> None:
        real_init(self, **fields)
        made[id(self)] = self

    def live_traces() -> int:
        return len(made)

    monkeypatch.setattr(traces.EpisodeTrace, "__init__", counting_init)
    alive: list[int] = []
    real_append = jsonl.append_lines
    before = 0

    def counting_append(path: Any, lines: Any) -> int:
        alive.append(live_traces() - before)
        return real_append(path, lines)

    monkeypatch.setattr(jsonl, "append_lines", counting_append)  # the trace writer appends through jsonl
    monkeypatch.setattr(traces, "append_lines", counting_append)
    monkeypatch.setattr(tracewriter, "WRITE_QUEUE_LINES", 8)
    config = ExperimentConfig.model_validate(
        {"name": "pile", "env": "commitbench/Standing-v0",
                         "agents": ["always-execute"], "episodes": {"split": "test", "limit": 120}, "concurrency": 4}
    )
    summary = run_experiment(config, tmp_path)
    assert summary.cells_done == 120 and len(read_traces(tmp_path / TRACES_FILE)) == 120
    # At most the traces being played (one per player, and the env's current one) are alive, never the run's.
    assert alive and 1 <= max(alive) <= 2 * config.concurrency + 2, alive  # the count sees the traces in play


# ------------------------------------------------------------------------- damaged files
def damaged_caches(tmp_path: Path) -> dict[str, Path]:
    """A file that is not a database, a real cache cut short, and one cut after its header."""
    from commitbench.cache import CallCache

    good = tmp_path / "good.sqlite"
    with CallCache(good) as cache:
        for index in range(1500):
            cache.put(f"key{index}", "mock-model", {"text": "x" * 400})
    data = good.read_bytes()
    files = {"garbage": b"not a database, just text\n" * 40, "truncated": data[: len(data) // 2],
             "header only": data[:100]}
    paths = {}
    for name, content in files.items():
        path = tmp_path / f"{name.replace(' ', '-')}.sqlite"
        path.write_bytes(content)
        paths[name] = path
    return paths


def test_a_damaged_cache_file_is_a_clear_error(tmp_path: Path) -> None:
    from commitbench.cache import CacheError, CallCache

    for name, path in damaged_caches(tmp_path).items():
        for mode in ("read_write", "replay_only"):
            with pytest.raises(CacheError) as caught, CallCache(path, mode) as cache:
                for index in range(0, 1500, 10):
                    cache.get(f"key{index}", "mock-model")
            assert str(path) in str(caught.value) and "damaged or not a commitbench cache" in str(caught.value), name


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_run_on_a_damaged_cache_stops_with_a_clear_error(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    cache = damaged_caches(tmp_path)[damage]
    config = chat_config(mock_server.base_url, 4, cache={"path": str(cache)})
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config.model_dump(mode="json")))
    code = cli_main(["run", str(config_path), "--out", str(tmp_path / "run"), "--no-progress", "--no-report"])
    err = capsys.readouterr().err
    assert code == 2 and str(cache) in err and "damaged or not a commitbench cache" in err
    assert "Traceback" not in err
    manifest = read_manifest(tmp_path / "run")
    assert manifest is not None and manifest.status is RunStatus.ABORTED and str(cache) in manifest.message
    assert cli_main(["cache", "stats", "--db", str(cache)]) == 2
    assert str(cache) in capsys.readouterr().err


def reference_run(out: Path, limit: int = 5) -> ExperimentConfig:
    config = ExperimentConfig.model_validate(
        {"name": "ref", "env": "commitbench/Standing-v0",
                        "agents": ["always-execute"], "episodes": {"split": "test", "limit": limit}}
    )
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    return config


def damage_line(path: Path, number: int, content: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[number - 1] = content
    path.write_bytes(b"".join(lines))


BAD_LINES = {
    "garbage": (b"}}} not json at all\n", "not a valid trace"),
    "non-UTF-8": (b'{"env_id": "\xff\xfe broken"}\n', "not UTF-8"),
    "nested 5,000 deep": (b'{"env_id": ' + nested(5000).encode() + b"}\n", "not a valid trace"),
    "wrong schema": (b'{"env_id": 5, "episode_id": [], "factors": "x"}\n', "not a valid trace"),
}


@pytest.mark.parametrize("content,reason", BAD_LINES.values(), ids=list(BAD_LINES))
def test_a_bad_line_in_the_traces_stops_report_and_run_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, reason: str
) -> None:
    out = tmp_path / "run"
    config = reference_run(out)
    damage_line(out / TRACES_FILE, 3, content)
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure"]) == 2
    err = capsys.readouterr().err
    assert f"{out / TRACES_FILE}:3" in err and reason in err and "Traceback" not in err
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config.model_dump(mode="json")))
    assert cli_main(["run", str(config_path), "--out", str(out), "--no-progress", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert f"{out / TRACES_FILE}:3" in err and "Traceback" not in err


def test_a_torn_last_line_cut_inside_a_character_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    reference_run(out)
    with (out / TRACES_FILE).open("ab") as handle:
        handle.write('{"env_id": "caf\u00e9'.encode()[:-1])  # a crash cut the write inside the two bytes of 'é'
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------- a full or read-only disk
@contextlib.contextmanager
def small_disk(path: Path, size_kib: int) -> Iterator[bool]:
    """Mount a tmpfs of ``size_kib`` at ``path``; yields False where mounting is not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def file_size_limit(limit: int) -> Any:
    """A preexec_fn that caps the size of every file the child writes (a write past it fails with EFBIG)."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def run_cli(args: list[str], preexec_fn: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "commitbench.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, preexec_fn=preexec_fn, timeout=300, check=False)


@pytest.mark.slow
def test_a_full_disk_ends_the_run_as_failed_with_the_reason_and_a_rerun_resumes(tmp_path: Path) -> None:
    config = ExperimentConfig.model_validate(
        {"name": "full", "env": "commitbench/Standing-v0",
                         "agents": ["always-execute"], "episodes": {"split": "test", "limit": 150}, "concurrency": 4}
    )
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config.model_dump(mode="json")))
    disk = tmp_path / "disk"
    out = disk / "run"
    args = ["run", str(config_path), "--out", str(out), "--no-progress", "--no-report"]
    with small_disk(disk, 640) as mounted:
        if mounted:  # a real full disk: ENOSPC
            done = run_cli(args)
            reason = "No space left on device"
        else:  # no mount allowed here: a file-size limit makes the trace file's writes fail (EFBIG)
            done = run_cli(args, preexec_fn=file_size_limit(200_000))
            reason = "File too large"
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and reason in done.stderr and "commitbench: error" not in done.stderr
        manifest = read_manifest(out)
        assert manifest is not None and manifest.status is RunStatus.FAILED and reason in manifest.message
        assert manifest.invocations[-1].status is RunStatus.FAILED
        assert not (out / ".reserve").exists()
        kept = len(latest_traces(out)) if (out / TRACES_FILE).exists() else 0
        assert kept < 150
        if mounted:
            subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        rerun = run_cli(args)
        assert rerun.returncode == 0, rerun.stderr
        traces = latest_traces(out)
        assert len(traces) == len({t.run_key for t in traces}) == 150
        manifest = read_manifest(out)
        assert manifest is not None and manifest.status is RunStatus.COMPLETE and manifest.message == ""


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` read-only for this process: a read-only remount of its tmpfs as root, else chmod."""
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip("cannot make a directory read-only here (root without mount)")
        try:
            yield
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)


@pytest.mark.slow
def test_a_read_only_run_directory_still_reports_and_is_refused_by_run(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 64 * 1024) as mounted:
        if os.geteuid() == 0 and not mounted:
            pytest.skip("cannot mount a tmpfs here")
        out = disk / "run"
        config = reference_run(out, limit=8)
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config.model_dump(mode="json")))
        before = (out / "manifest.json").read_text()
        with read_only(out if not mounted else disk):
            report = run_cli(["report", str(out), "--n-boot", "20"])
            assert report.returncode == 0, report.stderr
            assert "Traceback" not in report.stderr and "not writable" in report.stderr
            assert "always-execute" in report.stdout  # the tables are printed
            assert not (out / "results.json").exists() and not (out / "report").exists()
            rerun = run_cli(["run", str(config_path), "--out", str(out), "--no-progress", "--no-report"])
            assert rerun.returncode == 2, rerun.stderr
            assert "Traceback" not in rerun.stderr and f"cannot write to the run directory {out}" in rerun.stderr
        assert (out / "manifest.json").read_text() == before


def test_a_follow_up_labels_line_that_does_not_match_the_schema_is_named(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server.set_responder(lambda request: "I'll remind you tomorrow.")
    out = tmp_path / "run"
    assert cli_main(["run", "followup", "--model", "mock-model", "--base-url", mock_server.base_url, "--limit", "3",
                     "--out", str(out), "--no-progress", "--no-report"]) == 0
    assert cli_main(["label", str(out), "--judge", "rules"]) == 0
    labels = out / "labels-rules.jsonl"
    record = json.loads(labels.read_text().splitlines()[1])
    record["result"]["outcome"] = "kept-somehow"
    damage_line(labels, 2, json.dumps(record).encode() + b"\n")
    capsys.readouterr()
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure"]) == 2
    err = capsys.readouterr().err
    assert f"{labels}:2: not a valid labels record: result.outcome" in err and "Traceback" not in err


@pytest.mark.parametrize("bad_id", ["100000000000000000000000", "9223372036854775808", "0", "-3", "1e23"])
def test_ledger_ids_out_of_range_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_id: str
) -> None:
    db = str(tmp_path / "ledger.sqlite")
    actions = (["show", bad_id], ["ack", bad_id, "--actor", "me"],
               ["close", bad_id, "--outcome", "failed", "--actor", "me"])
    for action in actions:
        try:
            code = cli_main(["ledger", "--db", db, *action])
        except SystemExit as exited:  # argparse itself refuses what looks like an option ("-3")
            code = exited.code
        assert code == 2
        err = capsys.readouterr().err
        assert "commitment id" in err and "Traceback" not in err


def test_ledger_ids_at_the_top_of_the_range_are_looked_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "ledger.sqlite")
    assert cli_main(["ledger", "--db", db, "add", "--debtor", "a", "--creditor", "b", "--action", "x"]) == 0
    assert cli_main(["ledger", "--db", db, "show", str(2**63 - 1)]) == 1
    assert "9223372036854775807" in capsys.readouterr().err


@pytest.mark.parametrize("content,where", [
    (b'{"user": "hi", "reply": "ok"}\n{"user": ' + nested(5000).encode() + b', "reply": "x"}\n', ":2:"),
    (b'{"user": "hi", "reply": "ok"}\n{"user": "\xff", "reply": "x"}\n', ":2:"),
])
def test_prevalence_on_a_bad_log_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, where: str
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(content)
    assert cli_main(["prevalence", str(log), "--n-boot", "10"]) == 2
    err = capsys.readouterr().err
    assert f"{log}{where}" in err and "Traceback" not in err


def test_prevalence_on_a_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["prevalence", str(tmp_path), "--n-boot", "10"]) == 2
    assert "is a directory" in capsys.readouterr().err


# ------------------------------------------------------------------------------- secrets
SECRET = "pa55-w0rd-never-written"
JUDGE_SECRET = "judge-s3cret-never-written"


def endpoint(base_url: str, user: str, password: str, path: str = "/v1") -> str:
    return base_url.replace("http://", f"http://{user}:{password}@").replace("/v1", path)


def secret_model(name: str, url: str) -> dict[str, Any]:
    return {"name": name, "base_url": url, "api_key_env": None,
            "settings": {"model": "mock-model", "timeout": 5.0},
            "retry": {"max_attempts": 2, "base_delay_s": 0.001, "max_delay_s": 0.002, "seed": 1}}


def test_credentials_in_a_base_url_are_sent_but_never_written_or_printed(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    import base64
    import logging

    caplog.set_level(logging.DEBUG)
    mock_server.set_responder(lambda request: "Noted.")
    base = mock_server.base_url
    outs = {name: tmp_path / name for name in ("played", "rejected", "unreachable")}
    configs = {
        # two models and a judge, each behind credentials
        "played": {"models": [secret_model("a", endpoint(base, "alice", SECRET)),
                              secret_model("b", endpoint(base, "bob", SECRET))],
                   # one mock serves every model, so the judge serves the tested model on purpose
                   "judge": {"kind": "llm", "model": secret_model("judge", endpoint(base, "jude", JUDGE_SECRET)),
                             "max_attempts": 1, "allow_tested_model": True}},
        "rejected": {"models": [secret_model("a", endpoint(base, "carol", SECRET, "/wrong/v1"))]},
        "unreachable": {"models": [secret_model("a", f"http://dave:{SECRET}@127.0.0.1:9/v1")]},
    }
    codes = {}
    for name, fields in configs.items():
        data = {"name": f"secret-{name}", "env": "commitbench/Standing-v0",
                                          "agents": ["chat"], "episodes": {"split": "test", "limit": 2},
                "concurrency": 2, **fields}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        codes[name] = cli_main(["run", str(path), "--out", str(outs[name]), "--no-progress"])
    assert codes == {"played": 0, "rejected": 2, "unreachable": 1}
    # The credentials went to the server, as HTTP basic authentication.
    sent = {r["headers"].get("authorization", "") for r in mock_server.requests()}
    assert "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode() in sent
    assert "Basic " + base64.b64encode(f"jude:{JUDGE_SECRET}".encode()).decode() in sent
    manifest = read_manifest(outs["played"])
    assert manifest is not None and "***@" in manifest.config["models"][0]["base_url"]

    # Labelling again from the manifest needs the judge's URL again: its credentials were not kept.
    assert cli_main(["label", str(outs["played"]), "--retry-errors"]) == 2
    assert "--judge-base-url" in capsys.readouterr().err
    judge_url = endpoint(base, "jude", JUDGE_SECRET)
    assert cli_main(["label", str(outs["played"]), "--retry-errors", "--judge-base-url", judge_url]) in (0, 1)

    printed = capsys.readouterr()
    leaks = ["stdout, stderr or the log" for secret in (SECRET, JUDGE_SECRET)
             if secret in printed.out + printed.err + caplog.text]
    for out in outs.values():
        for path in out.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                leaks += [str(path) for secret in (SECRET, JUDGE_SECRET) if secret.encode() in data]
    assert leaks == []


@pytest.mark.parametrize("text,expected", [
    ("http://user:pw@host:8000/v1", "http://***@host:8000/v1"),
    ("https://TOKEN@api.example/v1", "https://***@api.example/v1"),
    ("--base-url=http://u:p%40ss@h/v1 and http://plain/v1", "--base-url=http://***@h/v1 and http://plain/v1"),
    ("http://host/path@not-credentials", "http://host/path@not-credentials"),
    ("no url at all: a@b", "no url at all: a@b"),
    ("http://a:b@c http://d:e@f", "http://***@c http://***@f"),
    ("://@" * 3, "://***@" * 3),
    ("http://h/v1?token=abc&x=1 done", "http://h/v1?token=***&x=*** done"),
    ("http://u:p@h/v1?t=1#frag", "http://***@h/v1?t=***#frag"),
    ("http://h/v1?bare&=v&", "http://h/v1?***&=***&"),
    ("see http://h/v1? or http://h/a?b", "see http://h/v1? or http://h/a?***"),
    ("'http://h/v1?k=v'", "'http://h/v1?k=***'"),
])
def test_redact_credentials(text: str, expected: str) -> None:
    from commitbench.llm import redact_credentials

    assert redact_credentials(text) == expected


def test_redact_credentials_takes_linear_time() -> None:
    import time

    from commitbench.llm import redact_credentials

    for text in ("://" * 200_000, "http://a@" + "b" * 600_000, "http://h/?" + "a=b&" * 150_000, "://?" * 150_000):
        started = time.process_time()
        redact_credentials(text)
        assert time.process_time() - started < 2.0, text[:20]


def test_the_command_line_in_the_manifest_holds_no_credentials(tmp_path: Path) -> None:
    config = ExperimentConfig.model_validate(
        {"name": "argv", "env": "commitbench/Standing-v0",
                         "agents": ["always-execute"], "episodes": {"split": "test", "limit": 1}}
    )
    argv = ["commitbench", "run", "standing", "--judge-base-url", f"http://jude:{SECRET}@127.0.0.1:1/v1"]
    run_experiment(config, tmp_path, argv=argv)
    assert SECRET not in (tmp_path / "manifest.json").read_text()
    manifest = read_manifest(tmp_path)
    assert manifest is not None and manifest.invocations[-1].argv[-1] == "http://***@127.0.0.1:1/v1"


# ----------------------------------------------------------------------------- processes
FAKE_SERVER = """
import signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a server slow to stop: only SIGKILL ends it


class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(sys.argv[1])), Models).serve_forever()
"""

PARENT = """
import os, sys, time
from commitbench.agents.local_model import LocalModelServer, _free_port


class FakeServer(LocalModelServer):
    def command(self):
        self.port = _free_port(self.host)
        return [sys.executable, sys.argv[1], str(self.port)]


for attempt in range(3):  # the free port may be taken by someone else before the server binds it
    try:
        server = FakeServer(startup_timeout_s=120, selftest=False).start()
        break
    except Exception:
        if attempt == 2:
            raise
print(server.pid, flush=True)
if sys.argv[2] == "exit":
    sys.stdin.readline()  # the test has seen the server alive
    os._exit(3)  # the parent ends without stopping the server
time.sleep(600)
"""


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("ending", ["SIGKILL", "SIGTERM", "exit"])
def test_the_local_model_server_dies_with_its_parent(tmp_path: Path, ending: str) -> None:
    import time

    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_SERVER)
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), str(fake), ending], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    server_pid = 0
    try:
        assert parent.stdout is not None and parent.stderr is not None
        line = parent.stdout.readline()  # the parent prints the server's pid once it answers
        if not line.strip().isdigit():
            parent.wait(60)
            pytest.fail(f"the parent did not start the server: {line!r} {parent.stderr.read()[-2000:]}")
        server_pid = int(line)
        assert process_alive(server_pid)
        if ending == "exit":
            assert parent.stdin is not None
            parent.stdin.write("go\n")
            parent.stdin.flush()
        else:
            parent.send_signal(getattr(signal, ending))
        parent.wait(60)
        deadline = time.monotonic() + 60
        while process_alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(server_pid), f"the server {server_pid} outlived its parent ({ending})"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for stream in (parent.stdin, parent.stdout, parent.stderr):
            if stream is not None:
                stream.close()
        if server_pid and process_alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


@pytest.mark.parametrize("reply,reason", [
    ('{"rationale": ' + nested(5000) + "}", "nested deeper than"),
    ('{"rationale": ' + nested(100) + "}", "nested deeper than"),
    ('{"rationale": "odd \\udcff"}', "lone surrogate"),
    ('{"rationale": ' + "1" * 5000 + "}", "not JSON"),
])
def test_a_hostile_judge_reply_is_a_recorded_judge_error(reply: str, reason: str) -> None:
    from pydantic import BaseModel

    from commitbench.llm.structured import parse_model_json

    class Verdict(BaseModel):
        rationale: Any

    parsed = parse_model_json(reply, Verdict)
    assert parsed.value is None and parsed.error is not None and reason in parsed.error
    parsed.model_dump_json()


# ------------------------------------------------------------------ servers that misbehave
def drill_config(base_url: str, limit: int = 1, settings: dict[str, Any] | None = None,
                 retry: dict[str, Any] | None = None, **fields: Any) -> ExperimentConfig:
    """A chat run of ``limit`` episodes against ``base_url`` (a misbehaving server of the test)."""
    data: dict[str, Any] = {
        "name": "drill", "env": "commitbench/Standing-v0", "agents": ["chat"],
        "models": [{"name": "raw", "base_url": base_url, "api_key_env": None,
                    "settings": {"model": "raw-model", "timeout": 10.0, **(settings or {})},
                    "retry": {**FAST_RETRY, **(retry or {})}}],
        "episodes": {"split": "test", "limit": limit}, "concurrency": 2,
    }
    data.update(fields)
    return ExperimentConfig.model_validate(data)


def run_config(tmp_path: Path, config: ExperimentConfig, *extra: str) -> tuple[int, Path]:
    """``commitbench run`` on ``config`` through the command line; (exit code, run directory)."""
    path = tmp_path / f"{config.name}.json"
    path.write_text(json.dumps(config.model_dump(mode="json")))
    out = tmp_path / f"out-{config.name}"
    return cli_main(["run", str(path), "--out", str(out), "--no-progress", "--no-report", *extra]), out


@pytest.mark.slow
def test_a_server_that_trickles_its_answer_cannot_hold_a_run(tmp_path: Path) -> None:
    import threading
    import time

    from _raw_server import RawServer, trickling

    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    stop = threading.Event()
    with RawServer(trickling(head, 0.2, stop)) as server:
        config = drill_config(server.base_url, settings={"timeout": 1.0}, retry={"max_attempts": 2})
        started = time.monotonic()
        try:
            code, out = run_config(tmp_path, config)
        finally:
            stop.set()
        took = time.monotonic() - started
    assert code == 1 and took < 60, took
    (trace,) = read_traces(out / TRACES_FILE)
    assert trace.infra_error is not None and trace.infra_error.startswith("timeout:")
    assert "within 1 s" in trace.infra_error and "gave up after 2 attempts" in trace.infra_error


def oversized_reply(size: int, framing: str) -> Any:
    """A handler whose answer is a completion of ``size`` bytes of text, framed as ``framing`` says:
    'declared' (a true Content-Length), 'close' (no length: the body ends when the connection does)."""
    from _raw_server import completion

    def handle(request: Any, conn: Any) -> None:
        body = json.dumps(completion({"role": "assistant", "content": "x" * size})).encode()
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
        if framing == "declared":
            head += f"Content-Length: {len(body)}\r\n"
        with contextlib.suppress(OSError):  # the client stops reading and hangs up
            conn.sendall(head.encode() + b"\r\n" + body)

    return handle


@pytest.mark.parametrize("framing", ["declared", "close"])
def test_a_reply_larger_than_the_bound_is_an_infrastructure_error_and_is_not_kept(
    tmp_path: Path, framing: str
) -> None:
    from _raw_server import RawServer

    from commitbench.bounds import DEFAULT_MAX_RESPONSE_BYTES

    with RawServer(oversized_reply(3 * DEFAULT_MAX_RESPONSE_BYTES, framing)) as server:
        code, out = run_config(tmp_path, drill_config(server.base_url))
        requests = len(server.requests)
    assert code == 1
    (trace,) = read_traces(out / TRACES_FILE)
    assert trace.infra_error is not None and trace.infra_error.startswith("response_too_large:")
    assert f"max_response_bytes ({DEFAULT_MAX_RESPONSE_BYTES:,}" in trace.infra_error
    assert requests == 1  # the same prompt would get the same answer: not retried
    assert (out / TRACES_FILE).stat().st_size < 50_000
    from commitbench.cache import CallCache

    with CallCache(out / "cache.sqlite") as cache:
        assert len(cache) == 0


def test_an_error_body_larger_than_the_bound_is_not_read(tmp_path: Path) -> None:
    from _raw_server import RawServer, http_bytes

    def handle(request: Any, conn: Any) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(http_bytes(500, b'{"error": {"message": "' + b"e" * 300_000 + b'"}}'))

    with RawServer(handle) as server:
        config = drill_config(server.base_url, settings={"max_response_bytes": 100_000})
        code, out = run_config(tmp_path, config)
    (trace,) = read_traces(out / TRACES_FILE)
    assert code == 1 and trace.infra_error is not None and trace.infra_error.startswith("response_too_large:")
    assert (out / TRACES_FILE).stat().st_size < 50_000


def test_tool_arguments_larger_than_the_bound_are_a_tool_error_never_resent_whole(tmp_path: Path) -> None:
    from _raw_server import RawServer, completion, http_bytes

    from commitbench.bounds import DEFAULT_MAX_ARGUMENT_BYTES
    from commitbench.cache import CallCache

    huge = json.dumps({"query": "y" * 1_000_000})

    def handle(request: Any, conn: Any) -> None:
        messages = request.json()["messages"]
        if messages[-1]["role"] == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": "Looked it up."}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": huge}}]}
        conn.sendall(http_bytes(200, json.dumps(completion(message)).encode()))

    with RawServer(handle) as server:
        config = drill_config(server.base_url, limit=2, cache={"path": str(tmp_path / "cache.sqlite")})
        code, out = run_config(tmp_path, config)
        sent = [len(r.body) for r in server.requests]
    assert code == 0
    traces = read_traces(out / TRACES_FILE)
    assert len(traces) == 2 and not any(t.infra_error for t in traces)
    calls = [c for t in traces for c in t.tool_calls() if c.tool == "lookup"]
    assert calls and all(not c.ok and c.error_kind == "bad_arguments" for c in calls)
    assert all(f"more than the {DEFAULT_MAX_ARGUMENT_BYTES:,} a tool call may carry" in c.result for c in calls)
    assert all(c.raw_arguments is not None and len(c.raw_arguments) < 2000 for c in calls)
    # Never resent whole: every request after the first of a conversation carries a cut copy.
    assert max(sent) < 100_000, max(sent)
    assert (out / TRACES_FILE).stat().st_size < 500_000
    # The answer itself (under the response bound) is cached, and a replay plays the same tool errors.
    with CallCache(tmp_path / "cache.sqlite") as cache:
        assert len(cache) > 0
    replay = config.model_copy(update={"cache": CacheConfig(path=tmp_path / "cache.sqlite", mode="replay_only")})
    summary = run_experiment(replay, tmp_path / "replay")
    assert summary.status is RunStatus.COMPLETE and summary.http_requests == 0
    again = [c.result for t in read_traces(tmp_path / "replay" / TRACES_FILE) for c in t.tool_calls()]
    assert again == [c.result for t in traces for c in t.tool_calls()]


# Answers that are no answer: each must fail its cell, never be graded as what the model said.
VLLM_NO_TOOL_PARSER = {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                       "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'}
UNUSABLE_ANSWERS: dict[str, tuple[int, Any, str]] = {
    "400 without a tool parser": (400, VLLM_NO_TOOL_PARSER, "bad_request"),
    "422": (422, {"detail": [{"msg": "field required"}]}, "bad_request"),
    "choices [{}]": (200, {"id": "x", "model": "raw-model", "choices": [{}]}, "invalid_response"),
    "message null": (200, {"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}, "invalid_response"),
    "tool_calls an object": (200, {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": {
        "id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}}}]}, "invalid_response"),
    "content a list of non-parts": (200, {"choices": [{"message": {"role": "assistant", "content": ["ok", 1]}}]},
                                    "invalid_response"),
}


def first_session_gets(status: int, payload: Any) -> Any:
    """A handler that answers every call of the first episode it sees with ``payload`` and the others well."""
    from _raw_server import completion, http_bytes

    bad: list[str] = []

    def handle(request: Any, conn: Any) -> None:
        session = request.headers.get("x-session-id", "")
        if not bad:
            bad.append(session)
        if session == bad[0]:
            conn.sendall(http_bytes(status, json.dumps(payload).encode()))
        else:
            conn.sendall(http_bytes(200, json.dumps(completion({"role": "assistant", "content": "Noted."})).encode()))

    return handle


@pytest.mark.parametrize("status,payload,kind", UNUSABLE_ANSWERS.values(), ids=list(UNUSABLE_ANSWERS))
def test_a_call_that_got_no_answer_fails_its_cell_and_is_left_out_of_every_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, payload: Any, kind: str
) -> None:
    from _raw_server import RawServer

    with RawServer(first_session_gets(status, payload)) as server:
        code, out = run_config(tmp_path, drill_config(server.base_url, limit=3, concurrency=1))
    assert code == 1
    traces = read_traces(out / TRACES_FILE)
    failed = [t for t in traces if t.infra_error]
    assert len(traces) == 3 and len(failed) == 1 and failed[0].infra_error.startswith(f"{kind}:")
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status is RunStatus.INCOMPLETE and manifest.cells_done == 2
    capsys.readouterr()
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["runs"] == 2  # the failed cell is in no table
    (row,) = [r for r in document["call_errors"] if r["kind"] == kind]
    assert row["player"] == "chat:raw" and row["cells"] == 1 and row["cells_left_out"] == 1 and row["calls"] >= 1
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure"]) == 0
    printed = capsys.readouterr().out
    assert "Model-call errors" in printed and kind in printed


def test_a_run_whose_first_calls_all_fail_stops_with_the_servers_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from _raw_server import RawServer, json_answer

    with RawServer(json_answer(VLLM_NO_TOOL_PARSER, status=400)) as server:
        code, out = run_config(tmp_path, drill_config(server.base_url, limit=20, concurrency=2))
        requests = len(server.requests)
    err = capsys.readouterr().err
    assert code == 2 and "first 8 calls to model 'raw-model' all failed" in err and "--enable-auto-tool-choice" in err
    assert "Traceback" not in err
    assert requests <= 8 + 2  # the calls in flight when the eighth failed, at most
    manifest = read_manifest(out)
    assert manifest is not None and manifest.status is RunStatus.ABORTED
    assert "--enable-auto-tool-choice" in manifest.message


VLLM_CONTEXT = {"object": "error", "type": "BadRequestError", "code": 400, "message": (
    "This model's maximum context length is 4096 tokens. However, you requested 4500 tokens "
    "(4244 in the messages, 256 in the completion). Please reduce the length of the messages or completion.")}


def test_a_context_that_no_longer_fits_is_a_fact_of_the_cell_reported_per_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from _raw_server import RawServer

    with RawServer(first_session_gets(400, VLLM_CONTEXT)) as server:
        code, out = run_config(tmp_path, drill_config(server.base_url, limit=3, concurrency=1))
    assert code == 0  # not an outage: every cell is done, the first one with calls the model could not take
    traces = read_traces(out / TRACES_FILE)
    assert not any(t.infra_error for t in traces)
    errors = [c.error for t in traces for c in t.model_calls if c.error]
    assert errors and all(e.startswith("context_length: HTTP 400") and "maximum context length is 4096" in e
                          for e in errors)
    capsys.readouterr()
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["runs"] == 3
    (row,) = document["call_errors"]
    assert (row["player"], row["kind"], row["cells"], row["cells_left_out"]) == ("chat:raw", "context_length", 1, 0)
    assert row["calls"] == len(errors)


API_KEY = "sk-drill-0123456789abcdef-never-written"
BASIC_USER, BASIC_PASSWORD = "drill-user", "basic-pa55word-never-written"
QUERY_TOKEN = "qt-0123456789-never-written"


def echoing(status: int) -> Any:
    """A handler that repeats what it was sent (the Authorization header and the path with its query)
    in its answer: as the reply text (status 200) or as the error body (any other status)."""
    from _raw_server import completion, http_bytes

    def handle(request: Any, conn: Any) -> None:
        echo = f"you sent Authorization: {request.headers.get('authorization')} to {request.path}"
        if status == 200:
            payload: Any = completion({"role": "assistant", "content": echo})
        else:
            payload = {"error": {"message": echo, "type": "error", "code": status}}
        conn.sendall(http_bytes(status, json.dumps(payload).encode()))

    return handle


def secret_forms() -> dict[str, str]:
    import base64

    basic = f"{BASIC_USER}:{BASIC_PASSWORD}"
    return {"API key": API_KEY, "basic-auth string": basic, "basic-auth password": BASIC_PASSWORD,
            "basic-auth base64": base64.b64encode(basic.encode()).decode(), "query token": QUERY_TOKEN}


@pytest.mark.parametrize("status", [200, 500, 400, 401])
def test_secrets_echoed_by_a_server_are_never_written_or_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: int
) -> None:
    from _raw_server import RawServer

    monkeypatch.setenv("DRILL_API_KEY", API_KEY)
    with RawServer(echoing(status)) as server:
        bearer = {"name": "bearer", "base_url": server.base_url, "api_key_env": "DRILL_API_KEY",
                  "settings": {"model": "raw-model"}, "retry": FAST_RETRY}
        basic_url = server.base_url.replace("http://", f"http://{BASIC_USER}:{BASIC_PASSWORD}@")
        basic = {"name": "basic", "base_url": f"{basic_url}?token={QUERY_TOKEN}", "api_key_env": None,
                 "settings": {"model": "raw-model"}, "retry": FAST_RETRY}
        config = ExperimentConfig.model_validate({
            "name": "echo", "env": "commitbench/Standing-v0", "agents": ["chat"], "models": [bearer, basic],
            "episodes": {"split": "test", "limit": 1}, "concurrency": 2})
        code, out = run_config(tmp_path, config)
        paths = {r.path for r in server.requests}
    assert code == {200: 0, 500: 1, 400: 1, 401: 2}[status]
    # The query token reached the server as a query, not glued into the path.
    assert f"/v1/chat/completions?token={QUERY_TOKEN}" in paths and all(p.startswith("/v1/chat/") for p in paths)
    if status == 200:
        assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure"]) == 0
        assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure", "--json"]) == 0
        assert cli_main(["view", str(out), "--n-boot", "20"]) == 0
    printed = capsys.readouterr()
    leaks = [f"{name} in stdout" for name, form in secret_forms().items() if form in printed.out]
    leaks += [f"{name} in stderr" for name, form in secret_forms().items() if form in printed.err]
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaks += [f"{name} in {path.relative_to(out)}" for name, form in secret_forms().items()
                      if form.encode() in data]
    assert leaks == []
    traces = read_traces(out / TRACES_FILE) if (out / TRACES_FILE).exists() else []
    if status == 200:  # what the server said is kept, the secrets in it replaced
        assert traces and all("you sent Authorization: " in t.turns[0].reply for t in traces if t.turns)


# ------------------------------------------------------------------------------- absurd sizes
@pytest.mark.parametrize("fields,words", [
    ({"samples": 1_000_000_000}, "samples: Input should be less than or equal to 1000"),
    ({"concurrency": 1_000_000}, "concurrency: Input should be less than or equal to 4096"),
    ({"samples": 1000, "episodes": {"split": None}}, "plans 1,440,000 cells"),
])
def test_absurd_sizes_are_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], words: str
) -> None:
    import time

    data = {"name": "huge", "env": "commitbench/Standing-v0", "agents": ["chat"], "episodes": {"split": "test"},
            "models": [{"name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}], **fields}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    for extra in ([], ["--dry-run"]):
        started = time.monotonic()
        assert cli_main(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress", *extra]) == 2
        assert time.monotonic() - started < 60
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
    assert cli_main(["run", "standing", "--agent", "creditor-rule", "--concurrency", "1000000"]) == 2
    assert "--concurrency must be from 1 to 4,096" in capsys.readouterr().err


def test_no_more_clients_than_cells_in_flight(tmp_path: Path, mock_server: MockServer) -> None:
    config = chat_config(mock_server.base_url, 2, concurrency=4096)
    summary = run_experiment(config, tmp_path)
    assert summary.status is RunStatus.COMPLETE
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    # Two cells make at most two calls at once: one client with a limit of two, not 64 clients of 64.
    assert manifest.invocations[-1].client_stats["mock"]["concurrency_limit"] == 2


# ------------------------------------------------------------------- bad input, clean errors
def invalid_data_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the shipped standing data with one type file whose promise names no template variable."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(ROOT / "episodes" / "data" / "standing", data)
    bad = data / "types" / "water_plants.yaml"
    text = (ROOT / "docs" / "examples" / "water_plants.yaml").read_text(encoding="utf-8")
    bad.write_text(text.replace('promise: "Sure.', 'promise: "{{ lipsum }} Sure.', 1), encoding="utf-8")
    return data, bad


def test_an_invalid_episode_data_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, bad = invalid_data_dir(tmp_path)
    args = ["--out", str(tmp_path / "out"), "--no-progress", "--no-report"]
    assert cli_main(["run", "standing", "--agent", "creditor-rule", "--data", str(data), "--limit", "2", *args]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: promise: the template uses 'lipsum'" in err and "Traceback" not in err
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"name": "data", "env": "commitbench/Standing-v0", "agents": ["creditor-rule"],
                                  "episodes": {"data": str(data), "limit": 2}}))
    for extra in ([], ["--dry-run"]):
        assert cli_main(["run", str(config), *args, *extra]) == 2
        err = capsys.readouterr().err
        assert f"{bad}: promise:" in err and "Traceback" not in err


@pytest.mark.parametrize("content,words", [
    ("name: x\nagents: [creditor-rule]\nseed: " + "9" * 5000 + "\n", "5000 digits (line 3)"),
    ("name: x\x00\nagents: [creditor-rule]\n", "U+0000 is not allowed in YAML (line 1)"),
])
def test_yaml_a_reader_cannot_take_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content, encoding="utf-8")
    assert cli_main(["run", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: " in err and words in err and "Traceback" not in err


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """Make one file read-only for this process (a read-only bind mount as root, else chmod)."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    bound = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, check=False)
    if bound.returncode != 0:
        pytest.skip("cannot make a file read-only here (root without mount)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", str(path)], check=False, capture_output=True)


def test_ledger_writes_to_a_read_only_database_are_clean_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    base = ["ledger", "--db", str(db), "--now", "2025-01-06T09:00:00Z"]
    assert cli_main([*base, "add", "--debtor", "a", "--creditor", "b", "--action", "x",
                     "--due", "2025-01-07T09:00:00Z"]) == 0
    capsys.readouterr()
    with read_only_file(db):
        for action in (["add", "--debtor", "a", "--creditor", "b", "--action", "y"], ["ack", "1", "--actor", "a"]):
            assert cli_main([*base, *action]) == 1
            err = capsys.readouterr().err
            assert f"cannot write to {db}" in err and "readonly" in err and "Traceback" not in err, err
        assert cli_main([*base, "list"]) == 0  # reading still works
    assert "-> b: x" in capsys.readouterr().out


def test_reading_a_ledger_that_does_not_exist_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "no" / "such" / "dir" / "ledger.db"
    for action in (["list"], ["due"], ["show", "1"], ["ack", "1", "--actor", "a"]):
        assert cli_main(["ledger", "--db", str(db), *action]) == 1
        assert f"no ledger at {db}" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()
    assert cli_main(["ledger", "--db", str(db), "add", "--debtor", "a", "--creditor", "b", "--action", "x"]) == 0
    assert db.is_file()


def test_a_merge_that_fails_leaves_nothing_behind_and_can_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    reference_run(out, limit=3)
    cache = out / "cache.sqlite"
    cache.write_bytes(b"not a database, just text\n" * 40)
    merged = tmp_path / "merged"
    assert cli_main(["merge", str(merged), str(out)]) == 2
    err = capsys.readouterr().err
    assert str(cache) in err and "damaged or not a commitbench cache" in err and "Traceback" not in err
    assert not merged.exists()
    cache.unlink()
    assert cli_main(["merge", str(merged), str(out)]) == 0
    assert len(read_traces(merged / TRACES_FILE)) == 3
    # A target that existed (empty) stays, empty.
    other = tmp_path / "other"
    other.mkdir()
    damage_line(out / TRACES_FILE, 2, b'{"env_id": "x", "episode_id": "y", "run_key": "nope"}\n')
    assert cli_main(["merge", str(other), str(out)]) == 2
    assert "is no cell of the experiment" in capsys.readouterr().err
    assert other.is_dir() and list(other.iterdir()) == []


def test_out_of_range_numbers_on_the_command_line_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    reference_run(out, limit=2)
    capsys.readouterr()
    for args, words in (
        (["view", str(out), "--serve", "99999"], "--serve PORT must be from 0 to 65535"),
        (["view", str(out), "--serve", "-1"], "--serve PORT must be from 0 to 65535"),
        (["report", str(out), "--n-boot", "99999999999"], "--n-boot must be from 1 to 100,000"),
        (["view", str(out), "--n-boot", "99999999999"], "--n-boot must be from 1 to 100,000"),
    ):
        assert cli_main(args) == 2, args
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
    assert not (out / "view").exists()  # refused before the site was built


# ------------------------------------------------------------- one rule for the lines of a run
def foreign_lines(tmp_path: Path) -> dict[str, bytes]:
    """Trace lines a run directory must not count: a renamed run key, a line of another experiment of the
    same player, and a line copied onto another cell's key."""
    other = tmp_path / "other"
    reference_run_config = {"name": "ref", "env": "commitbench/Standing-v0",
                                           "agents": ["always-execute"], "episodes": {"split": "dev", "limit": 2}}
    assert run_experiment(ExperimentConfig.model_validate(reference_run_config), other).status is RunStatus.COMPLETE
    first, second = (json.loads(line) for line in (other / TRACES_FILE).read_text().splitlines()[:2])
    renamed = dict(first, run_key="0" * 64)
    return {
        "renamed run key": json.dumps(renamed).encode() + b"\n",
        "another experiment, same player": json.dumps(second).encode() + b"\n",
    }


@pytest.mark.parametrize("kind", ["renamed run key", "another experiment, same player", "another cell's key"])
def test_run_report_and_merge_refuse_the_same_foreign_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    out = tmp_path / "run"
    config = reference_run(out, limit=4)
    lines = (out / TRACES_FILE).read_bytes().splitlines(keepends=True)
    if kind == "another cell's key":
        record = json.loads(lines[0])
        record["run_key"] = json.loads(lines[1])["run_key"]  # the first cell's trace, filed under the second's key
        extra = json.dumps(record).encode() + b"\n"
    else:
        extra = foreign_lines(tmp_path)[kind]
    with (out / TRACES_FILE).open("ab") as handle:
        handle.write(extra)
    where = f"{out / TRACES_FILE}:5"
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config.model_dump(mode="json")))
    capsys.readouterr()
    for args in (["report", str(out), "--n-boot", "20", "--no-figure", "--json"],
                 ["run", str(config_path), "--out", str(out), "--no-progress", "--no-report"],
                 ["view", str(out), "--n-boot", "20"],
                 ["label", str(out)],
                 ["merge", str(tmp_path / "merged"), str(out)]):
        assert cli_main(args) == 2, args
        printed = capsys.readouterr()
        assert where in printed.err and "Traceback" not in printed.err, (args, printed.err)
        assert printed.out == ""  # no table counted the line
    assert not (tmp_path / "merged").exists()


def test_the_cells_a_forced_run_added_stay_traces_of_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    reference_run(out, limit=3)
    other = ExperimentConfig.model_validate(
        {"name": "ref", "env": "commitbench/Standing-v0",
                        "agents": ["creditor-rule"], "episodes": {"split": "test", "limit": 2}})
    with pytest.raises(ValueError, match="holds a different experiment"):
        run_experiment(other, out)
    assert run_experiment(other, out, force=True).status is RunStatus.COMPLETE
    manifest = read_manifest(out)
    assert manifest is not None and [c["agents"] for c in manifest.earlier_configs] == [["always-execute"]]
    capsys.readouterr()
    assert cli_main(["report", str(out), "--n-boot", "20", "--no-figure", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 5
    assert run_experiment(other, out).cells_skipped == 2  # and a resume reads them all again


# -------------------------------------------------------------------------------- smaller ones
CONTROL = "I have created the draft \x1b[2J\x07 \x9b31m \u202eevil"


def test_the_guard_never_sends_control_characters_to_the_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    outputs = []
    for args in (["guard", CONTROL], ["guard", CONTROL, "--json"], ["guard", "-"], ["guard", "-", "--json"]):
        monkeypatch.setattr(sys, "stdin", io.StringIO(CONTROL + "\n"))
        assert cli_main(args) == 0
        outputs.append(capsys.readouterr().out)
    for out in outputs:
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e"), out
    assert "\\x1b[2J\\x07" in outputs[2]  # the line mode shows them escaped, as the ledger does
    assert json.loads(outputs[1])["text"] == CONTROL and json.loads(outputs[3])["text"] == CONTROL


def test_the_guard_and_the_router_cap_their_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import time

    from commitbench.claimguard.guard import MAX_TEXT_CHARS, TextTooLong, should_guard
    from commitbench.claimguard.routing import route_turn

    at_cap = ("I have created the draft. " * (MAX_TEXT_CHARS // 26 + 1))[:MAX_TEXT_CHARS]
    started = time.process_time()
    assert should_guard(at_cap, 0, False, True).guard and route_turn(at_cap) is not None
    assert time.process_time() - started < 5.0
    over = at_cap + "x"
    with pytest.raises(TextTooLong, match=f"{MAX_TEXT_CHARS + 1:,} characters long, more than the {MAX_TEXT_CHARS:,}"):
        should_guard(over, 0, False, True)
    with pytest.raises(TextTooLong, match="the user's message"):
        route_turn(over)
    with pytest.raises(TextTooLong, match="the assistant's previous message"):
        route_turn("yes", over)
    monkeypatch.setattr(sys, "stdin", io.StringIO("I have saved it.\n" + "y" * 1_000_000 + "\nnever read\n"))
    assert cli_main(["guard", "-"]) == 2
    printed = capsys.readouterr()
    assert printed.out.count("\n") == 1 and f"stdin line 2 is longer than the {MAX_TEXT_CHARS:,}" in printed.err
    assert cli_main(["guard", over]) == 2 and f"the guard reads at most {MAX_TEXT_CHARS:,}" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../escape", "a/b", "/abs", ".hidden", "two words", ""])
def test_an_experiment_name_is_one_plain_folder_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"name": name, "env": "commitbench/Standing-v0",
                                              "agents": ["creditor-rule"], "episodes": {"limit": 1}}))
    monkeypatch_cwd = tmp_path / "cwd"
    monkeypatch_cwd.mkdir()
    old = os.getcwd()
    os.chdir(monkeypatch_cwd)
    try:
        assert cli_main(["run", str(path), "--no-progress", "--no-report"]) == 2
    finally:
        os.chdir(old)
    assert "name" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == sorted([path, monkeypatch_cwd])  # nothing was written anywhere
    assert list(monkeypatch_cwd.iterdir()) == []


def test_an_invocation_that_left_no_end_is_marked_by_the_next(tmp_path: Path) -> None:
    config = reference_run(tmp_path, limit=2)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    # What SIGKILL leaves behind: the invocation still says 'running'.
    lost = manifest.invocations[-1].model_copy(update={"status": RunStatus.RUNNING, "ended_at": None})
    (tmp_path / "manifest.json").write_text(manifest.model_copy(update={
        "status": RunStatus.RUNNING, "invocations": [lost]}).model_dump_json(indent=2))
    run_experiment(config, tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest is not None
    first, second = manifest.invocations
    assert first.status is RunStatus.KILLED and f"pid {lost.pid} ended without recording how" in first.message
    assert second.status is RunStatus.COMPLETE and manifest.status is RunStatus.COMPLETE


@pytest.mark.slow
def test_an_invocation_killed_by_sigkill_is_marked_killed_by_the_next(tmp_path: Path, mock_server: MockServer) -> None:
    import time

    mock_server.set_latency(300)  # slow enough to be killed in the middle
    config = chat_config(mock_server.base_url, 6, concurrency=1)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.model_dump(mode="json")))
    out = tmp_path / "run"
    args = [sys.executable, "-m", "commitbench.cli", "run", str(path), "--out", str(out), "--no-progress",
            "--no-report"]
    child = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / TRACES_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    killed = read_manifest(out)
    assert killed is not None and killed.invocations[-1].status is RunStatus.RUNNING
    mock_server.set_latency(0)
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    manifest = read_manifest(out)
    assert manifest is not None
    assert [i.status for i in manifest.invocations] == [RunStatus.KILLED, RunStatus.COMPLETE]
    assert "ended without recording how" in manifest.invocations[0].message
    assert len(latest_traces(out)) == 6


# ------------------------------------------------------------------------------- held probes
HOSTILE_TEXT = ('<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
                '</script><script>window.pwned=3</script>"); window.pwned=4; //')


@pytest.mark.slow
def test_the_viewer_never_executes_model_text(tmp_path: Path, mock_server: MockServer) -> None:
    """What a model writes reaches the viewer's pages as text, never as markup or script (headless Chromium)."""
    from _browser import Browser, find_chromium, install_hint
    from _viewer_fixtures import route_ready

    if find_chromium() is None:
        pytest.fail(install_hint(), pytrace=False)
    mock_server.set_responder(lambda request: ReplySpec(text=HOSTILE_TEXT, reasoning=HOSTILE_TEXT))
    out = tmp_path / "run"
    assert run_experiment(chat_config(mock_server.base_url, 2), out).status is RunStatus.COMPLETE
    assert cli_main(["view", str(out), "--n-boot", "20"]) == 0
    run_key = latest_traces(out)[0].run_key
    browser = Browser(width=1280, height=900).start()
    try:
        for route in ("#/", "#/runs?q=pwned", f"#/run/{run_key}"):
            browser.goto((out / "view" / "index.html").resolve().as_uri() + route, ready=route_ready(route))
            assert browser.evaluate("typeof window.pwned") == "undefined", route
        assert HOSTILE_TEXT in str(browser.evaluate("document.getElementById('main').innerText"))
        assert browser.evaluate("document.querySelectorAll('#main img[src=x], #main script').length") == 0
    finally:
        browser.close()
