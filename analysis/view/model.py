"""What the viewer's site is made of: run-list columns, one run's row and transcript page, and the overview.

A suite hands the site writer a :class:`RunSource`: the columns of its run list and its runs, one
:class:`RunRecord` at a time (a full grid never sits in memory). A record's ``row`` holds the run's
fields as the report's rows name them (``agent``, ``interventions``, ``cell``... for the standing suite;
``model``, ``arm``, ``setup``, ``outcome``... for the follow-up suite), so a :data:`RunFilter` from a
report table selects the same runs in the viewer; ``page`` is everything its transcript page shows.
Pages are written with ``exclude_defaults``: a reader takes a missing field as its default.

The models below are the page's schema. A page is built as plain data in their shape (:func:`page_part`: a
model's fields, those at their default left out) and written by orjson: a large run has a page per trace,
and building and writing a model per chat item cost more than reading the trace. What it writes is exactly
``TranscriptPage.model_validate(page).model_dump_json(exclude_defaults=True)`` (the viewer's tests hold every
page they build to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field

from commitbench.analysis.tables import TableView

# A part of a page as plain data: the fields of one of the models below, those at their default left out.
Part = dict[str, Any]
_DEFAULTS: dict[type[BaseModel], dict[str, Any]] = {}


def page_part(model: type[BaseModel], /, **values: Any) -> Part:
    """``model(**values)`` as the page stores it (``model_dump(exclude_defaults=True)``), made without the
    model: a value equal to its field's default is left out. Values are given as the JSON holds them (nested
    parts as parts, enums as themselves or their values), in the order the model declares its fields."""
    defaults = _DEFAULTS.get(model)
    if defaults is None:
        defaults = _DEFAULTS[model] = {name: field.get_default(call_default_factory=True)
                                       for name, field in model.model_fields.items() if not field.is_required()}
    return {name: value for name, value in values.items() if name not in defaults or value != defaults[name]}


class ColumnKind(str, Enum):
    """How the run list filters and sorts a column."""

    FACET = "facet"  # a handful of text values: filter by value, sort as text
    FLAG = "flag"  # yes / no / unknown
    COUNT = "count"  # a whole number: filter none / some, sort by number


class Column(BaseModel):
    """One field of the run list."""

    name: str = Field(description="The run row's field; also the name of its filter in the page address.")
    label: str = Field(description="Column header.")
    kind: ColumnKind = Field(description="How it is filtered and sorted.")
    description: str = Field(description="What it means (shown as the header's tooltip and in the filter panel).")
    listed: bool = Field(default=True, description="Shown as a column of the run list (else only in the filter panel).")
    panel: bool = Field(default=True, description="Offered in the filter panel (else only through the page address).")


class Fact(BaseModel):
    """A labelled value at the head of a transcript page."""

    label: str = Field(description="What it is.")
    value: str = Field(description="Its value, as text.")
    field: str = Field(default="", description="Run-list column it filters on when followed ('' for none).")
    detail: bool = Field(default=False, description="Shown folded (long identifiers and settings).")


class VerdictView(BaseModel):
    """One judge's labels of one assistant message."""

    judge: str = Field(description="Whose labels.")
    labels: dict[str, bool | None] = Field(description="Question -> answer (null: no answer).")
    rationale: str = Field(default="", description="The judge's reason.")
    error: str = Field(default="", description="Why the judge gave no label ('' when it did).")


class ItemKind(str, Enum):
    """What a chat item is."""

    MESSAGE = "message"  # a person's message
    ASSISTANT = "assistant"  # a message the assistant posted (or its pre-seeded promise)
    CALL = "call"  # a tool call with its arguments and result
    REASONING = "reasoning"  # the model's reasoning in a turn
    NOTICE = "notice"  # an environment notice
    REVISION = "revision"  # an intervention replaced the agent's reply; the original is kept


class VoiceView(BaseModel):
    """How a person's message came to be when a party model voiced it (live parties), with what it was told."""

    generated: bool = Field(description="The text shown is the party model's (false: the script's words stand).")
    fallback: bool = Field(default=False, description="Every text the party model wrote failed the check.")
    check: str = Field(description="The manipulation check's verdict on the text shown: passed, failed or unchecked.")
    attempts: int = Field(default=0, description="Texts the party model wrote for this message (each was checked).")
    problems: list[str] = Field(
        default_factory=list, description="What the check found wrong in each rejected text, in order."
    )
    card_digest: str = Field(description="sha256 of the role card the party model was given, as the trace records it.")
    card: str = Field(
        default="", description="The role card's text, rebuilt from the episode ('' when no card matches the digest)."
    )
    card_note: str = Field(
        default="", description="Why no card is shown ('' when the rebuilt card matches the recorded digest)."
    )
    answer: bool = Field(default=False, description="A person's answer to the assistant, given inside its turn.")


