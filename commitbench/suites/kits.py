"""What a suite adds to the verbs that serve every suite: export rows, inspect grades, report flags.

Each is a field of :class:`commitbench.suites.Suite` (``dataset``, ``inspect``, ``report_options``), so no
module keeps a table of suites by name. A suite that leaves one out gets the generic default here: its
traces exported with their labels and a few signals any trace has, its inspect grade the scalar fields of
its offline labeller's record (their means as the task's metrics), and no report flags of its own. This
module imports neither pyarrow nor inspect-ai: the export and inspect extras stay optional.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.identity import arm_label
from commitbench.judges.labelling import LabelRecord
from commitbench.rundir import RunManifest
from commitbench.traces import EpisodeTrace

if TYPE_CHECKING:
    from commitbench.analysis.view.model import RunSource
    from commitbench.suites import AnySuite

__all__ = [
    "DataSource",
    "GenericSignals",
    "InspectKit",
    "NoReportOptions",
    "ScoredRun",
    "SuiteDataset",
    "attribution_table",
    "finite_or_none",
    "generic_grade",
    "generic_signals",
    "generic_values",
    "generic_view",
    "json_row",
    "licence_id",
    "offline_records",
    "plugin_sources",
    "trace_arm_label",
    "with_interval",
]


class DataSource(BaseModel):
    """Where some of a run's episodes come from, and under which licence."""

    name: str = Field(description="The source's name, as the episodes record it (e.g. 'slurp').")
    rows: int = Field(description="Rows of the dataset whose episode draws on it.")
    origin: str = Field(description="What the source is, in a sentence.")
    licence: str = Field(description="Its licence, as the project's attribution states it.")
    licence_id: str = Field(description="The licence's identifier on dataset hubs ('other' when it has none).")


@dataclass(frozen=True)
class SuiteDataset:
    """What a suite adds to its exported rows: signals, arm labels, offline labels and its episodes' sources."""

    signals_model: type[BaseModel]
    # run dir -> trace -> its signals (None: a trace without them, such as a failed one)
    signals: Callable[[Path], Callable[[EpisodeTrace], BaseModel | None]]
    arm: Callable[[EpisodeTrace], str]
    # run dir -> trace -> the offline labeller's record, made now (None: a trace it does not label)
    offline_labels: Callable[[Path], Callable[[EpisodeTrace], LabelRecord | None]]
    # run dir, manifest, rows per source factor value -> the data sources
    sources: Callable[[Path, RunManifest, Mapping[str, int]], list[DataSource]]
    signals_description: str
    source_factor: str | None = None  # the factor that names an episode's data source, if any


class GenericSignals(BaseModel):
    """What any trace says of itself (the signals of a suite that defines none)."""

    terminated: bool = Field(description="The episode reached its end.")
    truncated: bool = Field(description="The episode was cut short.")
    turns: int = Field(description="Assistant turns.")
    tool_calls: int = Field(description="Tool calls in all turns.")


def generic_signals(run_dir: Path) -> Callable[[EpisodeTrace], BaseModel | None]:
    def signals(trace: EpisodeTrace) -> BaseModel | None:
        if trace.infra_error:
            return None
        return GenericSignals(terminated=trace.terminated, truncated=trace.truncated, turns=len(trace.turns),
                              tool_calls=len(list(trace.tool_calls())))

    return signals


# Hub identifiers of the licences the project's attribution names.
_LICENCE_IDS = (("CC BY 4.0", "cc-by-4.0"), ("CDLA-Sharing-1.0", "cdla-sharing-1.0"), ("Apache-2.0", "apache-2.0"))


def licence_id(licence: str) -> str:
    """A licence's identifier on dataset hubs ('other' for one it does not know)."""
    return next((ident for name, ident in _LICENCE_IDS if name in licence), "other")


