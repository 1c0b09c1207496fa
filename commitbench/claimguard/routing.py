"""Turn routing that keeps write turns from losing their tools.

Two rules from the write-claim incident:

- a command word (either language) is checked *before* any short-message small-talk rule: in
  Turkish "Evet, oluştur." is two words and a full command;
- a bare affirmation ("yes", "tamam", "okay, create it"; at most five words) carries no intent of
  its own: it inherits write intent from the assistant's previous message when that message
  offered a write ("shall I create...", "would you like me to send...", "oluşturayım mı?").

:func:`route_turn` combines them and says whether the turn is a write context for the guard.
"""

from __future__ import annotations

import re
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard.guard import check_length, fold
from commitbench.textscan import ThenInClause

AFFIRMATION_MAX_WORDS = 5

COMMAND_WORDS_EN = (
    "create", "make", "save", "update", "edit", "delete", "remove", "add", "send", "post", "publish", "cancel",
    "rename", "assign", "approve", "continue", "proceed", "retry", "schedule", "reschedule", "book", "reserve",
    "remind", "email", "share", "upload", "submit", "order", "move", "change", "write", "draft", "file",
    "escalate", "forward", "renew", "archive", "reset", "notify", "invite", "pay", "refund", "transfer",
    "set", "set up", "go ahead", "remember", "note down", "keep track",
)  # fmt: skip
# Folded Turkish command stems; a stem counts with the imperative / request endings below.
COMMAND_STEMS_TR = (
    "olustur", "yarat", "kaydet", "kayded", "guncelle", "duzenle", "sil", "kaldir", "ekle", "gonder",
    "yayinla", "iptal", "tasi", "degistir", "paylas", "onayla", "ata", "devam", "baslat", "durdur", "dene",
    "planla", "ayarla", "kur", "hatirlat", "yaz", "yukle", "ilet", "yenile", "ertele", "hazirla", "sakla",
    "arsivle", "kapat", "rezerve", "hatirla", "unutma",
)  # fmt: skip
# bare imperative, polite (-In, -yIn, -InIz), "-sene", "let's" (-AlIm), and "will/could you" questions
_TR_REQUEST_TAIL = (
    r"(?:y?[iu]n(?:[iu]z)?|s[ae]n[ae]|y?[ae]l[iu]m|(?:[iuae])?r\s+m[iu]s[iu]n(?:[iu]z)?"
    r"|y?[ae]bil[iu]r\s+m[iu]s[iu]n(?:[iu]z)?)?"
)


def _words(options: tuple[str, ...]) -> str:
    return "|".join(sorted((re.escape(o).replace(r"\ ", r"\s+") for o in options), key=len, reverse=True))


COMMAND_WORD = re.compile(
    rf"(?<!\w)(?:(?:{_words(COMMAND_WORDS_EN)})|(?:{_words(COMMAND_STEMS_TR)}){_TR_REQUEST_TAIL})(?!\w)",
    re.IGNORECASE,
)

_AFFIRMATIONS = (
    "yes", "yeah", "yep", "yup", "ya", "y", "sure", "ok", "okay", "okey", "k", "alright", "all right",
    "go ahead", "go for it", "please do", "do it", "sounds good", "great", "perfect", "fine",
    "absolutely", "of course", "definitely", "certainly", "confirm", "confirmed", "approved", "approve",
    "correct", "right", "exactly", "let's do it", "let's go", "yes please",
    # Turkish, folded
    "evet", "evt", "tamam", "tamamdir", "olur", "peki", "tabii", "tabi", "elbette", "kesinlikle", "aynen",
    "hadi", "haydi", "onayliyorum", "onayla", "uygun", "dogru", "he", "hi hi", "tamam olur",
)  # fmt: skip
AFFIRMATION_START = re.compile(rf"^\W*(?:{_words(_AFFIRMATIONS)})(?!\w)", re.IGNORECASE)
# "Please ..." opens most commands; only on its own is it a yes.
BARE_PLEASE = re.compile(r"^\W*(?:please|pls|lutfen)\W*$", re.IGNORECASE)
# A reservation turns "yes" into something else ("yes but not now", "evet ama bekle").
RESERVATION = re.compile(
    r"(?<!\w)(?:no|not|don't|dont|wait|but|stop|later|hayir|degil|ama|bekle|dur|sonra|vazgec\w*)(?!\w)",
    re.IGNORECASE,
)
SMALL_TALK = re.compile(
    r"^\W*(?:hi|hello|hey|thanks|thank\s+you|thx|ty|good\s+(?:morning|afternoon|evening|night)|how\s+are\s+you|"
    r"bye|goodbye|see\s+you|cheers|lol|haha|merhaba|selam|tesekkurler|tesekkur\s+ederim|sag\s*ol|"
    r"gunaydin|iyi\s+(?:aksamlar|geceler|gunler)|nasilsin|gorusuruz|hosca\s+kal)\b[\W\s]*$",
    re.IGNORECASE,
)

