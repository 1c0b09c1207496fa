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

Every record also carries its labeller's *version* (:attr:`LabelRecord.labeller_version`), a string each
labeller declares as a constant beside its code (``RULE_JUDGE_VERSION``, ``LLM_JUDGE_VERSION``,
``OFFLINE_CHECKER_VERSION``, ``LLM_CHECKER_VERSION``). The rule: **bump the declared version whenever the
labeller's outputs change** (its rules; an LLM judge's prompts, output schema, what it is shown of a trace,
or how its answers become labels), and only then, so moving or renaming code never makes stored labels
stale. The tests say when: ``tests/test_labeller_versions.py`` pins each version together with a
fingerprint of the labeller's outputs on a fixed corpus of traces (an offline labeller's labels; an LLM
judge's requests and the labels it makes of scripted answers), and fails when the fingerprint moves and the
version does not. A record of another version is stale: :func:`label_run` labels it again for an offline
labeller always and for an LLM judge when asked (``relabel_stale``), and :func:`check_versions` says what a
report may read: offline labels are computed anew, stale LLM labels are refused with the command that
refreshes them, and no table mixes two versions.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, Field

from commitbench.cache import CacheMiss
from commitbench.jsonl import append_lines, iter_models, repair_torn_tail
from commitbench.judges.stored import StoredLabels
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
    "StaleLabelsError",
    "check_versions",
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


class LabelRecord(BaseModel):
    """One trace's labels by one labeller: a line of ``labels-<labeller>.jsonl``."""

    run_key: str = Field(description="The labelled trace's run key.")
    labeller: str = Field(description="Name of the labeller, e.g. 'rules' or 'llm:Qwen/Qwen3-8B'.")
    error: str | None = Field(default=None, description="Why the trace got no label at all (a judge error).")
    judge_errors: int = Field(default=0, description="Items of the trace the judge could not label.")
    labeller_version: str = Field(
        default="",
        description="The version its labeller declared when it made these labels (it moves whenever the labeller's "
        "outputs change); '' in records made before versions were kept, which count as stale.",
    )

    @property
    def has_errors(self) -> bool:
        return self.error is not None or self.judge_errors > 0


RecordT = TypeVar("RecordT", bound=LabelRecord)
RecordT_co = TypeVar("RecordT_co", bound=LabelRecord, covariant=True)


class LabellerUnavailable(RuntimeError):
    """The judge model could not be reached after retries: nothing is stored, the trace is labelled later."""


class Labeller(Protocol[RecordT_co]):
    """Anything that labels one trace; its records carry its ``version``. An offline labeller (no model) is
    ``cheap``: its stale records are labelled again whenever they are met."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def cheap(self) -> bool: ...

    async def label(self, trace: EpisodeTrace) -> RecordT_co: ...


class StaleLabelsError(ValueError):
    """Stored labels of an LLM judge were made by another version of it; the message names the fix."""


def check_versions(
    records: Mapping[str, RecordT], labeller: str, version: str, cheap: bool, run_dir: Path | str
) -> Mapping[str, RecordT] | None:
    """What a table may read of one labeller's stored records (its latest per run key).

    All of the current version: the records. Any stale one: None for a cheap (offline) labeller, whose
    labels the caller computes anew; :class:`StaleLabelsError` for an LLM judge, naming the command that
    labels the stale records again. So no table mixes two versions of a labeller.
    """
    versions = (records.versions() if isinstance(records, StoredLabels)
                else Counter(r.labeller_version for r in records.values()))
    stale = {found: count for found, count in versions.items() if found != version}
    if not stale:
        return records
    if cheap:
        return None
    found = sorted(v or "unversioned" for v in stale)
    model = labeller.split(":", 1)[1] if labeller.startswith("llm:") else "MODEL"
    raise StaleLabelsError(
        f"{sum(stale.values())} of {len(records)} labels of {labeller!r} in {run_dir} were made by another version "
        f"of the judge ({', '.join(found)}; now {version}: its prompt, schema or what it is shown changed). Label "
        f"them again: `commitbench label {run_dir} --judge llm --judge-model {model} --relabel-stale` (or label the "
        "run under another judge name); reports never mix the two versions"
    )


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


def one_labeller_labels(path: Path | str, record_type: type[RecordT], labeller: str) -> StoredLabels[RecordT]:
    """``labeller``'s last record of each run key, read from the file when asked for (:class:`StoredLabels`);
    :class:`MixedLabellersError` if any record is another's."""
    latest = StoredLabels(path, record_type)
    foreign = {name: seen for name, seen in latest.labellers.items() if name != labeller}
    if foreign:
        raise _foreign(path, labeller, foreign)
    return latest


