"""The follow-up suite: single-turn follow-up requests in setups C0-C4, checked for empty commitments."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from pydantic import BaseModel

from commitbench.agents.followup.chat import FollowUpChatAgent
from commitbench.analysis.call_errors import run_call_errors
from commitbench.analysis.cost import cost_frame, cost_table
from commitbench.analysis.followup import validation
from commitbench.analysis.followup.report import (
    FollowupReport,
    build_followup_report,
    checker_kind,
    labeller_of,
    responses_from_records,
    write_followup_files,
)
from commitbench.analysis.view.followup import RecordLookup, followup_source
from commitbench.analysis.view.model import RunSource
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.episodes import FollowUpEpisode, FollowupSelection
from commitbench.episodes.followup.requests import followup_data_version
from commitbench.episodes.followup.setups import load_setups
from commitbench.judges.followup.labellers import (
    CheckerLabeller,
    FollowupLabelRecord,
    arm_name,
    labeller_version,
    make_checker,
    trace_model,
)
from commitbench.judges.followup.llm import turn_from_parts
from commitbench.judges.followup.rules import OfflineChecker, flags_reply
from commitbench.judges.followup.schemas import ResponseFormatStyle
from commitbench.judges.labelling import Labeller, LabelRecord
from commitbench.llm import ModelClient
from commitbench.oracles.followup.fixes import ReplyDraft
from commitbench.suites import AnnotationKit, ReportOptions, Suite, register_suite
from commitbench.suites.common import hash_tree, labels_of, model_pairs, run_traces, stored_labels
from commitbench.traces import EpisodeTrace, iter_latest_traces

NAME = "followup"
# Tool calls an episode may make before the environment ends it (the chat agent's own bound on tool
# rounds is its max_model_calls_per_turn).
MAX_TOOL_CALLS = 20


def select(selection: BaseModel) -> list[FollowUpEpisode]:
    assert isinstance(selection, FollowupSelection)
    return selection.select()


def make_env(episodes: Sequence[Any]) -> gym.Env[Any, Any]:
    return gym.make(FOLLOWUP_ENV_ID, episodes=episodes, max_tool_calls=MAX_TOOL_CALLS, disable_env_checker=True)


def offline_flagger(draft: ReplyDraft) -> bool:
    """The offline checker's verdict on a draft reply: True when it labels it a failure."""
    turn = turn_from_parts("draft", draft.factors, draft.user_message, draft.calls, draft.reply)
    return flags_reply(turn)


def services() -> Mapping[str, Any]:
    return {"flagger": offline_flagger}


def labeller(
    kind: str, client: ModelClient | None = None, style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    max_attempts: int = 3, run_dir: Path | None = None,
) -> Labeller[LabelRecord]:
    """The offline checker (``rules``) or the LLM checker (``llm``, on ``client``)."""
    return CheckerLabeller(make_checker(kind, client, style, max_attempts))


def records_of(run_dir: Path, judge: str) -> list[FollowupLabelRecord]:
    """One checker's records of a run: stored ones (one labeller's only), or the offline checker's computed now."""
    stored = labels_of(SUITE, run_dir, judge)
    if stored is None:
        checker = CheckerLabeller(OfflineChecker())
        return [checker.label_now(t) for t in run_traces(run_dir) if not t.infra_error]
    records = [r for r in stored.values() if isinstance(r, FollowupLabelRecord)]
    labeller_of(records, judge)
    return records


def report(run_dir: Path, options: ReportOptions) -> FollowupReport:
    if options.leave_out_types:
        raise ValueError("--leave-out-types leaves standing commitment types out; a follow-up run has none")
    judge = options.judge or SUITE.offline_labeller
    records = records_of(run_dir, judge)
    rows, errors = responses_from_records(records)
    kind = checker_kind(labeller_of(records, judge))
    traces = iter_latest_traces(run_dir)
    costs = cost_frame(traces, {"model": trace_model, "arm": lambda t: arm_name(t.interventions)})
    cost = cost_table(costs, ("model", "arm"))
    players = sorted({r.model for r in rows})
    pairs = model_pairs(run_dir, options.compare, players, sorted({r.arm for r in rows}), player_of=lambda e: e)
    built = build_followup_report(rows, errors, run_dir, judge, kind, n_boot=options.n_boot, pairs=pairs, cost=cost,
                                  call_errors=run_call_errors(run_dir))
    if options.write_files:
        built.files = write_followup_files(built, rows, Path(run_dir) / "report", figure=options.figure)
    return built


def view(run_dir: Path, judge: str) -> RunSource:
    """The runs for the viewer, with the report's checker first and every other stored checker after it."""
    primary = labels_of(SUITE, run_dir, judge)
    offline = CheckerLabeller(OfflineChecker())

    def stored(records: Mapping[str, LabelRecord]) -> RecordLookup:
        def lookup(trace: EpisodeTrace) -> FollowupLabelRecord | None:
            record = records.get(trace.run_key)
            return record if isinstance(record, FollowupLabelRecord) else None

        return lookup

    def computed(trace: EpisodeTrace) -> FollowupLabelRecord | None:
        return None if trace.infra_error else offline.label_now(trace)

    judges: list[tuple[str, RecordLookup]] = [(judge, computed if primary is None else stored(primary))]
    judges.extend((name, stored(records)) for name, records in stored_labels(SUITE, run_dir).items() if name != judge)
    return followup_source(iter_latest_traces(run_dir, include_failed=True), judges, load_setups())


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


def _agreement(run_dir: Path, judge_a: str, judge_b: str) -> validation.CheckerAgreement:
    rows = validation.checker_agreement(records_of(run_dir, judge_a), records_of(run_dir, judge_b))
    return validation.CheckerAgreement(judge_a=judge_a, judge_b=judge_b, rows=rows)


def prompt_hashes(selection: BaseModel | None = None) -> dict[str, str]:
    from commitbench.episodes.followup.setups import SETUPS_RESOURCE
    from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR

    root = Path(DEFAULT_DATA_DIR).parent / "followup"
    return {"followup_data": hash_tree(root), "followup_setups_resource": SETUPS_RESOURCE}


def calls_per_episode(episode: Any) -> int:
    return 1


SUITE = Suite(
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
    default_max_model_calls_per_turn=6,
    services=services,
    view=view,
    episode_set_version=lambda selection: str(followup_data_version()),
)
register_suite(SUITE)
