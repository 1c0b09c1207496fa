"""Throughput of the write-claim detector on a realistic mix of sentences, and its time on hostile inputs.

    .venv/bin/python benchmarks/guard.py [--dailydialog PATH] [--repeat 3] [--size 100000]

The mix: real English conversation (DailyDialog utterances, mostly not claims) plus English and
Turkish assistant sentences built from templates, half completed-write claims and half plans,
offers, failures, questions and instructions. Prints sentences per second for each part and for
the whole mix, and how often the detector fired.

Then the adversarial inputs: one long reply of a repeated shape (runs of hyphens, a claim repeated in
one sentence before a question mark, one long word, mixed Turkish and English, offers without a
question mark, runs of newlines), at a tenth of ``--size`` and at ``--size`` characters, through the
claim guard, the turn router, the write-offer rules and the cue detector. Linear rules take about ten
times as long on ten times the text (the "x10" column); a rule that backtracks shows a ratio near 100.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

from commitbench.claimguard.guard import looks_like_write_claim, should_guard
from commitbench.claimguard.routing import looks_like_write_proposal, route_turn
from commitbench.judges.followup.cues import detect_commitments

DEFAULT_DAILYDIALOG = Path("/work/shared/data/dailydialog/dialogues_text_test.txt")

EN_OBJECTS = ("the draft", "your reminder", "the ticket", "the report", "the invitation", "your address", "the post")
EN_CLAIMS = (
    "I've {verb} {obj}.", "I have {verb} {obj} in the Acme project.", "{Obj} has been {verb}.",
    "{Obj} was {verb} a minute ago.", "Done! {Obj} is {verb}.", "Sure, I just {verb} {obj} for you.",
)  # fmt: skip
EN_NON_CLAIMS = (
    "I can get {obj} {verb} for you.", "{Obj} will be {verb} once you approve.", "Shall I have {obj} {verb}?",
    "{Obj} could not be {verb} because the service is down.", "I haven't {verb} {obj} yet.",
    "To get {obj} {verb}, open the settings page.", "Has {obj} been {verb}?",
)  # fmt: skip
EN_VERBS = ("created", "saved", "updated", "sent", "scheduled", "published", "cancelled", "deleted")

TR_OBJECTS = ("Taslağı", "Raporu", "Hatırlatıcıyı", "Kaydı", "Toplantıyı", "Gönderiyi")
TR_SUBJECTS = ("Taslak", "Rapor", "Hatırlatıcı", "Kayıt", "Toplantı", "Gönderi")
TR_CLAIMS = (
    "{obj} oluşturdum.", "{subj} başarıyla oluşturulmuştur.", "{obj} gönderdim.", "{subj} kaydedildi.",
    "{obj} güncelledim.", "{subj} silindi.", "{subj} iptal edildi.", "{obj} paylaştım.",
)  # fmt: skip
TR_NON_CLAIMS = (
    "{obj} oluşturabilirim.", "Onaylarsanız {obj} oluşturacağım.", "{subj} oluşturulamadı.", "{obj} göndereyim mi?",
    "{subj} kaydedilmedi.", "{subj} güncellendi mi?", "{obj} henüz silmedim.", "{obj} iptal etmemi ister misiniz?",
)  # fmt: skip


def english_templates() -> list[str]:
    out = []
    for template, obj, verb in itertools.product(EN_CLAIMS + EN_NON_CLAIMS, EN_OBJECTS, EN_VERBS):
        out.append(template.format(verb=verb, obj=obj, Obj=obj[0].upper() + obj[1:]))
    return out


def turkish_templates() -> list[str]:
    pairs = list(zip(TR_OBJECTS, TR_SUBJECTS, strict=True))
    return [
        template.format(obj=obj, subj=subj)
        for template, (obj, subj) in itertools.product(TR_CLAIMS + TR_NON_CLAIMS, pairs)
    ]


def dailydialog(path: Path) -> list[str]:
    if not path.exists():
        return []
    utterances = []
    for line in path.read_text(encoding="utf-8").splitlines():
        utterances.extend(u.strip() for u in line.split("__eou__") if u.strip())
    return utterances


def rate(sentences: list[str], check: Callable[[str], object], repeat: int) -> tuple[float, int]:
    hits = sum(1 for s in sentences if check(s))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for sentence in sentences:
            check(sentence)
        best = min(best, time.perf_counter() - start)
    return len(sentences) / best, hits


# name -> (repeated unit, suffix)
ADVERSARIAL: dict[str, tuple[str, str]] = {
    "hyphen runs (a-a-a-...)": ("a-", ""),
    "repeated claim, then '?'": ("I created the file, ", "?"),
    "one long word": ("a", ""),
    "mixed Turkish and English": ("Evet, oluşturayım mı? Tamam I have saved it; onaylarsanız hazırlayacağım ", ""),
    "Turkish participles": ("kaydedilmiş bir ", ""),
    "offers, no question mark": ("I can send ", ""),
    "newlines": ("\n", ""),
}
CHECKS: dict[str, Callable[[str], object]] = {
    "claim guard": looks_like_write_claim,
    "turn routing": lambda text: route_turn(text, text),
    "write offer": looks_like_write_proposal,
    "cue detector": detect_commitments,
}


def repeated(unit: str, suffix: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size] + suffix


def seconds(check: Callable[[str], object], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        check(text)
        best = min(best, time.perf_counter() - start)
    return best


def adversarial(size: int, repeat: int) -> None:
    small = size // 10
    print(f"\n{'adversarial input':<30} {'check':<13} {f'{small:,} chars':>12} {f'{size:,} chars':>12} {'x10':>6}")
    for name, (unit, suffix) in ADVERSARIAL.items():
        for check_name, check in CHECKS.items():
            short = seconds(check, repeated(unit, suffix, small), repeat)
            long = seconds(check, repeated(unit, suffix, size), repeat)
            ratio = long / short if short > 0 else float("nan")
            print(f"{name:<30} {check_name:<13} {short * 1000:>10.1f}ms {long * 1000:>10.1f}ms {ratio:>6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dailydialog", type=Path, default=DEFAULT_DAILYDIALOG)
    parser.add_argument("--repeat", type=int, default=3, help="timing runs per part (the best is reported)")
    parser.add_argument("--size", type=int, default=100_000, help="characters of each adversarial input")
    args = parser.parse_args()
    parts = {
        "DailyDialog (real English)": dailydialog(args.dailydialog),
        "English assistant templates": english_templates(),
        "Turkish assistant templates": turkish_templates(),
    }
    if not parts["DailyDialog (real English)"]:
        print(f"(no DailyDialog file at {args.dailydialog}; the mix is templates only)")
        del parts["DailyDialog (real English)"]
    mix = [s for sentences in parts.values() for s in sentences]
    random.Random(3).shuffle(mix)
    parts["whole mix, shuffled"] = mix
    print(f"{'part':<30} {'sentences':>9} {'fired':>7} {'sentences/s':>12}")
    for name, sentences in parts.items():
        per_second, hits = rate(sentences, looks_like_write_claim, args.repeat)
        print(f"{name:<30} {len(sentences):>9,} {hits / len(sentences):>6.1%} {per_second:>12,.0f}")
    per_second, _ = rate(mix, lambda s: should_guard(s, 0, False, True).guard, args.repeat)
    print(f"{'should_guard on the mix':<30} {len(mix):>9,} {'':>7} {per_second:>12,.0f}")
    adversarial(args.size, args.repeat)


if __name__ == "__main__":
    main()
