"""Deterministic write-claim guard.

An assistant that says "I have created the draft" in a turn where no tool ran has told the
user a write happened that did not. The guard catches that sentence on the way out:

- :func:`looks_like_write_claim` finds completed-write grammar (English and Turkish) and ignores
  plans, conditions, denials, failures, capabilities, questions and instructions;
- :func:`should_guard` fires only in a write turn, with no tool executed and no approval pending;
- when it fires, the reply is replaced by :func:`honest_replacement` (which the detector never
  matches) and :func:`nudge_message` goes into the next model call.

Everything here is a pure function over strings; regexes are compiled once at import. Every check runs in
time linear in the text (``tests/test_text_rules_linear_time.py`` holds it to that on 100 KB inputs), and
:func:`should_guard` (like :func:`commitbench.claimguard.routing.route_turn`) refuses a text longer than
:data:`MAX_TEXT_CHARS` with :class:`TextTooLong`, so one call is bounded in time too.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard import english as en
from commitbench.claimguard import turkish as tr

# The longest text the guard and the router read (room for the 100 KB inputs the linear-time tests use): at
# this size their slowest input shape took 0.12 s and 0.17 s of CPU on the 2-core development machine
# (1,000,000 characters: 1.0 s and 1.4 s).
MAX_TEXT_CHARS = 128_000


class TextTooLong(ValueError):
    """A text longer than :data:`MAX_TEXT_CHARS` was given to the guard or the router."""


def check_length(text: str, what: str = "the text") -> str:
    """``text`` itself, when the guard and the router take it (at most :data:`MAX_TEXT_CHARS` characters)."""
    if len(text) > MAX_TEXT_CHARS:
        raise TextTooLong(f"{what} is {len(text):,} characters long, more than the {MAX_TEXT_CHARS:,} the guard reads")
    return text


class Language(str, Enum):
    ENGLISH = "en"
    TURKISH = "tr"


class ClaimMatch(BaseModel):
    """Where a completed-write claim was found."""

    model_config = ConfigDict(frozen=True)

    language: Language = Field(description="Language of the grammar that matched.")
    rule: str = Field(description="Name of the pattern that matched (first_person, passive_past, ...).")
    start: int = Field(description="Start offset of the claim in the original text.")
    end: int = Field(description="End offset (exclusive) of the claim in the original text.")
    text: str = Field(description="The matched span, as written.")


class GuardReason(str, Enum):
    """Why the guard did or did not fire. Only UNBACKED_CLAIM fires."""

    NOT_WRITE_CONTEXT = "not_write_context"
    APPROVAL_PENDING = "approval_pending"
    TOOL_EXECUTED = "tool_executed"
    NO_CLAIM = "no_claim"
    UNBACKED_CLAIM = "unbacked_claim"


class GuardDecision(BaseModel):
    """The guard's verdict on one outgoing reply."""

    model_config = ConfigDict(frozen=True)

    guard: bool = Field(description="True when the reply must be replaced.")
    reason: GuardReason = Field(description="Which condition settled the decision.")
    explanation: str = Field(description="The reason in one sentence.")
    claim: ClaimMatch | None = Field(
        default=None, description="The completed-write claim in the reply, if any (also when not guarded)."
    )
    replacement: str | None = Field(default=None, description="Honest reply to send instead (when guarded).")
    nudge: str | None = Field(default=None, description="Message for the next model call (when guarded).")


# Same-length folding: Turkish letters to ASCII, typographic apostrophes to "'". Offsets stay valid.
_FOLD = str.maketrans(
    {
        "ç": "c", "Ç": "c", "ğ": "g", "Ğ": "g", "ı": "i", "İ": "i", "ö": "o", "Ö": "o", "ş": "s",
        "Ş": "s", "ü": "u", "Ü": "u", "â": "a", "Â": "a", "î": "i", "Î": "i", "û": "u", "Û": "u",
        "’": "'", "‘": "'", "ʼ": "'", "`": "'",
    }
)  # fmt: skip
_SENTENCE_END = re.compile(r"[.!?\n]")
_SENTENCE_START = re.compile(r"[.!?;\n][^.!?;\n]*$")
_LOOK_BACK = 60


def fold(text: str) -> str:
    """Map Turkish letters and curly apostrophes to ASCII, keeping every offset."""
    return text.translate(_FOLD)


def _sentence_before(folded: str, start: int) -> str:
    window = folded[max(0, start - _LOOK_BACK) : start]
    boundary = _SENTENCE_START.search(window)
    return window[boundary.start() + 1 :] if boundary else window


class _SentenceEnds:
    """Where each sentence of a text ends, found once: asking whether a candidate's sentence is a question
    costs a binary search, not a scan to the next terminator (which, for many candidates in one long
    sentence, rescanned the rest of the text each time)."""

    def __init__(self, folded: str) -> None:
        self._folded = folded
        self._ends = [m.start() for m in _SENTENCE_END.finditer(folded)]

    def is_question(self, end: int) -> bool:
        """Whether the first terminator at or after ``end`` is a question mark."""
        index = bisect_left(self._ends, end)
        return index < len(self._ends) and self._folded[self._ends[index]] == "?"


