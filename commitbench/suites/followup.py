"""The follow-up suite: single-turn follow-up requests in setups C0-C4, checked for empty commitments."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
from pydantic import BaseModel

from commitbench.agents.followup.chat import FollowUpChatAgent
from commitbench.agents.local_model import DEFAULT_ALIAS
from commitbench.analysis.call_errors import CallErrorTally, call_head
from commitbench.analysis.cost import cost_frame_of, cost_row, cost_table
from commitbench.analysis.followup import validation
from commitbench.analysis.followup.metrics import (
    CLUSTER_COLUMN,
    HEADLINE_METRICS,
    LabelledResponse,
    frame_of_dumps,
    rate_table,
    to_frame,
)
from commitbench.analysis.followup.paper import PAPER, followup_paper_tables
from commitbench.analysis.followup.report import (
    FollowupReport,
    build_followup_report,
    checker_kind,
    labeller_of,
    outcome_figure,
    response_frame,
    write_followup_files,
)
from commitbench.analysis.followup.rows import response_dump, response_row
from commitbench.analysis.paper_tables import write_paper_tables
from commitbench.analysis.rowstore import RowBatch, RowStore, row_batch
from commitbench.analysis.tables import cancelled_on_error, started_figure
from commitbench.analysis.view.followup import RecordLookup, SetupViews, followup_run, followup_source
from commitbench.analysis.view.model import RunSource, SiteRun
from commitbench.dataversion import hash_tree
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.episodes import FollowUpEpisode, FollowupSelection
from commitbench.episodes.followup.requests import FOLLOWUP_DATA_DIR, followup_data_version
from commitbench.episodes.followup.setups import SETUPS_RESOURCE, load_setups
from commitbench.judges.followup.labellers import (
    OFFLINE_NAME,
    CheckerLabeller,
    FollowupLabelRecord,
    labeller_version,
    make_checker,
    trace_arm,
    trace_model,
)
from commitbench.judges.followup.llm import LLM_CHECKER_VERSION, LLMChecker
from commitbench.judges.followup.outcomes import FAILURE_LABELS, OutcomeLabel
from commitbench.judges.followup.rules import OFFLINE_CHECKER_VERSION, OfflineChecker, check_turn
from commitbench.judges.followup.turn import FollowUpTurn, turn_from_parts, turn_from_trace
from commitbench.judges.labelling import Labeller, LabelRecord, pin_judge_settings
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle
from commitbench.memory import release_freed_memory
from commitbench.oracles.followup.fixes import FLAGGER, FlagVerdict, ReplyDraft
from commitbench.rundir import read_manifest
from commitbench.suites import AnnotationKit, JudgeSpec, PlayServices, ReportOptions, Suite
from commitbench.suites.common import labels_of, model_pairs, site_records, stored_labels, texts_note
from commitbench.suites.kits import (
    DataSource,
    InspectKit,
    ScoredRun,
    SuiteDataset,
    attribution_table,
    finite_or_none,
    licence_id,
    with_interval,
)
from commitbench.textslots import SuppliedTexts
from commitbench.traces import EpisodeTrace, ModelCallRecord, iter_latest_traces, map_latest_batches

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

NAME = "followup"
# The player of `commitbench run followup` when no --agent is given.
CHAT_AGENT_NAME = "chat"
# Tool calls an episode may make before the environment ends it (the chat agent's own bound on tool
# rounds is its max_model_calls_per_turn).
MAX_TOOL_CALLS = 20


def select(selection: FollowupSelection) -> list[FollowUpEpisode]:
    return selection.select()


def make_env(episodes: Sequence[FollowUpEpisode], texts: SuppliedTexts | None = None) -> gym.Env[Any, Any]:
    return gym.make(FOLLOWUP_ENV_ID, episodes=episodes, max_tool_calls=MAX_TOOL_CALLS, texts=texts,
                    disable_env_checker=True)


class OfflineFlagger:
    """The offline checker as the rewrite fix's flagger (used when the run's config names no judge model)."""

    name = OFFLINE_NAME

    async def flag(self, draft: ReplyDraft) -> FlagVerdict:
        turn = turn_from_parts("draft", draft.factors, draft.user_message, draft.calls, draft.reply)
        result = check_turn(turn)
        outcome = result.outcome.value if result.outcome is not None else None
        return FlagVerdict(flagged=result.outcome in FAILURE_LABELS, checker=self.name, outcome=outcome,
                           error=result.error)


class LLMFlagger:
    """The LLM checker on the run's judge model as the rewrite fix's flagger; its calls go through the run's
    cache and are recorded in the trace. A judge that cannot be reached raises LabellerUnavailable (the cell
    is an infrastructure failure, played again on resume); a judge error leaves the draft unflagged, recorded."""

    def __init__(self, checker: LLMChecker) -> None:
        self.checker = checker

    @property
    def name(self) -> str:
        return self.checker.name

    async def flag(self, draft: ReplyDraft) -> FlagVerdict:
        turn = turn_from_parts("draft", draft.factors, draft.user_message, draft.calls, draft.reply)
        result = await self.checker.check(turn)
        calls = [ModelCallRecord(turn=0, purpose="flagger", cache_key=c.cache_key, cache_hit=c.cache_hit,
                                 text=c.raw, error=c.error) for c in result.calls]
        outcome = result.outcome.value if result.outcome is not None else None
        return FlagVerdict(flagged=result.outcome in FAILURE_LABELS, checker=self.name, outcome=outcome,
                           error=result.error, calls=calls)


def services(play: PlayServices) -> Mapping[str, Any]:
    """The rewrite fix's flagger: the run's configured checker (the LLM checker on its judge model when the
    config names one, else the offline checker)."""
    if play.judge is None:
        return {FLAGGER: OfflineFlagger()}
    style = play.judge_style or ResponseFormatStyle.JSON_SCHEMA
    return {FLAGGER: LLMFlagger(LLMChecker(play.judge, max_attempts=play.judge_attempts, style=style))}


def service_identity(name: str, judge: JudgeSpec) -> dict[str, Any]:
    """The identity of a service under the run's judge config: which checker flags, on which model, which version."""
    if name != FLAGGER:
        raise ValueError(f"the follow-up suite has no service {name!r}")
    model = judge.model
    if judge.kind != "llm" or model is None:
        return {"checker": OFFLINE_NAME, "version": OFFLINE_CHECKER_VERSION}
    settings = pin_judge_settings(model.model_settings(local_alias=DEFAULT_ALIAS))
    return {"checker": "llm", "model": settings.identity(), "response_format": judge.response_format,
            "max_attempts": judge.max_attempts, "version": LLM_CHECKER_VERSION}


