"""The shipped experiment configs: they load, no tested model is silently its own judge, and the
follow-up study is the full crossed design labelled by the LLM checker on another model's family."""

from __future__ import annotations

from pathlib import Path

import pytest

from commitbench.cli import main as cli_main
from commitbench.config import ConfigError, ExperimentConfig, JudgeConfig, load_config
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.episodes.followup.episodes import FollowupSelection, full_run_size
from commitbench.episodes.followup.requests import load_requests
from commitbench.episodes.followup.vocabulary import Persona, SetupId, Variant
from commitbench.mock import MockServer
from commitbench.modelentry import served_identity
from commitbench.planning import plan
from commitbench.profiles import Profile
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


def family(served: str) -> str:
    """The publisher part of a served model name ('Qwen/Qwen3-8B' -> 'qwen')."""
    return served.split("/", 1)[0].lower() if "/" in served else served.split("-", 1)[0].lower()


def test_there_are_configs_and_a_followup_one() -> None:
    names = [p.name for p in CONFIGS]
    assert "followup-full.yaml" in names and len(names) >= 3


# Configs allowed to let a tested model judge itself, each with its reason. The only one is a demonstration on the
# embedded model, which plays the assistant, the live parties and their checker at once: one small CPU model is
# all it has, and it measures nothing (docs/live-parties.md, "The demo and the GPU study").
SELF_JUDGING_DEMOS = {"live-demo.yaml": "the embedded model is the assistant, the party model and the checker"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_no_shipped_config_lets_a_tested_model_judge_itself(path: Path) -> None:
    config = load_config(path)
    if path.name in SELF_JUDGING_DEMOS:
        assert config.judge.allow_tested_model and config.judge.model is not None and config.judge.model.local
        assert all(m.local for m in config.models), "only the embedded model may judge itself, in a demo"
        return
    assert not config.judge.allow_tested_model, f"{path.name} lets a tested model judge its own replies"
    assert config.judge_is_tested() == []
    if config.judge.kind == "llm":
        assert config.judge.model is not None
        judge = served_identity(config.judge.model)
        assert all(served_identity(m) != judge for m in config.models)


FOLLOWUP_CONFIGS = [p for p in CONFIGS if load_config(p).env == FOLLOWUP_ENV_ID]


def test_the_followup_configs_are_found() -> None:
    assert [p.name for p in FOLLOWUP_CONFIGS] == ["followup-full.yaml", "followup-paper.yaml"]


@pytest.mark.parametrize("path", FOLLOWUP_CONFIGS, ids=lambda p: p.name)
def test_followup_configs_cross_personas_and_use_the_llm_checker(path: Path) -> None:
    config = load_config(path)
    selection = config.episodes
    assert isinstance(selection, FollowupSelection)
    assert selection.personas is None or set(selection.personas) == set(Persona)
    assert config.judge.kind == "llm", f"{path.name}: the reported tables would come from the offline baseline"
    assert config.judge.model is not None and not config.judge.model.local
    judge_family = family(served_identity(config.judge.model))
    assert all(family(served_identity(m)) != judge_family for m in config.models), "judge shares a tested family"


def test_the_full_followup_run_is_every_request_in_all_twenty_conditions() -> None:
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "followup-full.yaml")
    requests = len(load_requests())
    assert full_run_size(requests) == requests * len(SetupId) * len(Variant) * len(Persona) == 6000
    planned = plan(config)
    assert planned.episodes == 6000
    assert planned.cells == 6000 * len(config.models) * len(config.interventions)
    episodes = config.episodes.select()
    assert {(e.setup, e.variant, e.persona) for e in episodes} == {
        (s, v, p) for s in SetupId for v in Variant for p in Persona
    }


def judged_by(judge_model: str, *, allow: bool = False, local: bool = False) -> dict[str, object]:
    tested = {"name": "qwen3-8b", "base_url": "http://127.0.0.1:8000/v1", "settings": {"model": "Qwen/Qwen3-8B"}}
    judge: dict[str, object] = (
        {"name": "local", "local": True} if local
        else {"name": "j", "base_url": "http://127.0.0.1:8001/v1", "settings": {"model": judge_model}}
    )
    return {
        "env": FOLLOWUP_ENV_ID, "agents": ["chat"],
        "models": [{"name": "local", "local": True} if local else tested],
        "judge": {"kind": "llm", "model": judge, "allow_tested_model": allow},
    }


