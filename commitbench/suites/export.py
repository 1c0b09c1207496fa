"""A run directory written as a dataset directory that the Hugging Face ``datasets`` library loads in one line.

    OUT/README.md                            the dataset card: YAML front matter (configs, features, licence)
                                             and what the run is, its judges, its sources and their licences
    OUT/data/train-00000-of-00001.parquet    one row per trace (:mod:`commitbench.suites.dataset`)

The directory is built beside ``OUT`` and moved into place when it is complete, so a failed export leaves
nothing half-written. ``OUT`` must be new or empty; ``force`` replaces a previous export, and only one:
a directory holding anything an export does not write is refused even then. Every string of both files
passes the run's :class:`commitbench.suites.dataset.Scrubber`.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, Field

from commitbench import __version__
from commitbench.rundir import MANIFEST_FILE, RunManifest, RunStatus, read_manifest
from commitbench.suites import AnySuite
from commitbench.suites.dataset import JSON_ENCODED, JudgeLabels, RunRows, Scrubber, read_run
from commitbench.suites.kits import DataSource

__all__ = ["CARD_FILE", "DATA_FILE", "DatasetCard", "ExportError", "ExportSummary", "export_run", "features_yaml"]

CARD_FILE = "README.md"
DATA_DIR = "data"
DATA_FILE = f"{DATA_DIR}/train-00000-of-00001.parquet"
SPLIT = "train"


class ExportError(ValueError):
    """A run directory that cannot be exported, or an output directory that must not be written; says why."""


class DatasetCard(BaseModel):
    """What the dataset card states about the run."""

    run_name: str = Field(description="The experiment's name.")
    run_id: str = Field(description="The run directory's random id.")
    suite: str = Field(description="The suite.")
    env_id: str = Field(description="Its environment id.")
    status: str = Field(description="The run's status after its latest invocation.")
    config_hash: str = Field(description="sha256 of the run's canonical config (its identity).")
    cells_hash: str = Field(description="sha256 of the run keys the experiment plays.")
    cells_total: int = Field(description="Cells of the experiment.")
    rows: int = Field(description="Rows of the dataset (one per run key with a trace).")
    failed_rows: int = Field(description="Rows whose every try failed for infrastructure reasons.")
    episode_set_version: str | None = Field(description="Version of the suite's episode set the run was played on.")
    agents: list[str] = Field(description="The players.")
    arms: list[str] = Field(description="The intervention arms.")
    judges: list[JudgeLabels] = Field(description="Whose labels the rows carry.")
    sources: list[DataSource] = Field(description="Where the episodes come from, with their licences.")
    commitbench_version: str = Field(description="Version of commitbench that wrote the export.")


class ExportSummary(BaseModel):
    """What an export wrote."""

    out_dir: str = Field(description="The dataset directory.")
    rows: int = Field(description="Rows written.")
    files: dict[str, int] = Field(description="Files written (relative path -> bytes).")
    seconds: float = Field(description="Wall time of the export.")
    card: DatasetCard = Field(description="What the card states.")


# ------------------------------------------------------------------------------ the card's features
def _type_yaml(kind: pa.DataType) -> dict[str, Any]:
    if pa.types.is_struct(kind):
        return {"struct": [features_yaml_field(child) for child in kind]}
    if pa.types.is_list(kind):
        inner = _type_yaml(kind.value_type)
        if list(inner) == ["dtype"]:
            return {"list": inner["dtype"]}
        if list(inner) == ["struct"]:
            return {"list": inner["struct"]}
        return {"list": inner}
    names = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "bool"}
    if kind not in names:
        raise TypeError(f"no dataset feature for the Arrow type {kind}")
    return {"dtype": names[kind]}


def features_yaml_field(field: pa.Field) -> dict[str, Any]:
    return {"name": field.name, **_type_yaml(field.type)}


def features_yaml(schema: pa.Schema) -> list[dict[str, Any]]:
    """A schema as the ``features`` list of a dataset card's ``dataset_info`` (the form ``datasets`` reads)."""
    return [features_yaml_field(field) for field in schema]