def labeller(
    kind: str, client: ModelClient | None = None, style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, run_dir: Path | None = None, fresh_retries: bool = False,
) -> Labeller[FollowupLabelRecord]:
    """The offline checker (``rules``) or the LLM checker (``llm``, on ``client``; ``fresh_retries``: its
    retries never replay an unusable reply the cache holds)."""
    return CheckerLabeller(make_checker(kind, client, style, max_attempts, fresh_retries))


def profile_of(run_dir: Path) -> str:
    """The run's profile, with any option set apart from it ('unknown' for a directory without a manifest)."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return "unknown (no manifest)"
    return FollowupSelection.model_validate(manifest.config.get("episodes") or {}).profile_label()


def iter_records(run_dir: Path, judge: str, labels_dir: Path | None = None) -> Iterator[FollowupLabelRecord]:
    """One checker's records of a run, one at a time: stored ones, or the offline checker's made now from
    the traces as they stream (no trace is kept)."""
    stored = labels_of(SUITE, run_dir, judge, labels_dir)
    if stored is None:
        checker = CheckerLabeller(OfflineChecker())
        return (checker.label_now(trace) for trace in iter_latest_traces(run_dir))
    return (r for r in stored.values() if isinstance(r, FollowupLabelRecord))


def records_of(run_dir: Path, judge: str, labels_dir: Path | None = None) -> list[FollowupLabelRecord]:
    """One checker's records of a run (one labeller's only: :func:`iter_records`)."""
    records = list(iter_records(run_dir, judge, labels_dir))
    labeller_of(records, judge)
    return records


@dataclass(frozen=True)
class _ReportChunk:
    """What the report reads of a chunk of traces, packed where they were read (:func:`map_latest_batches`): their
    call heads, their cost rows and metric rows as columns, and how many replies the checker could not label."""

    heads: list[Any]
    costs: RowBatch
    responses: RowBatch
    errors: int

    @classmethod
    def of(cls, items: list[tuple[Any, dict[str, Any] | None, dict[str, Any] | bool | None]]) -> _ReportChunk:
        return cls(heads=[head for head, _, _ in items],
                   costs=row_batch([cost for _, cost, _ in items if cost is not None], shared_texts=True),
                   responses=row_batch([row for _, _, row in items if isinstance(row, dict)], shared_texts=True),
                   errors=sum(1 for _, _, row in items if row is False))


def report(run_dir: Path, options: ReportOptions) -> FollowupReport:
    judge = options.judge or SUITE.offline_labeller
    kind = checker_kind(judge)
    call_errors = CallErrorTally()  # filled in the same pass over the traces as the cost rows
    cost_keys = {"model": trace_model, "arm": trace_arm}
    costs_store = RowStore()

    stored = labels_of(SUITE, run_dir, judge, options.labels_dir)
    offline = judge == SUITE.offline_labeller
    checker = CheckerLabeller(OfflineChecker()) if offline else None

    def convert(trace: EpisodeTrace) -> tuple[Any, dict[str, Any] | None, dict[str, Any] | bool | None]:
        """A trace's call head, cost row and, for the offline checker, its metric row (its stored record's, else
        one made now; False: a judge error), in whichever process read the trace: only these small values
        come back."""
        if trace.infra_error:
            return call_head(trace), None, None
        response: dict[str, Any] | bool | None = None
        if checker is not None:
            record = stored.get(trace.run_key) if stored is not None else None
            if not isinstance(record, FollowupLabelRecord):
                record = checker.label_now(trace)
            labeller_of([record], judge)
            dumped = response_dump(record)
            response = False if dumped is None else dumped
        return call_head(trace), cost_row(trace, cost_keys), response

    errors = 0

    def finished() -> Iterator[RowBatch]:
        """One pass over the traces that count, a packed chunk at a time: the call errors, the costs, and the
        offline checker's rows."""
        nonlocal errors
        for chunk in map_latest_batches(run_dir, convert, _ReportChunk.of, include_failed=True):
            for head in chunk.heads:
                call_errors.add(head)
            costs_store.add_batch(chunk.costs)
            errors += chunk.errors
            yield chunk.responses

    if checker is not None:  # the offline checker: each trace's stored record, or one made now where none is
        frame = frame_of_dumps(finished())
        release_freed_memory()  # the tables are computed from what is in use, not on top of this pass's peak
    else:  # a stored judge's records, every one of them, as that judge stored them
        if stored is None:
            raise ValueError(f"no labels of judge {judge!r} in {run_dir}")
        frame, errors = response_frame((r for r in stored.values() if isinstance(r, FollowupLabelRecord)), judge)
        for _ in finished():
            pass
    out = options.files_dir or Path(run_dir) / "report"
    # The outcome figure needs only the frame: drawn on another core while the tables are computed.
    outcome = started_figure(outcome_figure(frame, judge, kind), out) if options.write_files and options.figure \
        else None
    with cancelled_on_error(outcome):  # a report that fails (no labelled run, say) stops the drawing
        costs = cost_frame_of(costs_store, cost_keys)
        cost = cost_table(costs, ("model", "arm"))
        players = sorted(set(frame["model"]))
        pairs = model_pairs(run_dir, options.compare, players, sorted(set(frame["arm"])), player_of=lambda e: e)
        built = build_followup_report(frame, errors, run_dir, judge, kind, n_boot=options.n_boot, pairs=pairs,
                                      cost=cost, profile=profile_of(run_dir), call_errors=call_errors.rows(),
                                      texts=texts_note(run_dir))
        if options.write_files:
            built.files = write_followup_files(built, frame, out, figure=options.figure, outcome=outcome)
    if options.paper_tables is not None:
        manifest = read_manifest(run_dir)
        outputs = followup_paper_tables(frame, load_setups(), dict(manifest.prompt_hashes) if manifest else {},
                                        built.headline, n_boot=options.n_boot, seed=options.seed)
        built.paper_tables = write_paper_tables(outputs, options.paper_tables, PAPER,
                                                stamp={"profile": built.profile, "checker": built.checker_kind})
    return built


