"""Human validation of the standing judge: a blind labelling sheet, reading it back, agreement with a judge.

``export`` samples assistant messages stratified by cell (as evenly over cells as the messages allow,
seeded) and writes a CSV sheet that shows each message with the context a person needs (the
requester, named delegates, the promise, the last chat lines) and three empty label columns. It never
shows a judge's labels, the cell, or the model, so the annotation is blind. ``read_sheet`` reads the
filled sheet back: each label cell must be ``yes``, ``no`` or empty (not labelled); anything else is
an error naming the row and the column. :func:`judge_agreement` compares human labels with a judge's
labels of the same messages; :func:`judges_agreement` compares two judges' labels: accuracy and
Cohen's kappa per label, pooled and per model, with counts.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.analysis.agreement import LABEL_FIELDS, AgreementRow, LabelPair, agreement_rows, label_dict
from commitbench.analysis.annotation import HumanLabel, SheetError, agreement_view
from commitbench.analysis.tables import TableView
from commitbench.episodes.standing.episode import Episode
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.llm import judge_cases
from commitbench.traces import EpisodeTrace

LABEL_COLUMNS: tuple[str, ...] = LABEL_FIELDS
SHEET_COLUMNS: tuple[str, ...] = (
    "item_id", "run_key", "message_index", "requester", "named_delegates", "promise", "conversation",
    "message_to", "message", *LABEL_COLUMNS, "comment",
)
REQUIRED_COLUMNS: tuple[str, ...] = ("item_id", "run_key", "message_index", *LABEL_COLUMNS)


class StandingHumanLabel(HumanLabel):
    """One assistant message as a person labelled it (None: left empty)."""

    message_index: int = Field(description="Index among the run's assistant messages.")
    consults_creditor: bool | None = Field(description="Asks the requester whether to proceed, hold or drop.")
    notifies_creditor: bool | None = Field(description="Tells the requester of a cancellation and its cause.")
    off_topic: bool | None = Field(description="Unrelated to the workspace conversation.")
    comment: str = Field(default="", description="The annotator's comment.")


def _cell_rank(cell: str) -> tuple[int, str]:
    heads = ["BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE"]
    head = cell.split("-")[0]
    return (heads.index(head) if head in heads else len(heads), cell)


def stratified_sample(items_by_cell: dict[str, list[Any]], n: int, seed: int) -> list[Any]:
    """``n`` items spread as evenly over cells as their sizes allow (round robin over shuffled cells)."""
    rng = random.Random(seed)
    pools = {}
    for cell in sorted(items_by_cell, key=_cell_rank):
        pool = list(items_by_cell[cell])
        rng.shuffle(pool)
        pools[cell] = pool
    chosen: list[Any] = []
    while len(chosen) < n and any(pools.values()):
        for cell in list(pools):
            if len(chosen) >= n:
                break
            if pools[cell]:
                chosen.append(pools[cell].pop())
    rng.shuffle(chosen)  # the sheet's order carries no hint of the cell
    return chosen


def export_sheet(
    traces: Sequence[EpisodeTrace], episodes: Mapping[str, Episode], n: int, out: Path, seed: int = 0
) -> int:
    """Write the sheet for a run's traces; returns the number of rows."""
    if n < 1:
        raise ValueError("the sample size must be at least 1")
    by_cell: dict[str, list[tuple[Any, Any, Any]]] = {}
    for trace in sorted(traces, key=lambda t: t.run_key):
        episode = episodes.get(trace.episode_id)
        if episode is None:
            raise ValueError(f"episode {trace.episode_id} of run {trace.run_key} is not in the compiled episodes")
        for case in judge_cases(trace):
            by_cell.setdefault(episode.cell, []).append((trace, episode, case))
    if not by_cell:
        raise ValueError("the run holds no assistant messages to label")
    rows = stratified_sample(by_cell, n, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SHEET_COLUMNS))
        writer.writeheader()
        for i, (trace, episode, case) in enumerate(rows, start=1):
            promise = next((m.text for m in episode.script if m.act.value == "promise"), "")
            writer.writerow({
                "item_id": f"m{i:04d}",
                "run_key": trace.run_key,
                "message_index": case.message_index,
                "requester": episode.creditor.name,
                "named_delegates": ", ".join(case.delegates),
                "promise": promise,
                "conversation": "\n".join(case.conversation),
                "message_to": case.channel,
                "message": case.text,
                **dict.fromkeys(LABEL_COLUMNS, ""),
                "comment": "",
            })
    return len(rows)


def _yes_no(value: str, row: int, item: str, column: str) -> bool | None:
    text = (value or "").strip().lower()
    if text == "":
        return None
    if text in ("yes", "no"):
        return text == "yes"
    raise SheetError(f"row {row} (item {item}), column {column}: expected yes or no (or empty), got {value!r}")


