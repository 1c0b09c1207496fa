"""Drills: a run directory on read-only storage (an archive, a shared mount) is readable.

``report``, ``view --out``, ``export --out``, ``label --out`` (read back by ``report --labels`` and ``view
--labels``), ``merge`` from it and ``cache stats`` work from it and write nothing into it; a cache there
opens with SQLite's ``immutable=1``; what would have to write into it, or into another read-only
directory, is a one-line error naming the path.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_drills import read_only, small_disk

from commitbench.cli import main as cli_main
from commitbench.config import ExperimentConfig
from commitbench.mock import MockServer
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces


def chat_run(base_url: str, out: Path, limit: int = 3) -> ExperimentConfig:
    config = ExperimentConfig.model_validate({
        "name": "archive", "env": "commitbench/Standing-v0", "agents": ["chat", "creditor-rule"],
        "models": [{"name": "mock", "base_url": base_url, "api_key_env": None,
                    "settings": {"model": "mock-model", "timeout": 10.0}}],
        "episodes": {"split": "test", "limit": limit}, "concurrency": 2,
    })
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    return config


def tree(root: Path) -> dict[str, str]:
    """Every file below ``root`` with the digest of its bytes."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def archived(tmp_path: Path, mock_server: MockServer) -> Iterator[Path]:
    """A finished chat run (with its cache) on a tmpfs mounted read-only while the test runs."""
    disk = tmp_path / "disk"
    with small_disk(disk, 64 * 1024) as mounted:
        if os.geteuid() == 0 and not mounted:
            pytest.skip("cannot mount a tmpfs here")
        run = disk / "run"
        chat_run(mock_server.base_url, run)
        assert (run / "cache.sqlite").is_file() and not (run / "labels-rules.jsonl").exists()
        with read_only(disk if mounted else run):
            yield run


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_every_reader_works_from_a_read_only_run_and_writes_nothing_into_it(
    archived: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(archived)
    code, out, err = cli(capsys, "report", str(archived), "--n-boot", "20")
    assert code == 0 and "chat:mock" in out and "not writable" in err and "Traceback" not in err

    code, out, err = cli(capsys, "view", str(archived), "--out", str(tmp_path / "site"), "--n-boot", "20")
    assert code == 0, err
    assert (tmp_path / "site" / "index.html").is_file() and any((tmp_path / "site" / "img").glob("*.png"))

    code, out, err = cli(capsys, "export", str(archived), "--out", str(tmp_path / "dataset"))
    assert code == 0, err
    assert (tmp_path / "dataset" / "README.md").is_file()

    labels = tmp_path / "labels"
    code, out, err = cli(capsys, "label", str(archived), "--out", str(labels))
    assert code == 0, err
    assert (labels / "labels-rules.jsonl").is_file()
    assert len((labels / "labels-rules.jsonl").read_text().splitlines()) == len(latest_traces(archived))
    code, out, err = cli(capsys, "report", str(archived), "--labels", str(labels), "--judge", "rules",
                         "--n-boot", "20", "--json")
    assert code == 0, err
    assert json.loads(out)["judge"] == "rules"
    code, out, err = cli(capsys, "view", str(archived), "--out", str(tmp_path / "site2"), "--labels", str(labels),
                         "--n-boot", "20")
    assert code == 0, err

    code, out, err = cli(capsys, "cache", "stats", "--db", str(archived / "cache.sqlite"), "--json")
    assert code == 0, err
    assert json.loads(out)["entries"] > 0

    code, out, err = cli(capsys, "merge", str(tmp_path / "merged"), str(archived))
    assert code == 0, err
    assert len(latest_traces(tmp_path / "merged")) == len(latest_traces(archived))

    # A replay into a new directory reads the archived cache (immutable) and makes no call.
    config = json.loads((archived / "manifest.json").read_text())["config"]
    config["cache"] = {"path": str(archived / "cache.sqlite"), "mode": "replay_only"}
    (tmp_path / "replay.json").write_text(json.dumps(config))
    code, out, err = cli(capsys, "run", str(tmp_path / "replay.json"), "--out", str(tmp_path / "replay"),
                         "--no-progress", "--no-report")
    assert code == 0, err
    assert "0 HTTP" in err

    assert tree(archived) == before


def test_an_older_run_directory_without_a_cell_table_reads_from_read_only_storage(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory played before cell tables (no cells.jsonl): its cells come from its recorded config, and
    nothing is written into it, the table included; ``commitbench upgrade`` is refused with the reason."""
    disk = tmp_path / "disk"
    with small_disk(disk, 64 * 1024) as mounted:
        if os.geteuid() == 0 and not mounted:
            pytest.skip("cannot mount a tmpfs here")
        run = disk / "run"
        chat_run(mock_server.base_url, run, limit=2)
        (run / "cells.jsonl").unlink()
        with read_only(disk if mounted else run):
            before = tree(run)
            code, out, err = cli(capsys, "report", str(run), "--n-boot", "20", "--json")
            assert code == 0, err
            assert json.loads(out)["runs"] == 4
            code, out, err = cli(capsys, "view", str(run), "--out", str(tmp_path / "site"), "--n-boot", "20")
            assert code == 0, err
            code, out, err = cli(capsys, "export", str(run), "--out", str(tmp_path / "dataset"))
            assert code == 0, err
            code, out, err = cli(capsys, "merge", str(tmp_path / "merged"), str(run))
            assert code == 0, err
            assert (tmp_path / "merged" / "cells.jsonl").is_file()  # the merged directory has its table
            code, out, err = cli(capsys, "upgrade", str(run))
            assert code == 2 and "cells.jsonl" in err and "Traceback" not in err, err
            assert tree(run) == before


def test_what_would_write_into_read_only_storage_is_a_one_line_error(
    archived: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(archived)
    cases = [
        (["view", str(archived), "--n-boot", "20"], f"cannot write the site into {archived}"),
        (["label", str(archived)], f"cannot write the labels into {archived}"),
        (["label", str(archived), "--out", str(archived / "labels")], f"cannot create {archived / 'labels'}"),
        (["merge", str(archived.parent / "merged"), str(archived)], f"cannot create {archived.parent / 'merged'}"),
        (["export", str(archived), "--out", str(archived / "dataset")], f"{archived / 'dataset'}"),
        (["view", str(archived), "--out", str(archived / "site"), "--n-boot", "20"], f"{archived / 'site'}"),
        (["label", str(archived), "--out", str(tmp_path / "l"), "--judge", "llm", "--judge-model", "m",
          "--judge-base-url", "http://127.0.0.1:9/v1"], "on read-only storage and cannot be written"),
    ]
    for args, named in cases:
        code, _out, err = cli(capsys, *args)
        assert code == 2, (args, err)
        assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
    assert tree(archived) == before


def test_a_merge_into_a_read_only_directory_is_a_clean_error(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    chat_run(mock_server.base_url, source, limit=1)
    disk = tmp_path / "disk"
    with small_disk(disk, 1024) as mounted:
        if os.geteuid() == 0 and not mounted:
            pytest.skip("cannot mount a tmpfs here")
        (disk / "empty").mkdir()
        with read_only(disk):
            code, _out, err = cli(capsys, "merge", str(disk / "empty"), str(source))
    assert code == 2 and f"cannot write to {disk / 'empty'}" in err and "Traceback" not in err, err


def test_a_read_only_cache_with_an_unmerged_log_is_refused_naming_it(tmp_path: Path) -> None:
    import shutil
    import sqlite3

    from commitbench.cache import CacheError, CallCache

    written = tmp_path / "cache.sqlite"
    with CallCache(written) as cache:
        cache.put("k", "m", {"text": "x"})
    # A copy taken while a writer held its log unmerged: the cache with a -wal file beside it.
    holder = sqlite3.connect(written)
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("INSERT INTO entries VALUES ('k2', 'm', 0, '{}')")
    holder.commit()
    disk = tmp_path / "disk"
    with small_disk(disk, 4096) as mounted:
        if os.geteuid() == 0 and not mounted:
            pytest.skip("cannot mount a tmpfs here")
        for suffix in ("", "-wal"):
            shutil.copyfile(f"{written}{suffix}", f"{disk / 'cache.sqlite'}{suffix}")
        holder.close()
        path = disk / "cache.sqlite"
        assert Path(f"{path}-wal").stat().st_size > 0
        with read_only(disk):
            with pytest.raises(CacheError, match="write-ahead log"):
                CallCache(path, "replay_only")
            with pytest.raises(CacheError, match="on read-only storage"):
                CallCache(path, "read_write")
