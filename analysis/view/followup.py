"""The follow-up suite's runs for the viewer: run-list rows, transcript page entries and the runs behind each rate.

A run's row is the report's metric row (:func:`commitbench.analysis.followup.rows.response_row`, from
the same checker records as the report), so a rate's link selects the runs in its denominator. Its
page shows the request, the setup's tools and what persists, the turn (calls and reply), and each
checker's verdict: the detected commitments with their spans highlighted in the reply, their
feasibility and anchoring, the response judge's answers with rationales, and the outcome with the
rule that fired. The site holds what the page is made of (the trace, the checkers' records, the setup's
tools); the browser makes the page when it is opened (``assets/pages.js``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import orjson
import pandas as pd
from pydantic import BaseModel

from commitbench.analysis.followup.metrics import DENOMINATOR_COLUMNS, METRICS
from commitbench.analysis.followup.rows import response_dump
from commitbench.analysis.view.model import (
    Column,
    ColumnKind,
    MetricInfo,
    Part,
    RunSource,
    SiteRun,
    ToolView,
    page_part,
)
from commitbench.analysis.view.site import group_digest, page_json, shared_fields, verdict
from commitbench.analysis.view.transcript import (
    MAX_ITEM_TEXT,
    clip,
    event_speakers,
    indented_json,
    sample_group,
    search_text,
    settings_text,
)
from commitbench.episodes.followup.setups import SuiteSetups
from commitbench.episodes.followup.vocabulary import Persona, SetupId
from commitbench.judges.followup.labellers import FollowupLabelRecord, trace_arm, trace_model
from commitbench.judges.followup.turn import turn_from_trace
from commitbench.sourcelines import line_of
from commitbench.traces import EpisodeTrace

SUITE = "followup"
OK, INFRA_ERROR = "ok", "infra error"
JUDGE_ERROR = "judge error"
NOT_LABELLED = "not labelled"
# The rates a report links to (the shares of single outcomes link through the outcome column).
LINKED_METRICS = tuple(name for name in METRICS if not name.startswith("share:"))

COLUMNS: tuple[Column, ...] = (
    Column(name="model", label="model", kind=ColumnKind.FACET, description="The tested model."),
    Column(name="arm", label="arm", kind=ColumnKind.FACET, description="The intervention arm ('none': plain)."),
    Column(name="setup", label="setup", kind=ColumnKind.FACET,
           description="Which tools exist and what persists (C0-C4)."),
    Column(name="variant", label="variant", kind=ColumnKind.FACET,
           description="inferred (tools only) or stated (plus what persists)."),
    Column(name="persona", label="persona", kind=ColumnKind.FACET, listed=False,
           description="generic assistant or support agent."),
    Column(name="category", label="category", kind=ColumnKind.FACET, description="The request's category."),
    Column(name="doability", label="doability", kind=ColumnKind.FACET,
           description="Whether the setup can fully serve the request."),
    Column(name="outcome", label="outcome", kind=ColumnKind.FACET,
           description="The outcome label (judge error: the checker gave none)."),
    Column(name="false_action_claim", label="false claim", kind=ColumnKind.FLAG,
           description="The response judge: the reply claims an action no tool performed."),
    Column(name="asks_clarification", label="asks", kind=ColumnKind.FLAG, listed=False,
           description="The response judge: the reply mainly asks the user a question."),
    Column(name="n_agent_commitments", label="commitments", kind=ColumnKind.COUNT,
           description="Agent-initiated future-directed commitments."),
    Column(name="n_empty", label="empty", kind=ColumnKind.COUNT, description="Empty agent-initiated commitments."),
    Column(name="n_unanchored", label="unanchored", kind=ColumnKind.COUNT, listed=False,
           description="Feasible commitments that needed a call and got none."),
    Column(name="tool_calls", label="tool calls", kind=ColumnKind.COUNT, description="Tool calls in the turn."),
    Column(name="tool_errors", label="tool errors", kind=ColumnKind.COUNT,
           description="Tool calls the agent got wrong."),
    Column(name="judge_errors", label="judge errors", kind=ColumnKind.COUNT,
           description="1 when the checker could not label the reply."),
    Column(name="status", label="status", kind=ColumnKind.FACET, listed=False,
           description="ok, or infra error (the run failed for infrastructure reasons and enters no metric)."),
    Column(name="request_id", label="request", kind=ColumnKind.FACET, listed=False, panel=False,
           description="The request."),
    Column(name="episode_id", label="episode", kind=ColumnKind.FACET, listed=False, panel=False,
           description="The episode (request:setup:variant:persona)."),
)

# Judge name -> the checker's record of a run (None: that checker did not label it).
RecordLookup = Callable[[EpisodeTrace], FollowupLabelRecord | None]


def _row(trace: EpisodeTrace, record: FollowupLabelRecord | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The run's own fields and, for a run with a label (one that enters the metrics), its metric row, which the
    report's read of the same trace holds too (:func:`response_dump`: the same dict, made once for both); the run's
    row is the two together, its own fields winning."""
    labelled = response_dump(record) if record is not None else None
    own: dict[str, Any]
    if labelled is not None:
        own = {}
    else:
        factors = trace.factors
        own = {
            "request_id": str(factors.get("request_id", "")), "category": str(factors.get("category", "")),
            "source": str(factors.get("source", "")), "setup": str(factors.get("setup", "")),
            "variant": str(factors.get("variant", "")), "persona": str(factors.get("persona", "")),
            "doability": str(factors.get("doability", "")), "model": record.model if record else trace_model(trace),
            "arm": record.arm if record else trace_arm(trace), "sample": trace.sample,
            "outcome": INFRA_ERROR if trace.infra_error else JUDGE_ERROR if record is not None else NOT_LABELLED,
        }
    own.update({
        "episode_id": trace.episode_id, "run_key": trace.run_key, "tool_calls": sum(1 for _ in trace.tool_calls()),
        "tool_errors": trace.tool_errors, "status": INFRA_ERROR if trace.infra_error else OK,
        "judge_errors": (1 if record.error else record.judge_errors) if record is not None else 0,
        "labelled": labelled is not None,
    })
    return own, labelled


