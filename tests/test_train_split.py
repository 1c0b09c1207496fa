"""The train split: an overlay of its own (splits/train/) that shares no commitment type, no person's name and no
message text with the test split, plays the same design, and leaves the dev and test episodes, their ids and the
English version and lock exactly as they were."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from _reference_table import CELLS, EXPECTED_STRICT

from commitbench.agents.standing.reference import REFERENCE_AGENTS
from commitbench.analysis.standing.metrics import strict_by_cell
from commitbench.analysis.standing.results import load_rows
from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.dataversion import DataState, check_data, data_digest
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import GAPS, POLICIES, load_episodes
from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.loader import languages_of, load_spec
from commitbench.episodes.standing.selection import StandingSelection
from commitbench.episodes.standing.spec import (
    DEFAULT_DATA_DIR,
    SPLITS_DIR,
    SpecError,
    Split,
    episode_set_version,
    read_version,
)
from commitbench.rundir import RunStatus, read_manifest
from commitbench.runner import run_experiment
from commitbench.suites.standing import SUITE, episodes_of_run

TRAIN_DIR = DEFAULT_DATA_DIR / SPLITS_DIR / "train"
N_CELLS, N_SURFACES = 15, 3
N_TRAIN_TYPES = 4
# 15 cells x 2 policies x 2 gaps x 3 surfaces x 4 types
N_TRAIN = N_CELLS * len(POLICIES) * len(GAPS) * N_SURFACES * N_TRAIN_TYPES


@pytest.fixture(scope="module")
def train() -> tuple[Episode, ...]:
    return load_episodes(split="train")


@pytest.fixture(scope="module")
def held_out() -> tuple[Episode, ...]:
    """Every dev and test episode, in every language and under both profiles."""
    return tuple(e for profile in ("commitbench", "paper") for lang in languages_of(DEFAULT_DATA_DIR)
                 for e in load_episodes(settings=profile, languages=lang))


def test_the_train_split_has_its_count_and_only_its_own_types(train: tuple[Episode, ...]) -> None:
    assert N_TRAIN == 720 and len(train) == N_TRAIN
    assert {e.split for e in train} == {Split.TRAIN}
    assert len({e.commitment_type for e in train}) == N_TRAIN_TYPES
    assert len({e.id for e in train}) == N_TRAIN
    assert {e.cell for e in train} == set(CELLS)


def test_dev_and_test_are_what_they_were_and_never_hold_train(train: tuple[Episode, ...]) -> None:
    english = load_episodes()
    assert len(english) == 1440 and {e.split for e in english} == {Split.DEV, Split.TEST}
    assert {e.id for e in english}.isdisjoint(e.id for e in train)
    assert len(load_episodes(split="test")) == 1080 and len(load_episodes(split="dev")) == 360
    assert episode_set_version() == "4" and episode_set_version(split="test") == "4"
    # The English lock does not cover the overlay: it has a version and a lock of its own.
    assert check_data(DEFAULT_DATA_DIR, read_version(DEFAULT_DATA_DIR)).state is DataState.LOCKED
    assert check_data(TRAIN_DIR, read_version(TRAIN_DIR)).state is DataState.LOCKED


def test_no_commitment_type_or_tool_is_shared(train: tuple[Episode, ...], held_out: tuple[Episode, ...]) -> None:
    assert {e.commitment_type for e in train}.isdisjoint(e.commitment_type for e in held_out)
    tools = {t for e in held_out for t in (e.action_tool.name, e.check_tool.name)}
    assert {t for e in train for t in (e.action_tool.name, e.check_tool.name)}.isdisjoint(tools)


def _name_parts(episodes: tuple[Episode, ...]) -> set[str]:
    return {part for e in episodes for p in e.people for part in p.name.split()}


def test_no_first_or_last_name_team_or_channel_is_shared(train: tuple[Episode, ...],
                                                         held_out: tuple[Episode, ...]) -> None:
    assert _name_parts(train).isdisjoint(_name_parts(held_out))
    assert {e.team for e in train}.isdisjoint(e.team for e in held_out)
    assert {e.channel for e in train}.isdisjoint(e.channel for e in held_out)
    # Nor does any held-out name occur in a train message, or a train name in a held-out one.
    train_texts, held_texts = _texts(train), _texts(held_out)
    for parts, texts in ((_name_parts(held_out), train_texts), (_name_parts(train), held_texts)):
        pattern = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(parts)))})\b")
        assert not [t for t in texts if pattern.search(t)]


def _texts(episodes: tuple[Episode, ...]) -> set[str]:
    """Every message text as rendered: request, promise, delegation, events, filler, lookups, trigger, closing,
    the creditor's answers and acknowledgement, the wiki and the tools' results."""
    out: set[str] = set()
    for e in episodes:
        out.update(m.text for m in e.script)
        out.update(r.text for r in e.creditor_replies)
        out.update(entry.text for entry in e.wiki.values())
        out.update((e.acknowledgement, e.action_done_text, e.action_failed_text, e.check_text))
    return out


def _sentences(texts: set[str]) -> set[str]:
    return {s.strip().lower() for t in texts for s in re.split(r"(?<=[.!?:;])\s+", t) if s.strip()}


def test_no_message_text_is_shared(train: tuple[Episode, ...], held_out: tuple[Episode, ...]) -> None:
    """No rendered message is shared, nor any sentence of one (the paper profile's thumbs-up aside: it is the
    paper's acknowledgement, the same word in every split and language)."""
    train_texts, held_texts = _texts(train) - {"👍"}, _texts(held_out) - {"👍"}
    assert train_texts.isdisjoint(held_texts), sorted(train_texts & held_texts)[:5]
    shared = _sentences(train_texts) & _sentences(held_texts)
    assert not shared, sorted(shared)[:5]
    kinds = {m.act for e in train for m in e.script}
    assert {ScriptAct.REQUEST, ScriptAct.PROMISE, ScriptAct.DELEGATION, ScriptAct.FILLER, ScriptAct.LOOKUP,
            ScriptAct.TRIGGER, ScriptAct.CLOSING, ScriptAct.CANCEL, ScriptAct.RELAY, ScriptAct.CLAIM,
            ScriptAct.REINSTATE} <= kinds


def test_the_train_filler_never_mentions_the_commitment(train: tuple[Episode, ...]) -> None:
    for e in train:
        words = {w.lower() for w in e.action_tool.name.split("_")} | {str(v).lower() for v in e.target_args.values()}
        for m in e.script:
            if m.act in (ScriptAct.FILLER, ScriptAct.LOOKUP, ScriptAct.CLOSING):
                assert not any(w in m.text.lower() for w in words if len(w) > 3), (m.text, words)


def test_the_train_split_takes_the_instructions_from_the_english_data(train: tuple[Episode, ...]) -> None:
    spec, english = load_spec(split="train"), load_spec()
    assert spec.policies == english.policies and spec.system_prompt == english.system_prompt
    assert spec.workspace == english.workspace and spec.cells == english.cells
    assert {e.explicit_policy for e in train} == {english.policies.explicit.strip()}
    assert set(spec.styles) == set(english.styles)


# ------------------------------------------------------------------------------------------- versions and checks
def test_a_train_selection_names_both_versions_and_its_data_check_covers_the_overlay() -> None:
    selection = StandingSelection(split="train")
    assert SUITE.set_version(selection) == episode_set_version(split="train") == "4/train-1"
    check = SUITE.data_check(selection)
    assert check is not None and check.ok and check.version == "4/train-1"
    assert SUITE.data_check(StandingSelection(split="test")).version == "4"


def test_an_edited_overlay_is_caught_by_its_own_lock_and_leaves_the_english_lock_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    before = data_digest(data)
    chatter = data / SPLITS_DIR / "train" / "filler.yaml"
    chatter.write_text(chatter.read_text(encoding="utf-8").replace("Snow is forecast", "Hail is forecast"),
                       encoding="utf-8")
    assert data_digest(data) == before
    assert SUITE.data_check(StandingSelection(data=str(data), split="test")).ok
    check = SUITE.data_check(StandingSelection(data=str(data), split="train"))
    assert check is not None and check.state is DataState.CHANGED and "splits/train" in check.message()


# ------------------------------------------------------------------------------------------- clear errors
def test_turkish_has_no_train_split(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="train split is English only"):
        StandingSelection(split="train", language="tr")
    with pytest.raises(SpecError, match="train split is English only"):
        load_episodes(split="train", languages="tr")
    with pytest.raises(SpecError, match="train split is English only"):
        episode_set_version(languages=["tr"], split="train")
    assert main(["episodes", "validate", "--split", "train", "--language", "tr"]) == 1
    assert "train split is English only" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown split 'holdout'"):
        StandingSelection(split="holdout")


def _copy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    return data


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_dev_or_test_type_may_not_say_train(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    _edit(data / "types" / "book_room.yaml", "split: dev", "split: train")
    with pytest.raises(SpecError, match=r"book_room\.yaml: split: 'train': the train split's types live in "
                       r"splits/train/types/"):
        load_spec(data)


def test_a_train_type_may_not_say_dev_or_test(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    _edit(data / SPLITS_DIR / "train" / "types" / "reserve_van.yaml", "split: train", "split: test")
    with pytest.raises(SpecError, match=r"reserve_van\.yaml: split: 'test': a type in train split's folder"):
        load_spec(data, split="train")


def test_a_train_type_may_not_reuse_a_test_type_or_its_words(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    _edit(data / SPLITS_DIR / "train" / "types" / "reserve_van.yaml", "id: reserve_van", "id: book_room")
    with pytest.raises(SpecError, match=r"reserve_van\.yaml: id: type id 'book_room' is also a type of"):
        load_spec(data, split="train")
    data = _copy(tmp_path / "again")
    _edit(data / SPLITS_DIR / "train" / "types" / "reserve_van.yaml", "All the exhibit crates are packed",
          "All the exhibit crates are packed for the client")
    with pytest.raises(SpecError, match=r"reserve_van\.yaml: trigger\[0\]: uses 'client', a distinctive word of "
                       r"type 'schedule_call'"):
        load_spec(data, split="train")


def test_a_train_person_may_not_share_a_name_with_dev_and_test(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    _edit(data / SPLITS_DIR / "train" / "world.yaml", "Mateo Quispe", "Mateo Okafor")
    with pytest.raises(SpecError, match=r"world\.yaml: variants\.0\.people\.delegate\.name: 'Okafor' is also a name"):
        load_spec(data, split="train")


def test_a_train_overlay_takes_the_instructions_and_may_not_hold_them(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    shutil.copy(data / "policies.yaml", data / SPLITS_DIR / "train" / "policies.yaml")
    with pytest.raises(SpecError, match=r"train/policies\.yaml: <file>: a split overlay takes the release policies"):
        load_spec(data, split="train")


def test_a_directory_without_the_overlay_names_the_missing_folder(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    shutil.rmtree(data / SPLITS_DIR)
    with pytest.raises(SpecError, match=r"no train split \(expected the folder splits/train/"):
        load_episodes(data, split="train")
    assert len(load_episodes(data)) == 1440


# ------------------------------------------------------------------------------------------- the command line
def test_validate_the_train_split_reports_its_count_and_lock(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["episodes", "validate", "--split", "train"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"ok: {N_TRAIN} episodes from {N_TRAIN_TYPES} commitment types x 15 cells "
                              f"(train {N_TRAIN})")
    assert "warning" not in out.err
    assert main(["episodes", "validate", str(TRAIN_DIR), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["by_split"] == {"train": N_TRAIN} and summary["data_version"]["state"] == "locked"
    assert main(["episodes", "validate", str(TRAIN_DIR / "types" / "print_badges.yaml")]) == 0
    assert capsys.readouterr().out.startswith(f"ok: {N_TRAIN} episodes")
    assert main(["episodes", "list", "--split", "train", "--cells", "BASE", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["count"] == N_TRAIN // N_CELLS and {row["split"] for row in listing["episodes"]} == {"train"}
    first = listing["episodes"][0]
    assert main(["episodes", "show", first["id"]]) == 0  # found among the train episodes without --split
    assert capsys.readouterr().out.startswith(f"{first['id']}  {first['commitment_type']} / BASE")


# ------------------------------------------------------------------------------------------- the reference table
@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Every reference agent on the 720 train episodes, played by the runner, graded by the rule judge."""
    out = tmp_path_factory.mktemp("reference-train")
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=list(REFERENCE_AGENTS), episodes={"split": "train"})
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == len(REFERENCE_AGENTS) * N_TRAIN
    manifest = read_manifest(out)
    assert manifest is not None and manifest.episode_set_version == "4/train-1"
    return load_rows(out, episodes=episodes_of_run(out))


@pytest.mark.slow
@pytest.mark.parametrize("agent", list(EXPECTED_STRICT))
def test_the_reference_agents_score_the_test_splits_table_on_train(rows: pd.DataFrame, agent: str) -> None:
    table = strict_by_cell(rows[(rows["agent"] == agent) & (rows["policy"] == "explicit")])
    got = {cell: table[cell].iloc[0] for cell in table.columns}
    assert got == EXPECTED_STRICT[agent]


@pytest.mark.slow
def test_the_reference_agents_play_every_train_episode_without_errors(rows: pd.DataFrame) -> None:
    assert (rows["tool_errors"] == 0).all()
    assert set(rows["commitment_type"]) == {t.id for t in load_spec(split="train").types}
    assert rows.groupby("agent").size().to_dict() == dict.fromkeys(REFERENCE_AGENTS, N_TRAIN)
