"""One labeller protocol for every judge and checker, and one resumable loop that stores their labels.

A *labeller* reads one finished trace and returns one :class:`LabelRecord` (a subclass per suite
carries the labels themselves): the standing rule judge and LLM judge, the follow-up offline checker
and LLM checker all have this shape. ``label`` is asynchronous, since some labellers call a model.

A labeller signals two kinds of failure differently:

* the *judge* could not give a label (an unparseable reply after its retries): the record says so,
  in ``error`` (the whole trace is unlabelled) or in ``judge_errors`` (some of its items are); such
  records are stored and counted, and metrics exclude what they leave unlabelled, never reading it
  as "no";
* the judge *model* could not be reached (after the client's retries): the labeller raises
  :class:`LabellerUnavailable`, nothing is stored, and the next run of the loop labels the trace again.

:func:`label_run` is the loop: it appends each record to ``labels-<labeller>.jsonl`` as soon as it is
made (fsynced), skips the traces already labelled (``retry_errors`` labels again those whose records
hold judge errors; the newer record wins), repairs a torn last line first, and returns the counts.

A labels file holds one labeller's records. :func:`one_labeller_labels` (what reports read) and
:func:`label_run` refuse a file in which any record names another labeller
(:class:`MixedLabellersError`), so no table ever pools the labels of two judges or checkers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, Field

from commitbench.jsonl import append_lines, iter_models, repair_torn_tail
from commitbench.llm import ModelSettings
from commitbench.traces import EpisodeTrace

__all__ = [
    "JUDGE_MAX_TOKENS",
    "JUDGE_SEED",
    "LabelRecord",
    "LabelSummary",
    "Labeller",
    "LabellerUnavailable",
    "MixedLabellersError",
    "judge_name",
    "label_run",
    "labels_path",
    "one_labeller_labels",
    "pin_judge_settings",
    "read_label_records",
]


# Pinned settings of every LLM judge: temperature 0, a fixed seed, a bound on each reply.
JUDGE_SEED = 1234
JUDGE_MAX_TOKENS = 600


def pin_judge_settings(settings: ModelSettings) -> ModelSettings:
    """A judge model's settings: temperature 0, and a seed and a reply bound unless the settings name their own."""
    return settings.model_copy(
        update={
            "temperature": 0.0,
            "seed": settings.seed if settings.seed is not None else JUDGE_SEED,
            "max_tokens": settings.max_tokens or JUDGE_MAX_TOKENS,
        }
    )


def judge_name(model: str) -> str:
    """The name an LLM judge's labels are stored under: ``llm:<model>`` (file ``labels-llm_<model>.jsonl``)."""
    return f"llm:{model}"


class LabelRecord(BaseModel):
    """One trace's labels by one labeller: a line of ``labels-<labeller>.jsonl``."""

    run_key: str = Field(description="The labelled trace's run key.")
    labeller: str = Field(description="Name of the labeller, e.g. 'rules' or 'llm:Qwen/Qwen3-8B'.")
    error: str | None = Field(default=None, description="Why the trace got no label at all (a judge error).")
    judge_errors: int = Field(default=0, description="Items of the trace the judge could not label.")

    @property
    def has_errors(self) -> bool:
        return self.error is not None or self.judge_errors > 0


RecordT = TypeVar("RecordT", bound=LabelRecord)
RecordT_co = TypeVar("RecordT_co", bound=LabelRecord, covariant=True)


class LabellerUnavailable(RuntimeError):
    """The judge model could not be reached after retries: nothing is stored, the trace is labelled later."""


class Labeller(Protocol[RecordT_co]):
    """Anything that labels one trace."""

    @property
    def name(self) -> str: ...

    async def label(self, trace: EpisodeTrace) -> RecordT_co: ...


def labels_path(run_dir: Path | str, labeller: str) -> Path:
    """``RUN_DIR/labels-<labeller>.jsonl`` (``/`` and ``:`` in the name become ``_``)."""
    safe = labeller.replace("/", "_").replace(":", "_")
    return Path(run_dir) / f"labels-{safe}.jsonl"


