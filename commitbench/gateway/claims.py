"""Which claimed writes really happened: each claim part against the calls the conversation shows.

A claimed write (:func:`commitbench.gateway.claimgrammar.claim_parts`) is **backed** only by a call that
succeeded, of a tool that can do that write:

* a call *succeeded* when it ran (the request holds its result) and its result reports no failure
  (:func:`tool_failure`: an error field, a failed status, ``ok: false``, an HTTP error code, or words such
  as "failed", "denied", "başarısız"); the reply's own tool calls count as about to run;
* a tool *can do* the write when it is no read (``get_``, ``list_``, ``search_``... unless the catalogue
  marks it a write) and it shares the part's family (``send_email`` sends, ``create_event`` books) or the
  part's object ("preferences" in ``update_preferences``), or it names no family at all (``run_action``);
* a call *counts* when it is in this turn, or anywhere in the conversation the request carries when the
  claim's sentence speaks of an earlier time ("I sent it yesterday").

:class:`~commitbench.gateway.verdicts.CountMode` says how strict: ``matching`` (the gateway's default, as
above), ``writes`` (any successful call of a tool that can write backs every claim), ``any`` (the guard's
published rule, :mod:`commitbench.gateway.checks`). Every function here is pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard.guard import Language, fold
from commitbench.gateway.claimgrammar import ClaimPart, Family, family_of_words, family_words
from commitbench.gateway.turn import ToolActivity
from commitbench.gateway.verdicts import CountMode

__all__ = ["Backing", "back_parts", "corrected_reply", "tool_failure", "tool_families"]


READ_VERBS = frozenset({
    "get", "list", "read", "search", "fetch", "find", "lookup", "look", "check", "view", "show", "query",
    "describe", "count", "retrieve", "browse", "inspect", "preview", "download", "validate", "verify", "estimate",
    "calculate", "compute", "summarize", "summarise", "translate", "weather", "whoami", "ping", "status",
})
_TOKEN = re.compile(r"[a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FAILED_STATUS = frozenset({
    "failed", "failure", "error", "errored", "denied", "rejected", "forbidden", "unauthorized", "unauthorised",
    "timeout", "timed_out", "cancelled_by_server", "aborted", "invalid", "not_found", "basarisiz", "hata",
    "reddedildi",
})
_FAILURE_WORDS = re.compile(
    r"^\W*(?:error|failed|failure|denied|forbidden|unauthori[sz]ed|exception|traceback|rejected|invalid|"
    r"hata|basarisiz)\b|\b(?:failed\s+to|could\s+not|couldn't|unable\s+to|permission\s+denied|access\s+denied|"
    r"not\s+allowed|not\s+permitted|timed\s+out|http\s+[45]\d\d|status\s+[45]\d\d|"
    r"basarisiz\s+oldu|reddedildi|izin\s+verilmedi|yapilamadi|gonderilemedi|olusturulamadi)\b",
    re.IGNORECASE,
)
# A question: it ends in a question mark, opens on a question word, or (Turkish) holds a question particle.
_QUESTION = re.compile(
    r"\?\s*$|^(?:what|when|where|which|who|whose|how|why|did|do|does|is|are|was|were|has|have|can|could|"
    r"tell\s+me|show\s+me)\b|\bm[iu](?:s[iu]n(?:[iu]z)?|y[iu]m|d[iu]r)?\b|\b(?:ne\s+zaman|nedir|hangi|nerede)\b",
    re.IGNORECASE,
)
_FAILURE_KEYS = ("error", "errors", "error_message", "errorMessage", "exception", "fault")
# What a verdict quotes of a tool's error.
ERROR_CHARS = 120


class Backing(BaseModel):
    """What the conversation shows for one claimed write."""

    model_config = ConfigDict(frozen=True)

    part: ClaimPart = Field(description="The claimed write.")
    backed_by: str | None = Field(default=None, description="The call that backs it (null: none).")
    failed: list[tuple[str, str]] = Field(
        default_factory=list, description="Calls of tools that could have done it and failed: (tool, error).")
    reads: list[str] = Field(default_factory=list, description="Calls that ran but only read.")
    others: list[str] = Field(default_factory=list, description="Successful calls that do other writes.")

    @property
    def backed(self) -> bool:
        return self.backed_by is not None

    def reason(self) -> str:
        """Why the part is not backed, in one sentence."""
        claim = f"{self.part.text!r}"
        if self.failed:
            tool, error = self.failed[-1]
            return f"{claim} is claimed, but the {tool} call failed ({error})"
        if self.others:
            return f"{claim} is claimed, but no call did it (only {', '.join(self.others)} went through)"
        if self.reads:
            return f"{claim} is claimed, but only {', '.join(self.reads)} ran, which read and change nothing"
        return f"{claim} is claimed, but no tool ran for it"


def _tokens(words: str) -> list[str]:
    return _TOKEN.findall(fold(_CAMEL.sub(" ", words)).lower().replace("_", " ").replace("-", " "))


def tool_families(name: str) -> frozenset[Family]:
    """The families a tool's name speaks of (``create_event``: create and book)."""
    found = set()
    for token in _tokens(name):
        family = family_of_words(token)
        if family is not Family.OTHER and (token in family_words(family) or len(token) > 3):
            found.add(family)
    return frozenset(found)


