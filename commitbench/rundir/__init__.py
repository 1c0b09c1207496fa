"""The run directory as a store: its manifest, its lock, the disk space it sets aside, its provenance.

Output directory::

    OUT/traces.jsonl    one EpisodeTrace per finished cell, appended as cells finish (fsynced)
    OUT/manifest.json   RunManifest, written atomically (tmp + rename) at start and end
    OUT/cache.sqlite    the model-call cache, unless the config names another file
    OUT/.lock           held by the one process that writes the directory (released by the kernel on SIGKILL)
    OUT/.reserve        disk space set aside while cells are played, freed for the last manifest
                        write when the disk fills up (a full disk ends the run 'failed', with why)

The trace file is written by :mod:`commitbench.tracewriter` and read by :mod:`commitbench.runcells`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.jsonl import write_atomic
from commitbench.llm import redact_credentials

__all__ = [
    "LOCK_FILE",
    "MANIFEST_FILE",
    "RESERVE_FILE",
    "Invocation",
    "RunDirectoryBusyError",
    "RunDirectoryError",
    "RunManifest",
    "RunStatus",
    "directory_lock",
    "earlier_configs",
    "git_state",
    "mark_killed",
    "now_iso",
    "package_versions",
    "read_manifest",
    "redacted_json",
    "release_reserve",
    "reserve_space",
    "write_final_manifest",
    "write_manifest",
]

MANIFEST_FILE = "manifest.json"
LOCK_FILE = ".lock"
# Disk space set aside while a run plays, freed for the last manifest write if the disk fills up.
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 256 * 1024
MANIFEST_SCHEMA_VERSION = 1
# The packages whose versions shape results (recorded in every manifest).
_PACKAGES = ("commitbench", "openai", "httpx", "httpx2", "pydantic", "gymnasium", "numpy", "pandas",
             "jinja2", "pyyaml", "llama_cpp_python")


class RunStatus(str, Enum):
    """How an invocation of the runner (and so the directory, after its latest one) ended."""

    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # finished, but some cells failed for infrastructure reasons
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"  # a configuration error stopped the run (e.g. the endpoint rejects the model)
    FAILED = "failed"  # the machine stopped the run (the disk is full, the directory cannot be written)
    KILLED = "killed"  # the process ended without recording how (SIGKILL, a crash): marked by the next invocation


class Invocation(BaseModel):
    """One execution of ``commitbench run`` on the directory."""

    started_at: str = Field(description="ISO time the invocation started.")
    ended_at: str | None = Field(default=None, description="ISO time it ended (null while running).")
    pid: int = Field(description="Process id.")
    argv: list[str] = Field(description="Command line (the user-info of URLs replaced by ***).")
    cells_pending: int = Field(description="Cells it set out to play.")
    cells_done: int = Field(default=0, description="Cells it finished well.")
    cells_failed: int = Field(default=0, description="Cells it finished with an infrastructure error.")
    status: RunStatus = Field(default=RunStatus.RUNNING, description="How it ended.")
    message: str = Field(default="", description="Why it stopped early, when it did (aborted, failed).")
    cache_mode: str = Field(description="Cache mode used.")
    client_stats: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-model client counters (calls, cache hits, retries, errors, tokens)."
    )


class RunManifest(BaseModel):
    """What a run directory holds and how it was produced."""

    schema_version: int = Field(default=MANIFEST_SCHEMA_VERSION, description="Manifest format version.")
    name: str = Field(description="Experiment name.")
    suite: str = Field(description="The suite the run plays (from the config's env).")
    run_id: str = Field(description="Random id of the run directory (stable across resumes).")
    status: RunStatus = Field(description="Status after the latest invocation.")
    message: str = Field(default="", description="Why the latest invocation stopped early, when it did.")
    config: dict[str, Any] = Field(
        description="The experiment config, as validated (the user-info of URLs replaced by ***: no credentials)."
    )
    config_hash: str = Field(description="sha256 of the canonical JSON of the config (commitbench.identity).")
    cells_hash: str = Field(description="sha256 of the sorted run keys: what the experiment plays.")
    cells_total: int = Field(description="Cells of the experiment.")
    cells_done: int = Field(description="Cells with a good trace in traces.jsonl.")
    players: list[dict[str, Any]] = Field(description="Agent identities (model identities, never URLs or keys).")
    interventions: list[str] = Field(description="Intervention arm labels.")
    episodes: int = Field(description="Episodes selected.")
    samples: int = Field(description="Samples per chat cell.")
    seeds: dict[str, int | None] = Field(description="Seeds: env reset seed and sampling seeds per model.")
    prompt_hashes: dict[str, str] = Field(description="sha256 of prompt templates and data files used.")
    episode_set_version: str | None = Field(
        default=None,
        description="Version of the suite's episode set the runs were played on (null: the suite has no versions, "
        "or the manifest predates them).",
    )
    episode_data_digest: str | None = Field(
        default=None,
        description="sha256 of the episode data directory's files when the run was started (commitbench.dataversion; "
        "null: the suite keeps no versioned data directory, or the manifest predates the digest).",
    )
    episode_data_state: str | None = Field(
        default=None,
        description="How those files stood to the directory's VERSION: locked, or changed / unlocked (a run started "
        "with --allow-unversioned); null as above.",
    )
    packages: dict[str, str] = Field(description="Versions of Python and the packages that shape results.")
    git: dict[str, Any] | None = Field(description="Commit and dirty flag of the source checkout, if any.")
    started_at: str = Field(description="ISO time of the first invocation.")
    updated_at: str = Field(description="ISO time of the last write.")
    ended_at: str | None = Field(default=None, description="ISO time the latest invocation ended.")
    invocations: list[Invocation] = Field(default_factory=list, description="Every invocation, oldest first.")
    earlier_configs: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Configs of other experiments whose cells the directory also holds (replaced by one run with "
        "--force): their traces stay traces of this run.",
    )


class RunDirectoryBusyError(RuntimeError):
    """Another process is running into the same directory."""


class RunDirectoryError(RuntimeError):
    """The run directory cannot be written (read-only, full, no permission); nothing was played."""

    def __init__(self, out_dir: Path, exc: OSError) -> None:
        where = f" ({exc.filename})" if exc.filename else ""
        super().__init__(f"cannot write to the run directory {out_dir}: {exc.strerror or exc}{where}")


@contextlib.contextmanager
def directory_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out_dir`` (released by the kernel even on SIGKILL)."""
    import fcntl

    path = out_dir / LOCK_FILE
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunDirectoryBusyError(
                f"{out_dir} is in use by {holder}; wait for it to finish or stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


def read_manifest(out_dir: Path | str) -> RunManifest | None:
    """The manifest of a run directory; None when it has none, ValueError naming the file when it is damaged."""
    path = Path(out_dir) / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path} is not a run manifest: {exc}") from None