def view(run_dir: Path, judge: str, labels_dir: Path | None = None) -> RunSource:
    """The runs for the viewer, with the report's checker first and every other stored checker after it."""
    primary = labels_of(SUITE, run_dir, judge, labels_dir)
    offline = CheckerLabeller(OfflineChecker())

    def stored(records: Mapping[str, LabelRecord]) -> RecordLookup:
        def lookup(trace: EpisodeTrace) -> FollowupLabelRecord | None:
            record = records.get(trace.run_key)
            return record if isinstance(record, FollowupLabelRecord) else None

        return lookup

    def computed(trace: EpisodeTrace) -> FollowupLabelRecord | None:
        return None if trace.infra_error else offline.label_now(trace)

    judges: list[tuple[str, RecordLookup]] = [(judge, computed if primary is None else stored(primary))]
    judges.extend((name, stored(records)) for name, records in stored_labels(SUITE, run_dir, labels_dir).items()
                  if name != judge)
    setups = load_setups()
    views = SetupViews(setups)

    def record(trace: EpisodeTrace) -> SiteRun:
        """The run as :func:`followup_runs` makes it, in whichever process read the trace."""
        return followup_run(trace, [(name, lookup(trace)) for name, lookup in judges], views)

    source = followup_source((), judges, setups)
    return replace(source, records=site_records(run_dir, record, source))