def is_read(name: str, catalogued_write: bool) -> bool:
    """A tool that only reads: its name opens on a read verb, and the catalogue does not mark it a write."""
    tokens = _tokens(name)
    return not catalogued_write and bool(tokens) and tokens[0] in READ_VERBS


def tool_failure(result: str | None) -> str | None:
    """What a tool's result says went wrong (None: it did not fail, or did not run)."""
    if result is None:
        return None
    text = result.strip()
    try:
        value = json.loads(text) if text[:1] in "{[" else None
    except ValueError:
        value = None
    if isinstance(value, dict):
        return _structured_failure(value)
    if _FAILURE_WORDS.search(fold(text[:2000])):
        return text[:ERROR_CHARS]
    return None


def _structured_failure(value: dict[str, object]) -> str | None:
    for key in _FAILURE_KEYS:
        error = value.get(key)
        if error not in (None, "", False, [], {}, 0):
            return (error if isinstance(error, str) else json.dumps(error, ensure_ascii=False))[:ERROR_CHARS]
    for key in ("ok", "success", "succeeded"):
        if value.get(key) is False:
            message = value.get("message") or value.get("detail") or f"{key}: false"
            return str(message)[:ERROR_CHARS]
    for key in ("status", "state", "result", "outcome"):
        status = value.get(key)
        if isinstance(status, str) and fold(status).lower().replace(" ", "_") in _FAILED_STATUS:
            message = value.get("message") or value.get("detail") or status
            return str(message)[:ERROR_CHARS]
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            return f"status {status}"
    for key in ("status_code", "statusCode", "code", "http_status"):
        code = value.get(key)
        if isinstance(code, int) and not isinstance(code, bool) and code >= 400:
            return f"{key} {code}"
    return None


def _can_do(call: ToolActivity, part: ClaimPart, rule: CountMode) -> bool:
    families = tool_families(call.name)
    if rule is not CountMode.MATCHING or part.family is Family.OTHER:
        return True  # any tool that is no read can write
    if not families or part.family in families:
        return True
    # the claim names what the tool works on: "scheduled the email" and send_email, "saved your preferences"
    # and update_preferences (five-letter prefixes, so plural and tense do not matter)
    said = {t[:5] for t in _tokens(f"{part.before} {part.text}") if len(t) > 3}
    return any(t[:5] in said for t in _tokens(call.name) if len(t) > 3)


def asks(user_message: str) -> bool:
    """Whether the user's message is a question (a passive in the reply may then report what a read found)."""
    return bool(_QUESTION.search(fold(user_message.strip()[-2000:])))