def _short_type(field: pa.Field) -> str:
    kind = field.type
    if field.metadata and field.metadata.get(b"encoding") == JSON_ENCODED[b"encoding"]:
        return "JSON text"
    if pa.types.is_list(kind):
        return f"list of {_short_type(kind.value_field)}"
    if pa.types.is_struct(kind):
        return f"struct ({', '.join(child.name for child in kind)})" if kind.num_fields <= 6 else \
            f"struct of {kind.num_fields} fields"
    return str(kind)


# ------------------------------------------------------------------------------ the card's text
def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def card_text(card: DatasetCard, rows: RunRows, num_bytes: int) -> str:
    """The README.md of the dataset: front matter that ``datasets`` reads, then the card in words."""
    licences = sorted({source.licence_id for source in card.sources})
    front: dict[str, Any] = {
        "license": licences[0] if len(licences) == 1 else licences,
        "pretty_name": f"commitbench {card.suite} run {card.run_name}",
        "tags": ["commitbench", "llm-agents", "commitments", card.suite],
        "configs": [{"config_name": "default", "data_files": [{"split": SPLIT, "path": DATA_FILE}]}],
        "dataset_info": {
            "config_name": "default",
            "features": features_yaml(rows.schema),
            "splits": [{"name": SPLIT, "num_bytes": num_bytes, "num_examples": card.rows}],
        },
    }
    how = {True: "stored by `commitbench label`", False: "computed during the export"}
    judges = "\n".join(f"| `{_cell(j.name)}` | `{j.version}` | {how[j.stored]} | {j.rows} |" for j in card.judges)
    sources = "\n".join(f"| `{_cell(s.name)}` | {s.rows} | {_cell(s.origin)} | {_cell(s.licence)} |"
                        for s in card.sources)
    columns = "\n".join(f"| `{f.name}` | {_cell(_short_type(f))} | {_cell(rows.descriptions.get(f.name, ''))} |"
                        for f in rows.schema)
    follow = ("\nThe run's requests come from the sources below; a row's `factors.source` names the source of its "
              "request, and the licence of that source applies to the row. commitbench's "
              "`episodes/data/followup/ATTRIBUTION.md` gives the full attribution.\n" if card.suite == "followup" else
              "\nThe episodes come from the source below.\n")
    body = f"""# commitbench {card.suite} run `{card.run_name}`

The traces of one run of commitbench, a harness that measures whether LLM agents keep,
drop or fake the promises they make. Each row is one trace: one agent playing one episode of the
{card.suite} suite under one intervention arm, one sample, with everything the harness recorded (every
event and message, every tool call and its result, every model call and its token counts), the suite's
signals and the labels of each judge of the run. {card.failed_rows} of the {card.rows} rows failed for
infrastructure reasons (`infra_error` says why); they carry no signals and no labels.

## Loading

```python
from datasets import load_dataset

rows = load_dataset("path/to/this/folder", split="{SPLIT}")
```

`pandas.read_parquet("{DATA_FILE}")` reads the same table. Columns marked JSON text hold values of
no fixed shape (a tool call's arguments, an agent's settings): `json.loads` turns them back.

## The run

| | |
|---|---|
| suite | `{card.suite}` (`{card.env_id}`) |
| experiment | `{_cell(card.run_name)}` (run id `{card.run_id}`), status `{card.status}` |
| config hash | `{card.config_hash}` |
| cells hash | `{card.cells_hash}` |
| episode set version | `{card.episode_set_version or 'not recorded'}` |
| rows | {card.rows} of {card.cells_total} cells ({card.failed_rows} failed) |
| agents | {_cell(', '.join(card.agents))} |
| intervention arms | {_cell(', '.join(card.arms))} |
| exported by | commitbench {card.commitbench_version} |

The config hash identifies the experiment: the run's `manifest.json` records the config it hashes. The
episode set version names the version of the suite's episodes the run was played on; episodes of
another version have other texts and ids.

## Judges

| judge | labeller version | labels | rows labelled |
|---|---|---|---|
{judges}

A labeller's version is a digest of its rules or prompts: labels of two versions are never mixed.

## Data sources and licences
{follow}

| source | rows | what it is | licence |
|---|---|---|---|
{sources}

The replies, tool calls and reasoning in the rows were written by the models that played the run;
the terms of those models' providers may apply to them.

## Columns

| column | type | what it holds |
|---|---|---|
{columns}

## Secrets

Every string in these files went through commitbench's secret scrubbing: URLs lost their user-info and
query values (written `***`), and every form of an API key or URL credential of the run's config that
the exporting machine knew was replaced by `***`.
"""
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n" + body


