"""Deterministic rewriting of voice-assistant transcripts and support requests into typed English.

SLURP transcripts are lower case, unpunctuated, and spell numbers out ("remind me at three thirty pm").
The rules here turn them into what a user would type: wake words removed, clock times, dates and
larger quantities in digits, the pronoun "I", weekdays, months and known names capitalised, common
possessives given their apostrophe, a first capital and a final full stop or question mark. Anything
the rules cannot fix is handled by the hand table in ``curation.yaml`` (an edit or a rejection).

Every function is pure and table-tested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from commitbench.calendar_words import MONTHS, WEEKDAYS

WAKE_WORDS = ("hey olly", "olly", "alexa", "hey google", "google", "siri")

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_ORDINAL_UNITS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
    "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20,
    "thirtieth": 30,
}
# Month names that are also ordinary words are capitalised only next to a day number.
_AMBIGUOUS_MONTHS = frozenset({"may", "march"})
_DURATION_UNITS = ("minute", "minutes", "hour", "hours", "day", "days", "week", "weeks", "month", "months",
                   "year", "years", "degrees", "percent", "dollars")
_MERIDIEM = {"am": "am", "pm": "pm", "a.m.": "am", "p.m.": "pm"}
_POSSESSIVE_OWNERS = frozenset(
    {"mom", "dad", "mum", "mother", "father", "daughter", "son", "wife", "husband", "sister", "brother",
     "friend", "doctor", "dentist", "boss", "grandma", "grandpa", "tomorrow", "today", "tonight", "yesterday",
     "week", "year", "teacher", "child", "kid", "baby", "nephew", "niece", "uncle", "aunt", "cousin",
     *WEEKDAYS}
)
_POSSESSED = frozenset(
    {"birthday", "birthdays", "anniversary", "meeting", "meetings", "party", "appointment", "appointments",
     "wedding", "game", "recital", "graduation", "weather", "schedule", "event", "events", "test", "exam",
     "class", "lunch", "dinner", "flight", "match", "show", "concert", "news", "practice", "school", "house",
     "office", "plans", "visit", "retirement", "funeral", "surgery"}
)
_CONTRACTIONS = {
    "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "cant": "can't", "wont": "won't", "isnt": "isn't",
    "im": "I'm", "ive": "I've", "id": "I'd", "ill": "I'll", "youre": "you're", "thats": "that's",
    "whats": "what's", "theres": "there's", "lets": "let's", "o clock": "o'clock",
}
_QUESTION_OPENERS = (
    "can", "could", "will", "would", "do", "does", "did", "is", "are", "what", "when", "where", "who", "how",
    "shall", "should", "may", "why", "which",
)


def _tokens(text: str) -> list[str]:
    return text.split()


def parse_cardinal(words: list[str], start: int) -> tuple[int, int] | None:
    """Parse a spelled-out cardinal (0 to 99, or 'N hundred') at ``start``: (value, words consumed)."""
    if start >= len(words):
        return None
    word = words[start]
    if word in _TENS:
        value = _TENS[word]
        if start + 1 < len(words) and words[start + 1] in _UNITS and 0 < _UNITS[words[start + 1]] < 10:
            return value + _UNITS[words[start + 1]], 2
        return value, 1
    if word in _UNITS:
        return _UNITS[word], 1
    return None


def parse_ordinal(words: list[str], start: int) -> tuple[int, int] | None:
    """Parse a spelled-out ordinal day (first to thirty first): (value, words consumed)."""
    if start >= len(words):
        return None
    word = words[start]
    if word in ("twenty", "thirty") and start + 1 < len(words) and words[start + 1] in _ORDINAL_UNITS:
        unit = _ORDINAL_UNITS[words[start + 1]]
        if unit < 10:
            return _TENS[word] + unit, 2
    if word in _ORDINAL_UNITS:
        return _ORDINAL_UNITS[word], 1
    return None


def ordinal_suffix(day: int) -> str:
    if 10 <= day % 100 <= 20:
        return f"{day}th"
    return f"{day}" + {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _clock(words: list[str], i: int) -> tuple[str, int] | None:
    """A clock time at ``i``: 'three pm', 'three thirty pm', 'eight hundred am', 'eleven and thirty am',
    'twelve o clock'. Returns (typed form, words consumed)."""
    hour = parse_cardinal(words, i)
    if hour is None or not 1 <= hour[0] <= 12 or hour[1] != 1:
        return None
    j = i + 1
    minute: int | None = None
    if j < len(words) and words[j] == "hundred":
        j += 1
        minute = 0
        if j + 1 < len(words) and words[j] == "and":
            parsed = parse_cardinal(words, j + 1)
            if parsed is not None and parsed[0] < 60:
                minute, j = parsed[0], j + 1 + parsed[1]
    elif j + 1 < len(words) and words[j] == "and":
        parsed = parse_cardinal(words, j + 1)
        if parsed is not None and 10 <= parsed[0] < 60:
            minute, j = parsed[0], j + 1 + parsed[1]
    elif j < len(words) and words[j] == "o" and j + 1 < len(words) and words[j + 1] in _UNITS:
        minute, j = _UNITS[words[j + 1]], j + 2
    else:
        parsed = parse_cardinal(words, j)
        if parsed is not None and 10 <= parsed[0] < 60:
            minute, j = parsed[0], j + parsed[1]
    if j < len(words) and words[j] in _MERIDIEM:
        suffix = _MERIDIEM[words[j]]
        time = f"{hour[0]}:{minute:02d}" if minute is not None else f"{hour[0]}"
        return f"{time} {suffix}", j + 1 - i
    if j + 1 < len(words) and words[j] == "o" and words[j + 1] == "clock" and minute is None:
        return f"{hour[0]} o'clock", j + 2 - i
    if j < len(words) and words[j] == "o'clock" and minute is None:
        return f"{hour[0]} o'clock", j + 1 - i
    if minute is not None and i > 0 and words[i - 1] in ("at", "by", "until", "around", "from"):
        return f"{hour[0]}:{minute:02d}", j - i
    return None


def digits_for_numbers(text: str) -> str:
    """Write clock times, dates and quantities of ten or more in digits; keep small counts as words."""
    words = _tokens(text)
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        clock = _clock(words, i)
        if clock is not None:
            out.append(clock[0])
            i += clock[1]
            continue
        # 'at ten', 'by four' (an hour without am/pm), when no unit follows
        if out and out[-1] in ("at", "by", "until", "around") and word in _UNITS and 1 <= _UNITS[word] <= 12:
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt not in _DURATION_UNITS and nxt not in _UNITS and nxt not in _TENS:
                out.append(str(_UNITS[word]))
                i += 1
                continue
        # month + day ('march sixteen', 'march sixteenth'), day + month ('fifth march'), 'the fifteenth'
        if word in MONTHS:
            day = parse_ordinal(words, i + 1) or parse_cardinal(words, i + 1)
            if day is not None and 1 <= day[0] <= 31:
                out.extend([word, str(day[0])])
                i += 1 + day[1]
                continue
        ordinal = parse_ordinal(words, i)
        if ordinal is not None and ordinal[0] <= 31:
            nxt_index = i + ordinal[1]
            nxt = words[nxt_index] if nxt_index < len(words) else ""
            after_of = words[nxt_index + 1] if nxt_index + 1 < len(words) else ""
            previous = out[-1] if out else ""
            names_a_day = nxt in MONTHS or (nxt == "of" and after_of in MONTHS) or previous == "the"
            counts_something = previous == "the" and nxt in ("time", "thing", "one", "step", "place", "week")
            if names_a_day and not counts_something:
                out.append(ordinal_suffix(ordinal[0]))
                i = nxt_index
                continue
        cardinal = parse_cardinal(words, i)
        if cardinal is not None:
            value, used = cardinal
            nxt_index = i + used
            nxt = words[nxt_index] if nxt_index < len(words) else ""
            if nxt == "hundred":
                value *= 100
                used += 1
                nxt_index = i + used
                nxt = words[nxt_index] if nxt_index < len(words) else ""
            if nxt in _DURATION_UNITS and value >= 10:
                out.append(str(value))
                i += used
                continue
        out.append(word)
        i += 1
    return " ".join(out)


def strip_wake_words(text: str) -> str:
    """Remove a device name at the start or the end ('olly remind me ...', '... olly')."""
    stripped = text.strip()
    changed = True
    while changed:
        changed = False
        for wake in WAKE_WORDS:
            if stripped == wake:
                return ""
            if stripped.startswith(wake + " "):
                stripped = stripped[len(wake) + 1 :].lstrip(", ")
                changed = True
            if stripped.endswith(" " + wake):
                stripped = stripped[: -len(wake) - 1].rstrip(", ")
                changed = True
    return stripped


def fix_apostrophes(text: str) -> str:
    """Contractions ('dont', 'im') and possessives of common owners ('moms birthday', 'tomorrows meeting')."""
    for plain, typed in _CONTRACTIONS.items():
        text = re.sub(rf"\b{re.escape(plain)}\b", typed, text)
    words = _tokens(text)
    for i in range(len(words) - 1):
        word = words[i]
        if word.endswith("s") and not word.endswith("'s") and words[i + 1] in _POSSESSED:
            owner = word[:-1]
            if owner in _POSSESSIVE_OWNERS:
                words[i] = owner + "'s"
    return " ".join(words)


def capitalise(text: str, proper_nouns: Mapping[str, str]) -> str:
    """'I', weekdays, months and the given proper nouns (lower-case phrase -> typed form)."""
    for phrase in sorted(proper_nouns, key=len, reverse=True):
        text = re.sub(rf"(?<![\w']){re.escape(phrase)}(?![\w])", proper_nouns[phrase], text)
    words = _tokens(text)
    for i, word in enumerate(words):
        bare = word.rstrip(",.?!")
        tail = word[len(bare) :]
        base, _, possessive = bare.partition("'")
        if base == "i":
            words[i] = "I" + (("'" + possessive) if possessive or "'" in bare else "") + tail
        elif base in WEEKDAYS or (base.endswith("s") and base[:-1] in WEEKDAYS):
            words[i] = bare[:1].upper() + bare[1:] + tail
        elif base in MONTHS:
            neighbour_is_day = any(
                0 <= j < len(words) and re.fullmatch(r"\d{1,2}(st|nd|rd|th)?", words[j].rstrip(",.?!"))
                for j in (i - 1, i + 1)
            ) or (i >= 1 and words[i - 1] == "of")
            if base not in _AMBIGUOUS_MONTHS or neighbour_is_day:
                words[i] = bare[:1].upper() + bare[1:] + tail
    return " ".join(words)


def finish_sentence(text: str) -> str:
    """First letter upper case; a question mark when the sentence or its last clause is a question,
    otherwise a full stop."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    if text[-1] in ".?!":
        return text
    first = text.split()[0].lower().rstrip(",")
    last_clause = text.rsplit(", ", 1)[-1].split()
    last_first = last_clause[0].lower() if last_clause else ""
    question = first in _QUESTION_OPENERS or (", " in text and last_first in _QUESTION_OPENERS)
    return text + ("?" if question else ".")


