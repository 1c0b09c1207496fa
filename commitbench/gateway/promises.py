"""Whole promises, one by one, from the offline detector's findings (the gateway's reading; the follow-up
suite's checker keeps the detector's own).

The cue detector (:func:`commitbench.judges.followup.cues.detect_commitments`) finds one commitment per
promise sentence and names its action in a few words. The ledger needs more: "I'll remind you to call mum
at 6pm and remind you tomorrow at 9 am to pay the rent" is two promises, each with its own time, and each
action is the whole clause ("remind you tomorrow at 9 am to pay the rent", not "... to pay"). Here a
detected span is split where a coordinator opens another promise ("and remind you", "and I'll", ", then
I will"), each piece is read again by the detector for its own time words and trigger, and its action is
the whole piece. Linear in the reply.
"""

from __future__ import annotations

import re
from typing import Any

from commitbench.judges.followup.cues import detect_commitments
from commitbench.judges.followup.schemas import DetectedCommitment, DetectorOutput

__all__ = ["whole_promises"]

# Verbs that open a further promise after a coordinator ("and remind you", "and follow up").
_PROMISE_VERBS = (
    "remind", "follow up", "check", "send", "notify", "let you know", "ping", "email", "text", "message", "call",
    "book", "schedule", "update", "get back", "circle back", "look into", "review", "confirm", "share", "post",
    "create", "set up", "add", "cancel", "move", "order", "pay", "file", "submit", "write", "draft", "prepare",
)  # fmt: skip
_SUBJECT = r"(?:i(?:'ll|\s+will|\s+shall|'m\s+going\s+to|\s+am\s+going\s+to)|we(?:'ll|\s+will))"
_VERB = "|".join(re.escape(v).replace(r"\ ", r"\s+") for v in sorted(_PROMISE_VERBS, key=len, reverse=True))
# Where another promise begins: a coordinator, then a subject and any verb, or a promise verb alone.
_SPLIT = re.compile(
    rf"(?:,|(?<!\s))\s+(?:and(?:\s+then)?|then|also|plus)\s+(?=(?:{_SUBJECT}\s+\w|(?:also\s+)?(?:{_VERB})\b))",
    re.IGNORECASE,
)
_LEAD = re.compile(rf"^\s*(?:and\s+|then\s+|also\s+)*(?:{_SUBJECT}\s+)?(?:also\s+)?", re.IGNORECASE)
# Pieces shorter than this are no promise of their own (a stray "and").
_MIN_PIECE = 8


def _pieces(span: str) -> list[str]:
    pieces, start = [], 0
    for match in _SPLIT.finditer(span):
        pieces.append(span[start:match.start()])
        start = match.end()
    pieces.append(span[start:])
    return [p.strip().rstrip(",;") for p in pieces if len(p.strip()) >= _MIN_PIECE]


def _action(piece: str) -> str:
    return _LEAD.sub("", piece).strip().rstrip(".!;,")


def _whole(commitment: DetectedCommitment) -> list[DetectedCommitment]:
    pieces = _pieces(commitment.span)
    if len(pieces) <= 1:
        whole = _action(commitment.span)
        return [commitment.model_copy(update={"action": whole or commitment.action})]
    out = []
    for piece in pieces:
        lead = _LEAD.match(piece)
        subject = lead is not None and bool(re.search(_SUBJECT, lead.group(0), re.IGNORECASE))
        own = next(iter(detect_commitments(piece if subject else f"I'll {_action(piece)}").commitments), None)
        update: dict[str, Any] = {"span": piece, "action": _action(piece)}
        if own is not None:
            update |= {"time_expression": own.time_expression, "trigger_type": own.trigger_type,
                       "required_capabilities": own.required_capabilities}
        out.append(commitment.model_copy(update=update))
    return out


def whole_promises(detected: DetectorOutput) -> DetectorOutput:
    """The detector's findings with coordinated promises apart and every action whole (see the module doc)."""
    return detected.model_copy(update={"commitments": [p for c in detected.commitments for p in _whole(c)]})
