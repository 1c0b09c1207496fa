"""Helpers the suites share: a run's traces, its stored labels, the model pairs of a report."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from commitbench.analysis.comparisons import ComparisonKind, ModelPair, Side
from commitbench.analysis.view.site import pack_runs, site_run
from commitbench.jsonl import iter_models
from commitbench.judges.labelling import LabelRecord, check_versions, labels_path, one_labeller_labels
from commitbench.judges.stored import Overlaid
from commitbench.modelentry import ModelEntry, thinking_pairs
from commitbench.rundir import read_manifest
from commitbench.traces import EpisodeTrace, latest_traces, map_latest_batches

if TYPE_CHECKING:
    from commitbench.analysis.view.model import RunRecord, RunSource, SiteBatch, SiteRun
    from commitbench.suites import AnySuite


def run_traces(run_dir: Path | str) -> list[EpisodeTrace]:
    """The finished traces of a run directory, one per run key."""
    return latest_traces(run_dir)


def site_records(
    run_dir: Path | str, record: Callable[[EpisodeTrace], RunRecord | SiteRun], source: RunSource
) -> Iterator[SiteBatch]:
    """``record`` of every trace that counts, failed ones included, in file order, as the site stores it, packed for
    ``source`` (its run-list and member columns) a chunk at a time (:func:`commitbench.analysis.view.site.pack_runs`):
    on a large run made by a process per core (:func:`commitbench.traces.map_latest_batches`), each page written
    there, so only the packed chunks come back."""
    return map_latest_batches(run_dir, lambda trace: site_run(record(trace)),
                              partial(pack_runs, columns=source.columns, member_columns=source.member_columns),
                              include_failed=True)


def labels_file(run_dir: Path | str, judge: str, labels_dir: Path | str | None = None) -> Path:
    """Where the labels of ``judge`` are read: LABELS_DIR's file when one is given and holds it (labels written
    by ``commitbench label --out LABELS_DIR``, beside a run directory that cannot be written), else the run
    directory's."""
    if labels_dir is not None:
        path = labels_path(labels_dir, judge)
        if path.exists():
            return path
    return labels_path(run_dir, judge)


def labels_of(
    suite: AnySuite, run_dir: Path | str, judge: str, labels_dir: Path | str | None = None
) -> Mapping[str, LabelRecord] | None:
    """The stored labels of ``judge`` by run key (read from the file as each is asked for:
    :class:`commitbench.judges.stored.StoredLabels`) (:func:`labels_file` says where they are read); None when the
    suite's offline labeller has none stored of its current version.

    An offline labeller (no model) can label at any time, so callers compute its labels instead (its
    labels stored by an older version of its rules among them); any other judge must have been stored by
    ``commitbench label``, else FileNotFoundError says how, and stored labels of another version of it are
    refused (StaleLabelsError, naming the command that labels them again). A labels file that holds
    another labeller's records too is refused (MixedLabellersError). Both are ValueErrors.
    """
    path = labels_file(run_dir, judge, labels_dir)
    if path.exists():
        version, cheap = suite.labeller_version(judge)
        records = one_labeller_labels(path, suite.label_record, judge)
        return check_versions(records, judge, version, cheap, run_dir)
    if judge == suite.offline_labeller:
        return None
    where = f"{run_dir}" if labels_dir is None else f"{labels_dir} or {run_dir}"
    raise FileNotFoundError(
        f"no labels from judge {judge!r} in {where} (expected {path.name}); run "
        f"`commitbench label {run_dir} --judge llm --judge-model MODEL` first"
    )


def stored_labels(
    suite: AnySuite, run_dir: Path | str, labels_dir: Path | str | None = None
) -> dict[str, Mapping[str, LabelRecord]]:
    """Every judge's stored labels of its current version in a run directory (and LABELS_DIR, whose file of a
    judge wins): judge name -> run key -> its latest record (an offline labeller whose stored labels are stale
    is left out; its labels are made anew wherever they are needed; a stale LLM judge is refused, as by
    :func:`labels_of`)."""
    out: dict[str, Mapping[str, LabelRecord]] = {}
    files = {p.name: p for p in sorted(Path(run_dir).glob("labels-*.jsonl"))}
    if labels_dir is not None:
        files.update({p.name: p for p in sorted(Path(labels_dir).glob("labels-*.jsonl"))})
    for _, path in sorted(files.items()):
        first = next(iter_models(path, suite.label_record, what="labels record"), None)
        if first is None:
            continue
        current = labels_of(suite, run_dir, first.labeller, labels_dir)
        if current is not None:  # a later file's record of a run key wins, as in a dict update
            out[first.labeller] = Overlaid(current, out[first.labeller]) if first.labeller in out else current
    return out


def texts_note(run_dir: Path | str) -> str:
    """What a report says of the run's texts: the file it took the papers' texts from, or, under the paper profile
    without one, that the texts the paper prints are the project's wording ('' otherwise)."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return ""
    texts = manifest.config.get("texts")
    if isinstance(texts, dict) and texts.get("sha256"):
        slots = ", ".join(sorted(texts.get("texts") or {}))
        return f"texts from {texts.get('source', 'a file')} (sha256 {str(texts['sha256'])[:12]}): {slots}"
    if manifest.config.get("profile") == "paper":
        return ("the texts the paper prints word for word are the project's wording (no texts file: "
                "docs/validity.md, text slots)")
    return ""


def model_pairs(
    run_dir: Path | str, compare: Sequence[tuple[str, str]], players: Sequence[str], arms: Sequence[str],
    player_of: Callable[[str], str] = lambda entry: f"chat:{entry}",
) -> list[ModelPair]:
    """The model comparisons of a report: those asked for (``--compare A B``), then the thinking pairs of
    the run's config (two entries of one served model whose settings differ only in the thinking switch
    and what thinking needs), on as side a, that the run played. ``player_of`` names an entry's player as
    the suite's rows do."""
    pairs = [ModelPair.parse(a, b, players, arms) for a, b in compare]
    manifest = read_manifest(run_dir)
    if manifest is None:
        return pairs
    models = [ModelEntry.model_validate(entry) for entry in manifest.config.get("models") or []]
    asked = {(p.a.model, p.b.model) for p in pairs} | {(p.b.model, p.a.model) for p in pairs}
    for pair in thinking_pairs(models):
        on, off = player_of(pair.on), player_of(pair.off)
        if pair.confounds or on not in players or off not in players or (on, off) in asked:
            continue
        pairs.append(ModelPair(a=Side(model=on), b=Side(model=off), kind=ComparisonKind.THINKING))
    return pairs