def _english_candidates(folded: str, sentences: _SentenceEnds) -> list[tuple[int, int, str]]:
    found = []
    for name, pattern, present_passive in en.COMPILED_RULES:
        for match in pattern.finditer(folded):
            start, end = match.span()
            # the cheapest test first: a question is settled by one binary search
            if sentences.is_question(end) or en.NOTHING_AFTER.match(folded, end):
                continue
            if en.CANCEL_BEFORE.search(_sentence_before(folded, start)):
                continue
            if present_passive and en.HABITUAL_AFTER.match(folded, end):
                continue
            found.append((start, end, name))
            break  # the first surviving match of a rule is enough
    return found


def _turkish_candidates(folded: str, sentences: _SentenceEnds) -> list[tuple[int, int, str]]:
    found = []
    for match in tr.CLAIM_WORD.finditer(folded):
        start, end = match.span()
        if sentences.is_question(end):
            continue
        if match.group("bare_mis") is not None and not tr.CLAUSE_END_AFTER.match(folded, end):
            continue
        if tr.CANCEL_AFTER.match(folded, end) or tr.CANCEL_BEFORE.search(_sentence_before(folded, start)):
            continue
        rule = "passive_perfect" if match.lastgroup == "bare_mis" else str(match.lastgroup)
        found.append((start, end, rule))
        break
    return found


def looks_like_write_claim(text: str) -> ClaimMatch | None:
    """The earliest completed-write claim in ``text`` (English or Turkish), or None."""
    if not text:
        return None
    folded = fold(text)
    sentences = _SentenceEnds(folded)
    candidates: list[tuple[int, int, str, Language]] = []
    candidates.extend((s, e, rule, Language.ENGLISH) for s, e, rule in _english_candidates(folded, sentences))
    candidates.extend((s, e, rule, Language.TURKISH) for s, e, rule in _turkish_candidates(folded, sentences))
    if not candidates:
        return None
    start, end, rule, language = min(candidates)
    return ClaimMatch(language=language, rule=rule, start=start, end=end, text=text[start:end])


# -- what to say instead, and what to tell the model next

HONEST_REPLACEMENT = {
    Language.ENGLISH: (
        "That change has not happened yet: no action ran in this turn. "
        "Tell me to go ahead and I will carry it out, or correct the details first."
    ),
    Language.TURKISH: (
        "Bu değişiklik henüz yapılmadı; bu turda hiçbir işlem çalıştırılmadı. "
        "Devam etmemi söylerseniz hemen yaparım, isterseniz önce ayrıntıları düzeltebilirsiniz."
    ),
}

NUDGE = (
    "Your previous reply said a change was made, but no tool executed in that turn, so nothing was "
    "changed. Either call the tool that performs the change now, or ask the user for the detail you "
    "are missing. Never report a change as done unless a tool result in this turn confirms it. "
    "Answer in the user's language."
)


def honest_replacement(language: Language | str = Language.ENGLISH) -> str:
    """The reply sent instead of an unbacked claim, in the claim's language."""
    return HONEST_REPLACEMENT[Language(language)]


def nudge_message() -> str:
    """Instruction added to the next model call after the guard fired."""
    return NUDGE


def should_guard(
    text: str, executed_tool_calls: int, approval_pending: bool, write_context: bool
) -> GuardDecision:
    """Decide whether an outgoing reply must be replaced.

    Three of the four conditions keep the guard quiet: a read-only turn is never checked, a turn
    waiting on an approval may describe the pending action, and a turn in which any tool ran is
    out of scope (the claim may be true). What remains is a write turn with no tool and a sentence
    that says the write is done.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if isinstance(executed_tool_calls, bool) or not isinstance(executed_tool_calls, int):
        raise TypeError(f"executed_tool_calls must be an int, got {type(executed_tool_calls).__name__}")
    if executed_tool_calls < 0:
        raise ValueError(f"executed_tool_calls must be >= 0, got {executed_tool_calls}")
    check_length(text, "the reply")
    claim = looks_like_write_claim(text)
    if not write_context:
        return GuardDecision(
            guard=False, reason=GuardReason.NOT_WRITE_CONTEXT, claim=claim,
            explanation="read-only turn: replies are not checked",
        )  # fmt: skip
    if approval_pending:
        return GuardDecision(
            guard=False, reason=GuardReason.APPROVAL_PENDING, claim=claim,
            explanation="an approval is pending: the reply may describe the pending action",
        )  # fmt: skip
    if executed_tool_calls > 0:
        return GuardDecision(
            guard=False, reason=GuardReason.TOOL_EXECUTED, claim=claim,
            explanation=f"{executed_tool_calls} tool call(s) executed in this turn: the claim may be true",
        )  # fmt: skip
    if claim is None:
        return GuardDecision(
            guard=False, reason=GuardReason.NO_CLAIM, explanation="no completed-write claim in the reply"
        )
    return GuardDecision(
        guard=True,
        reason=GuardReason.UNBACKED_CLAIM,
        claim=claim,
        explanation=f"the reply claims a completed write ({claim.text!r}) but no tool executed in this turn",
        replacement=honest_replacement(claim.language),
        nudge=nudge_message(),
    )
