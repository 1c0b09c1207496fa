"""English completed-write grammar for the write-claim guard.

A claim is a first-person past or perfect ("I've created", "we sent"), a passive of a finished
write ("has been saved", "was posted", "is scheduled"), "successfully <verb>ed", or a bare
"Done!" / "You're all set" / "It's taken care of". A candidate is cancelled when a plan,
condition, negation, capability or instruction word stands shortly before it in the same
sentence, when its sentence is a question, or (for the present passive, which also describes
how things usually work) when a habitual or conditional phrase follows it.

Patterns run on text folded by :func:`commitbench.claimguard.guard.fold` (same length as the
original, Turkish letters mapped to ASCII, curly apostrophes straightened), case-insensitively.
"""

from __future__ import annotations

import re

# Past forms / participles of verbs that change something for the user.
WRITE_PARTICIPLES = (
    "created", "saved", "stored", "updated", "edited", "changed", "modified", "deleted", "removed", "erased",
    "added", "appended", "inserted", "sent", "emailed", "e-mailed", "texted", "messaged", "posted", "published",
    "shared", "uploaded", "submitted", "filed", "logged", "recorded", "noted", "written", "wrote", "drafted",
    "scheduled", "rescheduled", "booked", "rebooked", "reserved", "ordered", "purchased", "bought", "paid",
    "refunded", "credited", "charged", "transferred", "cancelled", "canceled", "renamed", "assigned",
    "reassigned", "approved", "escalated", "forwarded", "notified", "invited", "set", "put", "configured",
    "enabled", "disabled", "activated", "deactivated", "registered", "subscribed", "unsubscribed", "renewed",
    "extended", "deployed", "merged", "archived", "moved", "replied", "issued", "placed", "arranged",
    "organized", "organised", "processed", "completed", "finished", "reminded", "contacted", "reached out",
    "pinged", "dispatched", "launched", "triggered", "initiated", "applied", "installed", "attached", "linked",
    "tagged", "labeled", "labelled", "flagged", "marked", "pinned", "backed up", "synced", "restored", "reset",
    "restarted", "blocked", "unblocked", "granted", "revoked", "adjusted", "corrected", "fixed", "amended",
    "signed", "locked", "unlocked", "committed", "pushed", "raised", "opened a ticket", "opened a case",
    "opened a request", "opened a support ticket", "closed the ticket", "closed the case",
)  # fmt: skip
_MADE_OBJECTS = (
    "change", "changes", "update", "updates", "edit", "edits", "note", "reservation", "booking", "payment",
    "transfer", "appointment", "correction", "corrections",
)  # fmt: skip

_VERB = (
    r"(?:"
    + "|".join(sorted((re.escape(v).replace(r"\ ", r"\s+") for v in WRITE_PARTICIPLES), key=len, reverse=True))
    + r"|made\s+(?:the|that|those|these|your|a|an|all\s+the)\s+(?:" + "|".join(_MADE_OBJECTS) + r")"
    + r")\b"
)
_ADV = (
    r"(?:just|now|already|successfully|also|then|finally|since|quickly|both|all|officially|"
    r"gone\s+ahead\s+and|went\s+ahead\s+and)"
)

# Longest run of letters and hyphens a lookahead reads as one word (the longest verb word is 12 letters).
_WORD_RUN = 40

