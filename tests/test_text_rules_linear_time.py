"""Every rule that reads text answers in linear time: 100 KB of any shape is checked in well under a second.

Regular expressions that backtrack (a greedy run followed by something that may fail, a scan to the end
of the text repeated for every candidate) turn a long reply into minutes of work inside one guard call.
The shapes below are the ones that found such rules (runs of hyphens, a claim repeated in one sentence,
one very long word, runs of newlines, Turkish participles, offers without a question mark ...). Each is
checked by every text rule of the project, and every compiled pattern at module level is run over each
shape with ``finditer``, so a new pattern that backtracks fails here too.

The bound is generous (a linear rule takes milliseconds; a quadratic one takes minutes at this size).
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import mine_followup
import pytest

from commitbench.claimguard import english, routing, turkish
from commitbench.claimguard import guard as guard_module
from commitbench.claimguard.guard import looks_like_write_claim, should_guard
from commitbench.commands import ledger_cmd
from commitbench.episodes.followup import requests, rewrite
from commitbench.episodes.standing.addressee import addressed_to
from commitbench.episodes.standing.episode import Person
from commitbench.gateway import claimgrammar, claims, promises
from commitbench.gateway.claimgrammar import claim_parts
from commitbench.gateway.claims import tool_failure
from commitbench.judges.followup import cues, rules, turkish_cues, turkish_times
from commitbench.judges.followup.schemas import DetectorOutput
from commitbench.judges.standing import readers as standing_readers
from commitbench.llm.structured import parse_model_json
from commitbench.oracles.standing.ledger import normalise_entry_id
from commitbench.textscan import ThenInClause

pytestmark = pytest.mark.slow

SIZE = 100_000
BOUND_SECONDS = 2.0


def _salad(seed: int) -> str:
    """Words of every grammar, shuffled: claims, adverbs, cancel words, stems, punctuation."""
    words = [*english.WRITE_PARTICIPLES, "I", "we", "have", "has", "been", "was", "is", "just", "now", "not",
             "if", "successfully", "done", "all", "set", "can", "send", "?", ".", ",", "-", "\n", *turkish.WRITE_STEMS,
             "oluşturuldu", "kaydedilmiş", "mı", "eğer", "onaylarsanız", "hazırlayacağım", "yes", "tamam"]
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < SIZE:
        word = rng.choice(words)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


# name -> (repeated unit, suffix)
SHAPES: dict[str, tuple[str, str]] = {
    "hyphen runs": ("a-", ""),
    "hyphens": ("-", ""),
    "repeated claims, then a question mark": ("I created the file, ", "?"),
    "one long word": ("a", ""),
    "spaces": (" ", ""),
    "newlines": ("\n", ""),
    "blank lines with spaces": ("\n \n", ""),
    "repeated Turkish claims, then a question mark": ("Taslağı oluşturdum, ", "?"),
    "Turkish participles before nouns": ("kaydedilmiş bir ", ""),
    "Turkish questions": ("oluşturuldu mu ", ""),
    "one long Turkish word": ("oluştur", ""),
    "Turkish letters": ("şğıİçöüÇ", ""),
    "mixed Turkish and English": ("Evet, oluşturayım mı? Tamam I have saved it; onaylarsanız hazırlayacağım ", ""),
    "offers without a question mark": ("I can send ", ""),
    "Turkish offers without a question mark": ("gönderebilirim ", ""),
    "adverb runs": ("we just ", ""),
    "present passives": ("Drafts are saved ", ""),
    "successfully": ("successfully ", ""),
    "letters": ("Dear Bob,\nBest,\n", ""),
    "quotes": ('"', ""),
    "code fences": ("```", ""),
    "spoken digits": ("double ", ""),
    "promises": ("I'll remind you ", ""),
    "Turkish promises": ("yarın sabah 9'da size hatırlatırım ve ", ""),
    "Turkish offers and conditions": ("isterseniz gönderirseniz hatırlatayım mı ", "?"),
    "Turkish clock times": ("18.30'da ", ""),
    "affirmations": ("yes ", ""),
    "full stops": (".", ""),
    "e-mail-like runs": ("a.", ""),
    "requests to be told, no condition": ("let me know ", ""),
    "requests for a delivery, no subject": ("give me an ", ""),
}


def shape(name: str) -> str:
    if name == "word salad":
        return _salad(7)
    unit, suffix = SHAPES[name]
    return (unit * (SIZE // len(unit) + 1))[:SIZE] + suffix


SHAPE_NAMES = [*SHAPES, "word salad"]

_PEOPLE = [Person(role="creditor", name="Alice Moreno", title="Lead", rank=2)]

TEXT_RULES: dict[str, Callable[[str], Any]] = {
    "claim guard": looks_like_write_claim,
    "should_guard": lambda text: should_guard(text, 0, False, True),
    "turn routing": lambda text: routing.route_turn(text, text),
    "write proposal": routing.looks_like_write_proposal,
    "command word": routing.has_command_word,
    "cue detector": cues.detect_commitments,
    "offline checker flags": lambda text: rules.response_flags(text, [], ["create_reminder"], [], None),
    "judge JSON": lambda text: parse_model_json(text, DetectorOutput),
    "judge JSON in a fence": lambda text: parse_model_json("```json\n" + text, DetectorOutput),
    "addressee": lambda text: addressed_to("#team", text, _PEOPLE[0], "#team"),
    "request context": requests.context_problems,
    "support rewrite": rewrite.rewrite_support_request,
    "ledger entry id": normalise_entry_id,
    "request mining": lambda text: mine_followup.slurp_category({"text": text, "intent": "general_quirky"}),
    "gateway claims": claim_parts,
    "gateway promises": lambda text: promises.whole_promises(cues.detect_commitments(text)),
    "tool failure": tool_failure,
}


@pytest.mark.parametrize("shape_name", SHAPE_NAMES)
@pytest.mark.parametrize("rule_name", list(TEXT_RULES))
def test_each_text_rule_checks_100_kb_of_any_shape_quickly(rule_name: str, shape_name: str) -> None:
    text = shape(shape_name)
    started = time.perf_counter()
    TEXT_RULES[rule_name](text)
    elapsed = time.perf_counter() - started
    assert elapsed < BOUND_SECONDS, f"{rule_name} took {elapsed:.1f} s on 100 KB of {shape_name}"


def _patterns(value: Any) -> list[re.Pattern[str]]:
    if isinstance(value, re.Pattern):
        return [value]
    if isinstance(value, ThenInClause):
        return [value.head, value.tail, value.stops]
    if isinstance(value, (tuple, list)):
        return [p for item in value for p in _patterns(item)]
    if isinstance(value, dict):
        return [p for item in value.values() for p in _patterns(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a language's cue reader
        return [p for field in dataclasses.fields(value) for p in _patterns(getattr(value, field.name))]
    return []


MODULES: list[ModuleType] = [
    english, turkish, routing, guard_module, cues, rules, standing_readers, requests, mine_followup, rewrite,
    ledger_cmd, claimgrammar, claims, promises, turkish_cues, turkish_times,
]


def module_patterns(module: ModuleType) -> list[tuple[str, re.Pattern[str]]]:
    found = []
    for name, value in vars(module).items():
        for index, pattern in enumerate(_patterns(value)):
            if isinstance(pattern.pattern, str):
                found.append((f"{name}[{index}]", pattern))
    return found


@pytest.mark.parametrize("module", MODULES, ids=lambda m: ".".join(m.__name__.split(".")[-2:]))
def test_every_module_pattern_scans_100_kb_of_any_shape_quickly(module: ModuleType) -> None:
    """``finditer`` over each shape; a pattern named ``*_AFTER`` is matched at a position (``match(text, pos)``)
    where it is used, so it is timed that way, at every 7th position."""
    patterns = module_patterns(module)
    assert patterns, f"{module.__name__} has no compiled pattern at module level"
    slow = []
    for shape_name in SHAPE_NAMES:
        text = shape(shape_name)
        for name, pattern in patterns:
            started = time.perf_counter()
            if name.split("[")[0].endswith("_AFTER"):
                for position in range(0, len(text), 7):
                    pattern.match(text, position)
            else:
                for _ in pattern.finditer(text):
                    pass
            elapsed = time.perf_counter() - started
            if elapsed >= BOUND_SECONDS:
                slow.append(f"{name} on {shape_name}: {elapsed:.1f} s")
    assert not slow, "; ".join(slow)
