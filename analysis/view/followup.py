"""The follow-up suite's runs for the viewer: run-list rows, transcript pages and the runs behind each rate.

A run's row is the report's metric row (:func:`commitbench.analysis.followup.rows.response_row`, from
the same checker records as the report), so a rate's link selects the runs in its denominator. Its
page shows the request, the setup's tools and what persists, the turn (calls and reply), and each
checker's verdict: the detected commitments with their spans highlighted in the reply, their
feasibility and anchoring, the response judge's answers with rationales, and the outcome with the
rule that fired.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from commitbench.analysis.followup.metrics import METRICS, REQUIRED_COLUMNS
from commitbench.analysis.followup.rows import response_dump
from commitbench.analysis.view.model import (
    CheckView,
    Column,
    ColumnKind,
    CommitmentView,
    JudgeCallView,
    MetricInfo,
    Part,
    RequestView,
    RunRecord,
    RunSource,
    ToolView,
    TranscriptPage,
    page_part,
)
from commitbench.analysis.view.transcript import (
    chat_items,
    fact,
    identity_facts,
    indented_json,
    model_call_views,
    sample_group,
    search_text,
    system_prompt,
)
from commitbench.episodes.followup.setups import SuiteSetups
from commitbench.episodes.followup.vocabulary import Persona, SetupId
from commitbench.judges.followup.labellers import FollowupLabelRecord, trace_arm, trace_model
from commitbench.judges.followup.turn import turn_from_trace
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

RESPONSE_QUESTIONS = ("false_action_claim", "declines_request", "hands_back_to_user", "did_task_now",
                      "asks_clarification")

# Judge name -> the checker's record of a run (None: that checker did not label it).
RecordLookup = Callable[[EpisodeTrace], FollowupLabelRecord | None]


def utf16_offset(text: str, index: int) -> int:
    """The position ``index`` (in code points) of ``text`` in UTF-16 code units, as a browser counts."""
    return len(text[:index].encode("utf-16-le")) // 2


def locate(reply: str, span: str) -> tuple[int, int] | None:
    """Where ``span`` stands in ``reply`` (UTF-16 units): exactly, else ignoring case; None when absent."""
    if not span:
        return None
    start = reply.find(span)
    if start < 0:
        lowered = reply.lower()
        if len(lowered) == len(reply):  # lowering kept the positions
            start = lowered.find(span.lower())
    if start < 0:
        return None
    return utf16_offset(reply, start), utf16_offset(reply, start + len(span))


def check_view(judge: str, record: FollowupLabelRecord | None, reply: str) -> Part:
    """One checker's verdict on the reply, a :class:`CheckView` as plain data."""
    if record is None:
        return page_part(CheckView, judge=judge, error=NOT_LABELLED)
    result = record.result
    commitments = []
    for item in result.commitments:
        c, f = item.commitment, item.feasibility
        where = locate(reply, c.span)
        commitments.append(page_part(
            CommitmentView, span=c.span, start=where[0] if where else None, end=where[1] if where else None,
            action=c.action, performer=c.performer.value, trigger=c.trigger_type.value, time=c.time_expression or "",
            capabilities=list(c.required_capabilities), offer=c.is_offer, confidence=c.confidence,
            agent_initiated=f.agent_initiated, feasible=f.feasible, needed=[x.value for x in f.needed_capabilities],
            missing=[x.value for x in f.missing_capabilities], failure_types=[x.value for x in f.failure_types],
            primary_failure=f.primary_failure.value if f.primary_failure else "", anchoring=f.anchoring_groups,
            anchored=item.anchored, decided_by=f.decided_by.value,
        ))
    if not commitments and result.detector is not None:  # detected, but not assessed (a later step failed)
        for c in result.detector.commitments:
            where = locate(reply, c.span)
            commitments.append(page_part(
                CommitmentView, span=c.span, start=where[0] if where else None, end=where[1] if where else None,
                action=c.action, performer=c.performer.value, trigger=c.trigger_type.value,
                time=c.time_expression or "", capabilities=list(c.required_capabilities), offer=c.is_offer,
                confidence=c.confidence,
            ))
    answers: list[Part] = []
    if result.response is not None:
        for name in RESPONSE_QUESTIONS:  # JudgedAnswer parts, as page_part makes them (its rationale "" left out)
            answer = getattr(result.response, name)
            answers.append({"name": name, "value": answer.value, "rationale": answer.rationale} if answer.rationale
                           else {"name": name, "value": answer.value})
    return page_part(
        CheckView, judge=judge, outcome=result.outcome.value if result.outcome else "", rule=result.rule,
        error=record.error or result.error or "", commitments=commitments, answers=answers,
        calls=[page_part(JudgeCallView, step=c.step, attempt=c.attempt, cache_hit=c.cache_hit, error=c.error)
               for c in result.calls],
    )