# (rule name, pattern, is_present_passive)
CLAIM_RULES: tuple[tuple[str, str, bool], ...] = (
    ("first_person", rf"\b(?:i|we)(?:'ve|'d|\s+have\b|\s+had\b)?(?:\s+{_ADV})*\s+{_VERB}", False),
    ("perfect_passive", rf"\b(?:has|have|had|'s|'ve)\s+(?:{_ADV}\s+)*been\s+(?:{_ADV}\s+)*{_VERB}", False),
    ("past_passive", rf"\b(?:was|were|got)\s+(?:{_ADV}\s+)*{_VERB}", False),
    ("present_passive", rf"\b(?:is|are|'s|'re)\s+(?:{_ADV}\s+)*{_VERB}", True),
    # The lookahead rejects most positions before the long verb alternation is tried. Its word runs are
    # bounded and possessive (giving letters back could never put a space next): unbounded, every position
    # inside a long run of letters and hyphens ("a-a-a-...") rescanned the rest of the run (quadratic
    # time); no verb word comes near the bound.
    (
        "successfully",
        rf"\bsuccessfully\s+{_VERB}"
        rf"|\b(?=[\w-]{{1,{_WORD_RUN}}}+(?:\s+[\w-]{{1,{_WORD_RUN}}}+)?\s+successfully\b){_VERB}\s+successfully\b",
        False,
    ),
    ("done", r"^\W*(?:done|all\s+done|all\s+set|finished|completed)\s*(?:[!.,:;]|-|—|–|$)", False),
    ("all_set", r"\byou(?:'re|\s+are)\s+(?:now\s+)?all\s+set\b", False),
    (
        "taken_care_of",
        r"\b(?:it|that|this|everything)(?:'s|\s+is|\s+has\s+been)\s+(?:now\s+|all\s+)?"
        r"(?:done|taken\s+care\s+of|sorted|handled|in\s+place|live)\b",
        False,
    ),
    ("gone_out", r"\b(?:has|have)\s+(?:now\s+|just\s+|already\s+)?gone\s+out\b|\bis\s+(?:now\s+)?on\s+its\s+way\b",
     False),
)

# Words that turn a following completed form into a plan, condition, denial, capability, question or
# instruction. "no problem" and "I can confirm" are the common phrases that must not cancel.
_CANCEL_WORDS = (
    r"not|never|nothing|none|nobody|no\s+one|neither|nor|cannot|unable|unless|until|without|whether|before|"
    r"once|after|if|when|whenever|shall|will|would|could|should|may|might|must|gonna|"
    r"going\s+to|about\s+to|ready\s+to|able\s+to|wants?\s+to|wanted\s+to|plan(?:s|ned)?\s+to|planning\s+to|"
    r"intend(?:s|ed)?\s+to|hope\s+to|try\s+to|tried\s+to|trying\s+to|attempt(?:s|ed)?\s+to|"
    r"need(?:s|ed)?\s+to|have\s+to|has\s+to|had\s+to|yet\s+to|to\s+be|in\s+order\s+to|so\s+that|how\s+to|"
    r"as\s+soon\s+as|by\s+the\s+time|in\s+case|instead\s+of|rather\s+than|as\s+if|make\s+sure|ensure|"
    r"remember\s+to|forget\s+to|let\s+me|let's|i'll|we'll|you'll|it'll|they'll|claimed|claims|supposedly|"
    r"allegedly|click|tap|press|go\s+to|pretend"
)
CANCEL_BEFORE = re.compile(
    rf"(?:\b(?:{_CANCEL_WORDS})\b|n't\b|\bno\b(?!\s+(?:problem|worries|prob)\b)|\bcan\b(?!\s+confirm\b))"
    r"[^.!?;\n]{0,30}$",
    re.IGNORECASE,
)
# The "after" patterns are matched at the end of a candidate claim (``pattern.match(text, end)``), so
# no copy of the rest of the text is made per candidate.
# After a present passive: "Drafts are saved automatically", "Items are added when you click".
HABITUAL_AFTER = re.compile(
    r"[^.!?;\n]{0,40}?\b(?:automatically|by\s+default|every|each|whenever|when|once|if|after|until|"
    r"as\s+soon\s+as|within|only|unless)\b",
    re.IGNORECASE,
)

# Right after the verb: "I have created nothing", "we've sent none of them".
# (The look-behind keeps a scan over a long run of spaces linear: only the run's first space starts a match.)
NOTHING_AFTER = re.compile(r"(?<!\s)\s+(?:nothing|none|no\b|anything)", re.IGNORECASE)

COMPILED_RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE), present) for name, pattern, present in CLAIM_RULES
)
