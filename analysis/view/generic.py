"""The runs of a suite that brings no viewer of its own: what every trace and every label record says.

A plug-in's suite (``Suite.view`` left unset) is viewed like the built-in ones: the run list has a row per
run (episode, player, arm, sample, status) plus the yes/no, count and short text fields of the report's
judge's label record, and each run's page shows the conversation, the model calls and every field of
every judge's record. The suite's metrics are its own, so no report number links to runs here.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from commitbench.analysis.view.model import (
    ChatItem,
    Column,
    ColumnKind,
    Part,
    RunRecord,
    RunSource,
    Signal,
    TranscriptPage,
    page_part,
)
from commitbench.analysis.view.transcript import (
    ASSISTANT,
    chat_items,
    clip,
    identity_facts,
    model_call_views,
    sample_group,
    search_text,
    system_prompt,
)
from commitbench.identity import arm_label
from commitbench.judges.labelling import LabelRecord
from commitbench.traces import EpisodeTrace

__all__ = ["generic_columns", "generic_source"]

RecordLookup = Callable[[EpisodeTrace], LabelRecord | None]

# Fields every label record has; they say where a record comes from, not what it found.
_RECORD_BOOKKEEPING = frozenset(LabelRecord.model_fields)
_BASE_COLUMNS = (
    Column(name="episode_id", label="episode", kind=ColumnKind.FACET, description="The episode's id."),
    Column(name="agent", label="agent", kind=ColumnKind.FACET, description="The player."),
    Column(name="arm", label="arm", kind=ColumnKind.FACET, description="The intervention arm ('none': plain)."),
    Column(name="status", label="status", kind=ColumnKind.FACET, description="finished or infra error."),
    Column(name="labelled", label="labelled", kind=ColumnKind.FLAG,
           description="The report's judge labelled the run."),
    Column(name="sample", label="sample", kind=ColumnKind.COUNT, description="The sample index.", listed=False),
)


def _kind(annotation: Any) -> ColumnKind | None:
    """How a label field of this type is listed (None: not a column, such as a nested record)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is bool:
        return ColumnKind.FLAG
    if annotation is int:
        return ColumnKind.COUNT
    if annotation is str or (isinstance(annotation, type) and issubclass(annotation, str)):
        return ColumnKind.FACET
    return None


def generic_columns(record_type: type[BaseModel]) -> list[Column]:
    """The run list's columns: the run's own, then the record's plain fields (bool, int, text)."""
    columns = list(_BASE_COLUMNS)
    for name, field in record_type.model_fields.items():
        kind = _kind(field.annotation)
        if name in _RECORD_BOOKKEEPING or kind is None or name in {c.name for c in columns}:
            continue
        columns.append(Column(name=name, label=name.replace("_", " "), kind=kind,
                              description=field.description or f"The label record's {name}."))
    return columns


def _value(value: Any) -> str | int | float | bool | None:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return clip(json.dumps(value, sort_keys=True, default=str))


def _record(trace: EpisodeTrace, records: Sequence[tuple[str, LabelRecord | None]],
            columns: Sequence[Column]) -> RunRecord:
    primary = records[0][1] if records else None
    arm = arm_label(trace.interventions)
    row: dict[str, Any] = {
        "run_key": trace.run_key, "episode_id": trace.episode_id, "agent": trace.agent.name if trace.agent else "",
        "arm": arm, "sample": trace.sample, "status": "infra error" if trace.infra_error else "finished",
        "labelled": primary is not None and not primary.error,
    }
    dumped = primary.model_dump(mode="json") if primary is not None else {}
    for column in columns:
        if column.name not in row:
            row[column.name] = dumped.get(column.name)
    signals: list[Part] = []
    for judge, record in records:
        if record is None:
            signals.append(page_part(Signal, name=f"{judge}", value="not labelled", description=f"The judge {judge}."))
            continue
        for name, value in record.model_dump(mode="json").items():
            if name not in _RECORD_BOOKKEEPING or (name == "error" and value):
                signals.append(page_part(Signal, name=f"{judge}: {name}", value=_value(value),
                                         description=f"The {judge} judge's {name}."))
    items = chat_items(trace)
    spoken = {item.get("turn") for item in items if item["kind"] == ASSISTANT}
    for turn in trace.turns:  # an environment that keeps the reply on the turn only: shown after the turn
        if turn.reply and turn.index not in spoken:
            at = max((i for i, item in enumerate(items) if item.get("turn") == turn.index),
                     default=len(items) - 1) + 1
            items.insert(at, page_part(ChatItem, kind=ASSISTANT, step=turn.opened_by.step,
                                       turn=turn.index, sender="assistant", title="assistant",
                                       channel=turn.reply_channel, text=clip(turn.reply)))
    status = "labelled" if row["labelled"] else row["status"]
    page = page_part(
        TranscriptPage, suite="", key=trace.run_key, title=f"{trace.episode_id} · {row['agent']} · {arm} · {status}",
        facts=identity_facts(trace, "agent", "arm", arm), system_prompt=system_prompt(trace),
        items=items, model_calls=model_call_views(trace), signals=signals,
        infra_error=trace.infra_error or "",
    )
    return RunRecord(key=trace.run_key, episode=trace.episode_id, row=row, ok=not trace.infra_error,
                     text=search_text(trace, frozenset()), shared_text="", page=page, sample_group=sample_group(trace))


def _records(suite: str, traces: Iterable[EpisodeTrace], judges: Sequence[tuple[str, RecordLookup]],
             columns: Sequence[Column]) -> Iterator[RunRecord]:
    for trace in traces:
        made = _record(trace, [(name, lookup(trace)) for name, lookup in judges], columns)
        made.page["suite"] = suite
        yield made


def generic_source(suite: str, record_type: type[BaseModel], traces: Iterable[EpisodeTrace],
                   judges: Sequence[tuple[str, RecordLookup]]) -> RunSource:
    """The runs of ``suite`` for the site; ``judges`` lists every judge's records, the report's judge first."""
    columns = generic_columns(record_type)
    return RunSource(
        suite=suite, judge=judges[0][0] if judges else "", judges=[name for name, _ in judges], columns=columns,
        metrics=[], records=_records(suite, traces, judges, columns), members=lambda rows: {},
    )