def _row(trace: EpisodeTrace, record: FollowupLabelRecord | None) -> tuple[dict[str, Any], bool]:
    """The run's fields and whether it has a label (and so enters the metrics)."""
    labelled = response_dump(record) if record is not None else None
    factors = trace.factors
    row: dict[str, Any] = {
        "request_id": str(factors.get("request_id", "")), "category": str(factors.get("category", "")),
        "source": str(factors.get("source", "")), "setup": str(factors.get("setup", "")),
        "variant": str(factors.get("variant", "")), "persona": str(factors.get("persona", "")),
        "doability": str(factors.get("doability", "")), "model": record.model if record else trace_model(trace),
        "arm": record.arm if record else trace_arm(trace), "sample": trace.sample,
    }
    if labelled is not None:
        row.update(labelled)
    else:
        row["outcome"] = INFRA_ERROR if trace.infra_error else JUDGE_ERROR if record is not None else NOT_LABELLED
    calls = list(trace.tool_calls())
    row.update({
        "episode_id": trace.episode_id, "run_key": trace.run_key, "tool_calls": len(calls),
        "tool_errors": trace.tool_errors, "status": INFRA_ERROR if trace.infra_error else OK,
        "judge_errors": (1 if record.error else record.judge_errors) if record is not None else 0,
        "labelled": labelled is not None,
    })
    return row, labelled is not None


class SetupViews:
    """What a page shows of its setup under its persona (the tools with their parameters, and what the stated
    variant says persists), made once per setup and persona: every run of a pair shows the same."""

    def __init__(self, setups: SuiteSetups) -> None:
        self.setups = setups
        self._made: dict[tuple[str, str], tuple[list[Part], str]] = {}

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


def followup_record(
    trace: EpisodeTrace, records: Sequence[tuple[str, FollowupLabelRecord | None]], setups: SuiteSetups | SetupViews
) -> RunRecord:
    """One run: its row (from the primary checker's record, the first of ``records``) and its page (``setups``:
    the suite's setups, or their views made once for many runs)."""
    views = setups if isinstance(setups, SetupViews) else SetupViews(setups)
    primary = records[0][1] if records else None
    row, _ = _row(trace, primary)
    turn = primary.turn if primary is not None else None
    if turn is None and not trace.infra_error:
        try:
            turn = turn_from_trace(trace)
        except ValueError:
            turn = None
    reply = turn.reply if turn is not None else ""
    request = None
    user_message = turn.user_message if turn is not None else ""
    if turn is not None:
        request = page_part(
            RequestView, id=turn.request_id, category=turn.category.value, source=turn.source,
            doability=turn.doability.value, capabilities=[c.value for c in turn.required_capabilities],
            user_message=turn.user_message,
        )
    tools: list[Part] = []
    persists = ""
    with contextlib.suppress(ValueError, KeyError):  # a run of an unknown setup or persona shows no tools
        tools, persists = views.of(row["setup"], row["persona"])
    signals = [  # Signal parts, described once in the site's meta (RunSource.signals)
        {"name": name, "value": row[name]} for name, _ in _SIGNAL_TEXT if name in row
    ]
    facts = [
        fact("model", str(row["model"]), "model"),
        fact("setup", str(row["setup"]), "setup"),
        fact("variant", str(row["variant"]), "variant"),
        fact("persona", str(row["persona"]), "persona"),
        fact("category", str(row["category"]), "category"),
        fact("request", str(row["request_id"]), "request_id"),
        fact("doability", str(row["doability"]), "doability"),
        *identity_facts(trace, "", "arm", str(row["arm"])),
        fact("judge", records[0][0] if records else ""),
    ]
    page = page_part(
        TranscriptPage, suite=SUITE, key=trace.run_key,
        title=f"{row['request_id']} · {row['setup']} · {row['model']} · {row['arm']} · {row['outcome']}",
        facts=facts, system_prompt=system_prompt(trace), items=chat_items(trace), model_calls=model_call_views(trace),
        signals=signals, infra_error=trace.infra_error or "", request=request, tools=tools, persists=persists,
        reply=reply, checks=[check_view(judge, record, reply) for judge, record in records],
    )
    shared = frozenset({user_message}) if user_message else frozenset()
    return RunRecord(key=trace.run_key, episode=trace.episode_id, row=row, ok=not trace.infra_error,
                     text=search_text(trace, shared), shared_text=user_message, page=page,
                     sample_group=sample_group(trace))


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


def followup_records(
    traces: Iterable[EpisodeTrace], judges: Sequence[tuple[str, RecordLookup]], setups: SuiteSetups
) -> Iterator[RunRecord]:
    views = SetupViews(setups)
    for trace in traces:
        yield followup_record(trace, [(name, lookup(trace)) for name, lookup in judges], views)


def members(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per rate, which of the finished runs' rows are in its denominator (labelled runs only)."""
    out = {name: np.zeros(len(rows), dtype=bool) for name in LINKED_METRICS}
    positions = [i for i, row in enumerate(rows) if row.get("labelled")]
    if not positions:
        return out
    # Column by column: a frame of the needed columns, without pandas reading every field of every row.
    frame = pd.DataFrame({column: [rows[i].get(column) for i in positions] for column in REQUIRED_COLUMNS})
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
        records=followup_records(traces, judges, setups), members=members, signals=dict(_SIGNAL_TEXT),
    )