# --------------------------------------------------------------------------------- annotation
def _export(run_dir: Path, n: int, out: Path, seed: int, judge: str | None) -> int:
    if n < 1:
        raise ValueError("the sample size must be at least 1")
    chosen = validation.select_for_annotation(records_of(run_dir, judge or "rules"), n, seed)
    if not chosen:
        raise ValueError(f"{run_dir} holds no labelled response to annotate")
    validation.write_sheet(out, chosen)
    return len(chosen)


def _read_sheet(sheet: Path) -> tuple[list[BaseModel], int]:
    return list(validation.read_sheet(sheet)), 0


def _validate(human: Sequence[Any], run_dir: Path, judge: str) -> validation.ValidationReport:
    return validation.validate(list(human), records_of(run_dir, judge))


def _agreement(run_dir: Path, judge_a: str, judge_b: str, labels_dir: Path | None = None
               ) -> validation.CheckerAgreement:
    rows = validation.checker_agreement(records_of(run_dir, judge_a, labels_dir),
                                        records_of(run_dir, judge_b, labels_dir))
    return validation.CheckerAgreement(judge_a=judge_a, judge_b=judge_b, rows=rows)


def prompt_hashes(selection: FollowupSelection | None = None) -> dict[str, str]:
    """The follow-up data's digest (requests, setups, facts), for the manifest."""
    return {"followup_data": hash_tree(FOLLOWUP_DATA_DIR), "followup_setups_resource": SETUPS_RESOURCE}


def calls_per_episode(episode: FollowUpEpisode) -> int:
    return 1


def set_version(selection: FollowupSelection) -> str:
    return str(followup_data_version())


# --------------------------------------------------------------------------------- export and inspect
def _dataset_signals(run_dir: Path) -> Callable[[EpisodeTrace], BaseModel | None]:
    def signals(trace: EpisodeTrace) -> BaseModel | None:
        return None if trace.infra_error else turn_from_trace(trace)

    return signals


def _dataset_labels(run_dir: Path) -> Callable[[EpisodeTrace], LabelRecord | None]:
    labeller = CheckerLabeller(OfflineChecker())
    return lambda trace: None if trace.infra_error else labeller.label_now(trace)


def _dataset_sources(run_dir: Path, manifest: Any, counts: Mapping[str, int]) -> list[DataSource]:
    table = attribution_table(Path(FOLLOWUP_DATA_DIR) / "ATTRIBUTION.md")
    out = []
    for name in sorted(counts):
        origin, licence = table.get(name, ("not listed in the project's attribution", "unknown"))
        out.append(DataSource(name=name, rows=counts[name], origin=origin, licence=licence,
                              licence_id=licence_id(licence)))
    return out