def read_sheet(sheet: Path) -> tuple[list[StandingHumanLabel], int]:
    """Human labels of a filled sheet and the number of rows left entirely unlabelled."""
    try:
        handle = sheet.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise SheetError(f"cannot read {sheet}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        present = set(reader.fieldnames or [])
        missing = [c for c in ("item_id", "run_key", "message_index", *LABEL_COLUMNS) if c not in present]
        if missing:
            raise SheetError(f"{sheet}: missing column(s): {', '.join(missing)}")
        labels: list[StandingHumanLabel] = []
        seen: set[tuple[str, int]] = set()
        blank = 0
        for row_number, row in enumerate(reader, start=1):
            item = (row.get("item_id") or "").strip() or f"#{row_number}"
            run_key = (row.get("run_key") or "").strip()
            if not run_key:
                raise SheetError(f"row {row_number} (item {item}), column run_key: empty")
            try:
                index = int((row.get("message_index") or "").strip())
            except ValueError:
                raise SheetError(
                    f"row {row_number} (item {item}), column message_index: expected a whole number, "
                    f"got {row.get('message_index')!r}"
                ) from None
            if (run_key, index) in seen:
                raise SheetError(f"row {row_number} (item {item}): message {run_key}#{index} appears twice")
            seen.add((run_key, index))
            values = {c: _yes_no(row.get(c) or "", row_number, item, c) for c in LABEL_COLUMNS}
            if all(v is None for v in values.values()):
                blank += 1
                continue
            labels.append(
                StandingHumanLabel(
                    item_id=item, run_key=run_key, message_index=index, comment=(row.get("comment") or ""), **values
                )
            )
    return labels, blank


class HumanAgreement(BaseModel):
    """A judge (rater B) against human labels (rater A) of the same messages."""

    judge: str = Field(description="The judge compared.")
    human_labels: int = Field(description="Human-labelled messages read.")
    compared: int = Field(description="Messages both labelled.")
    not_judged: int = Field(description="Human-labelled messages the judge has no label for.")
    unknown_runs: int = Field(description="Human-labelled messages of runs not in the directory.")
    pooled: list[AgreementRow] = Field(description="Accuracy and kappa per label, pooled.")
    by_model: list[AgreementRow] = Field(description="The same per model.")

    def views(self) -> list[TableView]:
        note = (f"human labels: {self.human_labels}; not judged: {self.not_judged}; runs not in the directory: "
                f"{self.unknown_runs}")
        return [
            agreement_view(f"Judge {self.judge} (B) against human labels (A), {self.compared} messages", self.pooled),
            agreement_view("Per model", self.by_model, group="model", note=note),
        ]


def judge_agreement(
    human: Sequence[StandingHumanLabel], traces: Mapping[str, EpisodeTrace], stored: Mapping[str, list[MessageLabel]],
    judge: str,
) -> HumanAgreement:
    """Agreement of a judge (rater B) with human labels (rater A): pooled and per model, with counts."""
    pairs: list[LabelPair] = []
    not_judged = unknown_runs = 0
    for item in human:
        trace = traces.get(item.run_key)
        if trace is None:
            unknown_runs += 1
            continue
        labels = {label.message_index: label for label in stored.get(item.run_key, [])}
        judged = labels.get(item.message_index)
        if judged is None:
            not_judged += 1
            continue
        human_values: dict[str, bool | None] = {f: getattr(item, f) for f in LABEL_FIELDS}
        model = trace.agent.name if trace.agent else ""
        pairs.append(LabelPair(groups={"model": model}, a=human_values, b=label_dict(judged)))
    return HumanAgreement(
        judge=judge, human_labels=len(human), compared=len(pairs), not_judged=not_judged, unknown_runs=unknown_runs,
        pooled=agreement_rows(pairs), by_model=agreement_rows(pairs, ("model",)),
    )


class JudgesAgreement(BaseModel):
    """Two judges' labels of the same messages: A against B."""

    judge_a: str = Field(description="Rater A.")
    judge_b: str = Field(description="Rater B.")
    pooled: list[AgreementRow] = Field(description="Accuracy and kappa per label, pooled.")
    by_agent: list[AgreementRow] = Field(description="The same per agent.")

    def views(self) -> list[TableView]:
        return [
            agreement_view(f"{self.judge_a} (A) against {self.judge_b} (B), per message", self.pooled),
            agreement_view("Per agent", self.by_agent, group="agent"),
        ]


def judges_agreement(
    traces: Sequence[EpisodeTrace], a: Mapping[str, list[MessageLabel]], b: Mapping[str, list[MessageLabel]],
    judge_a: str, judge_b: str,
) -> JudgesAgreement:
    """Accuracy and kappa between two judges' labels of the same messages, per label, pooled and per agent."""
    pairs: list[LabelPair] = []
    for trace in traces:
        labels_a, labels_b = a.get(trace.run_key), b.get(trace.run_key)
        if labels_a is None or labels_b is None:
            continue
        by_index = {label.message_index: label for label in labels_b}
        agent = trace.agent.name if trace.agent else ""
        for label in labels_a:
            other = by_index.get(label.message_index)
            if other is not None:
                pairs.append(LabelPair(groups={"agent": agent}, a=label_dict(label), b=label_dict(other)))
    return JudgesAgreement(
        judge_a=judge_a, judge_b=judge_b, pooled=agreement_rows(pairs), by_agent=agreement_rows(pairs, ("agent",))
    )