_EN_BASE = (
    "create", "make", "save", "update", "edit", "delete", "remove", "add", "send", "post", "publish", "cancel",
    "rename", "assign", "approve", "schedule", "reschedule", "book", "reserve", "set up", "set", "remind",
    "email", "share", "upload", "submit", "order", "move", "change", "write", "draft", "file", "log",
    "escalate", "forward", "renew", "archive", "reset", "notify", "invite", "pay", "refund", "transfer",
    "open", "proceed", "go ahead", "do that", "do it", "do this",
)  # fmt: skip
_EN_VERB = rf"(?:go\s+ahead\s+and\s+|now\s+|also\s+|just\s+)?(?:{_words(_EN_BASE)})\b"
_TR_STEM = rf"(?:{_words(COMMAND_STEMS_TR)}|iptal\s+ed|rezerve\s+ed)"


def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_CLAUSE_STOPS = _compiled(r"[.!\n]")
PROPOSAL_PATTERNS: tuple[re.Pattern[str] | ThenInClause, ...] = (
    _compiled(rf"\b(?:shall|should|can|may)\s+i\s+{_EN_VERB}"),
    _compiled(rf"\b(?:would|do)\s+you\s+(?:like|want)\s+me\s+to\s+{_EN_VERB}"),
    _compiled(rf"\bwant\s+me\s+to\s+{_EN_VERB}"),
    # "I can send it if you like", "I'll book it, OK?"
    ThenInClause(
        head=_compiled(rf"\b(?:i\s+can|i\s+could|i'll|i\s+will|let\s+me)\s+{_EN_VERB}"),
        tail=_compiled(
            r"\?|\bif\s+you(?:'d|\s+would)?\s+like\b|\bif\s+you\s+want\b|\bonce\s+you\s+(?:confirm|approve|say)\b"
            r"|\bjust\s+say\b|\bsay\s+the\s+word\b"
        ),
        stops=_CLAUSE_STOPS,
    ),
    ThenInClause(
        head=_compiled(rf"\bready\s+(?:for\s+me\s+)?to\s+{_EN_VERB}"), tail=_compiled(r"\?"), stops=_CLAUSE_STOPS
    ),
    _compiled(r"\b(?:shall|should)\s+i\s+(?:go\s+ahead|proceed|continue)\b"),
    # Turkish: first-person optative (oluşturayım, ekleyeyim), "should I" question
    _compiled(rf"(?<!\w){_TR_STEM}y?[ae]y[iu]m(?!\w)"),
    # "would you like me to ..." (göndermemi ister misiniz)
    _compiled(rf"(?<!\w){_TR_STEM}m[ae]m[iu]\s+ister\s+m[iu]s[iu]n(?:[iu]z)?"),
    # "I can create ..., shall I?"
    ThenInClause(
        head=_compiled(rf"(?<!\w){_TR_STEM}y?[ae]bil[iu]r[iu]m(?!\w)"),
        tail=_compiled(r"\?|ister\s+m[iu]s[iu]n"),
        stops=_CLAUSE_STOPS,
    ),
    # "if you approve, I will create" (onaylarsanız ... oluşturacağım); the head starts at a word's start,
    # so a long word is read once, not once per letter
    ThenInClause(
        head=_compiled(r"(?<!\w)\w+(?:rs[ae]n[iu]z|rs[ae]n|[iu]sters[ae]n[iu]z)\b"),
        tail=_compiled(rf"(?<!\w){_TR_STEM}y?[ae]c[ae]g[iu]m(?!\w)"),
        stops=_compiled(r"[.!?\n]"),
    ),
)


class TurnIntent(str, Enum):
    """How a user turn is planned."""

    WRITE = "write"  # write tools attached; the reply is checked by the write-claim guard
    GENERAL = "general"  # normal planning with tools
    SMALL_TALK = "small_talk"  # no tools, no retrieval


