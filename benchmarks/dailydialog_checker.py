"""Benchmark: the offline checker's commitment detector against DailyDialog's commissive act label.

Run: .venv/bin/python benchmarks/dailydialog_checker.py [--data /work/shared/data/dailydialog] [--seed 0]

DailyDialog (Li et al., 2017; CC BY-NC-SA 4.0, used here only for measurement, never shipped) labels
every utterance with a dialogue act; 4 is commissive (1 inform, 2 question, 3 directive). An utterance
counts as detected when the cue detector finds at least one future-directed commitment in it (offers
and promises that wait for the other speaker included; the "agent-initiated" line counts only the
others). The commissive class is wider than a future-directed commitment: it also covers accepting
and declining suggestions and acts within the conversation ("Sounds great", "No, thanks"), so recall
against it is expected to be low and precision is the informative figure.

Main figures: 300 utterances, 150 commissive and 150 not, drawn with a fixed seed from all splits.
The same measures over every utterance of the corpus are printed beside them. Train dialogue 7851
(0-based) splits into 12 utterances but has 11 act labels; it is skipped.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commitbench.analysis.bootstrap import cluster_bootstrap, ratio_stat
from commitbench.judges.followup.cues import detect_commitments

COMMISSIVE = 4
SPLITS = ("train", "validation", "test")
GLITCHES = {("train", 7851)}


@dataclass(frozen=True)
class Utterance:
    split: str
    dialogue: int
    index: int
    text: str
    act: int


def normalise(text: str) -> str:
    """Undo DailyDialog's tokenisation: "I ’ ll go ." -> "I'll go."."""
    text = re.sub(r"\s*[’']\s*", "'", text)
    text = re.sub(r"\s+([,.?!;:])", r"\1", text)
    return " ".join(text.split())


def load(data: Path) -> tuple[list[Utterance], list[str]]:
    utterances: list[Utterance] = []
    skipped: list[str] = []
    for split in SPLITS:
        texts = (data / f"dialogues_text_{split}.txt").read_text(encoding="utf-8").split("\n")
        acts = (data / f"dialogues_act_{split}.txt").read_text(encoding="utf-8").split("\n")
        for number, (line, act_line) in enumerate(zip(texts, acts, strict=False)):
            if not line.strip():
                continue
            parts = [p for p in line.split("__eou__")][:-1]
            labels = act_line.split()
            if (split, number) in GLITCHES or len(parts) != len(labels):
                skipped.append(f"{split} dialogue {number}: {len(parts)} utterances, {len(labels)} act labels")
                continue
            for index, (part, label) in enumerate(zip(parts, labels, strict=True)):
                utterances.append(Utterance(split, number, index, normalise(part), int(label)))
    return utterances, skipped


@dataclass(frozen=True)
class Scores:
    n: int
    true_positive: int
    false_positive: int
    false_negative: int
    true_negative: int

    @property
    def precision(self) -> float:
        flagged = self.true_positive + self.false_positive
        return self.true_positive / flagged if flagged else float("nan")

    @property
    def recall(self) -> float:
        actual = self.true_positive + self.false_negative
        return self.true_positive / actual if actual else float("nan")

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else float("nan")

    @property
    def kappa(self) -> float:
        n = self.n
        observed = (self.true_positive + self.true_negative) / n
        yes = ((self.true_positive + self.false_positive) / n) * ((self.true_positive + self.false_negative) / n)
        no = ((self.false_negative + self.true_negative) / n) * ((self.false_positive + self.true_negative) / n)
        expected = yes + no
        return (observed - expected) / (1 - expected) if expected < 1 else float("nan")


def score(gold: np.ndarray, predicted: np.ndarray) -> Scores:
    return Scores(
        n=int(gold.size),
        true_positive=int(np.sum(gold & predicted)),
        false_positive=int(np.sum(~gold & predicted)),
        false_negative=int(np.sum(gold & ~predicted)),
        true_negative=int(np.sum(~gold & ~predicted)),
    )


def predict(utterances: list[Utterance]) -> tuple[np.ndarray, np.ndarray]:
    """(any commitment, agent-initiated commitment) per utterance."""
    any_found = np.zeros(len(utterances), dtype=bool)
    initiated = np.zeros(len(utterances), dtype=bool)
    for i, utterance in enumerate(utterances):
        commitments = detect_commitments(utterance.text).commitments
        any_found[i] = bool(commitments)
        initiated[i] = any(c.agent_initiated for c in commitments)
    return any_found, initiated


