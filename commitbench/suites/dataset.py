"""A run directory as rows of a dataset: one row per trace, its columns derived from the trace models.

The columns are the fields of :class:`commitbench.traces.EpisodeTrace` (a new trace field becomes a new
column without a change here), with a few added beside them: the suite, the intervention arm's label,
the trace's model-call usage (:func:`commitbench.analysis.cost.run_cost`), the suite's signals and the
labels of every judge. Each column's Arrow type is read off the pydantic annotation of its field
(:func:`arrow_type`): text, numbers and booleans stay scalars, enums and times become text, models become
structs and lists lists; what has no fixed shape (a tool call's arguments, an agent's settings, a dict)
is stored as JSON text, marked ``json`` in the field's metadata. The design factors become a struct whose
members are the factors found in the run.

What differs between suites is the suite's :class:`~commitbench.suites.kits.SuiteDataset`
(``Suite.dataset``): its signals (standing: what the assistant did; follow-up: the turn its checkers
read), its arm labels, its offline labeller's labels (computed on the fly, as the report computes them)
and the data sources its episodes draw on. A suite without one is exported with the generic kit.

Traces are read with :func:`commitbench.traces.iter_latest_traces` (the trace that counts per run key,
failed ones included), twice: once for the factors and the sources, once for the rows, so a run never
sits in memory whole. Every string goes through a :class:`Scrubber` before it is kept.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import AwareDatetime, BaseModel, Field, NaiveDatetime

from commitbench.analysis.cost import run_cost
from commitbench.judges.labelling import LabelRecord
from commitbench.rundir import RunManifest
from commitbench.secrets import Secrets
from commitbench.suites import AnySuite
from commitbench.suites.common import stored_labels
from commitbench.suites.kits import (
    DataSource,
    GenericSignals,
    SuiteDataset,
    generic_signals,
    offline_records,
    plugin_sources,
    trace_arm_label,
)
from commitbench.traces import EpisodeTrace, TurnRecord, iter_latest_traces

__all__ = [
    "JSON_ENCODED",
    "JudgeLabels",
    "RunRows",
    "Scrubber",
    "TraceUsage",
    "arrow_type",
    "dataset_kit",
    "read_run",
]

# Field metadata of a column stored as JSON text.
JSON_ENCODED = {b"encoding": b"json"}
# Rows per Parquet row group (and per batch held in memory while writing).
BATCH_ROWS = 256
# Models nested deeper than this are stored as JSON text (a guard against a model that contains itself).
MAX_DEPTH = 8


class JudgeLabels(BaseModel):
    """One judge whose labels the dataset carries."""

    name: str = Field(description="The labeller's name ('rules', or 'llm:<model>').")
    version: str = Field(description="The labeller's version (a digest of its rules or prompts).")
    stored: bool = Field(description="Read from the run's labels file (false: computed during the export).")
    rows: int = Field(default=0, description="Rows that carry a label of this judge.")


class TraceUsage(BaseModel):
    """What one trace's model calls cost (notices left out)."""

    model_calls: int = Field(description="Model calls, cache hits included.")
    cache_hits: int = Field(description="Of those, calls answered from the cache.")
    prompt_tokens: int = Field(description="Prompt tokens in all.")
    completion_tokens: int = Field(description="Completion tokens in all (reasoning included, as servers count).")
    reasoning_tokens: int = Field(description="Reasoning tokens in all.")
    reasoning_estimated: bool = Field(description="Some reasoning counts were estimated from the text.")
    model_time_s: float = Field(description="Server time of the calls whose time is known, in seconds.")
    model_time_unknown_calls: int = Field(description="Calls whose server time is unknown.")
    calls_unrecorded: bool = Field(description="Played by a class of the user's own with a model client of its "
                                   "own: its calls are not in the trace, so the zeros here mean unknown.")


