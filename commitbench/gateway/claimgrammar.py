"""The gateway's reading of a reply's write claims: every claimed write, one by one, and what it is about.

The write-claim guard (:mod:`commitbench.claimguard`) answers one question for a whole reply: is there a
completed-write claim in it? It is also the follow-up suite's offline checker, so its grammar stays as it
is. The gateway needs more, and adds it here, in its own layer over the guard:

* **claim by claim**: a reply is read a sentence at a time; a sentence holds a claim when the guard finds
  one in it or when one of the gateway's further verbs does ("turned off", "starred", "devre dışı
  bıraktım", ...); every write the sentence claims is a part of its own ("I've emailed Sarah and booked
  room 4B" claims two writes, so partial work is caught on the part no call backs);
* **what a part is about**: its verb's family (send, book, create, update, delete, mark, pay), which the
  tools that can back it must share (:mod:`commitbench.gateway.claims`);
* **when**: a sentence that speaks of an earlier time ("yesterday", "earlier", "already", "daha önce")
  may be backed by a call anywhere in the conversation the request carries.

Negations, plans, conditions, questions and offers stay out of scope, as in the guard. Every pattern runs
in time linear in the reply (``tests/test_text_rules_linear_time.py``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard import english as en
from commitbench.claimguard import turkish as tr
from commitbench.claimguard.guard import ClaimMatch, Language, fold, looks_like_write_claim

__all__ = ["ClaimPart", "Family", "claim_parts", "family_of_words", "sentence_spans"]


class Family(str, Enum):
    """What kind of write a claimed verb (or a tool) is about."""

    SEND = "send"
    BOOK = "book"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    MARK = "mark"
    PAY = "pay"
    OTHER = "other"  # a write the families do not name: any successful write backs it


# English verbs the guard does not read, and the gateway does (settings, mailbox marks, toggles).
EXTRA_VERBS = (
    "turned off", "turned on", "switched off", "switched on", "toggled", "starred", "unstarred", "muted",
    "unmuted", "snoozed", "paused", "resumed", "silenced", "hid", "hidden", "unpinned", "unflagged",
    "opted out", "opted in", "accepted", "declined", "trashed", "cleared", "emptied", "dismissed", "resolved",
    "closed", "reopened", "rsvped", "rsvp'd", "followed up", "unfollowed", "liked", "shut off", "stopped",
    "cancelled out", "killed",
)  # fmt: skip
# Turkish stems the guard does not read (folded), with the guard's finished tails.
EXTRA_STEMS_TR = (
    r"devre\s+disi\s+birak", r"sessize\s+al", r"durdur", "yildizla", "isaretle", "etiketle", "sabitle",
    "engelle", "gizle", "temizle", "bosalt", "onayla", "reddet", "redded", r"ac", r"birak",
)  # fmt: skip

_FAMILY_WORDS: dict[Family, tuple[str, ...]] = {
    Family.SEND: ("sent", "send", "emailed", "e-mailed", "email", "mail", "texted", "text", "messaged", "message",
                  "replied", "reply", "forwarded", "forward", "notified", "notify", "contacted", "reached out",
                  "pinged", "invited", "invite", "posted", "post", "dispatched", "shared", "share", "sms", "dm",
                  "slack", "gonder", "ilet", "paylas", "bildir", "mail", "e-posta", "eposta", "mesaj", "yayinla"),
    Family.BOOK: ("scheduled", "schedule", "rescheduled", "booked", "book", "rebooked", "reserved", "reserve",
                  "arranged", "calendar", "event", "meeting", "room", "appointment", "booking", "reservation",
                  "rsvped", "rsvp'd", "rsvp", "accepted", "declined", "planla", "zamanla", "rezerve", "randevu",
                  "rezervasyon", "takvim", "toplanti", "ertele", "programla"),
    Family.CREATE: ("created", "create", "saved", "save", "stored", "store", "added", "add", "appended", "inserted",
                    "insert", "written", "wrote", "write", "drafted", "draft", "recorded", "record", "logged", "log",
                    "noted", "note", "filed", "file", "uploaded", "upload", "submitted", "submit", "opened a",
                    "new", "reminded", "remind", "reminder", "task", "todo", "ticket", "olustur", "yarat",
                    "kaydet", "kayded", "ekle", "yaz", "sakla", "yukle", "hazirla", "not al", "not"),
    Family.UPDATE: ("updated", "update", "edited", "edit", "changed", "change", "modified", "modify", "renamed",
                    "rename", "adjusted", "corrected", "fixed", "amended", "set", "configured", "config",
                    "setting", "settings", "preference", "preferences", "enabled", "enable", "disabled", "disable",
                    "turned off", "turned on", "switched off", "switched on", "toggled", "toggle", "activated",
                    "deactivated", "muted", "mute", "unmuted", "paused", "pause", "resumed", "snoozed", "snooze",
                    "moved", "move", "assigned", "assign", "reassigned", "patch", "put", "stopped", "shut off",
                    "guncelle", "duzenle", "degistir", "ayarla", "duzelt", "devre disi birak", "etkinlestir",
                    "kapat", "kapa", "ac", "sessize al", "durdur", "tasi", "ata"),
    Family.DELETE: ("deleted", "delete", "removed", "remove", "erased", "erase", "cancelled", "canceled", "cancel",
                    "archived", "archive", "trashed", "trash", "cleared", "clear", "emptied", "unsubscribed",
                    "unsubscribe", "dismissed", "dismiss", "closed", "close", "resolved", "resolve", "sil", "kaldir",
                    "iptal", "arsivle", "arsiv", "temizle", "bosalt"),
    Family.MARK: ("starred", "star", "unstarred", "flagged", "flag", "unflagged", "marked", "mark", "tagged", "tag",
                  "labeled", "labelled", "label", "pinned", "pin", "unpinned", "liked", "like", "hid", "hidden",
                  "hide", "yildizla", "isaretle", "etiketle", "sabitle", "gizle"),
    Family.PAY: ("paid", "pay", "payment", "refunded", "refund", "charged", "charge", "transferred", "transfer",
                 "ordered", "order", "purchased", "purchase", "bought", "buy", "checkout", "invoice", "ode", "odeme",
                 "iade", "havale", "siparis", "tahsil"),
}
# A verb word -> its family (the first family that names it; nouns and tool words are read for tools only).
_VERB_FAMILY: dict[str, Family] = {}
for _family, _words in _FAMILY_WORDS.items():
    for _word in _words:
        _VERB_FAMILY.setdefault(_word, _family)

# A sentence: up to its end marks and any closing quotes or brackets after them, or a line break.
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"'\u201d\u2019)\]]*|\n|$)")
_ALL_VERBS = tuple(sorted({*en.WRITE_PARTICIPLES, *EXTRA_VERBS}, key=len, reverse=True))
_VERB_ALTERNATION = "|".join(re.escape(v).replace(r"\ ", r"\s+") for v in _ALL_VERBS)
_EXTRA_VERB_ALTERNATION = "|".join(
    re.escape(v).replace(r"\ ", r"\s+") for v in sorted(EXTRA_VERBS, key=len, reverse=True)
)
_ADV = r"(?:just|now|already|successfully|also|then|finally|quickly|both|all|gone\s+ahead\s+and|went\s+ahead\s+and)"
# The gateway's further claims: its extra verbs in the guard's first-person and passive shapes.
_EXTRA_CLAIM = re.compile(
    rf"\b(?:(?:i|we)(?:'ve|'d|\s+have\b|\s+had\b)?(?:\s+{_ADV})*\s+"
    rf"|(?:has|have|had|'s|'ve)\s+(?:{_ADV}\s+)*been\s+(?:{_ADV}\s+)*"
    rf"|(?:was|were|got|is|are|'s|'re)\s+(?:{_ADV}\s+)*)(?:{_EXTRA_VERB_ALTERNATION})\b",
    re.IGNORECASE,
)
# A further write verb coordinated with a claim: "... and booked", ", and also sent" (a bare comma is not enough:
# "the task, assigned to Bob" describes the task).
_COORDINATED = re.compile(
    rf"(?:(?:,|(?<!\s))\s+(?:and|&|then|plus|as\s+well\s+as)\s+)"  # a run of spaces is entered once
    rf"(?:(?:i(?:'ve)?|we(?:'ve)?|have|has|also|then|just|already|it\s+was|they\s+were|was|were)\s+)*"
    rf"(?P<verb>{_VERB_ALTERNATION})\b",
    re.IGNORECASE,
)
_FIRST_VERB = re.compile(rf"\b(?P<verb>{_VERB_ALTERNATION})\b", re.IGNORECASE)
# Verbs that open a sentence without saying a write happened ("Noted.", "Set a time that suits you.").
_NOT_ELLIPTICAL = ("noted", "set", "put", "wrote", "written", "logged", "moved", "fixed", "closed", "hidden", "liked",
                   "stopped", "killed", "cleared", "resolved", "accepted", "declined", "paused", "resumed")
# An elliptical claim: a sentence that opens on a write participle ("Archived and starred.", "Sent!").
_ELLIPTICAL = re.compile(
    r"^\W*(?:" + "|".join(re.escape(v).replace(r"\ ", r"\s+") for v in _ALL_VERBS if v not in _NOT_ELLIPTICAL)
    + r")\b(?!\s+(?:by|to\s+be|automatically|when|if|once|after)\b)",
    re.IGNORECASE,
)
# Composing verbs whose work a reply may hold itself, and the words that say it does.
_COMPOSING = frozenset({"written", "wrote", "drafted", "prepared", "put together", "outlined", "summarized",
                        "summarised", "created", "made", "compiled"})
_IN_REPLY = re.compile(r"\b(?:below|above|here(?:'s|\s+is|\s+are|\s+it\s+is)?|as\s+follows)\b|:\s*$",
                       re.IGNORECASE)
# Guard rules whose words are no write verb of their own ("You're all set", "Done!").
_VERBLESS_RULES = frozenset({"all_set", "done", "taken_care_of", "gone_out"})
_TR_EXTRA_STEM = "|".join(sorted(EXTRA_STEMS_TR, key=len, reverse=True))
_TR_EXTRA_WORD = re.compile(
    rf"(?<!\w)(?:{_TR_EXTRA_STEM})(?:[dt][iu](?:m|k)|m[iu]s(?:[iu]m|[iu]z)|[iu]?[ln][dt][iu](?:l[ae]r)?)(?!\w)",
    re.IGNORECASE,
)
# A sentence that speaks of an earlier time: a call earlier in the conversation may back it.
_EARLIER = re.compile(
    r"\b(?:earlier|previously|yesterday|before|already|ago|last\s+(?:week|time|night|month|turn|message)|"
    r"this\s+morning|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|as\s+(?:i|we)\s+"
    r"(?:said|mentioned|noted)|daha\s+once|onceden|dun|zaten|gecen|az\s+once|demin)\b",
    re.IGNORECASE,
)
# Words of a part's object read up to here (a tool is matched on the verb, its object and the tool's words).
_OBJECT_CHARS = 60


class ClaimPart(BaseModel):
    """One write a reply claims is done."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(description="Start offset of the part (its verb) in the reply.")
    end: int = Field(description="End offset of the part's words (the verb and a few words of its object).")
    text: str = Field(description="The part's words, as written.")
    verb: str = Field(description="The claimed verb, folded and lower-case.")
    family: Family = Field(description="What kind of write it is.")
    language: Language = Field(description="The claim's language.")
    sentence: tuple[int, int] = Field(description="Start and end offsets of the sentence that carries it.")
    before: str = Field(default="", description="The words before its verb back to the claim's previous verb (its "
                        "subject may say what it is about: 'Your reminder is set').")
    passive: bool = Field(default=False, description="A passive without the assistant as subject ('is scheduled', "
                          "'was processed', 'planlandı'): it may report a state a read returned.")
    earlier: bool = Field(description="The sentence speaks of an earlier time (a call earlier in the conversation "
                          "may back it).")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Start and end offsets of each sentence (a run up to and including its end marks or line break)."""
    return [(m.start(), m.end()) for m in _SENTENCE.finditer(text) if m.group().strip()]


def family_of_words(words: str) -> Family:
    """The family of a claimed verb (its longest known prefix word), or OTHER."""
    key = re.sub(r"\s+", " ", fold(words).lower().strip())
    if key in _VERB_FAMILY:
        return _VERB_FAMILY[key]
    for size in range(len(key), 1, -1):
        if key[:size] in _VERB_FAMILY:
            return _VERB_FAMILY[key[:size]]
    return Family.OTHER


def family_words(family: Family) -> tuple[str, ...]:
    """The words (verbs, nouns and tool words) of a family."""
    return _FAMILY_WORDS.get(family, ())


def _cancelled(folded: str, start: int) -> bool:
    window = folded[max(0, start - 60):start]
    cut = max(window.rfind(c) for c in ".!?;\n")
    return bool(en.CANCEL_BEFORE.search(window[cut + 1:]))


def _english_parts(text: str, folded: str, s: int, e: int, earlier: bool, claim: ClaimMatch | None) -> list[ClaimPart]:
    sentence = folded[s:e]
    start: int | None = None
    if claim is not None and claim.language is Language.ENGLISH:
        start = claim.start
    question = sentence.rstrip().endswith("?")
    extra = _EXTRA_CLAIM.search(sentence)
    if extra is not None and not _cancelled(folded, s + extra.start()) and not question:
        start = extra.start() if start is None else min(start, extra.start())
    elliptical = _ELLIPTICAL.match(sentence)
    if elliptical is not None and not question:
        start = 0
    if start is None:
        return []
    verbs: list[tuple[int, int, str]] = []
    verbless = claim is not None and claim.rule in _VERBLESS_RULES and claim.start == start
    first = _FIRST_VERB.search(sentence, claim.end if verbless and claim is not None else start)
    if first is not None:
        verbs.append((first.start("verb"), first.end("verb"), first.group("verb")))
        position = first.end()
        while True:
            more = _COORDINATED.search(sentence, position)
            if more is None:
                break
            position = more.end()
            if not _cancelled(folded, s + more.start("verb")):
                verbs.append((more.start("verb"), more.end("verb"), more.group("verb")))
    parts = []
    if _IN_REPLY.search(sentence):  # "I've drafted a reply below:": the content is in the reply itself
        verbs = [v for v in verbs if fold(v[2]).lower() not in _COMPOSING]
    if verbless and claim is not None:  # "Done!", "You're all set": a claim without a verb of its own
        parts.append(_part(text, s + claim.start, s + claim.end, claim.text, Family.OTHER, Language.ENGLISH,
                           (s, e), earlier))
    for index, (v_start, v_end, verb) in enumerate(verbs):
        stop = verbs[index + 1][0] if index + 1 < len(verbs) else len(sentence)
        end = min(stop, v_end + _OBJECT_CHARS)
        words = text[s + v_start:s + end].rstrip(" ,.;:!?&\n")
        while True:  # the joint before the next verb is no part of this one's words
            trimmed = re.sub(r"(?:,|\s+(?:and|then|plus|as\s+well\s+as|&))$", "", words, flags=re.IGNORECASE)
            if trimmed == words:
                break
            words = trimmed.rstrip(" ,;:&")
        passive = bool(_PASSIVE_BEFORE.search(sentence[max(0, v_start - 30):v_start]))
        # what the part is about may stand before its verb ("Your reminder is set"): back to the verb before it
        since = verbs[index - 1][1] if index else max(0, v_start - _OBJECT_CHARS)
        parts.append(_part(text, s + v_start, s + v_start + len(words), words, family_of_words(verb),
                           Language.ENGLISH, (s, e), earlier, passive, text[s + since:s + v_start]))
    return parts


def _turkish_parts(text: str, folded: str, s: int, e: int, earlier: bool, claim: ClaimMatch | None) -> list[ClaimPart]:
    sentence = folded[s:e]
    if sentence.rstrip().endswith("?") or tr.CANCEL_BEFORE.search(sentence):
        return []
    guard_found = claim is not None and claim.language is Language.TURKISH
    words: list[tuple[int, int]] = []
    for pattern in (tr.CLAIM_WORD, _TR_EXTRA_WORD):
        for match in pattern.finditer(sentence):
            if tr.CANCEL_AFTER.match(sentence, match.end()):
                continue
            if pattern is tr.CLAIM_WORD and match.group("bare_mis") is not None \
                    and not tr.CLAUSE_END_AFTER.match(sentence, match.end()):
                continue
            words.append(match.span())
    if not words or (not guard_found and not any(_TR_EXTRA_WORD.fullmatch(sentence, a, b) for a, b in words)):
        return []
    parts = []
    previous_end = 0
    for a, b in sorted(set(words)):
        if a < previous_end:
            continue
        # the object stands before a Turkish verb: read back to the previous claimed verb or a comma
        back = max(previous_end, sentence.rfind(",", 0, a) + 1, a - _OBJECT_CHARS)
        phrase = text[s + back:s + b].strip()
        if fold(phrase[:3]).lower() == "ve ":
            phrase = phrase[3:]
        parts.append(_part(text, s + b - len(phrase), s + b, phrase, family_of_words(sentence[a:b]),
                           Language.TURKISH, (s, e), earlier, bool(_TR_PASSIVE.search(sentence[a:b]))))
        previous_end = b
    return parts


def _part(text: str, start: int, end: int, words: str, family: Family, language: Language,
          sentence: tuple[int, int], earlier: bool, passive: bool = False, before: str = "") -> ClaimPart:
    return ClaimPart(start=start, end=end, text=words[:300], verb=fold(text[start:end]).lower().split(" ")[0][:40],
                     family=family, language=language, sentence=sentence, earlier=earlier, passive=passive,
                     before=before[-_OBJECT_CHARS:])


# Just before a verb: a passive auxiliary, with at most two adverbs between.
_PASSIVE_BEFORE = re.compile(r"\b(?:is|are|was|were|been|'s|'re)\s+(?:[a-z]+ly\s+|now\s+|already\s+|all\s+){0,2}$",
                             re.IGNORECASE)
# A Turkish passive finished form: stem + passive + past or perfect (the guard's passive tails).
_TR_PASSIVE = re.compile(r"[iu]?[ln](?:[dt][iu]|m[iu]s)(?:l[ae]r)?(?:[dt][iu]r)?$", re.IGNORECASE)


# Any word a claim could stand on; a sentence without one is passed over unread.
_TRIGGERS = (
    _FIRST_VERB,
    re.compile(r"\b(?:done|finished|completed|set|care|sorted|handled|place|live|gone|way)\b", re.IGNORECASE),
    tr.CLAIM_WORD,
    _TR_EXTRA_WORD,
)


def _triggered(folded: str) -> list[int]:
    return sorted({m.start() for pattern in _TRIGGERS for m in pattern.finditer(folded)})


def claim_parts(text: str) -> list[ClaimPart]:
    """Every write the reply claims is done, in order (see the module doc)."""
    folded = fold(text)
    triggers = _triggered(folded)
    parts: list[ClaimPart] = []
    for s, e in sentence_spans(text):
        at = bisect_left(triggers, s)
        if at == len(triggers) or triggers[at] >= e:
            continue
        earlier = bool(_EARLIER.search(folded, s, e))
        claim = looks_like_write_claim(text[s:e])
        found = _english_parts(text, folded, s, e, earlier, claim)
        found += _turkish_parts(text, folded, s, e, earlier, claim)
        parts.extend(sorted(found, key=lambda p: p.start))
    return parts