_TRAILING_REQUEST = re.compile(
    r"^(?P<head>(?:\S+ ){3,}?\S+?) (?P<tail>(?:please |so )?(?:can you |could you |will you )?"
    r"(?:please )?(?:remind me|send me a reminder|don't forget to remind me|create (?:a )?reminder)(?: please)?)$"
)
_LEADING_TIME = re.compile(
    r"^(?P<head>(?:every other|every|next|this|on) \S+(?: (?:morning|afternoon|evening|night))?|"
    r"tomorrow(?: morning| afternoon| evening| night)?|tonight|"
    r"at \d{1,2}(?::\d\d)? ?(?:am|pm)?(?: tomorrow| today)?|\S+ minutes from now) "
    r"(?P<tail>(?:please )?(?:remind me|i need|i want)\b.*)$"
)


def punctuate_clauses(text: str) -> str:
    """Commas a typist would put in: before a trailing 'remind me' clause and after a leading time."""
    trailing = _TRAILING_REQUEST.match(text)
    if trailing and not trailing.group("head").endswith(("to", "and", "me")):
        text = f"{trailing.group('head')}, {trailing.group('tail')}"
    leading = _LEADING_TIME.match(text)
    if leading:
        text = f"{leading.group('head')}, {leading.group('tail')}"
    if text.endswith(" please") and not text.endswith(", please") and len(text.split()) > 4:
        text = text[: -len(" please")] + ", please"
    return text


