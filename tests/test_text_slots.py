"""Text slots: the texts the papers print, supplied from a user's file instead of the project's wording.

A texts file (placeholder texts written by the project here; no file of the papers' wording ships) changes the
rendered prompt, the run identity and the report header; an unknown slot or a missing placeholder is refused,
naming the slot; a run without a file keeps its ids.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from commitbench.cli import main
from commitbench.config import ConfigError, ExperimentConfig, load_config
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.identity import run_key
from commitbench.jsoncodec import canonical_text
from commitbench.mock import MockServer
from commitbench.planning import expand_cells, manifest_config, select_config_episodes
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.textslots import SLOTS, TextsError, read_texts, slot_table
from commitbench.traces import latest_traces

ROOT = Path(__file__).resolve().parent.parent
PERSONA = "Placeholder persona for a test: you help the user with their everyday tasks."
TIME = "Clock: $weekday the $day of $month $year, $time."
POLICY = "Placeholder policy for a test: only the requester, or someone they named, may call the task off."


def texts_file(tmp_path: Path, texts: dict[str, str], name: str = "texts.yaml") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(texts), encoding="utf-8")  # JSON is YAML
    return path


def followup_config(base_url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "slots", "env": FOLLOWUP_ENV_ID, "agents": ["chat"],
            "models": [{"name": "m", "base_url": base_url, "api_key_env": None, "settings": {"model": "m"}}],
            "episodes": {"setups": ["C0"], "personas": ["generic"], "variants": ["inferred"], "limit": 3}, **extra}


# ------------------------------------------------------------------ refusals, naming the slot
@pytest.mark.parametrize(("texts", "message"), [
    ({"followup.persona.pirate": "Arr."}, "'followup.persona.pirate' is no text slot"),
    ({"followup.time_sentence": "It is $weekday, $day $month $year."}, "followup.time_sentence: the placeholder $time"),
    ({"followup.time_sentence": TIME + " $hour"}, "followup.time_sentence: unknown placeholder $hour"),
    ({"followup.rewrite_prompt": "Rewrite $draft for $card."}, "followup.rewrite_prompt: the placeholder "
                                                                "$user_message, $tool_activity is missing"),
    ({"followup.persona.generic": "It costs $5."}, "followup.persona.generic: a lone '$'"),
    ({"followup.persona.generic": ""}, "followup.persona.generic: the text must be a non-empty string"),
])
def test_a_bad_texts_file_is_refused_naming_the_slot(tmp_path: Path, texts: dict[str, str], message: str) -> None:
    with pytest.raises(TextsError) as caught:
        read_texts(texts_file(tmp_path, texts))
    assert message in str(caught.value) and str(tmp_path) in str(caught.value)


def test_a_slot_of_another_suite_or_profile_is_refused_at_load(tmp_path: Path) -> None:
    standing_only = texts_file(tmp_path, {"standing.release_policy": POLICY})
    with pytest.raises(ValueError, match="shown only under profile paper, not commitbench"):
        ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], texts=str(standing_only))
    with pytest.raises(ValueError, match="a text of the standing suite, not of followup"):
        ExperimentConfig.model_validate({**followup_config("http://127.0.0.1:9/v1"), "texts": str(standing_only)})
    config_path = tmp_path / "c.yaml"
    config_path.write_text(f"env: {STANDING_ENV_ID}\nagents: [creditor-rule]\ntexts: {tmp_path / 'missing.yaml'}\n")
    with pytest.raises(ConfigError, match="cannot read texts file"):
        load_config(config_path)


# ------------------------------------------------------------------ the prompt, the identity and the header
@pytest.mark.slow
def test_a_texts_file_changes_the_prompt_the_identity_and_the_header(
    tmp_path: Path, mock_server: MockServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = texts_file(tmp_path, {"followup.persona.generic": PERSONA, "followup.time_sentence": TIME})
    plain = ExperimentConfig.model_validate(followup_config(mock_server.base_url))
    supplied = ExperimentConfig.model_validate(followup_config(mock_server.base_url, texts=str(path)))
    assert run_experiment(plain, tmp_path / "plain").status is RunStatus.COMPLETE
    assert run_experiment(supplied, tmp_path / "supplied").status is RunStatus.COMPLETE
    before = {t.episode_id: t for t in latest_traces(tmp_path / "plain")}
    after = {t.episode_id: t for t in latest_traces(tmp_path / "supplied")}
    assert set(before) == set(after)
    for episode_id, trace in after.items():
        prompt = trace.events[0].text
        assert prompt.startswith(PERSONA) and prompt.endswith(", 10:00.") and "\n\nClock: Thursday the 1 of" in prompt
        assert not before[episode_id].events[0].text.startswith(PERSONA)
        assert trace.run_key != before[episode_id].run_key  # another cell: the texts are part of its identity
    manifest = json.loads((tmp_path / "supplied" / "manifest.json").read_text())
    assert manifest["config"]["texts"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "texts" not in json.loads((tmp_path / "plain" / "manifest.json").read_text())["config"]
    assert main(["report", str(tmp_path / "supplied"), "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert f"texts: texts from {path}" in out and "followup.persona.generic, followup.time_sentence" in out
    # The command line gives a texts file the same way.
    config_path = tmp_path / "slots.json"
    config_path.write_text(json.dumps(followup_config(mock_server.base_url)))
    assert main(["run", str(config_path), "--texts", str(path), "--out", str(tmp_path / "cli"), "--no-progress",
                 "--no-report"]) == 0
    assert {t.run_key for t in latest_traces(tmp_path / "cli")} == {t.run_key for t in after.values()}


def test_the_papers_release_policy_slot_replaces_it_under_the_paper_profile(tmp_path: Path) -> None:
    from commitbench.envs.standing.env import StandingEnv
    from commitbench.episodes.standing.compiler import load_episodes

    texts = read_texts(texts_file(tmp_path, {"standing.release_policy": POLICY,
                                             "standing.policy_paraphrase_1": "Placeholder paraphrase for a test."}))
    episode = next(e for e in load_episodes(settings="paper") if e.policy.value == "explicit")
    _, info = StandingEnv(episodes=[episode], texts=texts).reset(seed=0)
    assert info["system_prompt"].endswith(POLICY) and episode.explicit_policy not in info["system_prompt"]
    _, plain = StandingEnv(episodes=[episode]).reset(seed=0)
    assert plain["system_prompt"] == episode.system_prompt
    from commitbench.oracles.standing.policy import ReleasePolicy

    _, arm = ReleasePolicy(StandingEnv(episodes=[episode], texts=texts), text="paraphrase-1").reset(seed=0)
    assert arm["system_prompt"].endswith("Placeholder paraphrase for a test.")


def test_without_a_texts_file_the_ids_are_unchanged(tmp_path: Path) -> None:
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"limit": 3})
    assert "texts" not in manifest_config(config)  # the config hash is the one it always had
    for cell in expand_cells(config, select_config_episodes(config)):
        payload = {"agent": cell.player.identity.model_dump(mode="json"), "interventions": [], "env": config.env,
                   "episode": cell.episode_id, "sample": cell.sample}
        assert cell.run_key == hashlib.sha256(canonical_text(payload).encode()).hexdigest()
        assert cell.run_key == run_key(cell.player.identity, [], config.env, cell.episode_id, cell.sample)


def test_the_slots_are_listed_in_validity_md() -> None:
    doc = (ROOT / "docs" / "validity.md").read_text(encoding="utf-8")
    assert slot_table() in doc
    assert {s.name for s in SLOTS} >= {"followup.persona.generic", "followup.time_sentence", "followup.rewrite_prompt",
                                       "standing.release_policy", "standing.policy_paraphrase_2"}


@pytest.mark.slow
def test_the_paper_profile_without_a_texts_file_says_the_wording_is_the_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = ExperimentConfig(env=STANDING_ENV_ID, profile="paper", agents=["creditor-rule"], episodes={"limit": 4})
    assert run_experiment(config, tmp_path / "run").status is RunStatus.COMPLETE
    assert main(["report", str(tmp_path / "run"), "--n-boot", "20", "--json"]) == 0
    assert "are the project's wording (no texts file" in json.loads(capsys.readouterr().out)["texts"]


def test_fix_a_and_fix_c_take_their_texts_from_the_slots(tmp_path: Path) -> None:
    from commitbench.envs.followup.env import FollowUpEnv
    from commitbench.oracles.followup.fixes import CapabilityCard, ReplyDraft, rewrite_prompt

    texts = read_texts(texts_file(tmp_path, {
        "followup.card.C2": "Placeholder card for a test: call a tool now for anything later.",
        "followup.rewrite_prompt": "Placeholder rewrite for a test. Card: $card User: $user_message Did: "
                                   "$tool_activity Draft: $draft",
    }))
    env = CapabilityCard(FollowUpEnv(setup="C2", variant="inferred", persona="generic", texts=texts))
    _, info = env.reset(seed=0)
    assert info["system_prompt"].endswith("Placeholder card for a test: call a tool now for anything later.")
    draft = ReplyDraft(factors={}, user_message="remind me", calls=[], reply="I'll remind you.")
    prompt = rewrite_prompt("the card", draft, texts)
    assert prompt.startswith("Placeholder rewrite for a test. Card: the card User: remind me")
    assert prompt.endswith("Draft: I'll remind you.")
    assert rewrite_prompt("the card", draft) != prompt  # the project's wording without a file
