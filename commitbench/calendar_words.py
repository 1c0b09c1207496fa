"""The English names of weekdays and months, and their abbreviations: the project's one definition.

Every rule that reads a day or a month in English text reads these tables (the follow-up suite's time
matcher and cue detector, the standing suite's canonical arguments), so "Tue", "Tues." and "Tuesday" are
one day wherever the project compares them.
"""

from __future__ import annotations

__all__ = ["ABBREVIATIONS", "MONTHS", "WEEKDAYS", "full_name"]

WEEKDAYS: tuple[str, ...] = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS: tuple[str, ...] = ("january", "february", "march", "april", "may", "june", "july", "august",
                           "september", "october", "november", "december")

# Abbreviation -> full name (lower case, without a full stop). Three letters for every name, and the other
# spellings in common use; "may" is already whole.
ABBREVIATIONS: dict[str, str] = {
    **{name[:3]: name for name in WEEKDAYS},
    "tues": "tuesday", "tue": "tuesday", "weds": "wednesday", "thur": "thursday", "thurs": "thursday",
    **{name[:3]: name for name in MONTHS if name != "may"},
    "sept": "september",
}


def full_name(word: str) -> str | None:
    """The full weekday or month name a word is (case and a trailing full stop ignored), else None."""
    key = word.lower().rstrip(".")
    if key in WEEKDAYS or key in MONTHS:
        return key
    return ABBREVIATIONS.get(key)
