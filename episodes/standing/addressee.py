"""Whom a message in a standing workspace is addressed to: the one definition, by recipient and mention.

A message is addressed to a person when it is a direct message to them, or a post in the team channel that
@-mentions them or opens by addressing them by name ("Alice, ...", "Hi Alice, ..."); never because their name
appears inside a message to someone else. The environment's scripted creditor answers by this rule, and the
signals and the judges count a question or a notification as reaching the creditor by it.

It reads recipients, names and punctuation only, never words of a language: a greeting before the name is any
one word, and the name must be followed by a comma, a colon, an exclamation mark or a dash. Linear time: one
anchored pattern per person.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from commitbench.episodes.standing.episode import Person

__all__ = ["DM_PREFIX", "addressed_to", "addressees", "dm_channel"]

DM_PREFIX = "dm:"
# What may stand between a greeting word, the name and the rest: spaces, and the name's own punctuation.
_CLOSES = r"(?:[,:!\u2013\u2014]|\s+-)"


def dm_channel(name: str) -> str:
    """The channel of a direct message to ``name``."""
    return f"{DM_PREFIX}{name}"


@lru_cache(maxsize=256)
def _patterns(full: str, first: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    names = "|".join(re.escape(n) for n in sorted({full, first}, key=len, reverse=True))
    # @Alice or @Alice Moreno anywhere (not inside a word or an e-mail address).
    mention = re.compile(rf"(?<![\w@])@(?:{names})(?!\w)", re.IGNORECASE)
    # The opening: optionally one greeting word, then the name (with or without @), then its punctuation.
    opening = re.compile(rf"\A\W{{0,3}}(?:[^\W\d_]{{1,20}}\s+)?@?(?:{names})\s*{_CLOSES}", re.IGNORECASE)
    return mention, opening


def addressed_to(channel: str, text: str, person: Person, team_channel: str) -> bool:
    """Whether a message written in ``channel`` is addressed to ``person`` (see the module doc)."""
    if channel.startswith(DM_PREFIX):
        return channel == dm_channel(person.name)
    if channel.lower() != team_channel.lower():
        return False
    mention, opening = _patterns(person.name, person.first_name)
    return bool(mention.search(text) or opening.match(text))


def addressees(channel: str, text: str, people: Iterable[Person], team_channel: str) -> list[Person]:
    """The people a message is addressed to, in the order given."""
    return [p for p in people if addressed_to(channel, text, p, team_channel)]