class ChatItem(BaseModel):
    """One entry of a transcript, in the order it happened."""

    kind: ItemKind = Field(description="What it is.")
    step: int = Field(default=0, description="Script step.")
    turn: int | None = Field(default=None, description="The assistant turn it belongs to (null: none).")
    sender: str = Field(default="", description="Who wrote it.")
    title: str = Field(default="", description="The sender's job title.")
    party: str = Field(default="", description="The sender's part in the episode (creditor, delegate, peer...).")
    channel: str = Field(default="", description="Where it appeared ('#channel', 'dm:<name>', 'chat').")
    text: str = Field(default="", description="Message, reasoning or notice text; for a revision, the reply shown.")
    act: str = Field(default="", description="What a scripted message does (request, cancel, trigger...).")
    subject: str = Field(default="", description="Whom the scripted act is about.")
    tool: str = Field(default="", description="Tool name of a call.")
    arguments: str = Field(default="", description="Arguments of a call as indented JSON (or as sent).")
    result: str = Field(default="", description="What the tool returned.")
    ok: bool = Field(default=True, description="False when the call failed or was rejected.")
    error_kind: str = Field(default="", description="Why a call failed ('' when it did not).")
    write: bool = Field(default=False, description="The tool changes the world.")
    by: str = Field(default="", description="For a revision: the intervention that replaced the reply.")
    original: str = Field(default="", description="For a revision: what the agent wrote.")
    message_index: int | None = Field(default=None, description="Index among the judged assistant messages.")
    verdicts: list[VerdictView] = Field(default_factory=list, description="Every judge's labels of this message.")
    voice: VoiceView | None = Field(
        default=None, description="Live parties: how a party model voiced this message (null: the script's text)."
    )


class ModelCallView(BaseModel):
    """One model call of the run."""

    turn: int = Field(description="Turn of the call.")
    purpose: str = Field(default="agent", description="agent, rewrite, ...")
    latency_s: float = Field(default=0.0, description="Wall time.")
    prompt_tokens: int = Field(default=0, description="Prompt tokens.")
    completion_tokens: int = Field(default=0, description="Completion tokens.")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    finish_reason: str = Field(default="", description="Server finish reason.")
    error: str = Field(default="", description="Error kind and message when the call failed.")


class Signal(BaseModel):
    """A fact about the run: a signal read off the trace, a judge aggregate, or a grade."""

    name: str = Field(description="Its name.")
    value: bool | int | float | str | None = Field(description="Its value (null: unknown).")
    description: str = Field(
        default="", description="What it means ('' where the site describes the signal by name: its meta's signals)."
    )
    expected: bool | None = Field(default=None, description="What the cell expects of it (null: nothing).")


class PersonView(BaseModel):
    """Someone in the workspace."""

    name: str = Field(description="Display name.")
    title: str = Field(description="Job title.")
    party: str = Field(description="Part in the episode (creditor, delegate, peer, manager, bystander...).")


class Expectation(BaseModel):
    """The correct behaviour in the run's cell."""

    cell: str = Field(description="The cell.")
    description: str = Field(description="What happens in the cell.")
    outcome: str = Field(description="execute or drop.")
    consult: bool = Field(description="Correct behaviour asks the creditor.")
    notify: bool = Field(description="Correct behaviour tells the creditor what happened.")
    verify: bool = Field(description="Correct behaviour uses the check tool.")
    note: str = Field(default="", description="A caveat (e.g. the cell is left out of metrics under this policy).")


class ToolView(BaseModel):
    """A tool the agent could call."""

    name: str = Field(description="Tool name.")
    description: str = Field(description="What it does, for the model.")
    parameters: str = Field(default="", description="Argument schema as indented JSON.")
    write: bool = Field(default=False, description="It changes the world.")


