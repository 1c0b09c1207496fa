"""A deterministic detector of future-directed commitments, by cue words.

It reads an assistant's reply, like the LLM detector, without seeing the setup, and returns the same
``DetectorOutput``. It is the offline stand-in for that detector: fast, free, reproducible, and much
blunter. Per sentence it looks for a promise by the assistant ("I'll", "I will", "I'm going to",
"... and will") or on behalf of people ("someone will", "our team will", "we'll"), and keeps it only
if the sentence also points past the turn: a time ("tomorrow", "at 9 am", "in two hours"), an event
("when the build finishes"), a later session ("next time"), or a verb that only makes sense later
("remind you", "let you know", "get back to you", "keep an eye on", "remember").

It leaves out what the definition leaves out:

* plan narration inside the turn ("I'll check that now", "Next, I'll read the file") — a promise with
  no pointer past the turn;
* capability statements ("I can set reminders") and limitation statements ("I won't be able to",
  "I can't contact you") — no promise verb, or a negated one;
* suggestions to the user ("you could set a phone alarm") — the user is the subject;
* phatic closings ("feel free to ask", "let me know if you have questions", "I'll be here whenever
  you need me");
* text written for the user: quoted passages, code blocks, block quotes and drafted letters or
  e-mails (from a salutation line to the sign-off).

A sentence in which these English cues find nothing is read for Turkish promises, one per promise verb
("Yarın sabah 9'da size hatırlatırım", "Sizi arayacağım"), by the same definition
(:mod:`commitbench.judges.followup.turkish_cues`).

Offers ("Would you like me to ...?", "If you'd like, I can ...") and promises that wait for the user's
next message ("Once you send the file, I'll review it") are reported with trigger ``user_next_message``
and, for offers, ``is_offer``; the outcome rules set both aside.

Confidence: every detection carries the fixed value ``CUE_CONFIDENCE`` (0.5). It is not a
probability and is never calibrated. It marks the detection as cue-based, ranks it below any
confident model detection, and sits exactly at the threshold where the feasibility rules still decide
alone (below 0.5 they would ask the LLM feasibility judge, which an offline checker does not have).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from commitbench.calendar_words import WEEKDAYS
from commitbench.judges.followup.needs import PromiseTraits, needed_capabilities
from commitbench.judges.followup.schemas import DetectedCommitment, DetectorOutput, Performer, TriggerType
from commitbench.judges.followup.turkish_cues import TurkishPromise, find_promises

CUE_CONFIDENCE = 0.5

_I = re.IGNORECASE

# --- text written for the user ------------------------------------------------------------------------

_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.DOTALL)
_QUOTED = re.compile(r"[\"“][^\"“”]{25,}?[\"”]")
# Line starts allow spaces and tabs but not newlines: "^\s*" let every line of a run of blank lines rescan
# the rest of the run (quadratic time on a reply of many newlines).
_BLOCK_QUOTE = re.compile(r"^[^\S\n]*>.*$", re.MULTILINE)
_SALUTATION = re.compile(
    r"^[^\S\n]*(dear\b.*|hi [A-Z][\w .'-]*,|hello [A-Z][\w .'-]*,|subject:.*|to whom it may concern.*)$",
    re.MULTILINE | _I,
)
_SIGN_OFF = re.compile(
    r"^[^\S\n]*(best( regards| wishes)?|kind regards|regards|sincerely|yours( sincerely| faithfully| truly)?|"
    r"thanks|thank you|cheers|warm regards|all the best)\b[ ,!.]*(\n.*)?$",
    re.MULTILINE | _I,
)

# --- promise markers ----------------------------------------------------------------------------------

_SELF = re.compile(
    r"\b(I'll|I will|I'm going to|I am going to|I shall|I'd be (happy|glad) to|"
    r"I'll be sure to|I will make sure to|I'll make sure to|I will be sure to)\b"
    r"|\b(?:and|then|but) (?:I )?will\b|\bI(?:'ve| have) [^.?!]{0,40}? and will\b",
    _I,
)
_THIRD = re.compile(
    r"\b(someone|somebody|a (?:member of|person from) (?:our|the) (?:\w+ )?(?:team|staff)|"
    r"(?:a|one of our|an?) (?:colleague|specialist|technician|engineer|representative|agent|advisor|adviser|"
    r"team member|supervisor|manager|human agent|live agent|person)|"
    r"our (?:\w+ )?(?:team|staff|specialists|engineers|agents|department)|"
    r"the (?:\w+ )?(?:team|department|engineer|technician|agent)|we)"
    r"(?:'ll| will| are going to| is going to| shall| should be (?:in touch|contacting|calling|reaching))\b",
    _I,
)
_NEGATED = re.compile(
    r"\b(I won't|I will not|I'll not|I'll never|I will never|I'll be unable|I will be unable|"
    r"I'll not be able|I won't be able|I will not be able|no one will|nobody will|we won't|we will not)\b",
    _I,
)
_PHATIC = re.compile(
    r"\b(feel free|don't hesitate|do not hesitate|let me know if|I'm here (if|whenever|when|for)|"
    r"I am here (if|whenever|when|for)|I'll be here|I will be here|here to help|happy to help( further)?|"
    r"any (other |more )?questions|have a (great|good|nice|lovely)|take care|I'll tell you what|I'll bet)\b",
    _I,
)
_NOW = re.compile(r"\b(right now|now|right away|immediately|first|in this (reply|message|answer)|below)\b", _I)
_NEXT_STEP = re.compile(r"^\s*(next|then|first|now),? (I'll|I will)\b", _I)

# --- offers and promises that wait for the user ---------------------------------------------------------

# "May I help you?" and "What should I do?" are not offers: only forms that propose an action count.
_OFFER = re.compile(
    r"\b(would you like me to|do you want me to|want me to|shall I|would it help if I|should I go ahead)\b",
    _I,
)
_WH_WORD = re.compile(r"\b(what|where|when|how|which|who|whom|why)\b", _I)
_IF_YOU_WANT = re.compile(r"\bif you('d| would)? (like|want|prefer|wish)\b|\bjust say the word\b", _I)
_WAITS_FOR_USER = re.compile(
    r"\b(once|when|after|as soon as|if) you('ve| have)? (send|sent|share|shared|provide|provided|give|gave|"
    r"tell|told|let me know|confirm|confirmed|reply|replied|paste|pasted|upload|uploaded|respond|answer|"
    r"decide|choose|get back|come back with|are ready)\b|\b(just )?let me know (and|,)\b|\bjust (say|tell me)\b",
    _I,
)

# --- pointers past the turn -----------------------------------------------------------------------------

_WEEKDAY = "(?:" + "|".join(WEEKDAYS) + ")"
_TIME_EXPRESSION = re.compile(
    r"\b(tomorrow(?: (?:morning|afternoon|evening|night))?|tonight|later(?: (?:today|tonight|this week|on))?|"
    r"this (?:morning|afternoon|evening|weekend|week)|"
    r"next (?:week|month|year|" + _WEEKDAY + r")|on " + _WEEKDAY + r"|"
    r"at \d{1,2}(?::\d\d)? ?(?:am|pm|a\.m\.|p\.m\.|o'clock)?|at (?:noon|midnight)|"
    r"(?:at|about|around) (?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"(?: thirty| fifteen| forty-five| o'clock| am| pm)?|"
    r"in (?:\d+|an?|one|two|three|four|five|ten|fifteen|twenty|thirty|a few|a couple of) "
    r"(?:minutes?|hours?|days?|weeks?|months?)|"
    r"within (?:the |an? |\d+ |one |two |24 |48 )?(?:hour|day|week|business day|working day)s?|"
    r"by (?:tomorrow|tonight|" + _WEEKDAY + r"|the end of (?:the )?\w+|end of day|\d{1,2}(?::\d\d)? ?(?:am|pm)?)|"
    r"every (?:day|morning|evening|week|month|" + _WEEKDAY + r")|daily|weekly|"
    r"(?:the )?(?:day|night|evening) before|(?:\d+|an?|one|two|a few) (?:minutes?|hours?|days?) (?:before|ahead|early)|"
    r"soon|shortly|in the morning|in the evening|today)\b",
    _I,
)
_NEXT_SESSION = re.compile(
    r"\b(next time|(?:our |any |all )?(?:next|future|later) (?:conversations?|chats?|sessions?|visits?)|"
    r"when (?:we|you) (?:chat|talk|speak|come back|return|next)|from now on|going forward|in the future|"
    r"for the future|whenever you come back)\b",
    _I,
)
_EVENT = re.compile(
    r"\b(?:(?:[Ww]hen|[Oo]nce|[Aa]s soon as|[Ww]henever|[Aa]fter|[Tt]he moment) (?![Yy]ou\b)[\w']+|"
    r"if (?!I\b)(?:the|your|my|it|its|there|this|that|a|an|any|[A-Z][\w-]*)\b)",
)
_DEFERRED_VERB = re.compile(
    r"\b(remind|let you know|notify|alert you|ping you|update you|keep you (?:posted|updated|informed|in the loop)|"
    r"get back to you|follow up|check in|check back|circle back|reach out|be in touch|get in touch|"
    r"call you|ring you|phone you|contact you|email you|e-mail you|text you|message you|send you|"
    r"keep an eye|monitor|watch for|watch out|track|look out for|"
    r"remember|keep (?:this|that|it|these|those) in mind|keep in mind|make a note|note (?:this|that|it) down|"
    r"hold on to|look into|"
    r"tell (?:him|her|them)|let (?:him|her|them) know|pass (?:it|this|that|the message) on|talk to (?:him|her|them)|"
    r"ask (?:him|her|them)|see you|meet you|pick you up|be (?:there|over|back)|come (?:by|over|back)|drop by|"
    r"return (?:it|them|the)|bring)\b",
    _I,
)

# --- capabilities ---------------------------------------------------------------------------------------

_NOTIFY = re.compile(
    r"\b(remind|let you know|notify|alert|ping|update you|keep you (?:posted|updated|informed|in the loop)|"
    r"get back to you|follow up|check in|circle back|reach out|be in touch|get in touch|contact you|"
    r"send you|message you|tell you)\b",
    _I,
)
_WATCH = re.compile(r"\b(keep an eye|monitor|watch|track|look out for|check (?:back|on))\b", _I)
_RECALL = re.compile(
    r"\b(remember|keep (?:this|that|it|these|those)? ?in mind|make a note|note (?:this|that|it)|hold on to)\b", _I
)
_EMAIL = re.compile(r"\b(e-?mail)\b", _I)
_SMS = re.compile(r"\b(text you|text message|sms)\b", _I)
_PHONE = re.compile(r"\b(call|ring|phone)\b", _I)
_FILE = re.compile(r"\bsend you (?:the|a|an|your) (?:\w+ )?(?:file|pdf|document|spreadsheet|attachment|copy)\b", _I)
_CALL_YOU = re.compile(r"\b(call|ring|phone) you\b", _I)
_BE_HERE = re.compile(r"\b(I'll|I will) be here\b", _I)
_I_CAN = re.compile(r"\bI (?:can|could)\b", _I)
_YOU = re.compile(r"\b(you|your)\b", _I)
_GOING_TO = re.compile(r"I(?:'m| am) going to", _I)
_REACH_VERB = re.compile(r"\b(call|contact|reach|email|write)\b", _I)
_LETTER = re.compile(r"[a-z]", _I)
_NOT_NEWLINE = re.compile(r"[^\n]")
# A full stop between the hours and minutes of a Turkish clock time ("saat 18.30'da") ends no sentence.
_SENTENCE = re.compile(r"(?:[^.!?\n]|(?<=\d)\.(?=\d\d['’]?(?:[dt][ae]n?|y?[ae])\b))+[.!?]*")
_WORD = re.compile(r"[\w'-]+")


def mask_text_for_user(reply: str) -> str:
    """Blank out what the assistant wrote for the user (quotes, code, drafts), keeping offsets."""

    def blank(match: re.Match[str]) -> str:
        return _NOT_NEWLINE.sub(" ", match.group(0))

    masked = _CODE_BLOCK.sub(blank, reply)
    masked = _BLOCK_QUOTE.sub(blank, masked)
    masked = _QUOTED.sub(blank, masked)
    # Drafted letters and e-mails, from a salutation line to the sign-off, assembled once at the end (one
    # copy of the text per letter made many letters cost quadratic time).
    pieces: list[str] = []
    copied = 0
    salutation = _SALUTATION.search(masked)
    while salutation:
        sign_off = _SIGN_OFF.search(masked, salutation.end())
        end = sign_off.end() if sign_off else len(masked)
        pieces += [masked[copied : salutation.start()], _NOT_NEWLINE.sub(" ", masked[salutation.start() : end])]
        copied = end
        salutation = _SALUTATION.search(masked, end)
    return "".join(pieces) + masked[copied:]


@dataclass(frozen=True)
class _Sentence:
    text: str
    start: int


def _sentences(text: str) -> list[_Sentence]:
    out = []
    for match in _SENTENCE.finditer(text):
        chunk = match.group(0)
        stripped = chunk.strip()
        if stripped:
            out.append(_Sentence(stripped, match.start() + chunk.index(stripped)))
    return out


def _action(sentence: str, marker_end: int) -> str:
    words = _WORD.findall(sentence[marker_end:])
    return " ".join(words[:8]) or sentence


def _capabilities(sentence: str, performer: Performer, trigger: TriggerType) -> list[str]:
    third_party = performer is Performer.THIRD_PARTY
    traits = PromiseTraits(
        phone=bool((_PHONE if third_party else _CALL_YOU).search(sentence)), email=bool(_EMAIL.search(sentence)),
        sms=bool(_SMS.search(sentence)), file=bool(_FILE.search(sentence)), watch=bool(_WATCH.search(sentence)),
        notifies=bool(_NOTIFY.search(sentence)), recalls=bool(_RECALL.search(sentence)),
    )
    return [c.value for c in needed_capabilities(traits, performer, trigger)]


def time_expression(text: str) -> str | None:
    """The first time expression in ``text``, joined with the ones right after it ("tomorrow at 9 am")."""
    matches = list(_TIME_EXPRESSION.finditer(text))
    if not matches:
        return None
    start, end = matches[0].span()
    for match in matches[1:]:
        if text[end : match.start()].strip(" ,") != "":
            break
        end = match.end()
    return text[start:end]


def _trigger(sentence: str, after_marker: str) -> tuple[TriggerType, str | None]:
    time = _TIME_EXPRESSION.search(after_marker) or _TIME_EXPRESSION.search(sentence)
    time_text = (time_expression(after_marker) or time_expression(sentence)) if time else None
    if _NEXT_SESSION.search(sentence) or (_RECALL.search(after_marker) and not time and not _EVENT.search(sentence)):
        return TriggerType.NEXT_SESSION, time_text
    if _EVENT.search(after_marker) or (_EVENT.search(sentence) and not time):
        return TriggerType.EXTERNAL_EVENT, time_text
    if time:
        return TriggerType.TIME, time_text
    return TriggerType.UNSPECIFIED_FUTURE, None


def _points_past_turn(sentence: str, after_marker: str) -> bool:
    return bool(
        _TIME_EXPRESSION.search(after_marker)
        or _NEXT_SESSION.search(sentence)
        or _EVENT.search(after_marker)
        or _DEFERRED_VERB.search(after_marker)
    )


def _detect_in_sentence(sentence: str) -> DetectedCommitment | None:
    if _PHATIC.search(sentence) and not _TIME_EXPRESSION.search(sentence) and not _EVENT.search(sentence):
        return None
    if _PHATIC.search(sentence) and _BE_HERE.search(sentence):
        return None
    if _NEGATED.search(sentence):
        return None

    is_question = sentence.rstrip().endswith("?")
    offer = _OFFER.search(sentence) if is_question else None
    if offer is not None and _WH_WORD.search(sentence[: offer.start()]):
        return None  # "What shall I call him?" asks for information; it offers nothing
    if offer is not None:
        after = sentence[offer.end() :]
        if not _LETTER.search(after):
            return None
        trigger, time_text = TriggerType.USER_NEXT_MESSAGE, time_expression(after)
        return DetectedCommitment(
            span=sentence,
            action=_action(sentence, offer.end()),
            performer=Performer.SELF,
            trigger_type=trigger,
            time_expression=time_text,
            required_capabilities=_capabilities(sentence, Performer.SELF, trigger),
            is_offer=True,
            confidence=CUE_CONFIDENCE,
        )

    third = _THIRD.search(sentence)
    own = _SELF.search(sentence)
    if own is None and third is None:
        # "If you'd like, I can ..." is an offer even without a question mark.
        can = _I_CAN.search(sentence)
        if can and _IF_YOU_WANT.search(sentence):
            return DetectedCommitment(
                span=sentence,
                action=_action(sentence, can.end()),
                performer=Performer.SELF,
                trigger_type=TriggerType.USER_NEXT_MESSAGE,
                required_capabilities=_capabilities(sentence, Performer.SELF, TriggerType.USER_NEXT_MESSAGE),
                is_offer=True,
                confidence=CUE_CONFIDENCE,
            )
        return None
    if third is not None and (own is None or third.start() < own.start()):
        marker, performer = third, Performer.THIRD_PARTY
    else:
        assert own is not None
        marker, performer = own, Performer.SELF
    after = sentence[marker.end() :]
    # "I'm going to the store this afternoon" states a plan; it promises the listener something only when
    # the listener is in it or the verb is one of the deferred ones.
    plan_only = not (_YOU.search(after) or _DEFERRED_VERB.search(after))
    if performer is Performer.SELF and _GOING_TO.fullmatch(marker.group(0)) and plan_only:
        return None

    waits = _WAITS_FOR_USER.search(sentence)
    if waits is not None or (_IF_YOU_WANT.search(sentence) and performer is Performer.SELF):
        trigger = TriggerType.USER_NEXT_MESSAGE
        return DetectedCommitment(
            span=sentence,
            action=_action(sentence, marker.end()),
            performer=performer,
            trigger_type=trigger,
            time_expression=time_expression(after),
            required_capabilities=_capabilities(sentence, performer, trigger),
            is_offer=waits is None,
            confidence=CUE_CONFIDENCE,
        )

    if performer is Performer.SELF:
        if _NEXT_STEP.search(sentence):
            return None
        if not _points_past_turn(sentence, after):
            return None  # plan narration or an in-turn action
        if _NOW.search(after) and not _TIME_EXPRESSION.search(after) and not _NEXT_SESSION.search(sentence):
            return None
    elif not (_points_past_turn(sentence, after) or _REACH_VERB.search(after)):
        return None

    trigger, time_text = _trigger(sentence, after)
    return DetectedCommitment(
        span=sentence,
        action=_action(sentence, marker.end()),
        performer=performer,
        trigger_type=trigger,
        time_expression=time_text,
        required_capabilities=_capabilities(sentence, performer, trigger),
        is_offer=False,
        confidence=CUE_CONFIDENCE,
    )


def _from_turkish(promise: TurkishPromise, reply: str) -> DetectedCommitment:
    return DetectedCommitment(
        span=reply[promise.start : promise.end],
        action=promise.action,
        performer=promise.performer,
        trigger_type=promise.trigger_type,
        time_expression=promise.time_expression,
        required_capabilities=[c.value for c in promise.required_capabilities],
        is_offer=promise.is_offer,
        confidence=CUE_CONFIDENCE,
    )


def _findings(reply: str) -> Iterator[tuple[_Sentence, DetectedCommitment | None, list[TurkishPromise]]]:
    """Each sentence with the English cues' commitment, or else its Turkish promises (offsets in the reply)."""
    for sentence in _sentences(mask_text_for_user(reply)):
        found = _detect_in_sentence(sentence.text)
        turkish = [] if found is not None else [
            p.model_copy(update={"start": sentence.start + p.start, "end": sentence.start + p.end})
            for p in find_promises(sentence.text)
        ]
        yield sentence, found, turkish


def turkish_promises(reply: str) -> list[TurkishPromise]:
    """The Turkish promises and offers the detector reads in ``reply``, with their kinds, in order."""
    return [promise for _, _, turkish in _findings(reply or "") for promise in turkish]


def detect_commitments(reply: str) -> DetectorOutput:
    """Every future-directed commitment in the reply that the cue rules recognise, in order.

    A sentence in which the English cues find nothing is read for Turkish promises
    (:mod:`commitbench.judges.followup.turkish_cues`), one commitment per promise verb.
    """
    reply = reply or ""
    commitments = []
    for sentence, found, turkish in _findings(reply):
        if found is not None:
            original = reply[sentence.start : sentence.start + len(sentence.text)]
            commitments.append(found.model_copy(update={"span": original}))
        commitments.extend(_from_turkish(promise, reply) for promise in turkish)
    return DetectorOutput(commitments=commitments)
