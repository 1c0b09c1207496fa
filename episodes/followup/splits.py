"""The follow-up suite's train and test splits: a fixed assignment of every (source, category) cell.

A request's split is a function of where its text came from and what it asks for, never of its id or of a
random draw:

============  ==========  ==========  ===========  ==================  ======
source        reminder    monitoring  callback     deferred_delivery   memory
============  ==========  ==========  ===========  ==================  ======
template      train       train       train        train               train
slurp         test        test        test         test                test
bitext        test        test        test         test                test
============  ==========  ==========  ===========  ==================  ======

Why whole cells: the templated requests of one family differ only in their slots ("remind me to call the
dentist" and "... the plumber"), so a split that cut a family would put near-copies on both sides, and the test
split would no longer be unseen text. The mined requests (real users' words from SLURP and Bitext) are held out:
testing on them measures whether what a policy learnt on templated text carries over to real requests, and
the reminder category (mined only) is a category the train split never shows. Every request has exactly one
source and one category, so it is in exactly one split.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from commitbench.episodes.followup.requests import FollowupRequest
from commitbench.episodes.followup.vocabulary import RequestCategory, SourceDataset, Split

__all__ = ["SPLIT_TABLE", "split_counts", "split_of", "split_requests"]

# Every (source, category) cell and its split: the table of the module's doc.
SPLIT_TABLE: dict[tuple[SourceDataset, RequestCategory], Split] = {
    (source, category): Split.TRAIN if source is SourceDataset.TEMPLATE else Split.TEST
    for source in SourceDataset
    for category in RequestCategory
}


def split_of(request: FollowupRequest) -> Split:
    """The split a request belongs to (by its source and category)."""
    return SPLIT_TABLE[(request.source.dataset, request.category)]


def split_requests(requests: Sequence[FollowupRequest], split: Split | str | None) -> list[FollowupRequest]:
    """The requests of one split, in their order (None: every request)."""
    if split is None:
        return list(requests)
    wanted = Split(split)
    return [r for r in requests if split_of(r) is wanted]


def split_counts(requests: Iterable[FollowupRequest]) -> dict[Split, int]:
    """How many requests each split holds."""
    counts = dict.fromkeys(Split, 0)
    for request in requests:
        counts[split_of(request)] += 1
    return counts