class LabelSummary(BaseModel):
    """What one pass of :func:`label_run` did."""

    labeller: str = Field(description="The labeller's name.")
    labels_file: str = Field(description="Where the labels are.")
    runs_total: int = Field(description="Finished traces offered.")
    runs_skipped: int = Field(default=0, description="Traces already labelled before this pass.")
    runs_relabelled: int = Field(
        default=0, description="Traces labelled again because their stored labels were of another labeller version."
    )
    runs_labelled: int = Field(default=0, description="Traces labelled now.")
    runs_unavailable: int = Field(default=0, description="Traces left unlabelled: the judge model did not answer.")
    runs_with_judge_errors: int = Field(default=0, description="Records stored now that hold judge errors.")
    judge_errors: int = Field(default=0, description="Items stored now without a label (excluded from metrics).")
    unavailable: list[str] = Field(default_factory=list, description="Why traces were left unlabelled (first few).")


async def label_run(
    traces: Iterable[EpisodeTrace],
    labeller: Labeller[LabelRecord],
    path: Path,
    *,
    record_type: type[LabelRecord] = LabelRecord,
    concurrency: int = 16,
    retry_errors: bool = False,
    limit: int | None = None,
    relabel_stale: bool = False,
) -> LabelSummary:
    """Label the traces not yet in ``path``, appending each record as it is made (see the module docstring).

    The traces are taken one at a time as they stream (a run of 100,000 traces is never held): at most
    ``concurrency`` are labelled at once, and at most twice that many wait.

    A stored record of another version of the labeller is labelled again when the labeller is cheap (offline)
    or ``relabel_stale`` asks for it; otherwise it stays, and reports refuse it (:func:`check_versions`).
    """
    repair_torn_tail(path)
    stored: Mapping[str, LabelRecord] = (one_labeller_labels(path, record_type, labeller.name) if path.exists()
                                         else {})
    again = relabel_stale or labeller.cheap
    stale: set[str] = set()
    with_errors: set[str] = set()
    if again or retry_errors:  # one read of the stored records, each parsed as it comes
        for key, record in stored.items():
            if again and record.labeller_version != labeller.version:
                stale.add(key)
            if retry_errors and record.has_errors:
                with_errors.add(key)
    summary = LabelSummary(labeller=labeller.name, labels_file=str(path), runs_total=0)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(trace: EpisodeTrace) -> None:
        async with gate:
            try:
                record = await labeller.label(trace)
                record.labeller_version = labeller.version
            except (LabellerUnavailable, CacheMiss) as exc:  # no answer (a replay-only cache has none recorded)
                summary.runs_unavailable += 1
                if len(summary.unavailable) < 5:
                    summary.unavailable.append(f"{trace.run_key[:12]}: {exc}")
                return
        append_lines(path, [record.model_dump_json()])
        summary.runs_labelled += 1
        summary.runs_relabelled += trace.run_key in stale
        if record.has_errors:
            summary.runs_with_judge_errors += 1
            summary.judge_errors += record.judge_errors or (1 if record.error else 0)

    window = 2 * max(1, concurrency)
    running: set[asyncio.Task[None]] = set()
    taken = 0
    try:
        for trace in traces:
            if trace.infra_error:
                continue
            summary.runs_total += 1
            if not (trace.run_key not in stored or trace.run_key in stale or trace.run_key in with_errors):
                summary.runs_skipped += 1
                continue
            if limit is not None and taken >= limit:
                continue
            taken += 1
            while len(running) >= window:
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a labeller's own error ends the pass, as it always did
            running.add(asyncio.ensure_future(one(trace)))
        if running:
            await asyncio.gather(*running)
    finally:
        for task in running:
            task.cancel()
    return summary