class RouteReason(str, Enum):
    AFFIRMS_WRITE_OFFER = "affirms_write_offer"
    AFFIRMATION_WITH_COMMAND = "affirmation_with_command"
    AFFIRMATION_WITHOUT_WRITE = "affirmation_without_write"
    COMMAND_WORD = "command_word"
    SMALL_TALK_PHRASE = "small_talk_phrase"
    SHORT_MESSAGE = "short_message"
    DEFAULT = "default"


class TurnRoute(BaseModel):
    """Routing decision for one user message."""

    model_config = ConfigDict(frozen=True)

    intent: TurnIntent = Field(description="How the turn is planned.")
    reason: RouteReason = Field(description="Which rule decided.")
    tools: bool = Field(description="Whether tools are attached to the model call.")
    write_context: bool = Field(description="Whether the write-claim guard checks the reply.")


def word_count(text: str) -> int:
    return len(text.split())


def has_command_word(text: str) -> bool:
    """A write command verb in English or Turkish (imperative and request forms)."""
    return bool(COMMAND_WORD.search(fold(text)))


def looks_like_write_request(text: str) -> bool:
    return has_command_word(text)


def is_affirmation(text: str) -> bool:
    """A short yes (at most five words, no reservation), possibly with a trailing command."""
    folded = fold(text)
    if word_count(folded) == 0 or word_count(folded) > AFFIRMATION_MAX_WORDS:
        return False
    starts_with_yes = bool(AFFIRMATION_START.search(folded) or BARE_PLEASE.search(folded))
    return starts_with_yes and not RESERVATION.search(folded)


def looks_like_write_proposal(assistant_text: str | None) -> bool:
    """The assistant offered to perform a write ("shall I create", "göndermemi ister misiniz")."""
    if not assistant_text:
        return False
    folded = fold(assistant_text)
    return any(pattern.search(folded) for pattern in PROPOSAL_PATTERNS)


def inherits_write_intent(user_text: str, previous_assistant_text: str | None) -> bool:
    """A bare affirmation that continues a write: its own command word, or the assistant's offer."""
    if not is_affirmation(user_text):
        return False
    return looks_like_write_request(user_text) or looks_like_write_proposal(previous_assistant_text)


def is_small_talk(text: str) -> bool:
    """Small talk gets no tools. A command word always wins over the length rule."""
    if has_command_word(text):
        return False
    return bool(SMALL_TALK.search(fold(text))) or word_count(text) < 3


def route_turn(user_text: str, previous_assistant_text: str | None = None, can_write: bool = True) -> TurnRoute:
    """Plan a user turn: write, general, or small talk (in that order of precedence).

    Texts longer than :data:`~commitbench.claimguard.guard.MAX_TEXT_CHARS` are refused
    (:class:`~commitbench.claimguard.guard.TextTooLong`).
    """
    check_length(user_text, "the user's message")
    if previous_assistant_text is not None:
        check_length(previous_assistant_text, "the assistant's previous message")
    if is_affirmation(user_text):
        if can_write and looks_like_write_request(user_text):
            return TurnRoute(
                intent=TurnIntent.WRITE, reason=RouteReason.AFFIRMATION_WITH_COMMAND, tools=True, write_context=True
            )
        if can_write and looks_like_write_proposal(previous_assistant_text):
            return TurnRoute(
                intent=TurnIntent.WRITE, reason=RouteReason.AFFIRMS_WRITE_OFFER, tools=True, write_context=True
            )
        return TurnRoute(
            intent=TurnIntent.GENERAL, reason=RouteReason.AFFIRMATION_WITHOUT_WRITE, tools=True, write_context=False
        )
    if has_command_word(user_text):
        intent = TurnIntent.WRITE if can_write else TurnIntent.GENERAL
        return TurnRoute(intent=intent, reason=RouteReason.COMMAND_WORD, tools=True, write_context=can_write)
    if SMALL_TALK.search(fold(user_text)):
        return TurnRoute(
            intent=TurnIntent.SMALL_TALK, reason=RouteReason.SMALL_TALK_PHRASE, tools=False, write_context=False
        )
    if word_count(user_text) < 3:
        return TurnRoute(
            intent=TurnIntent.SMALL_TALK, reason=RouteReason.SHORT_MESSAGE, tools=False, write_context=False
        )
    return TurnRoute(intent=TurnIntent.GENERAL, reason=RouteReason.DEFAULT, tools=True, write_context=False)