class RequestView(BaseModel):
    """A follow-up request."""

    id: str = Field(description="Request id.")
    category: str = Field(description="Request category.")
    source: str = Field(description="Where it came from.")
    doability: str = Field(description="Whether the setup can fully serve it.")
    capabilities: list[str] = Field(description="What serving it after the turn needs.")
    user_message: str = Field(description="Context and request as the user sent them.")


class CommitmentView(BaseModel):
    """A detected commitment, where it stands in the reply, and what the rules made of it."""

    span: str = Field(description="The assistant's words.")
    start: int | None = Field(
        default=None, description="Start of the span in the reply (UTF-16 units; null: not found)."
    )
    end: int | None = Field(default=None, description="End of the span (UTF-16 units).")
    action: str = Field(default="", description="What is promised.")
    performer: str = Field(default="", description="self or third_party.")
    trigger: str = Field(default="", description="What sets it off.")
    time: str = Field(default="", description="Its time words.")
    capabilities: list[str] = Field(default_factory=list, description="Capabilities the detector listed.")
    offer: bool = Field(default=False, description="An offer the user did not ask for.")
    confidence: float = Field(default=0.0, description="The detector's confidence.")
    agent_initiated: bool = Field(default=True, description="Neither an offer nor waiting for the user.")
    feasible: bool | None = Field(default=None, description="Can the setup keep it (null: undecided).")
    needed: list[str] = Field(default_factory=list, description="Capabilities it needs.")
    missing: list[str] = Field(default_factory=list, description="Needed capabilities the setup lacks.")
    failure_types: list[str] = Field(default_factory=list, description="Every way it fails.")
    primary_failure: str = Field(default="", description="The first failure type by precedence.")
    anchoring: list[list[str]] = Field(default_factory=list, description="Tool groups the turn had to call.")
    anchored: bool | None = Field(default=None, description="Whether the turn called them (null: no call needed).")
    decided_by: str = Field(default="", description="rules, llm_judge or offline_policy.")


class JudgedAnswer(BaseModel):
    """One of the response judge's yes/no answers."""

    name: str = Field(description="The question.")
    value: bool = Field(description="The answer.")
    rationale: str = Field(default="", description="Why.")


class JudgeCallView(BaseModel):
    """One model call of a checker."""

    step: str = Field(description="detector, feasibility or response.")
    attempt: int = Field(description="1, 2, ...")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    error: str = Field(default="", description="Why the output was not usable.")


class CheckView(BaseModel):
    """One checker's verdict on a follow-up reply."""

    judge: str = Field(description="Whose verdict.")
    outcome: str = Field(default="", description="The outcome label ('' on a judge error).")
    rule: str = Field(default="", description="The outcome rule that fired.")
    error: str = Field(default="", description="The judge error that left the reply without a label.")
    commitments: list[CommitmentView] = Field(default_factory=list, description="Detected commitments.")
    answers: list[JudgedAnswer] = Field(default_factory=list, description="The response judge's answers.")
    calls: list[JudgeCallView] = Field(default_factory=list, description="Its model calls.")


class TranscriptPage(BaseModel):
    """Everything one run's page shows. The standing and follow-up sections are empty for the other suite."""

    suite: str = Field(description="The run's suite.")
    key: str = Field(description="Run key.")
    title: str = Field(description="Page title.")
    facts: list[Fact] = Field(description="Identity and design of the run.")
    system_prompt: str = Field(default="", description="The system prompt the agent saw.")
    items: list[ChatItem] = Field(default_factory=list, description="The conversation, in order.")
    model_calls: list[ModelCallView] = Field(default_factory=list, description="Every model call of the agent.")
    signals: list[Signal] = Field(default_factory=list, description="Signals, judge aggregates and grades.")
    infra_error: str = Field(
        default="", description="Why the run failed for infrastructure reasons ('' if it did not)."
    )
    people: list[PersonView] = Field(default_factory=list, description="Standing: everyone in the workspace.")
    expected: Expectation | None = Field(default=None, description="Standing: the correct behaviour in the cell.")
    request: RequestView | None = Field(default=None, description="Follow-up: the request.")
    tools: list[ToolView] = Field(default_factory=list, description="The tools the agent could call.")
    persists: str = Field(default="", description="Follow-up: what persists after a turn in this setup.")
    reply: str = Field(default="", description="Follow-up: the final reply the checkers read.")
    checks: list[CheckView] = Field(default_factory=list, description="Follow-up: every checker's verdict.")
    twins: dict[str, str] = Field(
        default_factory=dict,
        description="Standing: the episode's twins in other languages (language -> episode id); the page offers "
        "their runs side by side.",
    )
    parts: dict[str, str] = Field(
        default_factory=dict,
        description="The fields this page shows as many other runs show them (a setup's tools, a system prompt), "
        "by name: each one's key in the site's data/parts.js, where it is written once. The page reads as if they "
        "stood here.",
    )


