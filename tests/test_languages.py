"""Episodes in a second language: English stays exactly as it was; Turkish episodes are twins of English ones."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes, twin_key
from commitbench.episodes.standing.loader import languages_of, load_spec
from commitbench.episodes.standing.selection import StandingSelection
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, ENGLISH_WORKSPACE, Language, SpecError
from commitbench.identity import config_hash
from commitbench.planning import manifest_config
from commitbench.profiles import Profile

# The English episode ids of both profiles as they were before episodes had a language (count, sha256 of the ids
# one per line in compile order, first and last id). A run key names its episode id, so every stored English run
# keeps its key only while these hold.
ENGLISH_IDS = {
    Profile.PAPER: (1440, "f1e2ece42c72ade4", "st-49c49be69062", "st-ff1d62fbe7fa"),
    Profile.COMMITBENCH: (1440, "23a8e72c483e848e", "st-961140300d06", "st-dc1fffad462c"),
}


@pytest.mark.parametrize("profile", list(Profile))
def test_english_episode_ids_are_unchanged(profile: Profile) -> None:
    ids = [e.id for e in load_episodes(settings=profile)]
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    assert (len(ids), digest, ids[0], ids[-1]) == ENGLISH_IDS[profile]


def test_an_english_config_keeps_its_config_hash() -> None:
    plain = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"split": "test"})
    data = manifest_config(plain)
    assert "language" not in data["episodes"]
    english = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"],
                               episodes={"split": "test", "language": None})
    assert config_hash(manifest_config(english)) == config_hash(data)
    turkish = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"],
                               episodes={"split": "test", "language": "tr"})
    assert manifest_config(turkish)["episodes"]["language"] == ["tr"]
    assert config_hash(manifest_config(turkish)) != config_hash(data)


def test_language_filter_values() -> None:
    assert StandingSelection().languages() == [Language.EN]
    assert StandingSelection(language="tr").languages() == [Language.TR]
    assert StandingSelection(language=["en", "tr"]).languages() == [Language.EN, Language.TR]
    with pytest.raises(ValueError, match="named twice"):
        StandingSelection(language=["tr", "tr"])
    with pytest.raises(ValueError):
        StandingSelection(language="de")


def test_a_directory_without_the_language_names_the_missing_folder(tmp_path) -> None:
    (tmp_path / "cells.yaml").write_text((DEFAULT_DATA_DIR / "cells.yaml").read_text())
    with pytest.raises(SpecError, match=r"languages/tr/"):
        load_spec(tmp_path, language="tr")
    with pytest.raises(SpecError, match="unknown language 'xx'"):
        load_spec(tmp_path, language="xx")


def test_english_episodes_keep_the_built_in_workspace_words() -> None:
    episode = load_episodes()[0]
    assert episode.language is Language.EN and episode.workspace == ENGLISH_WORKSPACE
    assert episode.id_fields().keys().isdisjoint({"language", "workspace", "twins", "id"})


def test_every_turkish_episode_has_an_english_twin_with_its_structure() -> None:
    english = {e.id: e for e in load_episodes()}
    turkish = load_episodes(languages="tr")
    assert len(turkish) == 1440 and sum(e.split.value == "test" for e in turkish) == 1080
    assert len(set(languages_of(DEFAULT_DATA_DIR))) == 2
    for episode in turkish:
        twin = english[episode.twins["en"]]
        assert twin.twins == {"tr": episode.id} and twin_key(twin) == twin_key(episode)
        assert (twin.trigger_step, twin.event_steps) == (episode.trigger_step, episode.event_steps)
        assert [(m.step, m.act, m.sender) for m in twin.script] == [(m.step, m.act, m.sender) for m in episode.script]
        assert episode.language is Language.TR and episode.id != twin.id
    english_names = {p.name for e in english.values() for p in e.people}
    assert english_names.isdisjoint({p.name for e in turkish for p in e.people})


def test_interventions_with_english_words_refuse_turkish_episodes_and_the_others_play() -> None:
    from commitbench.envs.standing.env import StandingEnv
    from commitbench.oracles.base import InterventionError
    from commitbench.oracles.standing.ledger import SelfKeptLedger
    from commitbench.oracles.standing.policy import ReleasePolicy
    from commitbench.oracles.standing.stores import OracleStore

    turkish = [e for e in load_episodes(languages="tr") if e.cell == "PEER-DIRECT"][:2]
    for make in (lambda env: SelfKeptLedger(env), lambda env: OracleStore(env, level="B1"),
                 lambda env: ReleasePolicy(env, text="paraphrase-1")):
        with pytest.raises(InterventionError, match="written in en only, and these episodes are in tr"):
            make(StandingEnv(episodes=turkish))
    for text in ("explicit", "silent"):
        env = ReleasePolicy(StandingEnv(episodes=turkish), text=text)
        _, info = env.reset(seed=0)
        assert (turkish[0].explicit_policy in info["system_prompt"]) is (text == "explicit")
    english = [e for e in load_episodes() if e.cell == "PEER-DIRECT"][:2]
    SelfKeptLedger(StandingEnv(episodes=english)).reset(seed=0)


def test_a_type_in_english_alone_plays_without_a_twin_and_a_turkish_type_needs_an_english_one(tmp_path) -> None:
    import shutil

    data = tmp_path / "standing"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    shutil.copy(Path(__file__).resolve().parents[1] / "docs" / "examples" / "water_plants.yaml", data / "types")
    english = load_episodes(data)
    plants = [e for e in english if e.commitment_type == "water_plants"]
    assert plants and all(e.twins == {} for e in plants)
    assert all(e.twins for e in english if e.commitment_type != "water_plants")
    (data / "types" / "book_room.yaml").unlink()
    with pytest.raises(SpecError, match="tr episodes have no English twin"):
        load_episodes(data, languages="tr")