def apply_replacements(text: str, replacements: Iterable[tuple[str, str]]) -> str:
    """Whole-word replacements, in order (small fixes of recognition errors)."""
    for wrong, right in replacements:
        text = re.sub(rf"(?<![\w']){re.escape(wrong)}(?![\w'])", right, text)
    return text


def rewrite_transcript(
    text: str, proper_nouns: Mapping[str, str], replacements: Iterable[tuple[str, str]] = ()
) -> str:
    """A lower-case voice transcript as a typed request."""
    result = strip_wake_words(text.lower())
    result = apply_replacements(result, replacements)
    result = fix_apostrophes(result)
    result = digits_for_numbers(result)
    result = punctuate_clauses(result)
    result = capitalise(result, proper_nouns)
    return finish_sentence(result)


_SUPPORT_FIXES: tuple[tuple[str, str], ...] = (
    # "u" run into the next word ("can uhelp me", "I don't understand ui want ...")
    ("uhelp", "you help"),
    ("uneed", "you need"),
    ("uhave", "you have"),
    ("uarent", "you aren't"),
    ("ui", "you, i"),
    ("ur", "your"),
    ("u", "you"),
    ("ya", "you"),
    ("wanna", "want to"),
    ("gotta", "have to"),
    ("pls", "please"),
    ("plz", "please"),
    ("cust", "customer"),
)


def rewrite_support_request(text: str) -> str:
    """A support request as typed English: colloquial spellings expanded, 'I' capitalised, punctuated."""
    result = " ".join(text.split())
    result = apply_replacements(result, _SUPPORT_FIXES)
    result = fix_apostrophes(result)
    result = re.sub(r"(?<![\w'])i(?=('m|'ve|'d|'ll)?(?![\w']))", "I", result)
    return finish_sentence(result)