class Scrubber:
    """Every string written passes here: URLs lose their user-info and query values (as in a manifest), and
    every form of a key the run's config names, or of a credential of its URLs, is replaced
    (:class:`commitbench.secrets.Secrets`)."""

    def __init__(self, manifest: RunManifest, environ: Mapping[str, str] | None = None) -> None:
        self.secrets = Secrets()
        environ = os.environ if environ is None else environ
        config = manifest.config
        entries = list(config.get("models") or [])
        judge = config.get("judge") or {}
        if isinstance(judge.get("model"), dict):
            entries.append(judge["model"])
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            variable = entry.get("api_key_env")
            if isinstance(variable, str) and variable:
                self.secrets.add(environ.get(variable))
            for url in [entry.get("base_url"), *(entry.get("base_urls") or [])]:
                if isinstance(url, str):
                    self.secrets.add_url(url)

    def text(self, value: str) -> str:
        return self.secrets.scrub_message(value)

    def json_value(self, value: Any) -> Any:
        """A JSON value with every string (keys included) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.json_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json_value(v) for v in value]
        return value


# ------------------------------------------------------------------------------ types from the models
def _field(name: str, annotation: Any, depth: int) -> pa.Field:
    kind, json_encoded = _arrow(annotation, depth)
    return pa.field(name, kind, nullable=True, metadata=JSON_ENCODED if json_encoded else None)


def _arrow(annotation: Any, depth: int) -> tuple[pa.DataType, bool]:
    """The Arrow type of an annotation, and whether values of it are stored as JSON text."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _arrow(members[0], depth)
        return pa.string(), True
    if origin is typing.Literal:
        values = typing.get_args(annotation)
        return pa.string(), not all(isinstance(v, str) for v in values)
    if origin in (list, tuple, Sequence) or annotation in (list, tuple):
        args = typing.get_args(annotation)
        if not args or (origin is tuple and not (len(args) == 2 and args[1] is Ellipsis)):
            return pa.string(), True
        return pa.list_(_field("item", args[0], depth)), False
    if annotation in (AwareDatetime, NaiveDatetime):
        return pa.string(), False
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return pa.bool_(), False
        if issubclass(annotation, Enum) or issubclass(annotation, (str, datetime, date)):
            return pa.string(), False
        if issubclass(annotation, int):
            return pa.int64(), False
        if issubclass(annotation, float):
            return pa.float64(), False
        if issubclass(annotation, BaseModel) and depth < MAX_DEPTH:
            return model_struct(annotation, depth=depth + 1), False
    return pa.string(), True


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a pydantic annotation (JSON text where its values have no fixed shape)."""
    return _arrow(annotation, 0)[0]


def model_struct(model: type[BaseModel], exclude: Sequence[str] = (), depth: int = 0) -> pa.StructType:
    """A model's fields as an Arrow struct, in their order."""
    return pa.struct([_field(name, info.annotation, depth) for name, info in model.model_fields.items()
                      if name not in exclude])


def shaped(value: Any, field: pa.Field, scrubber: Scrubber) -> Any:
    """A JSON value (``model_dump(mode="json")``) in the shape of ``field``, every string scrubbed."""
    if value is None:
        return None
    if field.metadata and field.metadata.get(b"encoding") == b"json":
        return json.dumps(scrubber.json_value(value), ensure_ascii=False, sort_keys=True)
    kind = field.type
    if pa.types.is_struct(kind):
        return {child.name: shaped(value.get(child.name), child, scrubber) for child in kind}
    if pa.types.is_list(kind):
        return [shaped(item, kind.value_field, scrubber) for item in value]
    if pa.types.is_string(kind):
        return scrubber.text(value if isinstance(value, str) else str(value))
    if pa.types.is_floating(kind):
        return float(value)
    return value


# ------------------------------------------------------------------------------ what differs by suite
def dataset_kit(suite: AnySuite) -> SuiteDataset:
    """What a suite adds to its rows: its own kit (``Suite.dataset``), or the generic one (a trace's own
    signals, the suite's offline labeller, its episodes under the licence its authors state)."""
    if suite.dataset is not None:
        return suite.dataset
    return SuiteDataset(
        signals_model=GenericSignals, signals=generic_signals, arm=trace_arm_label,
        offline_labels=lambda run_dir: offline_records(suite, run_dir), sources=plugin_sources(suite.name),
        signals_description="What the trace says of itself: whether the episode ended or was cut short, its turns "
        "and tool calls (the suite defines no signals of its own; null for a failed trace).",
    )


# ------------------------------------------------------------------------------ the rows of a run
@dataclass(frozen=True)
class RunRows:
    """A run's schema, judges and sources (the first pass), and its rows (:meth:`batches`, the second)."""

    schema: pa.Schema
    rows: int
    failed: int
    judges: list[JudgeLabels]
    sources: list[DataSource]
    descriptions: dict[str, str]
    batches: Callable[[], Iterator[list[dict[str, Any]]]]


# The columns that come first (the others follow in the order of the trace's fields).
LEADING_COLUMNS = ("run_key", "suite", "env_id", "episode_id", "sample", "factors", "agent", "interventions", "arm")
# Columns that are not fields of a trace: name -> description.
ADDED_COLUMNS = {
    "suite": "The suite the run plays (standing or followup).",
    "arm": "The intervention arm's label, as the report writes it ('none' for the plain environment).",
    "tool_calls": "Every tool call of every turn, in order, with its arguments (JSON text) and its result.",
    "usage": "The trace's model calls: how many, their tokens and their server time.",
    "labels": "One record per judge: the stored labels of each judge in the run directory and the offline "
    "labeller's, computed during the export ('stored' tells which); none for a failed trace.",
}


def _factor_field(name: str, values: set[type]) -> pa.Field:
    integer = values == {int}
    return pa.field(name, pa.int64() if integer else pa.string())


def _factors(trace: EpisodeTrace, field: pa.Field, scrubber: Scrubber) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for child in field.type:
        value = trace.factors.get(child.name)
        if value is not None and not pa.types.is_integer(child.type):
            value = scrubber.text(str(value))
        out[child.name] = value
    return out


