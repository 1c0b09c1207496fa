"""The standing suite: scripted workplace chats in which people with and without standing change a promise."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from commitbench.agents.chat import ChatAgent
from commitbench.agents.local_model import DEFAULT_ALIAS
from commitbench.analysis.call_errors import CallErrorTally
from commitbench.analysis.paper_tables import write_paper_tables
from commitbench.analysis.standing import annotation
from commitbench.analysis.standing.metrics import CLUSTER_COLUMN, compute_metrics, run_row
from commitbench.analysis.standing.paper import PAPER, standing_paper_tables
from commitbench.analysis.standing.report import (
    StandingReport,
    build_standing_report,
    chosen_baseline,
    heatmap_figure,
    write_standing_files,
)
from commitbench.analysis.standing.results import load_rows, message_labels
from commitbench.analysis.standing.tables import cell_table
from commitbench.analysis.tables import cancelled_on_error, started_figure
from commitbench.analysis.view.model import RunRecord, RunSource
from commitbench.analysis.view.standing import (
    EpisodeViews,
    LabelLookup,
    episode_texts,
    standing_record,
    standing_source,
)
from commitbench.dataversion import hash_tree
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import episodes_of_profiles, load_episodes
from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.loader import languages_of, load_spec
from commitbench.episodes.standing.selection import StandingSelection
from commitbench.episodes.standing.spec import (
    DEFAULT_DATA_DIR,
    LANGUAGES_DIR,
    SPLITS_DIR,
    Language,
    episode_set_version,
    read_version,
    split_part,
)
from commitbench.judges.labelling import Labeller, LabelRecord, pin_judge_settings
from commitbench.judges.standing.labellers import LLMLabeller, RulesLabeller, StandingLabelRecord, labeller_version
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.llm import LLMJudge
from commitbench.judges.standing.rules import RuleJudge
from commitbench.judges.standing.signals import Signals, compute_signals
from commitbench.judges.stored import Projected
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle
from commitbench.oracles.standing.parties import PARTIES_SERVICE, PARTY_PROMPT_HASH, PartyEngine
from commitbench.rundir import read_manifest
from commitbench.suites import AnnotationKit, JudgeSpec, PlayServices, ReportOptions, Suite
from commitbench.suites.common import labels_of, model_pairs, run_traces, site_records, stored_labels, texts_note
from commitbench.suites.kits import (
    DataSource,
    InspectKit,
    ScoredRun,
    SuiteDataset,
    finite_or_none,
    json_row,
    trace_arm_label,
    with_interval,
)
from commitbench.textslots import SuppliedTexts
from commitbench.traces import EpisodeTrace

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

NAME = "standing"


def episodes_by_id(selection: StandingSelection | None = None) -> dict[str, Episode]:
    """The episodes a selection's settings compile to (its data directory, its profile), by id; with no
    selection, every episode of the shipped data under both profiles."""
    if selection is None:
        return episodes_of_profiles(DEFAULT_DATA_DIR)
    data = selection.data or DEFAULT_DATA_DIR
    overlay = split_part(selection.split)  # a train filter's episodes are the train overlay's
    return {e.id: e for e in load_episodes(data, selection.settings(), languages_of(data, overlay), split=overlay)}


def _selection_of(run_dir: Path | None) -> StandingSelection | None:
    manifest = read_manifest(run_dir) if run_dir is not None else None
    if manifest is None:
        return None
    return StandingSelection.model_validate(manifest.config.get("episodes") or {})


def profile_of(run_dir: Path | None) -> str:
    """The run's profile, with any option set apart from it ('unknown' for a directory without a manifest)."""
    selection = _selection_of(run_dir)
    return selection.profile_label() if selection is not None else "unknown (no manifest)"


def episodes_of_run(run_dir: Path | None) -> dict[str, Episode]:
    """The episodes a run directory was played on (its filter's data directory and settings; without a
    manifest, the shipped episodes of both profiles)."""
    return episodes_by_id(_selection_of(run_dir))


def select(selection: StandingSelection) -> list[Episode]:
    return selection.select(load_episodes(selection.data or DEFAULT_DATA_DIR, selection.settings(),
                                          selection.languages(), split=split_part(selection.split)))


def set_version(selection: StandingSelection) -> str:
    return episode_set_version(selection.data or DEFAULT_DATA_DIR, selection.languages(), selection.split)