def test_a_tested_model_as_its_own_judge_is_refused_unless_asked_for(tmp_path: Path) -> None:
    for data in (judged_by("Qwen/Qwen3-8B"), judged_by("qwen/qwen3-8b"), judged_by("", local=True)):
        with pytest.raises(ValueError, match=r"judge model is also a tested model .* judge\.allow_tested_model"):
            ExperimentConfig.model_validate(data)
    assert ExperimentConfig.model_validate(judged_by("Qwen/Qwen3-8B", allow=True)).judge_is_tested() == ["qwen3-8b"]
    assert ExperimentConfig.model_validate(judged_by("openai/gpt-oss-120b")).judge_is_tested() == []
    path = tmp_path / "self.yaml"
    path.write_text(
        "env: commitbench/FollowUp-v0\nagents: [chat]\n"
        "models: [{name: m, base_url: 'http://127.0.0.1:8000/v1', settings: {model: M}}]\n"
        "judge: {kind: llm, model: {name: j, base_url: 'http://127.0.0.1:8001/v1', settings: {model: M}}}\n"
    )
    with pytest.raises(ConfigError, match=r"self\.yaml: .*judge model is also a tested model \(m\)"):
        load_config(path)


def test_a_local_entry_gets_the_embedded_models_defaults_unless_it_names_its_own() -> None:
    from commitbench.commands.common import model_entry
    from commitbench.modelentry import LOCAL_SETTINGS, GenerationSettings, ModelEntry

    plain = ModelEntry(name="local", local=True).settings
    assert (plain.temperature, plain.seed, plain.max_tokens) == (0.8, 0, 256) == (
        LOCAL_SETTINGS["temperature"], LOCAL_SETTINGS["seed"], LOCAL_SETTINGS["max_tokens"])
    # a field the entry sets wins, as a dict (YAML) or as a settings object; the others keep their default
    greedy = ModelEntry.model_validate({"name": "local", "local": True, "settings": {"temperature": 0}}).settings
    assert (greedy.temperature, greedy.seed, greedy.max_tokens) == (0.0, 0, 256)
    short = ModelEntry(name="local", local=True, settings=GenerationSettings(max_tokens=64)).settings
    assert (short.temperature, short.max_tokens) == (0.8, 64)
    # the command line's --model local is the same entry; a server keeps the plain defaults
    assert model_entry("local").settings == plain
    served = ModelEntry(name="m", base_url="http://127.0.0.1:1/v1").settings
    assert (served.temperature, served.seed, served.max_tokens) == (0.0, None, None)
    # a dumped entry reads back equal (the manifest's copy of the config)
    entry = ModelEntry(name="local", local=True, settings=GenerationSettings(max_tokens=64))
    assert ModelEntry.model_validate(entry.model_dump(mode="json")) == entry


@pytest.mark.slow
def test_the_followup_paper_config_plays_the_papers_design(tmp_path: Path, mock_server: MockServer) -> None:
    """configs/followup-paper.yaml, pointed at a local server and cut to three episodes: every model plays every
    arm on paper-profile episodes, and the report names the profile."""
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "followup-paper.yaml")
    assert config.profile is Profile.PAPER and [a.label() for a in config.interventions] == ["none", "card", "rewrite"]
    selection = config.episodes
    assert isinstance(selection, FollowupSelection)
    local = config.model_copy(update={
        "models": [m.model_copy(update={"base_url": mock_server.base_url}) for m in config.models],
        "judge": JudgeConfig(),  # the offline checker labels here, and flags for the rewrite fix
        "episodes": selection.model_copy(update={"limit": 3}),
        "concurrency": 8,
    })
    summary = run_experiment(local, tmp_path / "run")
    assert summary.status is RunStatus.COMPLETE, summary.failures
    assert summary.cells_done == len(config.models) * 3 * 3
    traces = latest_traces(tmp_path / "run")
    assert {t.episode_id.rsplit(":", 1)[-1] for t in traces} == {"paper"}
    assert {t.agent.name for t in traces if t.agent} == {f"chat:{m.name}" for m in config.models}
    assert cli_main(["report", str(tmp_path / "run"), "--n-boot", "20", "--json"]) == 0