# ------------------------------------------------------------------------------ writing
def _check_out(out: Path, run_dir: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file, not a directory")
    resolved, run = out.resolve(), run_dir.resolve()
    if resolved == run or resolved in run.parents:
        raise ExportError(f"--out {out} holds the run directory {run_dir}; export to a directory of its own")
    if not out.exists():
        return
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if not force:
        raise ExportError(f"--out {out} exists and is not empty; choose a new directory, or --force to replace a "
                          "previous export")
    data = out / DATA_DIR
    foreign = [name for name in entries if name not in (CARD_FILE, DATA_DIR)]
    if data.is_dir():
        foreign += [f"{DATA_DIR}/{p.name}" for p in sorted(data.iterdir()) if p.suffix != ".parquet" or p.is_dir()]
    elif data.exists():
        foreign.append(DATA_DIR)
    if foreign:
        raise ExportError(f"--out {out} holds what an export does not write ({', '.join(foreign[:5])}); --force "
                          "replaces a previous export only: choose another directory")


def export_run(run_dir: Path | str, out: Path | str, suite: AnySuite, force: bool = False) -> ExportSummary:
    """Write the run directory ``run_dir`` of ``suite`` as a dataset directory ``out`` (see the module docstring).

    ``suite`` is the directory's, as :func:`commitbench.planning.run_suite` reads it (which refuses a
    directory of another episode-set version and a trace line of another run). Raises :class:`ExportError`
    for a directory that is no finished run or an ``out`` that must not be written; the errors of reading
    the run (``FileNotFoundError``, ``ValueError`` for a damaged trace file or stale LLM labels) pass through.
    """
    started = time.perf_counter()
    run_dir, out = Path(run_dir), Path(out)
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir} is not a directory (a run directory written by 'commitbench run')")
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise ExportError(f"{run_dir} has no {MANIFEST_FILE}; an export states the run's config hash and episode set "
                          "from it, so only a directory written by 'commitbench run' can be exported")
    if manifest.status is RunStatus.RUNNING:
        raise ExportError(f"{run_dir} is still running (or its run was killed: run it again to finish it); export a "
                          "finished run")
    _check_out(out, run_dir, force)
    scrubber = Scrubber(manifest)
    rows = read_run(run_dir, suite, manifest, scrubber)
    if rows.rows == 0:
        raise ExportError(f"{run_dir} holds no trace: there is nothing to export")
    card = _card(manifest, rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Beside OUT (one file system: the move is a rename), with the modes the user's umask gives a new directory.
    building = out.parent / f".{out.name}.export-{uuid.uuid4().hex[:12]}"
    try:
        building.mkdir()
        (building / DATA_DIR).mkdir()
        num_bytes = 0  # the rows' size in memory, as the card's split states it
        with pq.ParquetWriter(building / DATA_FILE, rows.schema, compression="zstd") as writer:
            for batch in rows.batches():
                table = pa.Table.from_pylist(batch, schema=rows.schema)
                num_bytes += table.nbytes
                writer.write_table(table)
        (building / CARD_FILE).write_text(scrubber.text(card_text(card, rows, num_bytes)), encoding="utf-8")
        files = {name: (building / name).stat().st_size for name in (CARD_FILE, DATA_FILE)}
        if out.exists():
            shutil.rmtree(out)
        building.replace(out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return ExportSummary(out_dir=str(out), rows=rows.rows, files=files, seconds=time.perf_counter() - started,
                         card=card)


def _card(manifest: RunManifest, rows: RunRows) -> DatasetCard:
    return DatasetCard(
        run_name=manifest.name, run_id=manifest.run_id, suite=manifest.suite, env_id=str(manifest.config.get("env")),
        status=manifest.status.value, config_hash=manifest.config_hash, cells_hash=manifest.cells_hash,
        cells_total=manifest.cells_total, rows=rows.rows, failed_rows=rows.failed,
        episode_set_version=manifest.episode_set_version,
        agents=[str(player.get("name")) for player in manifest.players], arms=list(manifest.interventions),
        judges=rows.judges, sources=rows.sources, commitbench_version=__version__,
    )