DATASET = SuiteDataset(
    signals_model=FollowUpTurn, signals=_dataset_signals, arm=trace_arm, offline_labels=_dataset_labels,
    sources=_dataset_sources, source_factor="source",
    signals_description="The turn the checkers read, from the trace alone: the request, its setup and "
    "doability, the user's message, the reply, the turn's tool calls and, in follow-through mode, what became "
    "of what the turn left for later (null for a failed trace).",
)


def inspect_grade(episode: Any, trace: EpisodeTrace, record: LabelRecord) -> ScoredRun:
    """An inspect sample's grade: the outcome label, whether it is a failure or an over-refusal."""
    if not isinstance(record, FollowupLabelRecord):
        raise ValueError(f"the labels of {trace.run_key} are no follow-up checker record")
    result = record.result
    row = response_row(record)
    outcome = result.outcome.value if result.outcome is not None else None
    value: dict[str, str | int | float | bool | None] = {
        "outcome": outcome,
        "failure": result.outcome in FAILURE_LABELS if result.outcome is not None else None,
        "over_refusal": result.outcome is OutcomeLabel.OVER_REFUSAL if result.outcome is not None else None,
    }
    explanation = f"outcome {outcome} (rule: {result.rule})" if outcome else f"no label: {result.error}"
    signals = {"commitments": [c.model_dump(mode="json") for c in result.commitments],
               "response": result.response.model_dump(mode="json") if result.response else None}
    return ScoredRun(value=value, answer=outcome or "", explanation=explanation, signals=signals,
                     labels=record.model_dump(mode="json"),
                     rows=[row.model_dump(mode="json")] if row is not None else [])


def inspect_values(rows: list[dict[str, Any]], n_boot: int, seed: int = 0) -> dict[str, float]:
    """Failure rate beside over-refusal, empty-commitment and false-claim rates, deferral, incidence, and the
    outcome distribution over the rows, with intervals (the report's definitions)."""
    if not rows:
        return {}
    frame = to_frame([LabelledResponse.model_validate(row) for row in rows])
    out: dict[str, float] = {"responses": float(len(frame))}
    for name in HEADLINE_METRICS:
        record = rate_table(frame, name, by=(), n_boot=n_boot, seed=seed).iloc[0]
        with_interval(out, name, finite_or_none(record["estimate"]), finite_or_none(record["low"]),
                      finite_or_none(record["high"]))
    counts = frame["outcome"].astype(str).value_counts()
    for label in OutcomeLabel:
        out[f"share:{label.value}"] = float(counts.get(label.value, 0)) / len(frame)
    return out


SUITE: Suite[FollowupSelection, FollowUpEpisode, FollowupLabelRecord] = Suite(
    name=NAME,
    env_id=FOLLOWUP_ENV_ID,
    selection=FollowupSelection,
    select=select,
    make_env=make_env,
    label_record=FollowupLabelRecord,
    labeller=labeller,
    labeller_version=labeller_version,
    report=report,
    annotation=AnnotationKit(
        sheet_columns=validation.SHEET_COLUMNS, required_columns=validation.REQUIRED_COLUMNS,
        export=_export, read_sheet=_read_sheet,
        human_label=validation.FollowupHumanLabel, validate=_validate, agreement=_agreement,
    ),
    prompt_hashes=prompt_hashes,
    calls_per_episode=calls_per_episode,
    chat_agent=FollowUpChatAgent,
    # The paper's turn loop: at most five tool rounds, then one call without tools gives the reply.
    default_max_model_calls_per_turn=6,
    closing_call_without_tools=True,
    services=services,
    service_identity=service_identity,
    view=view,
    episode_set_version=set_version,
    default_agents=(CHAT_AGENT_NAME,),
    dataset=DATASET,
    inspect=InspectKit(grade=inspect_grade, values=inspect_values,
                       description="failure, over-refusal, empty-commitment and false-claim rates per epoch's runs",
                       cluster_factor=CLUSTER_COLUMN),
)