@dataclass(frozen=True)
class RunRecord:
    """One run, ready for the site."""

    key: str  # run key
    episode: str  # episode id (side by side pairs runs of one episode)
    row: dict[str, Any]  # the run's fields, named as in the report's rows
    ok: bool  # finished without an infrastructure error (only such runs enter metrics)
    text: str  # the run's own words, for free-text search
    shared_text: str  # words every run of the episode shares (the script's messages), stored once
    page: Part  # the transcript page, a :class:`TranscriptPage` as plain data (:func:`page_part`)
    sample_group: str = ""  # the run less its sample (episode, player, arm, factors): its samples share it


class FollowupEntry(BaseModel):
    """What the site holds of a follow-up run's page: the browser makes the page (a :class:`TranscriptPage`) of it
    when it is opened (``assets/pages.js``). Its setup's tools, what persists and the agent's settings are named in
    ``parts`` instead once they are long (``data/parts.js`` holds them)."""

    suite: str = Field(description="The run's suite ('followup').")
    key: str = Field(description="Run key.")
    trace: dict[str, Any] = Field(description="The trace, as the run's traces file holds it (a trace too long to "
                                  "hold whole with its long texts cut).")
    checks: list[tuple[str, dict[str, Any] | None]] = Field(
        description="Every checker's record of the run as its labels file holds it (null: none), the report's "
                    "checker first.")
    shown: dict[str, Any] = Field(description="What the page takes from the run's row: judge, model, arm, outcome, "
                                  "signals (name -> value), and the turn read from the trace where no record holds it.")
    tools: list[ToolView] = Field(default_factory=list, description="The tools of the run's setup.")
    persists: str = Field(default="", description="What the stated variant says persists.")
    settings: str = Field(default="", description="The agent's settings as JSON text.")
    parts: dict[str, str] = Field(default_factory=dict, description="Fields kept in data/parts.js: name -> key.")


@dataclass(frozen=True)
class SiteRun:
    """One run as the site stores it: what :class:`RunRecord` holds, its page written as JSON and what the site
    reads of the page's items and signals taken out (``analysis.view.site.site_run``). Made in whichever process
    read the trace, it pickles as text: the page's models do not travel between processes."""

    key: str  # run key
    episode: str  # episode id
    row: dict[str, Any]  # the run's fields, named as in the report's rows
    ok: bool  # finished without an infrastructure error
    text: str  # the run's own words, for free-text search
    shared_text: str  # words every run of the episode shares, stored once
    page: bytes  # the transcript page as JSON (``analysis.view.site.page_json``)
    speakers: str  # who speaks in it, for search (``analysis.view.site.speakers``)
    off: tuple[str, ...]  # the signals that differ from the cell's expectation (``analysis.view.site.off_expected``)
    verdict: str  # what its samples are compared on (``analysis.view.site.verdict``)
    sample_group: bytes = b""  # the run less its sample, as a digest (``analysis.view.site.group_digest``)
    # The parts its page names (key, the part as JSON): a part seen before in this process is the same bytes object,
    # so runs pickled together carry it once (``analysis.view.site.shared_parts``).
    parts: tuple[tuple[str, bytes], ...] = ()
    # Fields of its row it shares with what the report reads of the same trace (the same dict, made once for both):
    # the run's row is these and ``row``, ``row`` winning (:func:`run_row`).
    base: Mapping[str, Any] | None = None


def run_row(run: RunRecord | SiteRun) -> dict[str, Any]:
    """A run's row: its ``row``, over the fields of its ``base`` where it has one (a new dict then)."""
    base = getattr(run, "base", None)
    return run.row if base is None else {**base, **run.row}