def data_overlays(selection: StandingSelection) -> list[tuple[str, str]]:
    """The overlays a filter plays, with their own versions: its language folders (English is the directory
    itself) and the split overlay of a train filter (splits/train)."""
    root = Path(selection.data or DEFAULT_DATA_DIR)
    overlays = [(f"{LANGUAGES_DIR}/{lang.value}", read_version(root / LANGUAGES_DIR / lang.value))
                for lang in selection.languages() if lang is not Language.EN]
    overlay = split_part(selection.split)
    if overlay is not None:
        overlays.append((f"{SPLITS_DIR}/{overlay.value}", read_version(root / SPLITS_DIR / overlay.value)))
    return overlays


def make_env(episodes: Sequence[Episode], texts: SuppliedTexts | None = None) -> gym.Env[Any, Any]:
    return gym.make(STANDING_ENV_ID, episodes=episodes, texts=texts, disable_env_checker=True)


def services(play: PlayServices) -> Mapping[str, Any]:
    """The live parties' engine: the party model, checked by the run's judge (none without both)."""
    if play.party is None or play.judge is None:
        return {}
    style = play.judge_style or ResponseFormatStyle.JSON_SCHEMA
    return {PARTIES_SERVICE: PartyEngine(play.party, play.judge, budget=play.party_budget, judge_style=style)}


def service_identity(name: str, judge: JudgeSpec) -> dict[str, Any]:
    """The live parties' identity under the run's judge: the check's model and the cards' and prompts' version
    (the planner adds the party model and the budget, which the config holds)."""
    if name != PARTIES_SERVICE:
        raise ValueError(f"the standing suite has no service {name!r}")
    model = judge.model
    if judge.kind != "llm" or model is None:
        raise ValueError("live parties need judge.kind: llm, whose model checks the party model's texts")
    settings = pin_judge_settings(model.model_settings(local_alias=DEFAULT_ALIAS))
    return {"check": settings.identity(), "response_format": judge.response_format, "prompts": PARTY_PROMPT_HASH}


def labeller(
    kind: str, client: ModelClient | None = None, style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, run_dir: Path | None = None, fresh_retries: bool = False,
) -> Labeller[StandingLabelRecord]:
    """The rule judge (``rules``) or the LLM judge (``llm``, on ``client``), over the run's episodes
    (``fresh_retries``: its retries never replay an unusable reply the cache holds)."""
    if kind == "rules":
        return RulesLabeller(episodes_of_run(run_dir))
    if kind == "llm":
        if client is None:
            raise ValueError("the LLM judge needs a model")
        judge = LLMJudge(client, max_attempts=max_attempts, style=style, fresh_retries=fresh_retries)
        return LLMLabeller(judge, episodes_of_run(run_dir))
    raise ValueError(f"unknown judge {kind!r} for the standing suite (rules or llm)")


def _message_labels(
    run_dir: Path, judge: str, labels_dir: Path | None = None
) -> Mapping[str, list[MessageLabel]] | None:
    """The stored labels of ``judge`` by run key, each record read when its run asks for it (None: the rule
    judge's, made now)."""
    records = labels_of(SUITE, run_dir, judge, labels_dir)
    if records is None:
        return None
    return Projected(records, _labels_of)


def _labels_of(record: LabelRecord) -> list[MessageLabel]:
    if not isinstance(record, StandingLabelRecord):
        raise TypeError(f"run {record.run_key}: a standing labels record was expected, not a {type(record).__name__}")
    return record.labels


class StandingReportOptions(BaseModel):
    """The standing suite's own report options (flags of 'commitbench report')."""

    model_config = ConfigDict(extra="forbid")

    leave_out_types: list[str] | None = Field(
        default=None,
        description="standing: commitment types to leave out of every table (post_announcement, as the paper's "
        "robustness table does: under the paper profile its request lacks the text to post)",
    )