def attribution_table(path: Path) -> dict[str, tuple[str, str]]:
    """The sources table of an attribution file: source name -> (origin, licence). Its rows look like
    ``| `name` | rows | origin | licence |`` (the header row names no count of rows)."""
    table: dict[str, tuple[str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:400]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`") and cells[0].endswith("`") and cells[1].isdigit():
            table[cells[0].strip("`")] = (cells[2], cells[-1])
    return table


def trace_arm_label(trace: EpisodeTrace) -> str:
    """A trace's intervention arm, as reports write it."""
    return arm_label(trace.interventions)


def plugin_sources(suite: str) -> Callable[[Path, RunManifest, Mapping[str, int]], list[DataSource]]:
    """The sources of a suite that names none: its episodes, under the licence its authors state."""

    def sources(run_dir: Path, manifest: RunManifest, counts: Mapping[str, int]) -> list[DataSource]:
        return [DataSource(name=suite, rows=sum(counts.values()), origin=f"the episodes of the {suite} suite (a "
                           "plug-in; its package says where they come from)", licence="as its authors state",
                           licence_id="other")]

    return sources


@dataclass(frozen=True)
class ScoredRun:
    """One inspect sample's grade: the score's value, the signals and labels, and the rows of the task's metrics."""

    value: dict[str, str | int | float | bool | None]
    answer: str
    explanation: str
    signals: dict[str, Any]
    labels: dict[str, Any]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class InspectKit:
    """How a suite's labelled trace becomes an inspect score, and its rows the task's metrics."""

    # the episode (None when the suite's selection has no such id), the trace, its label record -> the grade
    grade: Callable[[Any, EpisodeTrace, LabelRecord], ScoredRun]
    # the rows of every sample and epoch, bootstrap replicates, seed -> metric name -> value
    values: Callable[[list[dict[str, Any]], int, int], dict[str, float]]
    description: str = ""
    # The episode factor (a key of the episodes' ``factors()``) the metrics' intervals cluster by, as the
    # report clusters: the task deals its samples round-robin over its values, so that the first N samples
    # (inspect's --limit N) cover as many clusters as they can. None: the samples keep the filter's order.
    cluster_factor: str | None = None


def finite_or_none(value: Any) -> float | None:
    """A number as a float, None when it is missing or not finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def with_interval(out: dict[str, float], name: str, estimate: float | None, low: float | None,
                  high: float | None) -> None:
    """Put an estimate and its interval (``name_low``, ``name_high``) into a task's metric values, when finite."""
    if estimate is None:
        return
    out[name] = estimate
    if low is not None and high is not None:
        out[f"{name}_low"], out[f"{name}_high"] = low, high


def json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A metric row as JSON values (numpy scalars and NaN become plain values and None)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[key] = value
    return out


_RECORD_FIELDS = frozenset(LabelRecord.model_fields)


def generic_grade(episode: Any, trace: EpisodeTrace, record: LabelRecord) -> ScoredRun:
    """A suite without an inspect kit: the scalar fields of its labeller's record are the score."""
    value: dict[str, str | int | float | bool | None] = {}
    for name, item in record.model_dump(mode="json").items():
        if name not in _RECORD_FIELDS and (item is None or isinstance(item, str | int | float | bool)):
            value[name] = item
    shown = ", ".join(f"{k}={v}" for k, v in value.items())
    return ScoredRun(value=value, answer=shown, explanation=shown or "the record has no scalar field",
                     signals={}, labels=record.model_dump(mode="json"), rows=[dict(value)])


def generic_values(rows: list[dict[str, Any]], n_boot: int, seed: int) -> dict[str, float]:
    """The mean of every numeric or boolean column of the rows (and how many rows)."""
    if not rows:
        return {}
    out: dict[str, float] = {"runs": float(len(rows))}
    columns = {name for row in rows for name in row}
    for name in sorted(columns):
        values = [row.get(name) for row in rows]
        numbers = [float(v) for v in values if isinstance(v, bool | int | float) and math.isfinite(float(v))]
        if numbers and len(numbers) == sum(v is not None for v in values):
            out[name] = sum(numbers) / len(numbers)
    return out


class NoReportOptions(BaseModel):
    """A suite's report options, when it has none of its own."""

    model_config = ConfigDict(extra="forbid")


def offline_records(suite: AnySuite, run_dir: Path) -> Callable[[EpisodeTrace], LabelRecord | None]:
    """A suite's offline labeller, its records made now, one trace at a time (its ``label`` may be async;
    a failed trace gets none)."""
    import asyncio
    import inspect

    labeller = suite.labeller(suite.offline_labeller, run_dir=run_dir)
    loop = asyncio.new_event_loop()

    def label(trace: EpisodeTrace) -> LabelRecord | None:
        if trace.infra_error:
            return None
        made = labeller.label(trace)
        record: LabelRecord = loop.run_until_complete(made) if inspect.isawaitable(made) else made
        return record

    return label


def generic_view(suite: AnySuite) -> Callable[[Path, str, Path | None], RunSource]:
    """The viewer's runs of a suite that brings none (``Suite.view`` unset): every trace, the report's judge's
    records first (the offline labeller's made now when none are stored), every other stored judge after."""
    from commitbench.analysis.view.generic import generic_source
    from commitbench.suites.common import labels_of, stored_labels
    from commitbench.traces import iter_latest_traces

    def view(run_dir: Path, judge: str, labels_dir: Path | None = None) -> RunSource:
        primary = labels_of(suite, run_dir, judge, labels_dir)

        def stored(records: Mapping[str, LabelRecord]) -> Callable[[EpisodeTrace], LabelRecord | None]:
            return lambda trace: records.get(trace.run_key)

        first = offline_records(suite, run_dir) if primary is None else stored(primary)
        judges = [(judge, first)]
        judges.extend((name, stored(records)) for name, records in stored_labels(suite, run_dir, labels_dir).items()
                      if name != judge)
        return generic_source(suite.name, suite.label_record, iter_latest_traces(run_dir, include_failed=True),
                              judges)

    return view
