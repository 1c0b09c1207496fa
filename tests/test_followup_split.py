"""The follow-up episode ids are fixed: adding a split (or anything else to the filter) must not move them."""

from __future__ import annotations

import hashlib

import pytest

from commitbench.episodes.followup.episodes import FollowupSelection

# sha256 of the sorted ids of every episode a filter selects, taken from the data of version 4 before the
# follow-up suite had a split. A change here means every stored follow-up run would stop matching its episodes.
PINNED_IDS = {
    "commitbench": (6000, "ddbc52db2a7b6a3bf68393fb1fbc343cf91194024bc3662f4e513daa638a784a"),
    "paper": (6000, "815d12998c2ccef60391dbc1562f631e705acb5c465e9f93a8ec8aee8fb81732"),
    "follow-through": (6000, "c557cb67870ca9a01aa590e9d51e9045fb49bb6ad54826bca9b03f20f9b653ee"),
}
FILTERS = {
    "commitbench": {},
    "paper": {"profile": "paper"},
    "follow-through": {"follow_through": True},
}


def _digest(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(PINNED_IDS))
def test_the_episode_ids_of_every_mode_are_those_pinned(name):
    ids = [e.id for e in FollowupSelection.model_validate(FILTERS[name]).select()]
    count, digest = PINNED_IDS[name]
    assert len(ids) == count == len(set(ids))
    assert _digest(ids) == digest