def back_part(part: ClaimPart, now: Sequence[ToolActivity], earlier: Sequence[ToolActivity],
              pending: Sequence[ToolActivity], writes: frozenset[str], rule: CountMode,
              question: bool = False) -> Backing:
    """What the calls show for one claimed write (see the module doc)."""
    calls = [*(earlier if part.earlier else ()), *now]
    failed: list[tuple[str, str]] = []
    reads: list[str] = []
    others: list[str] = []
    for call in [*calls, *pending]:
        pending_call = call.result is None and call in pending
        if not call.ran and not pending_call:
            continue
        if is_read(call.name, call.name in writes):
            if question and part.passive and call.ran and tool_failure(call.result) is None:
                # "When was my payment processed?" - "It was processed on May 3": a state the read returned
                return Backing(part=part, backed_by=f"{call.name} (a state it read)")
            reads.append(call.name)
            continue
        doable = _can_do(call, part, rule)
        error = None if pending_call else tool_failure(call.result)
        if error is not None:
            if doable:
                failed.append((call.name, error))
            continue
        if doable:
            return Backing(part=part, backed_by=call.name)
        others.append(call.name)
    return Backing(part=part, failed=failed, reads=list(dict.fromkeys(reads)), others=list(dict.fromkeys(others)))


def back_parts(parts: Sequence[ClaimPart], now: Sequence[ToolActivity], earlier: Sequence[ToolActivity],
               pending: Sequence[ToolActivity], writes: frozenset[str], rule: CountMode,
               question: bool = False) -> list[Backing]:
    """What the calls show for each claimed write, in order (``question``: the user asked a question)."""
    return [back_part(part, now, earlier, pending, writes, rule, question) for part in parts]


_CORRECTIONS = {
    Language.ENGLISH: {
        "none": "No action ran for this, so it has not happened yet.",
        "failed": "The {tool} call failed ({error}), so this has not happened.",
        "partial": "Only {tools} went through; the rest of this has not happened yet.",
        "reads": "Only {tools} ran, which changes nothing, so this has not happened yet.",
    },
    Language.TURKISH: {
        "none": "Bunun için hiçbir işlem çalışmadı; henüz yapılmadı.",
        "failed": "{tool} çağrısı başarısız oldu ({error}); bu yapılmadı.",
        "partial": "Yalnızca {tools} çalıştı; gerisi henüz yapılmadı.",
        "reads": "Yalnızca {tools} çalıştı ve bunlar bir şey değiştirmez; henüz yapılmadı.",
    },
}


def correction(backings: Sequence[Backing], language: Language) -> str:
    """The sentence said instead of one whose claims are not all backed: what actually happened."""
    words = _CORRECTIONS[language]
    done = [b.backed_by for b in backings if b.backed_by]
    missing = [b for b in backings if not b.backed]
    failed = [f for b in missing for f in b.failed]
    if failed:
        tool, error = failed[-1]
        sentence = words["failed"].format(tool=tool, error=re.sub(r"\s+", " ", error)[:ERROR_CHARS])
        return sentence if not done else f"{words['partial'].format(tools=', '.join(dict.fromkeys(done)))} {sentence}"
    if done:
        return words["partial"].format(tools=", ".join(dict.fromkeys(done)))
    reads = [r for b in missing for r in b.reads]
    if reads:
        return words["reads"].format(tools=", ".join(dict.fromkeys(reads)))
    return words["none"]


def corrected_reply(text: str, backings: Sequence[Backing]) -> str:
    """The reply with each sentence that carries an unbacked claim replaced by what actually happened; the
    other sentences (true claims, the rest of the answer) stay as written."""
    by_sentence: dict[tuple[int, int], list[Backing]] = {}
    for backing in backings:
        by_sentence.setdefault(backing.part.sentence, []).append(backing)
    out: list[str] = []
    position = 0
    for (start, end), found in sorted(by_sentence.items()):
        if all(b.backed for b in found):
            continue
        lead = len(text[start:end]) - len(text[start:end].lstrip())
        trail = text[start:end][len(text[start:end].rstrip()):]
        said = correction(found, found[0].part.language)
        between = text[position:start + lead]
        if out and out[-2] == said and not between.strip():  # the sentence before said the same: once is enough
            out[-1] = trail
        else:
            out.extend((between, said, trail))
        position = end
    out.append(text[position:])
    return "".join(out)