def write_manifest(out_dir: Path, manifest: RunManifest) -> None:
    """Write a manifest atomically (a reader sees the old one or the new one, never half of one)."""
    write_atomic(out_dir / MANIFEST_FILE, manifest.model_dump_json(indent=2))


def reserve_space(out_dir: Path) -> None:
    """Set disk space aside for the last manifest write (a full disk must not leave a run 'running')."""
    path = out_dir / RESERVE_FILE
    try:
        with path.open("wb") as handle:
            os.posix_fallocate(handle.fileno(), 0, RESERVE_BYTES)
    except OSError:
        path.unlink(missing_ok=True)  # the disk is already full: there is nothing to set aside


def release_reserve(out_dir: Path) -> None:
    """Free the space :func:`reserve_space` set aside."""
    with contextlib.suppress(OSError):
        (out_dir / RESERVE_FILE).unlink(missing_ok=True)


def write_final_manifest(out_dir: Path, manifest: RunManifest) -> str:
    """Write the last manifest of an invocation, with the reserved space if the disk is full; '' or why it
    could not be written. The reserve is released either way."""
    try:
        try:
            write_manifest(out_dir, manifest)
        except OSError:
            release_reserve(out_dir)
            write_manifest(out_dir, manifest)
    except OSError as exc:
        return f"the manifest could not be updated ({type(exc).__name__}: {exc})"
    finally:
        release_reserve(out_dir)
    return ""


def earlier_configs(previous: RunManifest | None, cells_hash: str) -> list[dict[str, Any]]:
    """The configs whose cells a directory holds besides a new config's (of cells hash ``cells_hash``): the
    previous manifest's earlier configs, and its own config when --force is adding another experiment's cells."""
    if previous is None:
        return []
    earlier = list(previous.earlier_configs)
    if previous.cells_hash != cells_hash and previous.config not in earlier:
        earlier.append(previous.config)
    return earlier


def mark_killed(invocations: list[Invocation], now: str) -> list[Invocation]:
    """The invocations of a directory whose lock this process holds: one still ``running`` ended without
    recording how (its process is gone), so it is marked ``killed``."""
    marked = []
    for old in invocations:
        if old.status is RunStatus.RUNNING:
            old = old.model_copy(update={
                "status": RunStatus.KILLED,
                "message": f"pid {old.pid} ended without recording how (killed, or the machine stopped); "
                f"marked when the invocation of {now} started",
            })
        marked.append(old)
    return marked


def redacted_json(value: Any) -> Any:
    """A JSON value with the user-info of every URL in its strings replaced (what a manifest may hold)."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, dict):
        return {key: redacted_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted_json(item) for item in value]
    return value


def now_iso() -> str:
    """The time now, as manifests record it (UTC, seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    """Python's version, the platform, and the versions of the packages that shape results."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def git_state(start: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirty flag of the checkout holding the source, or None outside a checkout."""
    where = start or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where, capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)}