def report(run_dir: Path, options: ReportOptions) -> StandingReport:
    judge = options.judge or "rules"
    own = StandingReportOptions.model_validate(options.suite_options)
    call_errors = CallErrorTally()  # filled in the same pass over the traces as the rows
    labels = _message_labels(run_dir, judge, options.labels_dir)
    rows = load_rows(run_dir, labels=labels, judge=judge, episodes=episodes_of_run(run_dir),
                     each_trace=call_errors.add)
    profile = profile_of(run_dir)
    if own.leave_out_types and not rows.empty:
        unknown = sorted(set(own.leave_out_types) - set(rows["commitment_type"]))
        if unknown:
            raise ValueError(f"--leave-out-types: {', '.join(unknown)} is not a commitment type of this run "
                             f"(its types: {', '.join(sorted(set(rows['commitment_type'])))})")
        rows = rows[~rows["commitment_type"].isin(own.leave_out_types)]
        profile += f"; without {', '.join(sorted(own.leave_out_types))}"
    players = sorted(set(rows["agent"])) if not rows.empty else []
    arms = sorted(set(rows["interventions"])) if not rows.empty else []
    pairs = model_pairs(run_dir, options.compare, players, arms)
    chosen_baseline(arms, options.baseline)  # a refused baseline stops the report before a figure is started
    out = options.files_dir or Path(run_dir) / "report"
    # The heatmap needs only the cell table: drawn on another core while the other tables are computed.
    by_cell = cell_table(rows, n_boot=options.n_boot, seed=options.seed) if not rows.empty else None
    heatmap = heatmap_figure(by_cell, judge) if by_cell is not None and options.write_files and options.figure \
        else None
    started = started_figure(heatmap, out) if heatmap is not None else None
    with cancelled_on_error(started):  # a report that fails after this stops the drawing
        built = build_standing_report(rows, run_dir, judge, n_boot=options.n_boot, seed=options.seed,
                                      baseline=options.baseline, pairs=pairs, profile=profile,
                                      call_errors=call_errors.rows(), texts=texts_note(run_dir), by_cell=by_cell)
        if options.write_files:
            built.files = write_standing_files(built, out, figure=options.figure, heatmap=started)
    if options.paper_tables is not None:
        expected = {e.cell: e.expected for e in episodes_of_run(run_dir).values()}
        outputs = standing_paper_tables(rows, built, expected, n_boot=options.n_boot, seed=options.seed)
        built.paper_tables = write_paper_tables(outputs, options.paper_tables, PAPER,
                                                stamp={"profile": profile, "judge": judge})
    return built


def view(run_dir: Path, judge: str, labels_dir: Path | None = None) -> RunSource:
    """The runs for the viewer, graded as the report grades them; every stored judge's labels shown."""
    primary = _message_labels(run_dir, judge, labels_dir)
    judge_rules = RuleJudge()
    last: list[tuple[EpisodeTrace, list[MessageLabel]]] = []

    def rules(trace: EpisodeTrace, episode: Episode) -> list[MessageLabel]:
        """The rule judge's labels of a trace, made once though both the grade and the page ask for them."""
        if not last or last[0][0] is not trace:
            last[:] = [(trace, judge_rules.label(trace, episode))]
        return last[0][1]

    read: list[tuple[EpisodeTrace, list[MessageLabel] | None]] = []

    def primary_of(trace: EpisodeTrace) -> list[MessageLabel] | None:
        """The primary judge's stored labels of a trace, read once though both the grade and the page ask."""
        assert primary is not None
        if not read or read[0][0] is not trace:
            read[:] = [(trace, primary.get(trace.run_key))]
        return read[0][1]

    def graded_with(trace: EpisodeTrace, episode: Episode) -> list[MessageLabel]:
        if primary is None:
            return rules(trace, episode)
        return message_labels(trace, episode, {trace.run_key: found} if (found := primary_of(trace)) is not None
                              else {}, judge)

    def stored(records: Mapping[str, LabelRecord]) -> LabelLookup:
        def lookup(trace: EpisodeTrace, episode: Episode) -> list[MessageLabel] | None:
            record = records.get(trace.run_key)
            return record.labels if isinstance(record, StandingLabelRecord) else None

        return lookup

    def primary_lookup(trace: EpisodeTrace, episode: Episode) -> list[MessageLabel] | None:
        if primary is None:
            return rules(trace, episode)
        return primary_of(trace)

    judges: list[tuple[str, LabelLookup]] = [(judge, primary_lookup)]
    judges.extend((name, stored(records)) for name, records in stored_labels(SUITE, run_dir, labels_dir).items()
                  if name != judge)
    selection = _selection_of(run_dir)
    data = selection.data if selection is not None else None
    cells = {cell.id: cell.description for cell in load_spec(data or DEFAULT_DATA_DIR).cells}
    episodes = episodes_by_id(selection)
    texts: dict[str, frozenset[str]] = {}
    views = EpisodeViews(cells)

    def record(trace: EpisodeTrace) -> RunRecord:
        """The run's record as :func:`standing_records` makes it, in whichever process read the trace."""
        episode = episodes.get(trace.episode_id)
        if episode is None:
            raise KeyError(f"episode {trace.episode_id} of run {trace.run_key[:12]} is not in the compiled episodes")
        if episode.id not in texts:
            texts[episode.id] = episode_texts(episode)
        labels = [(name, lookup(trace, episode)) for name, lookup in judges]
        return standing_record(trace, episode, labels, graded_with(trace, episode), views, texts[episode.id])

    source = standing_source((), episodes, judges, graded_with, cells)
    return replace(source, records=site_records(run_dir, record, source))


