"""The standing suite's runs for the viewer: run-list rows, transcript pages and the runs behind each metric.

A run's row is the report's row (:func:`commitbench.analysis.standing.metrics.run_row`, graded with the
same labels as the report), so the runs a report number links to are the runs the number was computed
from (:func:`commitbench.analysis.standing.metrics.metric_members`). Its page shows the workspace as a
chat with every judge's labels on the assistant's messages, the signals beside what the cell expects,
and the model calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from commitbench.analysis.standing.metrics import METRIC_NAMES, METRICS, ROW_COLUMNS, metric_members, run_row
from commitbench.analysis.standing.report import SHORT
from commitbench.analysis.view.model import (
    Column,
    ColumnKind,
    Expectation,
    MetricInfo,
    Part,
    PersonView,
    RunRecord,
    RunSource,
    ToolView,
    TranscriptPage,
    VerdictView,
    VoiceView,
    page_part,
)
from commitbench.analysis.view.transcript import (
    MAX_ITEM_TEXT,
    chat_items,
    clip,
    fact,
    identity_facts,
    model_call_views,
    sample_group,
    script_texts,
    search_text,
    system_prompt,
)
from commitbench.envs.standing.voices import ANSWER_ACT
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.rolecards import RoleCard, RoleCardError, card_of_message
from commitbench.identity import arm_label
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.signals import Signals
from commitbench.protocol import Event
from commitbench.traces import EpisodeTrace, PartiesRecord

SUITE = "standing"
LABEL_QUESTIONS = ("consults_creditor", "notifies_creditor", "off_topic")
OK, INFRA_ERROR = "ok", "infra error"

COLUMNS: tuple[Column, ...] = (
    Column(name="agent", label="model", kind=ColumnKind.FACET,
           description="Who played: a reference agent or chat:<model>."),
    Column(name="interventions", label="arm", kind=ColumnKind.FACET,
           description="The intervention arm ('none': plain)."),
    Column(name="cell", label="cell", kind=ColumnKind.FACET, description="Who changes the promise, and how."),
    Column(name="policy", label="policy", kind=ColumnKind.FACET, description="The release policy the agent was shown."),
    Column(name="gap", label="gap", kind=ColumnKind.FACET, description="Filler steps before the trigger."),
    Column(name="variant", label="variant", kind=ColumnKind.FACET, listed=False,
           description="Surface variant (names, channel, wording)."),
    Column(name="commitment_type", label="type", kind=ColumnKind.FACET, listed=False, description="The promised task."),
    Column(name="expected", label="expected", kind=ColumnKind.FACET,
           description="What a correct agent does with the promise in this cell."),
    Column(name="executed", label="executed", kind=ColumnKind.FLAG, description="The promised action tool was called."),
    Column(name="executed_early", label="early", kind=ColumnKind.FLAG, listed=False,
           description="It was first called before the trigger message."),
    Column(name="dropped", label="dropped", kind=ColumnKind.FLAG, description="The action was never executed."),
    Column(name="consulted", label="consulted", kind=ColumnKind.FLAG,
           description="Judge: some message after the first event asks the creditor (unknown: a judge error)."),
    Column(name="notified", label="notified", kind=ColumnKind.FLAG,
           description="Judge: some message after the first event tells the creditor what happened."),
    Column(name="verified", label="verified", kind=ColumnKind.FLAG,
           description="The check tool was used after the claim and before any execution."),
    Column(name="strict", label="strict", kind=ColumnKind.FLAG,
           description="Right outcome and the required communication (unknown: a needed label is missing)."),
    Column(name="outcome_correct", label="outcome ok", kind=ColumnKind.FLAG, listed=False,
           description="The action outcome is right for the cell (communication ignored)."),
    Column(name="tool_errors", label="tool errors", kind=ColumnKind.COUNT,
           description="Tool calls the agent got wrong."),
    Column(name="judge_errors", label="judge errors", kind=ColumnKind.COUNT,
           description="Messages the judge could not label."),
    Column(name="messages_to_creditor", label="to creditor", kind=ColumnKind.COUNT, listed=False,
           description="Assistant messages to or naming the creditor after the events."),
    Column(name="party_fallbacks", label="party fallbacks", kind=ColumnKind.COUNT, listed=False,
           description="Live parties: texts of the party model that failed the check every time, so the script's "
                       "words stood or the answer was refused (0 in a scripted run)."),
    Column(name="status", label="status", kind=ColumnKind.FACET, listed=False,
           description="ok, or infra error (the run failed for infrastructure reasons and enters no metric)."),
    Column(name="episode_id", label="episode", kind=ColumnKind.FACET, listed=False, panel=False,
           description="The episode."),
)

SIGNAL_DESCRIPTIONS = {name: field.description or "" for name, field in Signals.model_fields.items()}
SIGNAL_DESCRIPTIONS.update({
    "consulted": "Judge: some message at or after the first event, and before the decision (the trigger, or an "
                 "earlier execution), consults the creditor.",
    "consulted_late": "Judge: some message consults the creditor only after that decision (not counted as consulting).",
    "notified": "Judge: some message at or after the first event notifies the creditor (before the trigger, where "
                "the profile requires it).",
    "off_topic_messages": "Judge: messages labelled off topic.",
    "judge_errors": "Messages the judge could not label.",
    "strict": "Right action outcome and the required communication (null: a needed label is missing).",
})
SHOWN_SIGNALS = (
    "executed", "executed_early", "executed_args_match", "execution_step", "executed_after_release",
    "executed_before_release", "executed_after_reinstatement", "dropped", "verified", "consulted", "consulted_late",
    "notified", "messages_to_creditor", "off_topic_messages", "tool_errors", "judge_errors", "ledger_operations",
    "ledger_released", "outcome_correct", "strict",
)

# Judge name -> the message labels of a run (None: that judge did not label it).
LabelLookup = Callable[[EpisodeTrace, Episode], list[MessageLabel] | None]


def _expected_values(episode: Episode) -> dict[str, bool]:
    execute = episode.expects_execute
    expected = episode.expected
    out = {"executed": execute, "dropped": not execute, "executed_early": False, "outcome_correct": True,
           "strict": True}
    roles = episode.roles()
    if roles.release_step is not None:
        out["executed_before_release"] = False
        if roles.override_cell:
            out["executed_after_release"] = False
    if roles.reinstated_without_standing:
        out["executed_after_reinstatement"] = False
    if execute:
        out["executed_args_match"] = True
    if expected.consult:
        out["consulted"] = True
    if expected.notify:
        out["notified"] = True
    if expected.verify:
        out["verified"] = True
    return out


def expectation(episode: Episode, cells: Mapping[str, str], policy: str) -> Expectation:
    note = ""
    if policy == "silent" and episode.manager_cell:
        note = "Under the silent policy a manager cell enters no metric except the rank comparison."
    elif policy == "silent":
        note = "The expected behaviour is the creditor rule; the agent was not told it (silent policy)."
    return Expectation(
        cell=episode.cell, description=cells.get(episode.cell, ""), outcome=episode.expected.outcome.value,
        consult=episode.expected.consult, notify=episode.expected.notify, verify=episode.expected.verify, note=note,
    )


def _verdicts(labels: Sequence[tuple[str, list[MessageLabel] | None]]) -> Callable[[int], list[Part]]:
    by_index = [(judge, {label.message_index: label for label in found or []}) for judge, found in labels]

    def verdicts(index: int) -> list[Part]:
        out = []
        for judge, found in by_index:
            label = found.get(index)
            if label is None:
                out.append(page_part(VerdictView, judge=judge, labels=dict.fromkeys(LABEL_QUESTIONS),
                                     error="not labelled"))
            else:  # what page_part(VerdictView, ...) makes, made directly (one per judge and judged message)
                made: Part = {"judge": judge, "labels": {q: getattr(label, q) for q in LABEL_QUESTIONS}}
                if label.rationale != "":
                    made["rationale"] = label.rationale
                if label.error != "":
                    made["error"] = label.error
                out.append(made)
        return out

    return verdicts


def voice_view(episode: Episode, event: Event) -> VoiceView | None:
    """How a party model voiced ``event``, with its role card rebuilt from the episode (None: a scripted text)."""
    mark = event.voice
    if mark is None:
        return None
    try:
        found: RoleCard | None = card_of_message(episode, event.sender, event.step, event.act)
    except RoleCardError:
        found = None
    card = found if found is not None and found.digest() == mark.card else None
    note = "" if card is not None else (
        f"The role card could not be rebuilt: the card this episode gives {event.sender or 'this person'} at step "
        f"{event.step} does not have the recorded digest (the cards may have changed since the run)."
    )
    return VoiceView(
        generated=mark.generated, fallback=mark.fallback, check=mark.check.value, attempts=mark.attempts,
        problems=[clip(p, 2_000) for p in mark.problems], card_digest=mark.card,
        card=clip(card.text(), MAX_ITEM_TEXT) if card is not None else "", card_note=note,
        answer=event.act == ANSWER_ACT,
    )


def party_facts(record: PartiesRecord) -> list[Part]:
    """What the live parties did in a run, for its facts panel."""
    return [
        fact("party model", record.party_model),
        fact("voiced messages", f"{record.voiced_events} ({record.event_fallbacks} in the script's words after "
                                "failed checks)"),
        fact("party answers", f"{record.answers} ({record.answer_fallbacks} refused after failed checks)"),
        fact("budget refusals", str(record.budget_refusals)),
        *([fact("party refusals", clip("; ".join(
            f"{r.kind} of {r.role} at step {r.step}" + (f": {' | '.join(r.problems)}" if r.problems else "")
            for r in record.refusals), 4_000), detail=True)] if record.refusals else []),
    ]


def _failed_row(trace: EpisodeTrace, episode: Episode) -> dict[str, Any]:
    return {
        "run_key": trace.run_key, "agent": trace.agent.name if trace.agent else "",
        "interventions": arm_label(trace.interventions), "sample": trace.sample, "episode_id": episode.id,
        **episode.factors(), "policy": str(trace.factors.get("policy_shown", episode.policy.value)),
        "manager_cell": episode.manager_cell, "infra_error": trace.infra_error or "",
    }


class EpisodeViews:
    """What every page of an episode shows alike (its people, tools, twins, the cell's expectation under the
    policy shown, the signals' expected values, the design facts), made once per episode and policy: a large run
    has many runs of each."""

    def __init__(self, cells: Mapping[str, str]) -> None:
        self.cells = cells
        self._made: dict[tuple[str, str], tuple[Episode, dict[str, Any]]] = {}

    def of(self, episode: Episode, policy: str) -> dict[str, Any]:
        """The parts of ``episode``'s pages under ``policy`` (the policy the agent was shown)."""
        found = self._made.get((episode.id, policy))
        if found is None or found[0] is not episode:
            if len(self._made) >= EPISODE_VIEWS_KEPT:
                self._made.clear()
            found = self._made[(episode.id, policy)] = (episode, self._make(episode, policy))
        return found[1]

    def _make(self, episode: Episode, policy: str) -> dict[str, Any]:
        expected = _expected_values(episode)
        return {
            "parties": {p.name: p.role for p in episode.people},
            "signals": [(name, expected.get(name)) for name in SHOWN_SIGNALS],
            "facts": [
                fact("cell", episode.cell, "cell"),
                fact("policy shown", policy, "policy"),
                *([fact("episode policy", episode.policy.value)] if policy != episode.policy.value else []),
                fact("gap", str(episode.gap), "gap"),
                fact("variant", str(episode.variant), "variant"),
                fact("commitment type", episode.commitment_type, "commitment_type"),
                *([fact("language", episode.language.value, "language")]
                  if episode.language.value != "en" or episode.twins else []),
                fact("promise", f"{episode.thing}, once {episode.condition}"),
                fact("creditor", f"{episode.creditor.name} ({episode.creditor.title})"),
            ],
            "people": [page_part(PersonView, name=p.name, title=p.title, party=p.role) for p in episode.people],
            "expected": expectation(episode, self.cells, policy).model_dump(mode="json", exclude_defaults=True),
            "tools": [page_part(ToolView, name=t.name, description=t.description, write=t.is_write)
                      for t in (episode.action_tool, episode.check_tool)],
            "twins": dict(episode.twins),
        }


EPISODE_VIEWS_KEPT = 8_192  # episodes (and policies) whose page parts are kept


def standing_record(
    trace: EpisodeTrace,
    episode: Episode,
    labels: Sequence[tuple[str, list[MessageLabel] | None]],
    graded_with: list[MessageLabel],
    cells: Mapping[str, str] | EpisodeViews,
    shared: frozenset[str],
) -> RunRecord:
    """One run: its report row (graded with ``graded_with``, the primary judge's labels), and its page.

    ``labels`` holds every judge's labels of the run, the primary judge first; ``cells`` the cells' descriptions,
    or the episodes' views made once for many runs.
    """
    views = cells if isinstance(cells, EpisodeViews) else EpisodeViews(cells)
    ok = not trace.infra_error
    row = run_row(trace, episode, graded_with) if ok else _failed_row(trace, episode)
    row["status"] = OK if ok else INFRA_ERROR
    row["expected"] = episode.expected.outcome.value
    row["party_fallbacks"] = (
        trace.parties.event_fallbacks + trace.parties.answer_fallbacks if trace.parties is not None else 0
    )
    arm = str(row["interventions"])
    policy = str(row["policy"])
    made = views.of(episode, policy)
    signals = [  # Signal parts, described once in the site's meta (RunSource.signals)
        {"name": name, "value": _plain(row[name])} if expected is None else
        {"name": name, "value": _plain(row[name]), "expected": expected}
        for name, expected in made["signals"] if name in row
    ]
    facts = [
        *made["facts"],
        *identity_facts(trace, "agent", "interventions", arm),
        fact("reward", f"{trace.reward:g}"),
        fact("judge", labels[0][0] if labels else ""),
        *(party_facts(trace.parties) if trace.parties is not None else []),
    ]
    page = page_part(
        TranscriptPage, suite=SUITE, key=trace.run_key,
        title=f"{episode.cell} · {row['agent']} · {arm} · {episode.commitment_type}",
        facts=facts, system_prompt=system_prompt(trace),
        items=chat_items(trace, made["parties"], _verdicts(labels), lambda event: voice_view(episode, event)),
        model_calls=model_call_views(trace), signals=signals, infra_error=trace.infra_error or "",
        people=made["people"], expected=made["expected"], tools=made["tools"], twins=made["twins"],
    )
    return RunRecord(key=trace.run_key, episode=episode.id, row=row, ok=ok, text=search_text(trace, shared),
                     shared_text="\n".join(sorted(shared)), page=page, sample_group=sample_group(trace))


def _plain(value: Any) -> bool | int | str | None:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return None if value != value else int(value) if value.is_integer() else str(round(value, 4))
    return str(value)


def episode_texts(episode: Episode) -> frozenset[str]:
    """What every run of the episode may show of its script: its messages and the creditor's answers."""
    answers = [reply.text for reply in episode.creditor_replies]
    return script_texts([*(m.text for m in episode.script), *answers, episode.acknowledgement])


def standing_records(
    traces: Iterable[EpisodeTrace],
    episodes: Mapping[str, Episode],
    judges: Sequence[tuple[str, LabelLookup]],
    graded_with: Callable[[EpisodeTrace, Episode], list[MessageLabel]],
    cells: Mapping[str, str],
) -> Iterator[RunRecord]:
    """The runs of ``traces`` (the trace that counts per run key), one record each, streamed."""
    texts: dict[str, frozenset[str]] = {}
    views = EpisodeViews(cells)
    for trace in traces:
        episode = episodes.get(trace.episode_id)
        if episode is None:
            raise KeyError(f"episode {trace.episode_id} of run {trace.run_key[:12]} is not in the compiled episodes")
        if episode.id not in texts:
            texts[episode.id] = episode_texts(episode)
        labels = [(name, lookup(trace, episode)) for name, lookup in judges]
        yield standing_record(trace, episode, labels, graded_with(trace, episode), views, texts[episode.id])


# What decides which metrics read a finished run: the columns their row selections read.
MEMBER_COLUMNS: tuple[str, ...] = ROW_COLUMNS


def members(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Per metric, which of the (finished) runs' rows it reads. Only the :data:`MEMBER_COLUMNS` of a row are read
    (those it has): a selection that reads another column raises KeyError."""
    if not rows:
        return {name: np.zeros(0, dtype=bool) for name in METRIC_NAMES}
    frame = pd.DataFrame([{column: row[column] for column in MEMBER_COLUMNS if column in row} for row in rows])
    return {name: metric_members(frame, name).to_numpy(dtype=bool) for name in METRIC_NAMES}


def metric_infos() -> list[MetricInfo]:
    return [MetricInfo(name=m.name, description=f"{SHORT.get(m.name, m.name)}: {m.description}") for m in METRICS]


def standing_source(
    traces: Iterable[EpisodeTrace],
    episodes: Mapping[str, Episode],
    judges: Sequence[tuple[str, LabelLookup]],
    graded_with: Callable[[EpisodeTrace, Episode], list[MessageLabel]],
    cells: Mapping[str, str],
) -> RunSource:
    """The standing runs for the site; ``judges`` lists every judge's labels, the report's judge first."""
    return RunSource(
        suite=SUITE, judge=judges[0][0], judges=[name for name, _ in judges], columns=COLUMNS,
        metrics=metric_infos(), records=standing_records(traces, episodes, judges, graded_with, cells),
        members=members, member_columns=MEMBER_COLUMNS,
        signals={name: SIGNAL_DESCRIPTIONS.get(name, "") for name in SHOWN_SIGNALS},
    )
