"""Reading a run directory: its suite and its cells, without the code that played it.

Every verb that reads a finished run (``label``, ``report``, ``view``, ``annotate``, ``export``, ``merge``)
finds the run's suite here (:func:`run_suite`) and its cells in the directory's cell table
(:mod:`commitbench.rundir.cells`), so it never imports a player: a run of an agent whose package was
uninstalled since reads as well as any. Nothing here writes into the directory.

A directory written before cell tables existed has none; its cells are then found by expanding the
configs its manifest records (:func:`legacy_cell_table`), which imports the players they name. When that
fails (an agent's package is gone), the error says so and names ``commitbench upgrade RUN``, which writes
the table once, while the agent can still be imported (:func:`upgrade_run_dir`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from commitbench import identity
from commitbench.digests import digest
from commitbench.jsonl import file_state
from commitbench.runcells import check_trace_file, trace_file_checked
from commitbench.rundir import MANIFEST_FILE, RunManifest, directory_lock, read_manifest
from commitbench.rundir.cells import CELLS_FILE, CellTable, read_cell_table, write_cell_table
from commitbench.suites import AnySuite, get_suite, suite_for_env
from commitbench.traces import TRACES_FILE, iter_traces

if TYPE_CHECKING:
    from commitbench.config import ExperimentConfig

__all__ = [
    "UpgradeError",
    "config_of_manifest",
    "directory_cells",
    "legacy_cell_table",
    "run_suite",
    "upgrade_run_dir",
]


class UpgradeError(ValueError):
    """``commitbench upgrade`` cannot write a directory's cell table (it has one, or its config cannot be expanded)."""


def config_of_manifest(data: dict[str, Any]) -> ExperimentConfig:
    """The experiment config a manifest records (its cache file is the directory's own: the path is dropped).
    Validating it imports the players it names: only ``run``, ``merge`` and :func:`legacy_cell_table` do."""
    from commitbench.config import ExperimentConfig

    cache = {**(data.get("cache") or {}), "path": None}
    config: ExperimentConfig = ExperimentConfig.model_validate({**data, "cache": cache})
    return config


def legacy_cell_table(manifest: RunManifest, skip_config: bool = False) -> CellTable:
    """The cells of a directory that has no cell table, by expanding the configs its manifest records (its
    own, current, and those ``--force`` replaced; ``skip_config``: the earlier ones only)."""
    from commitbench.planning import cell_table, expand_cells, select_config_episodes

    table = CellTable((), ())
    configs = ([] if skip_config else [(manifest.config, True)]) + [(c, False) for c in manifest.earlier_configs]
    for data, current in configs:
        config = config_of_manifest(data)
        table = table.union(cell_table(config, expand_cells(config, select_config_episodes(config)), current))
    return table


def directory_cells(run_dir: Path, manifest: RunManifest) -> CellTable:
    """A run directory's cells: its cell table, or (a directory written before tables) its expanded configs;
    a ValueError that names ``commitbench upgrade`` when those cannot be expanded here."""
    table = read_cell_table(run_dir, manifest.cells_hash)
    if table is not None:
        return table
    try:
        return legacy_cell_table(manifest)
    except (ValidationError, ValueError, ImportError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ValidationError) and exc.errors():
            first = str(exc.errors()[0].get("msg", first))
        raise ValueError(
            f"{run_dir} has no {CELLS_FILE} (it was written by an earlier commitbench), so its cells come from "
            f"expanding its config, which failed here: {first}. Where the config's players can be imported, run "
            f"'commitbench upgrade {run_dir}' once: it writes the table, and the directory reads anywhere after"
        ) from None


def cells_context(run_dir: Path, manifest: RunManifest) -> str | None:
    """What names a directory's cells for :func:`commitbench.runcells.trace_file_checked`: its cell table file as
    it is now and the cells hash of its manifest (None for a directory without a table, whose cells come from
    expanding its configs, which the code that expands them may change)."""
    table = run_dir / CELLS_FILE
    if not table.is_file():
        return None
    return digest(repr((file_state(table), manifest.cells_hash)))


def run_suite(run_dir: Path | str) -> AnySuite:
    """The suite of a run directory: from its manifest (whose episode-set version must be this checkout's,
    and whose every trace line must be a trace of one of its cells: :mod:`commitbench.runcells`), else from
    the environment of its first trace."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is not None:
        suite = get_suite(manifest.suite)
        selection = suite.selection.model_validate(manifest.config.get("episodes") or {})
        suite.check_set_version(manifest.episode_set_version, run_dir, selection)
        # Every line must be a trace of a cell of the run's experiment (the rule 'run' and 'merge' apply); a
        # trace file checked against the same cell table before, unchanged since, is not read for it again.
        traces, context = run_dir / TRACES_FILE, cells_context(run_dir, manifest)
        if context is None or not trace_file_checked(traces, context):
            check_trace_file(traces, directory_cells(run_dir, manifest).facts(), context)
        return suite
    path = run_dir / TRACES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} holds neither {MANIFEST_FILE} nor {TRACES_FILE}; is it a run directory?")
    for trace in iter_traces(path):
        return suite_for_env(trace.env_id)
    raise ValueError(f"{path} holds no trace, so the run's suite is unknown")


def upgrade_run_dir(run_dir: Path) -> int:
    """Write the cell table of a directory written before tables existed; the number of cells written."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise UpgradeError(f"{run_dir} has no {MANIFEST_FILE}: it is no run directory of 'commitbench run'")
    if (run_dir / CELLS_FILE).exists():
        read_cell_table(run_dir, manifest.cells_hash)  # a damaged table is named, not written over
        raise UpgradeError(f"{run_dir} already has its {CELLS_FILE}; nothing to upgrade")
    try:
        table = legacy_cell_table(manifest)
    except (ValidationError, ValueError, ImportError) as exc:
        raise UpgradeError(f"cannot expand the config of {run_dir}: {exc}") from None
    if identity.cells_hash(table.current_keys()) != manifest.cells_hash:
        raise UpgradeError(f"expanding the config of {run_dir} here gives other cells than the run holds (its "
                           "players or this commitbench changed since it was played); nothing was written")
    with directory_lock(run_dir):  # nothing else writes the directory meanwhile
        if (run_dir / CELLS_FILE).exists():
            raise UpgradeError(f"{run_dir} got its {CELLS_FILE} meanwhile; nothing to upgrade")
        write_cell_table(run_dir, table)
    return len(table.rows)