# --------------------------------------------------------------------------------- annotation
def _export(run_dir: Path, n: int, out: Path, seed: int, judge: str | None) -> int:
    return annotation.export_sheet(run_traces(run_dir), episodes_of_run(run_dir), n, out, seed=seed)


def _read_sheet(sheet: Path) -> tuple[list[BaseModel], int]:
    labels, blank = annotation.read_sheet(sheet)
    return list(labels), blank


def _all_labels(run_dir: Path, judge: str, labels_dir: Path | None = None) -> Mapping[str, list[MessageLabel]]:
    labels = _message_labels(run_dir, judge, labels_dir)
    if labels is None:  # the rule judge, computed now
        rules = RulesLabeller(episodes_of_run(run_dir))
        labels = {t.run_key: rules.label_now(t).labels for t in run_traces(run_dir)}
    return labels


def _validate(human: Sequence[Any], run_dir: Path, judge: str) -> annotation.HumanAgreement:
    traces = {t.run_key: t for t in run_traces(run_dir)}
    return annotation.judge_agreement(list(human), traces, _all_labels(run_dir, judge), judge)


def _agreement(run_dir: Path, judge_a: str, judge_b: str, labels_dir: Path | None = None
               ) -> annotation.JudgesAgreement:
    return annotation.judges_agreement(
        run_traces(run_dir), _all_labels(run_dir, judge_a, labels_dir), _all_labels(run_dir, judge_b, labels_dir),
        judge_a, judge_b,
    )


def prompt_hashes(selection: StandingSelection) -> dict[str, str]:
    return {"standing_data": hash_tree(Path(selection.data or DEFAULT_DATA_DIR))}


def calls_per_episode(episode: Episode) -> int:
    """Turns of the episode: each opens with at least one model call."""
    return sum(1 for m in episode.script if m.act not in (ScriptAct.REQUEST, ScriptAct.PROMISE))


def shorthand_episodes(given: dict[str, Any]) -> dict[str, Any]:
    """``commitbench run standing`` plays the test split unless a split or commitment types are named."""
    if given.get("split") is None and not given.get("types"):
        return {**given, "split": "test"}
    return given


# --------------------------------------------------------------------------------- export and inspect
def _dataset_signals(run_dir: Path) -> Callable[[EpisodeTrace], BaseModel | None]:
    episodes = episodes_of_run(run_dir)

    def signals(trace: EpisodeTrace) -> BaseModel | None:
        episode = episodes.get(trace.episode_id)
        return None if trace.infra_error or episode is None else compute_signals(trace, episode)

    return signals


def _dataset_labels(run_dir: Path) -> Callable[[EpisodeTrace], LabelRecord | None]:
    labeller = RulesLabeller(episodes_of_run(run_dir))
    return lambda trace: None if trace.infra_error else labeller.label_now(trace)


def _dataset_sources(run_dir: Path, manifest: Any, counts: Mapping[str, int]) -> list[DataSource]:
    rows = sum(counts.values())
    data = (manifest.config.get("episodes") or {}).get("data")
    if data and Path(data).resolve() != Path(DEFAULT_DATA_DIR).resolve():
        return [DataSource(name="own-data", rows=rows, origin=f"episodes compiled from the data directory {data}, "
                           "not the one commitbench ships", licence="as its authors state", licence_id="other")]
    return [DataSource(name="commitbench", rows=rows, licence="Apache-2.0", licence_id="apache-2.0",
                       origin="scripted workplace chats written for this project (episodes/data/standing); no "
                       "outside data")]


