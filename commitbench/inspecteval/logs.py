"""Inspect logs of the commitbench tasks as a run directory, for ``commitbench report``, ``view`` and ``export``.

Every sample of ``commitbench/standing`` and ``commitbench/followup`` stores its episode's trace
(:data:`~commitbench.inspecteval.play.TRACE_KEY`) and the experiment config its cell belongs to
(:data:`~commitbench.inspecteval.play.CONFIG_KEY`, the config ``commitbench run SUITE --agent chat`` would
build). :func:`convert_logs` writes those into a run directory: the traces through the project's trace file
helpers (``traces.jsonl``, in the order the evals were created, so a cell played by two evals counts once,
by the rule every reader applies: the last good trace of a run key), and a manifest
(:mod:`commitbench.rundir`) of the config, one invocation per eval, and the cell table of the config's cells
(:mod:`commitbench.rundir.cells`), so the run directory reads like one of ``commitbench run``. Logs of
several models of the same task and parameters become one run with every model (so the report compares
them); anything else is refused with an :class:`InspectLogError`: a log of another task, an eval that did
not finish (``error``, ``cancelled``, still ``started``), a log without its samples or a sample without its
trace.

The run directory is the log directory's sibling ``<LOG_DIR>-commitbench`` (:func:`default_run_dir`),
kept so that ``report``'s files, ``view``'s site and labels of ``commitbench label`` stay beside it. It
is rewritten when the logs changed since the last conversion (``inspect-logs.json`` records which logs
made it) and never when it holds anything else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench import identity
from commitbench.config import ExperimentConfig
from commitbench.digests import digest
from commitbench.inspecteval.params import DATA_KEY
from commitbench.jsonl import write_atomic
from commitbench.planning import (
    Cell,
    cell_table,
    expand_cells,
    manifest_config,
    players,
    prompt_hashes,
    select_config_episodes,
)
from commitbench.progress import reading
from commitbench.rundir import (
    MANIFEST_FILE,
    Invocation,
    RunManifest,
    RunStatus,
    directory_lock,
    now_iso,
    package_versions,
    write_manifest,
)
from commitbench.rundir.cells import CELLS_FILE, write_cell_table
from commitbench.rundir.reader import config_of_manifest
from commitbench.traces import TRACES_FILE, EpisodeTrace, append_traces

__all__ = [
    "LOG_SUFFIXES", "SOURCE_FILE", "TASKS", "ConversionSummary", "InspectLogError", "convert_logs",
    "default_run_dir", "is_inspect_log", "log_files",
]

# The registry names of the tasks whose logs can be converted.
TASKS = ("commitbench/standing", "commitbench/followup")
LOG_SUFFIXES = (".eval", ".json")
# What the converter writes into its run directory besides the run's own files: which logs made it.
SOURCE_FILE = "inspect-logs.json"
RUN_DIR_SUFFIX = "-commitbench"


class InspectLogError(ValueError):
    """The logs cannot be made into a run directory (another task, an unfinished eval, no samples)."""


class ConversionSummary(BaseModel):
    """What :func:`convert_logs` did."""

    run_dir: str = Field(description="The run directory the logs became.")
    logs: list[str] = Field(description="The log files, oldest eval first.")
    suite: str = Field(description="The suite of the logs' task.")
    samples: int = Field(description="Samples read (one trace each).")
    cells_total: int = Field(description="Cells of the run's config.")
    cells_done: int = Field(description="Cells with a good trace.")
    rewritten: bool = Field(description="False when the run directory already held these logs' conversion.")


def _run_dir_markers(path: Path) -> bool:
    return (path / MANIFEST_FILE).exists() or (path / TRACES_FILE).exists()


def is_inspect_log(path: Path) -> bool:
    """Whether ``path`` is an inspect log file, or a directory of log files that is no run directory.

    Reads names only (no log is opened, nothing of inspect-ai is imported)."""
    if path.is_file():
        return path.suffix in LOG_SUFFIXES
    return path.is_dir() and not _run_dir_markers(path) and any(
        f.suffix in LOG_SUFFIXES and f.is_file() for f in path.iterdir()
    )


def log_files(source: Path) -> list[Path]:
    """The log files of ``source`` (a log file, or a directory: its logs, not those of folders under it)."""
    if source.is_file():
        return [source]
    from inspect_ai.log import list_eval_logs

    found = sorted(Path(info.name.removeprefix("file://")) for info in list_eval_logs(str(source), recursive=False))
    if not found:
        raise InspectLogError(f"{source} is no run directory (it has neither {MANIFEST_FILE} nor {TRACES_FILE}) "
                              "and holds no inspect log (.eval or .json)")
    return found


def default_run_dir(source: Path) -> Path:
    """Where the run directory of a log directory (or log file) goes: its sibling ``<name>-commitbench``."""
    source = source.resolve()
    return source.parent / f"{source.stem if source.is_file() else source.name}{RUN_DIR_SUFFIX}"


def _fingerprint(files: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for path in files:
        stat = path.stat()
        out.append({"file": str(path.resolve()), "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    return out


def _read(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    try:
        return read_eval_log(str(path))
    except Exception as exc:  # a damaged or foreign file: inspect's reader says why
        raise InspectLogError(f"{path} is not a readable inspect log: {type(exc).__name__}: {exc}") from None


def _check(path: Path, log: Any) -> None:
    task = log.eval.task_registry_name or log.eval.task
    if task not in TASKS:
        raise InspectLogError(f"{path} is a log of the task {task!r}; only logs of {' and '.join(TASKS)} "
                              "can be read as a run")
    if log.status != "success":
        why = f": {log.error.message}" if log.error is not None else ""
        raise InspectLogError(
            f"{path}: the eval ended '{log.status}'{why}; only a finished eval is a run. Play the rest with "
            f"'inspect eval-retry {path}' and read the log it writes (without this one)")
    expected = log.results.total_samples if log.results is not None else None
    if not log.samples or (expected is not None and len(log.samples) < expected):
        raise InspectLogError(f"{path} holds {len(log.samples or [])} of its {expected} samples; a partial log "
                              "is no run")


def _sample_parts(path: Path, log: Any) -> tuple[list[dict[str, Any]], list[EpisodeTrace]]:
    from commitbench.inspecteval.play import CONFIG_KEY, TRACE_KEY

    configs, traces = [], []
    for sample in log.samples:
        stored, config = sample.store.get(TRACE_KEY), sample.store.get(CONFIG_KEY)
        if stored is None or config is None:
            missing = TRACE_KEY if stored is None else CONFIG_KEY
            raise InspectLogError(f"{path}: sample {sample.id} (epoch {sample.epoch}) has no {missing} in its store "
                                  "(the episode was not played, or the log predates it)")
        configs.append(config)
        traces.append(EpisodeTrace.model_validate(stored))
    return configs, traces


def _one_config(configs: Sequence[dict[str, Any]]) -> ExperimentConfig:
    """The run's config: the samples' config, with every model of the logs (all else must agree)."""
    first = {k: v for k, v in configs[0].items() if k != "models"}
    models: list[dict[str, Any]] = []
    for config in configs:
        rest = {k: v for k, v in config.items() if k != "models"}
        if rest != first:
            differ = sorted(k for k in set(rest) | set(first) if rest.get(k) != first.get(k))
            raise InspectLogError(f"the logs are not of one experiment: their configs differ in {', '.join(differ)} "
                                  "(convert the logs of each task and parameters apart)")
        for model in config.get("models", []):
            if model not in models:
                if any(m.get("name") == model.get("name") for m in models):
                    raise InspectLogError(f"two logs ran the model {model.get('name')} with different settings; "
                                          "convert them apart")
                models.append(model)
    return config_of_manifest({**first, "models": models})


def _invocation(path: Path, log: Any, good: int, failed: int) -> Invocation:
    stats = log.stats
    return Invocation(
        started_at=stats.started_at or log.eval.created, ended_at=stats.completed_at or None, pid=0,
        argv=["inspect", "eval", str(log.eval.task_registry_name or log.eval.task), "--model", str(log.eval.model)],
        cells_pending=len(log.samples), cells_done=good, cells_failed=failed, status=RunStatus.COMPLETE,
        message=f"inspect eval {log.eval.eval_id}, read from {path}",
        cache_mode="inspect" if log.eval.task_args.get("cache") else "off",
    )


def _manifest(config: ExperimentConfig, entries: Sequence[tuple[Path, Any, list[EpisodeTrace]]],
              done: int, episodes: Sequence[Any], cells: Sequence[Cell]) -> RunManifest:
    config_json = manifest_config(config)
    invocations = [_invocation(p, log, sum(not t.infra_error for t in ts), sum(bool(t.infra_error) for t in ts))
                   for p, log, ts in entries]
    status = RunStatus.COMPLETE if done == len(cells) else RunStatus.INCOMPLETE
    message = "" if status is RunStatus.COMPLETE else (
        f"the inspect logs hold good traces of {done} of the config's {len(cells)} cells (inspect's --limit or "
        "--sample-id, or failed samples)")
    revision = entries[-1][1].eval.revision
    eval_ids = "\n".join(sorted(log.eval.eval_id for _, log, _ in entries))
    seeds: dict[str, int | None] = {"env_reset": config.seed}
    for entry in config.models:
        seeds[f"sampling:{entry.name}"] = entry.settings.seed
    # The episode data as the last eval found it when its task was built (its task metadata), not as it is now.
    data = (entries[-1][1].eval.metadata or {}).get(DATA_KEY) or {}
    packages = package_versions()
    for _, log, _ in entries:
        packages.update({f"{k} (inspect eval)": str(v) for k, v in (log.eval.packages or {}).items()})
    return RunManifest(
        name=config.name, suite=config.suite.name, run_id=digest(eval_ids, length=32),
        status=status, message=message, config=config_json, config_hash=identity.config_hash(config_json),
        cells_hash=identity.cells_hash(c.run_key for c in cells), cells_total=len(cells), cells_done=done,
        players=[p.identity.model_dump(mode="json") for p in players(config)],
        interventions=[arm.label() for arm in config.interventions], episodes=len(episodes), samples=config.samples,
        seeds=seeds, prompt_hashes=prompt_hashes(config),
        episode_set_version=config.suite.set_version(config.episodes), packages=packages,
        episode_data_digest=data.get("digest"), episode_data_state=data.get("state"),
        git={"commit": revision.commit, "dirty": bool(revision.dirty)} if revision is not None else None,
        started_at=min(i.started_at for i in invocations), updated_at=now_iso(),
        ended_at=max((i.ended_at for i in invocations if i.ended_at), default=None), invocations=invocations,
    )


def convert_logs(source: Path | str, run_dir: Path | str | None = None) -> ConversionSummary:
    """Make the run directory of an inspect log file or log directory (see the module doc)."""
    source = Path(source)
    if not source.exists():
        raise InspectLogError(f"{source} does not exist")
    files = log_files(source)
    out = Path(run_dir) if run_dir is not None else default_run_dir(source)
    fingerprint = _fingerprint(files)
    recorded = out / SOURCE_FILE
    if out.exists() and any(out.iterdir()) and not recorded.is_file():
        raise InspectLogError(f"{out} exists and was not written from inspect logs; move it away to read {source}")
    logs = [(path, _read(path)) for path in files]
    for path, log in logs:
        _check(path, log)
    logs.sort(key=lambda item: str(item[1].eval.created))
    suites = {str(log.eval.task_registry_name) for _, log in logs}
    if len(suites) > 1:
        raise InspectLogError(f"{source} holds logs of {' and '.join(sorted(suites))}; convert each task's logs apart")
    entries, configs = [], []
    progress = reading(f"converting inspect logs of {source.name}", sum(len(log.samples or []) for _, log in logs))
    try:
        for path, log in logs:
            sample_configs, traces = _sample_parts(path, log)
            configs.extend(sample_configs)
            entries.append((path, log, traces))
            if progress is not None:
                for _ in log.samples or []:
                    progress.advance()
                progress.poll()
    finally:
        if progress is not None:
            progress.close()
    config = _one_config(configs)
    every = [t for _, _, traces in entries for t in traces]
    done = len({t.run_key for t in every if not t.infra_error})
    summary = ConversionSummary(run_dir=str(out), logs=[str(p) for p, _ in logs], suite=config.suite.name,
                                samples=len(every), cells_total=0, cells_done=done, rewritten=True)
    if (recorded.is_file() and (out / CELLS_FILE).is_file()
            and json.loads(recorded.read_text(encoding="utf-8")).get("logs") == fingerprint):
        manifest = RunManifest.model_validate_json((out / MANIFEST_FILE).read_text(encoding="utf-8"))
        return summary.model_copy(update={"cells_total": manifest.cells_total, "rewritten": False})
    episodes = select_config_episodes(config)
    cells = expand_cells(config, episodes)
    manifest = _manifest(config, entries, done, episodes, cells)
    out.mkdir(parents=True, exist_ok=True)
    with directory_lock(out):
        (out / TRACES_FILE).unlink(missing_ok=True)
        append_traces(out / TRACES_FILE, every)
        write_cell_table(out, cell_table(config, cells))
        write_manifest(out, manifest)
        write_atomic(recorded, json.dumps({"logs": fingerprint, "written_at": now_iso()}, indent=2))
    return summary.model_copy(update={"cells_total": manifest.cells_total})