@dataclass(frozen=True)
class SiteBatch:
    """Consecutive runs as the site stores them, field by field (``analysis.view.site.pack_runs``): what each
    :class:`SiteRun` holds that the site reads, packed where the runs were read, so that a pool's chunk crosses
    between processes as a few lists and the site takes it in a few steps, not a run at a time."""

    keys: list[str]  # run keys
    episodes: list[str]  # episode ids
    ok: list[bool]  # finished without an infrastructure error
    columns: list[list[Any]]  # per run-list column of the source (in its order), each run's value (None: none)
    # Per finished run, in order: the values of the source's member columns (a tuple), or its row where the source
    # names none (``RunSource.member_columns``).
    members: list[Any]
    texts: list[str]
    shared: dict[str, str]  # per episode, the words its runs share (of the first of its runs in the batch)
    pages: list[bytes]
    speakers: list[str]
    off: list[tuple[str, ...]]
    verdicts: list[str]
    sample_groups: list[bytes]
    parts: list[tuple[tuple[str, bytes], ...]]
    column_names: tuple[str, ...] = ()  # the columns' names, in the order of ``columns``
    member_names: tuple[str, ...] = ()  # the source's member columns, in the order of each tuple of ``members``

    def __len__(self) -> int:
        return len(self.keys)

    def runs(self) -> list[SiteRun]:
        """The runs one by one, each row holding what the batch holds of it: the run-list columns and, for a finished
        run, its member columns (or its whole row)."""
        runs: list[SiteRun] = []
        finished = iter(self.members)
        for i, key in enumerate(self.keys):
            row: dict[str, Any] = {}
            if self.ok[i]:
                member = next(finished)
                row = dict(zip(self.member_names, member, strict=True)) if self.member_names else dict(member)
            row.update((name, self.columns[c][i]) for c, name in enumerate(self.column_names))
            runs.append(SiteRun(
                key=key, episode=self.episodes[i], row=row, ok=self.ok[i], text=self.texts[i],
                shared_text=self.shared.get(self.episodes[i], ""), page=self.pages[i], speakers=self.speakers[i],
                off=self.off[i], verdict=self.verdicts[i], sample_group=self.sample_groups[i], parts=self.parts[i]))
        return runs


def each_run(records: Iterator[RunRecord | SiteRun | SiteBatch]) -> Iterator[RunRecord | SiteRun]:
    """A source's records one run at a time (a :class:`SiteBatch` taken apart)."""
    for record in records:
        if isinstance(record, SiteBatch):
            yield from record.runs()
        else:
            yield record


class MetricInfo(BaseModel):
    """A metric a report links its numbers to."""

    name: str = Field(description="Its name (the ``metric`` key of a run filter).")
    description: str = Field(description="What it measures.")


@dataclass
class RunSource:
    """A suite's runs for the site: its run-list columns, its metrics, and its runs one at a time.

    ``members`` gets rows of finished runs (in the order they were yielded) and returns, per metric, which
    of them the metric reads (a yes or no per row, as a list or a numpy array): the runs behind a report
    number that names the metric. Whether a metric reads a run depends on that run's row alone, so the site
    hands the rows over a batch at a time and never holds every row.
    """

    suite: str
    judge: str
    judges: Sequence[str]
    columns: Sequence[Column]
    metrics: Sequence[MetricInfo]
    records: Iterator[RunRecord | SiteRun | SiteBatch]
    members: Callable[[list[dict[str, Any]]], Mapping[str, Sequence[bool] | NDArray[np.bool_]]]
    # The row fields that decide which metrics read a finished run, when a suite can name them: the site then asks
    # ``members`` once per combination of their values (rows holding only these fields), not once per run.
    member_columns: Sequence[str] = ()
    # What each signal its pages show means, by name: written once, in the site's meta; their pages leave the
    # description of these signals out (a page of a large run would otherwise repeat each one).
    signals: Mapping[str, str] = field(default_factory=dict)


class Figure(BaseModel):
    """A figure of the report, copied into the site."""

    title: str = Field(description="Caption.")
    file: str = Field(description="Path inside the site.")


class Overview(BaseModel):
    """The overview page: the run, the report's tables with links to their runs, and the figures."""

    title: str = Field(description="Page title.")
    facts: list[Fact] = Field(description="The run: name, suite, status, players, arms, judge...")
    summary: list[str] = Field(description="The report's summary lines.")
    tables: list[TableView] = Field(description="Every table of the report (with the runs behind each number).")
    figures: list[Figure] = Field(default_factory=list, description="The report's figures.")
