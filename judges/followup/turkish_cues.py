"""Turkish promises of later action, by verb stem and a first-person future or volitional ending.

Turkish puts the promise in one word: a verb stem and an ending that says who acts and when
(hatırlat-acağım "I will remind", ara-rım "I'll call", haber ver-eyim "let me let you know"). The English
cue detector looks for "I'll" before a verb; this module looks for a promise stem followed, as one whole
word, by one of these endings (on text folded by :func:`commitbench.claimguard.guard.fold`, so ASCII-typed
Turkish reads the same):

* future, first person: -(y)AcAğIm (I), -(y)AcAğIz (we);
* aorist, first person: -(I/A)rIm (I), -(I/A)rIz (we): the everyday promise "size haber veririm";
* optative, first person singular: -(y)AyIm ("yarın size döneyim"), a volitional promise; followed by the
  question particle ("hatırlatayım mı?") it is an offer;
* third person future -(y)AcAk(lAr), only after a subject that is the deployment's people ("ekibimiz sizi
  arayacak"), as English "our team will call you"; a named person ("Ahmet sizi arayacak") promises nothing
  on the assistant's behalf, as in English.

Because the ending must close the word, what is not a promise never matches: the past and the reported
(hatırlattım, göndereceğimi), the negative and the inability (hatırlatmayacağım, arayamam,
arayamayacağım), the potential ("hatırlatabilirim": a capability, an offer only with "isterseniz" or a
question), the second person (siz ararsanız) and the third person without such a subject. Words that make
the aorist general ("genelde müşterilerimizi ararız") cancel it, and "şunu hatırlatırım" reminds now.

As in English, "we" is the company's people (performer ``third_party``, who keep the promise through a
hand-over), a promise that waits for the user's own move or is offered is reported apart (not
agent-initiated), and a promise must point past the turn: a time, an event, the next conversation
(:mod:`commitbench.judges.followup.turkish_times`), or a verb that only makes sense later (remind, call,
let you know, follow up, remember, ...).

A sentence with two promise verbs ("yarın hatırlatırım ve cuma günü raporu gönderirim") gives two
promises, each read in its own clause (from the previous promise verb to its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard.guard import fold
from commitbench.episodes.followup.vocabulary import Capability
from commitbench.judges.followup import turkish_times as tt
from commitbench.judges.followup.needs import PromiseTraits, needed_capabilities
from commitbench.judges.followup.schemas import Performer, TriggerType

__all__ = ["PromiseKind", "TurkishPromise", "find_promises"]

_I = re.IGNORECASE


class PromiseKind(str, Enum):
    """What a Turkish promise says the assistant will do, read from its verb (and the clause's nouns)."""

    REMIND = "remind"
    CALL = "call"
    MESSAGE = "message"
    EMAIL = "email"
    NOTIFY = "notify"
    FOLLOW_UP = "follow_up"
    SCHEDULE = "schedule"
    SEND = "send"
    CHECK = "check"
    WATCH = "watch"
    REMEMBER = "remember"
    LOOK_INTO = "look_into"
    PREPARE = "prepare"


# Folded stems by kind. A light verb's "et" is written "ed": every ending read here starts with a vowel.
STEMS: dict[PromiseKind, tuple[str, ...]] = {
    PromiseKind.REMIND: (
        r"(?:hatirlatma(?:yi|lar[iu]?)?|hatirlatici(?:yi|lar[iu]?)?|alarm(?:[iu]|lar[iu]?)?)\s+"
        r"(?:kur|ayarla|olustur|planla)",
        "hatirlat",
    ),
    PromiseKind.CALL: (r"telefon\s+ed", r"arama\s+yap", r"geri\s+ara", "ara"),
    PromiseKind.EMAIL: (r"(?:e-?mail|mail|e-?posta)(?:[iu]|y[iu])?\s+(?:at|gonder|yaz)",),
    PromiseKind.MESSAGE: (r"(?:mesaj|sms|whatsapp)(?:[iu]|lar[iu]?)?\s+(?:at|gonder|yaz|birak)",),
    PromiseKind.NOTIFY: (
        r"haber\s+ver", r"bilgi\s+ver", r"haberdar\s+ed", r"iletisime\s+gec", "bilgilendir", "bildir", "ulas",
    ),
    PromiseKind.FOLLOW_UP: (r"takip\s+ed", r"donus\s+yap", r"geri\s+don", "don"),
    PromiseKind.WATCH: (r"goz\s+kulak\s+ol", r"takipte\s+kal", "izle", "gozlemle"),
    PromiseKind.REMEMBER: (r"akl[iu]mda\s+tut", r"not\s+al", "hatirla", "unutma"),
    PromiseKind.LOOK_INTO: ("arastir", "ilgilen"),
    PromiseKind.CHECK: (r"kontrol\s+ed", r"goz\s+at", "incele", "bak"),
    PromiseKind.SCHEDULE: (r"randevu\s+(?:al|ayarla|olustur)", "planla", "ayarla", "zamanla", "programla", "kur"),
    PromiseKind.SEND: ("gonder", "ilet", "paylas", "yolla"),
    PromiseKind.PREPARE: ("hazirla", "yaz", "tamamla"),
}

# First-person future, aorist and optative endings, the third-person future, and the forms of an offer.
_ENDING = (
    r"(?:(?P<future>y?[ae]c[ae]g[iu](?P<future_person>[mz]))"
    r"|(?P<aorist>(?:[aeiu]?r)[iu](?P<aorist_person>[mz]))"
    r"|(?P<optative>y?[ae]y[iu]m)"
    r"|(?P<third>y?[ae]c[ae]k(?:l[ae]r)?(?:d[iu]r)?)"
    r"|(?P<potential>y?[ae]bil[iu]r[iu][mz])"
    r"|(?P<asks>m[ae]m[iu]\s+ister\s+m[iu]s[iu]n(?:[iu]z)?|m[ae]m[iu]\s+ister\s+m[iu]y[iu]s[iu]n(?:[iu]z)?))"
)
_KIND_GROUP = {kind: f"k_{kind.value}" for kind in PromiseKind}
PROMISE_VERB = re.compile(
    r"(?<!\w)(?:"
    + "|".join(f"(?P<{_KIND_GROUP[kind]}>{'|'.join(stems)})" for kind, stems in STEMS.items())
    + r")" + _ENDING + r"(?!\w)",
    _I,
)
# The question particle right after the verb: "hatırlatayım mı?", "arayayım mı". (The look-behind keeps a
# scan over a long run of spaces linear: only the run's first space starts a match.)
QUESTION_AFTER = re.compile(r"(?<!\s)\s*m[iu](?:s[iu]n(?:[iu]z)?|y[iu]m|y[iu]z)?(?!\w)", _I)

# The deployment's people as the subject of a third-person promise ("ekibimiz", "bir temsilcimiz").
OUR_PEOPLE = re.compile(
    r"(?<!\w)(?:ekib(?:imiz|i)|ekip\s+arkadas(?:im|imiz|larimiz)|arkadaslarimiz|bir\s+arkadasimiz"
    r"|(?:bir\s+)?(?:temsilci|uzman|teknisyen|yetkili|danisman|muhendis|sorumlu)(?:miz|lerimiz)"
    r"|bir\s+(?:temsilci|uzman|teknisyen|yetkili|danisman|muhendis)|birisi|biri"
    r"|(?:destek|teknik|satis|fatura(?:lama)?|musteri\s+hizmetleri)\s+(?:ekibi(?:miz)?|birimi(?:miz)?|departmani(?:miz)?)"
    r"|departman(?:imiz)|birim(?:imiz)|musteri\s+hizmetleri(?:miz)?)(?!\w)",
    _I,
)
# Words that make an aorist a habit, not a promise ("genelde ararız").
HABITUAL = re.compile(
    r"(?<!\w)(?:genel(?:de|likle|\s+olarak)|normal(?:de|\s+olarak)|cogu(?:nlukla|\s+zaman)|bazen|siklikla"
    r"|zaman\s+zaman|her\s+zaman|hep|ekseriyetle|tipik\s+olarak)(?!\w)",
    _I,
)
# "Şunu hatırlatırım" reminds now, in the reply itself.
REMINDS_NOW = re.compile(r"(?<!\w)(?:sunu|sunlari|bunu|unutmayin)\s+$", _I)
_LOOK_BACK = 24
ADDRESSED = re.compile(r"(?<!\w)(?:size|sana|sizlere|sizinle|seninle|sizi|seni)(?!\w)", _I)
EMAIL_NOUN = re.compile(r"(?<!\w)(?:e-?mail|mail|e-?posta|eposta)\w*", _I)
SMS_NOUN = re.compile(r"(?<!\w)(?:sms|kisa\s+mesaj|metin\s+mesaj)\w*", _I)
MESSAGE_NOUN = re.compile(r"(?<!\w)mesaj\w*", _I)
FILE_NOUN = re.compile(r"(?<!\w)(?:dosya|belge|dokuman|pdf|ek(?:i|leri)|kopya|tablo)\w*", _I)
# What is left of a clause at its start: a coordinator or punctuation from the clause before.
_CLAUSE_LEAD = re.compile(r"[\s,;:]*(?:(?:ve|sonra|ardindan|ayrica|hem(?:\s+de)?|da|de)(?!\w)[\s,;:]*)*", _I)

# Kinds that point past the turn by themselves (English "remind", "call you", "let you know", "follow up").
DEFERRED_KINDS: frozenset[PromiseKind] = frozenset({
    PromiseKind.REMIND, PromiseKind.CALL, PromiseKind.MESSAGE, PromiseKind.EMAIL, PromiseKind.NOTIFY,
    PromiseKind.FOLLOW_UP, PromiseKind.WATCH, PromiseKind.REMEMBER, PromiseKind.LOOK_INTO,
})  # fmt: skip
# Kinds that tell the user something later (English "remind", "let you know", "get back to you", "message you").
NOTIFY_KINDS: frozenset[PromiseKind] = frozenset(
    {PromiseKind.REMIND, PromiseKind.NOTIFY, PromiseKind.FOLLOW_UP, PromiseKind.MESSAGE}
)
_SENDING = frozenset({PromiseKind.SEND, PromiseKind.PREPARE})


class TurkishPromise(BaseModel):
    """One Turkish promise (or offer) in a sentence, with the offsets of its clause in the text read."""

    model_config = ConfigDict(frozen=True)

    kind: PromiseKind = Field(description="What is promised, read from the verb and the clause's nouns.")
    verb: str = Field(description="The promise verb as written.")
    start: int = Field(description="Start of the promise's clause in the text read.")
    end: int = Field(description="End of the clause (the end of its verb).")
    action: str = Field(description="The clause as written, ending with the verb.")
    performer: Performer = Field(description="self for I; third_party for we and for the deployment's people.")
    trigger_type: TriggerType = Field(description="What sets the action off.")
    time_expression: str | None = Field(default=None, description="The time words, as written.")
    required_capabilities: list[Capability] = Field(description="What keeping it needs of the runtime.")
    is_offer: bool = Field(description="An offer: a question, or a promise on condition that the user wants it.")


def _kind(match: re.Match[str], clause: str) -> PromiseKind:
    kind = next(k for k in PromiseKind if match.group(_KIND_GROUP[k]) is not None)
    if kind in _SENDING or (kind is PromiseKind.MESSAGE and EMAIL_NOUN.search(clause)):
        if EMAIL_NOUN.search(clause):
            return PromiseKind.EMAIL
        if SMS_NOUN.search(clause) or MESSAGE_NOUN.search(clause):
            return PromiseKind.MESSAGE
        if kind is PromiseKind.PREPARE and match.group(_KIND_GROUP[kind]).lower() == "yaz" and ADDRESSED.search(clause):
            return PromiseKind.MESSAGE  # "size yazarım": I'll write to you
    return kind


def _capabilities(kind: PromiseKind, clause: str, performer: Performer, trigger: TriggerType) -> list[Capability]:
    sends_to_user = kind is PromiseKind.SEND and bool(ADDRESSED.search(clause))
    traits = PromiseTraits(
        phone=kind is PromiseKind.CALL, email=kind is PromiseKind.EMAIL, sms=bool(SMS_NOUN.search(clause)),
        file=sends_to_user and bool(FILE_NOUN.search(clause)), watch=kind is PromiseKind.WATCH,
        notifies=kind in NOTIFY_KINDS or sends_to_user, recalls=kind is PromiseKind.REMEMBER,
    )
    return needed_capabilities(traits, performer, trigger)


@dataclass(frozen=True)
class _SentenceFacts:
    """What the whole sentence says, read once (a clause is read alone; the sentence never again per verb)."""

    folded: str
    original: str
    wanted: bool
    waits: bool
    habitual: bool
    next_step: bool
    next_session: bool
    question: bool
    time_text: str | None

    @classmethod
    def read(cls, sentence: str) -> _SentenceFacts:
        folded = fold(sentence)
        return cls(
            folded=folded, original=sentence, wanted=bool(tt.IF_YOU_WANT.search(folded)),
            waits=bool(tt.WAITS_FOR_USER.search(folded)), habitual=bool(HABITUAL.search(folded)),
            next_step=bool(tt.NEXT_STEP.match(folded)), next_session=bool(tt.NEXT_SESSION.search(folded)),
            question=sentence.rstrip().endswith("?"), time_text=tt.time_expression(folded, sentence),
        )


@dataclass(frozen=True)
class _Clause:
    """A promise verb's clause: from the end of the verb before it (its coordinator left out) to its own end."""

    match: re.Match[str]
    start: int
    folded: str
    original: str
    kind: PromiseKind


def _trigger(clause: _Clause, facts: _SentenceFacts) -> TriggerType:
    has_time = bool(tt.TIME_EXPRESSION.search(clause.folded) or facts.time_text)
    has_event = bool(tt.EVENT.search(clause.folded))
    if facts.next_session or (clause.kind is PromiseKind.REMEMBER and not has_time and not has_event):
        return TriggerType.NEXT_SESSION
    if has_event:
        return TriggerType.EXTERNAL_EVENT
    if has_time:
        return TriggerType.TIME
    return TriggerType.UNSPECIFIED_FUTURE


def _points_past_turn(clause: _Clause, facts: _SentenceFacts) -> bool:
    addressed_send = clause.kind is PromiseKind.SEND and bool(ADDRESSED.search(clause.folded))
    return bool(
        clause.kind in DEFERRED_KINDS or addressed_send or facts.time_text or facts.next_session
        or tt.EVENT.search(clause.folded)
    )


def _action(original_clause: str) -> str:
    return " ".join(original_clause.split()).strip(" ,;:") or original_clause


def _performer(match: re.Match[str], clause: _Clause) -> Performer | None:
    if match.group("third") is not None:
        return Performer.THIRD_PARTY if OUR_PEOPLE.search(clause.folded) else None
    if match.group("future_person") == "z" or match.group("aorist_person") == "z":
        return Performer.THIRD_PARTY  # "we", as English "we'll": the company's people
    return Performer.SELF


def _is_offer(match: re.Match[str], asked: bool, performer: Performer, facts: _SentenceFacts) -> bool:
    if match.group("asks") is not None or asked:
        return True
    if match.group("potential") is not None or match.group("optative") is not None:
        return facts.wanted or facts.question
    return facts.wanted and performer is Performer.SELF


def _read(clause: _Clause, facts: _SentenceFacts) -> TurkishPromise | None:
    """The promise (or offer) of one verb, read in its clause, or None."""
    match = clause.match
    asked = QUESTION_AFTER.match(facts.folded, match.end()) is not None
    performer = _performer(match, clause)
    if performer is None or (asked and match.group("third") is not None):
        return None  # a named person's promise, or a question about what someone will do
    if _is_offer(match, asked, performer, facts):
        return _promise(clause, facts, performer, TriggerType.USER_NEXT_MESSAGE, is_offer=True)
    if match.group("potential") is not None:
        return None  # "hatırlatabilirim": what the assistant can do, not what it will
    if match.group("aorist") is not None and facts.habitual:
        return None
    before = facts.folded[max(0, match.start() - _LOOK_BACK) : match.start()]
    if clause.kind is PromiseKind.REMIND and REMINDS_NOW.search(before):
        return None
    if facts.waits:
        return _promise(clause, facts, performer, TriggerType.USER_NEXT_MESSAGE, is_offer=False)
    if not _points_past_turn(clause, facts):
        return None  # an action inside the turn
    if performer is Performer.SELF:
        if facts.next_step:
            return None  # the turn's next step
        has_time = tt.TIME_EXPRESSION.search(clause.folded)
        if tt.NOW.search(clause.folded) and not has_time and not facts.next_session:
            return None
    return _promise(clause, facts, performer, _trigger(clause, facts), is_offer=False)


def _promise(clause: _Clause, facts: _SentenceFacts, performer: Performer, trigger: TriggerType,
             is_offer: bool) -> TurkishPromise:
    end = clause.match.end()
    return TurkishPromise(
        kind=clause.kind, verb=facts.original[clause.match.start() : end], start=clause.start, end=end,
        action=_action(clause.original), performer=performer, trigger_type=trigger,
        time_expression=tt.time_expression(clause.folded, clause.original) or facts.time_text,
        required_capabilities=_capabilities(clause.kind, clause.folded, performer, trigger), is_offer=is_offer,
    )


def find_promises(sentence: str) -> list[TurkishPromise]:
    """The Turkish promises and offers of one sentence, in order (none in a sentence of another language)."""
    facts = _SentenceFacts.read(sentence)
    found: list[TurkishPromise] = []
    start = 0
    for match in PROMISE_VERB.finditer(facts.folded):
        lead = _CLAUSE_LEAD.match(facts.folded, start, match.start())
        begin = lead.end() if lead else start
        folded_clause = facts.folded[begin : match.end()]
        clause = _Clause(match=match, start=begin, folded=folded_clause,
                         original=sentence[begin : match.end()], kind=_kind(match, folded_clause))
        promise = _read(clause, facts)
        if promise is not None:
            found.append(promise)
        start = match.end()
    return found