def read_label_records(path: Path | str, record_type: type[RecordT]) -> list[RecordT]:
    """Every record of a labels file, in order (a torn last line skipped; any other bad line named)."""
    return list(iter_models(path, record_type, what="labels record"))


class MixedLabellersError(ValueError):
    """A labels file holds records of more than one labeller; the message names the file and the labellers."""


def _foreign(path: Path | str, labeller: str, names: dict[str, tuple[int, int]]) -> MixedLabellersError:
    others = "; ".join(f"{name!r}: {count} records, the first is record {first}" for name, (count, first) in
                       sorted(names.items()))
    return MixedLabellersError(
        f"{path} holds labels of more than one labeller ({labeller!r} expected; also {others}); a table reads one "
        f"labeller's labels only: move the file away and label the run again with the one labeller"
    )


def one_labeller_labels(path: Path | str, record_type: type[RecordT], labeller: str) -> dict[str, RecordT]:
    """``labeller``'s last record of each run key; :class:`MixedLabellersError` if any record is another's."""
    latest: dict[str, RecordT] = {}
    foreign: dict[str, tuple[int, int]] = {}
    for number, record in enumerate(iter_models(path, record_type, what="labels record"), start=1):
        if record.labeller != labeller:
            count, first = foreign.get(record.labeller, (0, number))
            foreign[record.labeller] = (count + 1, first)
        latest[record.run_key] = record
    if foreign:
        raise _foreign(path, labeller, foreign)
    return latest


class LabelSummary(BaseModel):
    """What one pass of :func:`label_run` did."""

    labeller: str = Field(description="The labeller's name.")
    labels_file: str = Field(description="Where the labels are.")
    runs_total: int = Field(description="Finished traces offered.")
    runs_skipped: int = Field(default=0, description="Traces already labelled before this pass.")
    runs_labelled: int = Field(default=0, description="Traces labelled now.")
    runs_unavailable: int = Field(default=0, description="Traces left unlabelled: the judge model did not answer.")
    runs_with_judge_errors: int = Field(default=0, description="Records stored now that hold judge errors.")
    judge_errors: int = Field(default=0, description="Items stored now without a label (excluded from metrics).")
    unavailable: list[str] = Field(default_factory=list, description="Why traces were left unlabelled (first few).")


async def label_run(
    traces: Sequence[EpisodeTrace],
    labeller: Labeller[LabelRecord],
    path: Path,
    *,
    record_type: type[LabelRecord] = LabelRecord,
    concurrency: int = 16,
    retry_errors: bool = False,
    limit: int | None = None,
) -> LabelSummary:
    """Label the traces not yet in ``path``, appending each record as it is made (see the module docstring)."""
    repair_torn_tail(path)
    done: dict[str, bool] = {}
    if path.exists():
        done = {key: record.has_errors for key, record in one_labeller_labels(path, record_type, labeller.name).items()}
    todo = [t for t in traces if not t.infra_error and (t.run_key not in done or (retry_errors and done[t.run_key]))]
    finished = [t for t in traces if not t.infra_error]
    summary = LabelSummary(
        labeller=labeller.name, labels_file=str(path), runs_total=len(finished), runs_skipped=len(finished) - len(todo)
    )
    if limit is not None:
        todo = todo[:limit]
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(trace: EpisodeTrace) -> None:
        async with gate:
            try:
                record = await labeller.label(trace)
            except LabellerUnavailable as exc:
                summary.runs_unavailable += 1
                if len(summary.unavailable) < 5:
                    summary.unavailable.append(f"{trace.run_key[:12]}: {exc}")
                return
        append_lines(path, [record.model_dump_json()])
        summary.runs_labelled += 1
        if record.has_errors:
            summary.runs_with_judge_errors += 1
            summary.judge_errors += record.judge_errors or (1 if record.error else 0)

    await asyncio.gather(*(one(t) for t in todo))
    return summary
