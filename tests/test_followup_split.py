"""The follow-up episode ids are fixed (adding a split must not move them), and the train and test splits."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.episodes import FollowupSelection, select_followup_episodes
from commitbench.episodes.followup.requests import load_requests
from commitbench.episodes.followup.splits import SPLIT_TABLE, split_of, split_requests
from commitbench.episodes.followup.vocabulary import RequestCategory, SourceDataset, Split

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


# ------------------------------------------------------------------------------------------ the split
def test_the_two_splits_share_no_request_and_together_hold_every_request():
    requests = load_requests()
    train = {r.id for r in split_requests(requests, Split.TRAIN)}
    test = {r.id for r in split_requests(requests, "test")}
    assert train and test
    assert not train & test
    assert train | test == {r.id for r in requests}


def test_a_request_is_in_the_split_its_source_and_category_say():
    for request in load_requests():
        expected = Split.TRAIN if request.source.dataset is SourceDataset.TEMPLATE else Split.TEST
        assert split_of(request) is expected, request.id
    assert set(SPLIT_TABLE) == {(s, c) for s in SourceDataset for c in RequestCategory}  # every cell decided


def test_a_split_filter_keeps_the_ids_of_its_episodes_and_the_two_splits_make_up_the_whole():
    everything = {e.id for e in FollowupSelection().select()}
    train = [e.id for e in FollowupSelection(split=Split.TRAIN).select()]
    test = [e.id for e in FollowupSelection(split="test").select()]
    assert set(train) | set(test) == everything and not set(train) & set(test)
    assert len(train) == 157 * 20 and len(test) == 143 * 20
    train_requests = {i.split(":")[0] for i in train}
    assert all(split_of(r) is Split.TRAIN for r in load_requests() if r.id in train_requests)


def test_the_split_combines_with_the_other_filters():
    chosen = FollowupSelection(split="test", categories=["memory"], setups=["C3"], variants=["stated"],
                               personas=["generic"]).select()
    assert {e.request.source.dataset for e in chosen} == {SourceDataset.SLURP}
    assert len(chosen) == 7  # the seven mined memory requests
    assert select_followup_episodes(split="train", category="reminder") == []  # every reminder is mined


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        select_followup_episodes(split="dev")
    with pytest.raises(ValidationError):
        FollowupSelection.model_validate({"split": "dev"})


def test_a_filter_without_a_split_serializes_as_it_did_before_the_split():
    assert "split" not in FollowupSelection().model_dump(mode="json")
    assert FollowupSelection(split="train").model_dump(mode="json")["split"] == "train"
    config = ExperimentConfig.model_validate({"env": FOLLOWUP_ENV_ID, "agents": ["chat"], "models": [
        {"name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}], "episodes": {"setups": ["C0"]}})
    assert "split" not in config.model_dump(mode="json")["episodes"]