def balanced_sample(utterances: list[Utterance], per_class: int, seed: int) -> list[Utterance]:
    rng = random.Random(seed)
    positives = [u for u in utterances if u.act == COMMISSIVE]
    negatives = [u for u in utterances if u.act != COMMISSIVE]
    sample = rng.sample(positives, per_class) + rng.sample(negatives, per_class)
    rng.shuffle(sample)
    return sample


def _interval(gold: np.ndarray, predicted: np.ndarray, clusters: np.ndarray, which: str, seed: int) -> str:
    """95% cluster-bootstrap interval (dialogues as clusters) for precision or recall."""
    if which == "precision":
        values = np.column_stack([gold & predicted, predicted]).astype(float)
    else:
        values = np.column_stack([gold & predicted, gold]).astype(float)
    result = cluster_bootstrap(values, clusters, ratio_stat, n_boot=1000, seed=seed)
    return f"[{result.low:.2f}, {result.high:.2f}]"


def report(name: str, utterances: list[Utterance], any_found: np.ndarray, initiated: np.ndarray, seed: int) -> None:
    gold = np.array([u.act == COMMISSIVE for u in utterances])
    clusters = np.array([f"{u.split}:{u.dialogue}" for u in utterances])
    print(f"\n{name}: {len(utterances)} utterances, {int(gold.sum())} commissive")
    print(f"  {'detector output':<26}{'precision':>22}{'recall':>22}{'F1':>7}{'kappa':>8}{'flagged':>9}")
    for label, predicted in (("any commitment", any_found), ("agent-initiated only", initiated)):
        s = score(gold, predicted)
        precision = f"{s.precision:.2f} {_interval(gold, predicted, clusters, 'precision', seed)}"
        recall = f"{s.recall:.2f} {_interval(gold, predicted, clusters, 'recall', seed)}"
        print(f"  {label:<26}{precision:>22}{recall:>22}{s.f1:>7.2f}{s.kappa:>8.2f}{int(predicted.sum()):>9}")
    for label, predicted in (("any commitment", any_found), ("agent-initiated only", initiated)):
        s = score(gold, predicted)
        true_rate = s.true_positive / max(s.true_positive + s.false_negative, 1)
        false_rate = s.false_positive / max(s.false_positive + s.true_negative, 1)
        if true_rate + false_rate > 0:
            balanced = true_rate / (true_rate + false_rate)
            print(f"  {label}: precision at a 50% commissive share (from these rates): {balanced:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/dailydialog"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-class", type=int, default=150)
    parser.add_argument("--examples", type=int, default=8, help="print this many hits and misses of the sample")
    args = parser.parse_args(argv)
    if not (args.data / "dialogues_text_train.txt").exists():
        print(f"error: DailyDialog not found in {args.data}", file=sys.stderr)
        return 2

    utterances, skipped = load(args.data)
    print(f"loaded {len(utterances)} utterances; skipped: {'; '.join(skipped) or 'none'}")

    sample = balanced_sample(utterances, args.per_class, args.seed)
    sample_any, sample_initiated = predict(sample)
    report(f"balanced sample (seed {args.seed})", sample, sample_any, sample_initiated, args.seed)

    started = time.perf_counter()
    corpus_any, corpus_initiated = predict(utterances)
    elapsed = time.perf_counter() - started
    report("whole corpus", utterances, corpus_any, corpus_initiated, args.seed)
    print(f"  detector speed: {len(utterances) / elapsed:,.0f} utterances/s")

    if args.examples:
        gold = [u.act == COMMISSIVE for u in sample]
        groups = {
            "detected, commissive": [u for u, g, p in zip(sample, gold, sample_any, strict=True) if g and p],
            "detected, not commissive": [u for u, g, p in zip(sample, gold, sample_any, strict=True) if not g and p],
            "missed commissive": [u for u, g, p in zip(sample, gold, sample_any, strict=True) if g and not p],
        }
        for title, items in groups.items():
            print(f"\n{title} ({len(items)}):")
            for u in items[: args.examples]:
                print(f"  [{u.act}] {u.text[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