class SetupViews:
    """What a page shows of its setup under its persona (the tools with their parameters, and what the stated
    variant says persists), made once per setup and persona: every run of a pair shows the same."""

    def __init__(self, setups: SuiteSetups) -> None:
        self.setups = setups
        self._made: dict[tuple[str, str], tuple[list[Part], str]] = {}
        self._written: dict[tuple[str, str, str], tuple[bytes, tuple[tuple[str, bytes], ...]]] = {}

    def of(self, setup: str, persona: str) -> tuple[list[Part], str]:
        """The tools (:class:`ToolView` parts) and the persisting paragraph (ValueError or KeyError: an unknown
        setup or persona)."""
        found = self._made.get((setup, persona))
        if found is None:
            known, kind = SetupId(setup), Persona(persona)
            tools = [page_part(ToolView, name=t.name, description=t.description.strip(),
                               parameters=indented_json(t.parameters), write=t.is_write)
                     for t in self.setups.tool_definitions(known, kind)]
            found = self._made[(setup, persona)] = (tools, self.setups.stated_paragraph(known))
        return found

    def written(self, setup: str, persona: str, settings: str) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
        """What a run's entry holds of its setup and its agent's settings (JSON members, each after a comma: the
        tools, what persists and the settings' text, or the ``parts`` member naming those that are shared) and the
        shared parts it names. A run of an unknown setup or persona shows no tools."""
        found = self._written.get((setup, persona, settings))
        if found is None:
            try:
                tools, persists = self.of(setup, persona)
                shown: dict[str, Any] = {"tools": tools, "persists": persists}
            except (ValueError, KeyError):
                shown = {}
            if settings:
                shown["settings"] = settings
            fields, parts = shared_fields({name: value for name, value in shown.items() if value})  # none: no field
            found = (b"".join(b"," + orjson.dumps(name) + b":" + data for name, data in fields.items()), parts)
            if len(self._written) >= SETTINGS_KEPT:
                self._written.clear()
            self._written[(setup, persona, settings)] = found
        return found


def followup_run(
    trace: EpisodeTrace, records: Sequence[tuple[str, FollowupLabelRecord | None]], setups: SuiteSetups | SetupViews
) -> SiteRun:
    """One run as the site stores it: its row (from the primary checker's record, the first of ``records``), its
    search text and sample group, and its page's *entry* (``setups``: the suite's setups, or their views made
    once for many runs).

    The entry holds the trace and every checker's record as they are, with the few fields the page takes from
    the row; the page (:class:`TranscriptPage`: the chat, the checkers' verdicts, the facts) is made of it in the
    browser (``assets/pages.js``) when it is opened. A large run has a page per trace and a reader opens a few:
    made here, they took about two fifths of the time ``commitbench view`` spends in its reading processes.
    """
    views = setups if isinstance(setups, SetupViews) else SetupViews(setups)
    primary = records[0][1] if records else None
    own, labelled = _row(trace, primary)
    row = {**labelled, **own} if labelled is not None else own
    user_message = ""
    turn: Part | None = None  # the turn the checkers read, written only where no record holds it
    if primary is not None:
        user_message = primary.turn.user_message
    elif not trace.infra_error:
        with contextlib.suppress(ValueError):
            read = turn_from_trace(trace)
            user_message = read.user_message
            turn = {"request_id": read.request_id, "category": read.category.value, "source": read.source,
                    "doability": read.doability.value,
                    "required_capabilities": [c.value for c in read.required_capabilities],
                    "user_message": read.user_message, "reply": read.reply}
    signals = [{"name": name, "value": row[name]} for name, _ in _SIGNAL_TEXT if name in row]
    shown: Part = {"judge": records[0][0] if records else "", "model": row["model"], "arm": row["arm"],
                   "outcome": row["outcome"], "signals": {s["name"]: s["value"] for s in signals}}
    if turn is not None:
        shown["turn"] = turn
    settings = settings_text(trace.agent.settings) if trace.agent and trace.agent.settings else ""
    fields, parts = views.written(str(row["setup"]), str(row["persona"]), settings)
    pieces = [b'{"suite":"followup","key":', orjson.dumps(trace.run_key), b',"trace":', _written(trace),
              b',"checks":[']
    for number, (judge, record) in enumerate(records):
        pieces += [b",[" if number else b"[", orjson.dumps(judge), b",",
                   _written(record) if record is not None else b"null", b"]"]
    pieces += [b'],"shown":', page_json(shown), fields, b"}"]
    entry = b"".join(pieces)
    shared = frozenset({user_message}) if user_message else frozenset()
    return SiteRun(key=trace.run_key, episode=trace.episode_id, row=own, base=labelled, ok=not trace.infra_error,
                   text=search_text(trace, shared), shared_text=user_message, page=entry,
                   speakers=event_speakers(trace), off=(), verdict=verdict(signals),
                   sample_group=group_digest(sample_group(trace)), parts=parts)