DATASET = SuiteDataset(
    signals_model=Signals, signals=_dataset_signals, arm=trace_arm_label, offline_labels=_dataset_labels,
    sources=_dataset_sources,
    signals_description="The run's signals, read off the trace alone: whether and when the promised action was "
    "executed (early, after a release, after a reinstatement), dropped or verified, and whether the outcome is "
    "right for the cell (null for a failed trace).",
)


def inspect_grade(episode: Any, trace: EpisodeTrace, record: LabelRecord) -> ScoredRun:
    """An inspect sample's grade: the signals, the judge's aggregates and the strict grade of the run."""
    if not isinstance(episode, Episode) or not isinstance(record, StandingLabelRecord):
        raise ValueError(f"episode {trace.episode_id} is no standing episode of the task, or its labels no "
                         "standing labels")
    signals = compute_signals(trace, episode)
    row = run_row(trace, episode, record.labels)
    value: dict[str, str | int | float | bool | None] = {
        "executed": signals.executed, "dropped": signals.dropped, "verified": signals.verified,
        "consulted": row["consulted"], "notified": row["notified"], "strict": row["strict"],
    }
    explanation = (f"cell {row.get('cell', '')}: executed={signals.executed}, dropped={signals.dropped}, "
                   f"consulted={row['consulted']}, notified={row['notified']}, strict={row['strict']}")
    return ScoredRun(value=value, answer="executed" if signals.executed else "dropped", explanation=explanation,
                     signals=signals.model_dump(mode="json"), labels=record.model_dump(mode="json"),
                     rows=[json_row(row)])


def inspect_values(rows: list[dict[str, Any]], n_boot: int, seed: int = 0) -> dict[str, float]:
    """The headline metrics over the rows (every metric a row qualifies for), with intervals: override,
    premature execution, net unauthorized release, reinstatement obedience, consultation after relays,
    verification after claims, strict accuracy, ... (the report's definitions); ``<metric>_excluded``, where
    some are, counts the runs a metric leaves out because their grade needs a label the judge could not give,
    as the report's 'excl.' does."""
    if not rows:
        return {}
    frame = pd.DataFrame(rows)
    frame["agent"] = "all"  # one model per task: pool every row into one group
    out: dict[str, float] = {"runs": float(len(frame))}
    for value in compute_metrics(frame, group_by=("agent",), n_boot=n_boot, seed=seed):
        with_interval(out, value.metric, finite_or_none(value.estimate), finite_or_none(value.low),
                      finite_or_none(value.high))
        if value.excluded:  # runs the metric leaves out because their grade needs a label the judge did not give
            out[f"{value.metric}_excluded"] = float(value.excluded)
    return out


SUITE: Suite[StandingSelection, Episode, StandingLabelRecord] = Suite(
    name=NAME,
    env_id=STANDING_ENV_ID,
    selection=StandingSelection,
    select=select,
    make_env=make_env,
    label_record=StandingLabelRecord,
    labeller=labeller,
    labeller_version=labeller_version,
    report=report,
    annotation=AnnotationKit(
        sheet_columns=annotation.SHEET_COLUMNS, required_columns=annotation.REQUIRED_COLUMNS, export=_export,
        read_sheet=_read_sheet,
        human_label=annotation.StandingHumanLabel, validate=_validate, agreement=_agreement,
    ),
    prompt_hashes=prompt_hashes,
    calls_per_episode=calls_per_episode,
    chat_agent=ChatAgent,
    default_max_model_calls_per_turn=10,
    episode_set_version=set_version,
    data_directory=lambda selection: Path(selection.data or DEFAULT_DATA_DIR),
    data_overlays=data_overlays,
    view=view,
    shorthand_episodes=shorthand_episodes,
    dataset=DATASET,
    inspect=InspectKit(grade=inspect_grade, values=inspect_values,
                       description="override, net unauthorized release, strict accuracy, ... per epoch's runs",
                       cluster_factor=CLUSTER_COLUMN),
    report_options=StandingReportOptions,
    services=services,
    service_identity=service_identity,
)
