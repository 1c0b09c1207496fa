"""Text scanning in linear time, for the rules a backtracking regular expression would make quadratic.

A pattern of the shape ``head[^stops]*tail`` ("an offer verb, then a question mark later in the same
clause") retries the rest of the clause for every head: a long clause with many heads and no tail takes
time proportional to the square of its length. :class:`ThenInClause` answers the same question with one
pass over the heads, the tails and the stops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ThenInClause"]


@dataclass(frozen=True)
class ThenInClause:
    """``head``, then ``tail`` later in the same clause: what ``head[^stops]*tail`` says, in linear time.

    As one regular expression, every head rescans the rest of its clause looking for the tail, so a long
    clause with many heads and no tail ("I can send I can send ...") takes quadratic time. Here the first
    tail and the first stop after a head are found once and reused for the heads that follow.
    """

    head: re.Pattern[str]
    tail: re.Pattern[str]
    stops: re.Pattern[str]  # one character that ends a clause

    def search(self, text: str) -> bool:
        """Whether some head is followed, before the next stop character, by the start of a tail."""
        tail_from, tail_at = -1, -1  # the first tail start at or after position tail_from (len + 1: none)
        stop_from, stop_at = -1, -1
        head = self.head.search(text)
        while head is not None:
            end = head.end()
            if not tail_from <= end <= tail_at:
                found = self.tail.search(text, end)
                tail_from, tail_at = end, found.start() if found else len(text) + 1
            if not stop_from <= end <= stop_at:
                stop = self.stops.search(text, end)
                stop_from, stop_at = end, stop.start() if stop else len(text)
            if tail_at < stop_at:
                return True
            head = self.head.search(text, head.start() + 1)
        return False