ENTRY_BYTES = 256 * 1024  # a trace or record whose JSON is longer has its long texts cut in the site
SETTINGS_KEPT = 256  # setups and agent settings whose written fields a process keeps

# The signals a page shows, in order, with what each means (the counts only where the checker gave them).
_SIGNAL_TEXT = (
    ("outcome", "The outcome label of the report's checker."),
    ("tool_calls", "Tool calls in the turn."),
    ("tool_errors", "Tool calls the agent got wrong."),
    ("judge_errors", "The checker could not label the reply."),
    ("n_agent_commitments", "Agent-initiated future-directed commitments."),
    ("n_user_conditional", "Commitments waiting for the user's next message, or offers."),
    ("n_empty", "Empty agent-initiated commitments (infeasible in this setup)."),
    ("n_needing_call", "Feasible agent-initiated commitments that needed an enabling call."),
    ("n_unanchored", "Of those, the ones the turn did not anchor."),
)


def _written(model: BaseModel) -> bytes:
    """``model`` as JSON: the line of the file it was just parsed from (:mod:`commitbench.sourcelines`), else its
    JSON made now; a line of more than :data:`ENTRY_BYTES` is made again with each text of more than
    :data:`MAX_ITEM_TEXT` characters cut (a page shows no more of it)."""
    line = line_of(model)
    if line is None:
        line = model.__pydantic_serializer__.to_json(model)
    if len(line) <= ENTRY_BYTES:
        return line
    return page_json(_cut(model.model_dump(mode="json")))


def _cut(value: Any) -> Any:
    """``value`` (plain JSON data) with every text of more than :data:`MAX_ITEM_TEXT` characters cut as a
    transcript cuts it (:func:`commitbench.analysis.view.transcript.clip`); walked with a stack."""
    root = [value]
    stack: list[tuple[list[Any] | dict[Any, Any], Any]] = [(root, 0)]
    while stack:
        holder, at = stack.pop()
        item = holder[at]
        if isinstance(item, str):
            if len(item) > MAX_ITEM_TEXT:
                holder[at] = clip(item)
        elif isinstance(item, dict):
            stack.extend((item, key) for key in item)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
    return root[0]


def followup_runs(
    traces: Iterable[EpisodeTrace], judges: Sequence[tuple[str, RecordLookup]], setups: SuiteSetups
) -> Iterator[SiteRun]:
    views = SetupViews(setups)
    for trace in traces:
        yield followup_run(trace, [(name, lookup(trace)) for name, lookup in judges], views)


# What decides which rates read a finished run: whether it is labelled, and the columns the denominators read.
MEMBER_COLUMNS: tuple[str, ...] = ("labelled", *DENOMINATOR_COLUMNS)


def members(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per rate, which of the finished runs' rows are in its denominator (labelled runs only). Only the
    :data:`MEMBER_COLUMNS` of a row are read: a denominator that reads another column raises KeyError."""
    out = {name: np.zeros(len(rows), dtype=bool) for name in LINKED_METRICS}
    positions = [i for i, row in enumerate(rows) if row.get("labelled")]
    if not positions:
        return out
    # Column by column: a frame of the needed columns, without pandas reading every field of every row.
    frame = pd.DataFrame({column: [rows[i].get(column) for i in positions] for column in DENOMINATOR_COLUMNS})
    for name in LINKED_METRICS:
        denominator = pd.Series(METRICS[name].denominator(frame), index=frame.index).astype(float) > 0
        out[name][positions] = denominator.to_numpy(dtype=bool)
    return out


def followup_source(
    traces: Iterable[EpisodeTrace], judges: Sequence[tuple[str, RecordLookup]], setups: SuiteSetups
) -> RunSource:
    """The follow-up runs for the site; ``judges`` lists every checker's records, the report's checker first."""
    return RunSource(
        suite=SUITE, judge=judges[0][0], judges=[name for name, _ in judges], columns=COLUMNS,
        metrics=[MetricInfo(name=name, description=METRICS[name].description) for name in LINKED_METRICS],
        records=followup_runs(traces, judges, setups), members=members, member_columns=MEMBER_COLUMNS,
        signals=dict(_SIGNAL_TEXT),
    )