def read_run(run_dir: Path, suite: AnySuite, manifest: RunManifest, scrubber: Scrubber) -> RunRows:
    """The rows of a run directory (see the module docstring). A stored LLM judge's stale labels are refused
    (:class:`commitbench.judges.labelling.StaleLabelsError`), as the report refuses them."""
    kit = dataset_kit(suite)
    stored = stored_labels(suite, run_dir)
    factor_types: dict[str, set[type]] = {}
    counts: Counter[str] = Counter()
    rows = failed = 0
    labelled: Counter[str] = Counter()
    for trace in iter_latest_traces(run_dir, include_failed=True):
        rows += 1
        failed += bool(trace.infra_error)
        for key, value in trace.factors.items():
            factor_types.setdefault(key, set()).add(type(value))
        counts[str(trace.factors.get(kit.source_factor, "")) if kit.source_factor else suite.name] += 1
        for name, records in stored.items():
            labelled[name] += trace.run_key in records
        if not trace.infra_error:
            labelled[suite.offline_labeller] += suite.offline_labeller not in stored
    judges = [JudgeLabels(name=name, version=next(iter(records.values())).labeller_version, stored=True,
                          rows=labelled[name]) for name, records in sorted(stored.items()) if records]
    if suite.offline_labeller not in stored:
        version = suite.labeller_version(suite.offline_labeller)[0]
        judges.insert(0, JudgeLabels(name=suite.offline_labeller, version=version, stored=False,
                                     rows=labelled[suite.offline_labeller]))
    # A struct needs a member: a run whose traces name no factor at all gets a null one.
    members = [_factor_field(k, factor_types[k]) for k in sorted(factor_types)] or [pa.field("none", pa.string())]
    factors = pa.field("factors", pa.struct(members))
    schema, descriptions = _schema(suite, kit, factors)

    def batches() -> Iterator[list[dict[str, Any]]]:
        signals = kit.signals(run_dir)
        offline = kit.offline_labels(run_dir) if suite.offline_labeller not in stored else None
        batch: list[dict[str, Any]] = []
        for trace in iter_latest_traces(run_dir, include_failed=True):
            records = [records[trace.run_key] for _, records in sorted(stored.items()) if trace.run_key in records]
            made = offline(trace) if offline is not None else None
            labels = ([(made, False)] if made is not None else []) + [(r, True) for r in records]
            batch.append(_row(trace, suite, kit, schema, signals(trace), labels, scrubber))
            if len(batch) >= BATCH_ROWS:
                yield batch
                batch = []
        if batch:
            yield batch

    sources = kit.sources(run_dir, manifest, counts)
    return RunRows(schema, rows, failed, judges, sources, descriptions, batches)


def _schema(suite: AnySuite, kit: SuiteDataset, factors: pa.Field) -> tuple[pa.Schema, dict[str, str]]:
    fields: list[pa.Field] = []
    descriptions: dict[str, str] = {}
    for name, info in EpisodeTrace.model_fields.items():
        if name == "factors":
            fields.append(factors)
        elif name == "turns":
            fields.append(pa.field("turns", pa.list_(pa.field("item", model_struct(TurnRecord, exclude=("calls",))))))
        else:
            fields.append(_field(name, info.annotation, 0))
        descriptions[name] = info.description or ""
        if name == "run_key":
            fields.append(pa.field("suite", pa.string()))
        if name == "interventions":
            fields.append(pa.field("arm", pa.string()))
        if name == "turns":
            calls = TurnRecord.model_fields["calls"].annotation
            fields.append(_field("tool_calls", calls, 0))
    fields.sort(key=lambda f: LEADING_COLUMNS.index(f.name) if f.name in LEADING_COLUMNS else len(LEADING_COLUMNS))
    fields.append(pa.field("usage", model_struct(TraceUsage)))
    fields.append(pa.field("signals", model_struct(kit.signals_model)))
    label = pa.struct([pa.field("stored", pa.bool_()), *model_struct(suite.label_record, exclude=("run_key",))])
    fields.append(pa.field("labels", pa.list_(pa.field("item", label))))
    descriptions.update(ADDED_COLUMNS)
    descriptions["signals"] = kit.signals_description
    descriptions["turns"] = "Every assistant turn: the message that opened it, its reply and how it ended (its tool " \
        "calls are in tool_calls)."
    return pa.schema(fields), descriptions


def _row(
    trace: EpisodeTrace, suite: AnySuite, kit: SuiteDataset, schema: pa.Schema, signals: BaseModel | None,
    labels: list[tuple[LabelRecord, bool]], scrubber: Scrubber,
) -> dict[str, Any]:
    data = trace.model_dump(mode="json")
    data["suite"] = suite.name
    data["arm"] = kit.arm(trace)
    data["tool_calls"] = [call.model_dump(mode="json") for call in trace.tool_calls()]
    data["usage"] = TraceUsage.model_validate(run_cost(trace)).model_dump(mode="json")
    data["signals"] = signals.model_dump(mode="json") if signals is not None else None
    data["labels"] = [{"stored": stored, **record.model_dump(mode="json")} for record, stored in labels]
    row: dict[str, Any] = {}
    for field in schema:
        if field.name == "factors":
            row["factors"] = _factors(trace, field, scrubber)
        else:
            row[field.name] = shaped(data.get(field.name), field, scrubber)
    return row
