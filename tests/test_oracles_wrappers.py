"""Interventions as wrappers: names, recorded stacks, refused combinations, the policy paragraph."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import commitbench.envs  # noqa: F401  (registers the environments)
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.prompts import prompt_without_policy
from commitbench.llm import ModelClient, ModelSettings
from commitbench.oracles.base import Intervention, InterventionError, intervention_names
from commitbench.oracles.registry import INTERVENTIONS, InterventionSpec, apply_interventions, check_stack
from commitbench.oracles.standing.catalog import ENTRIES
from commitbench.oracles.standing.parties import PARTIES_SERVICE, PartyEngine
from commitbench.oracles.standing.policy import ReleasePolicy, policy_paragraph
from commitbench.oracles.standing.stores import OracleStore
from commitbench.runner import run_experiment
from commitbench.traces import latest_traces

EPISODES = load_episodes()


def _episode(cell: str = "PEER-DIRECT", policy: str = "explicit") -> Episode:
    return next(
        e for e in EPISODES
        if e.split.value == "test" and e.cell == cell and e.policy.value == policy and e.gap == 1 and e.variant == 0
    )


def _twin(episode: Episode, policy: str) -> Episode:
    return next(
        e for e in EPISODES
        if (e.commitment_type, e.cell, e.gap, e.variant) ==
        (episode.commitment_type, episode.cell, episode.gap, episode.variant) and e.policy.value == policy
    )


def _env(episode: Episode) -> StandingEnv:
    return StandingEnv(episode_id=episode.id, episodes=EPISODES)


def wrap(env: gym.Env, names: list[str]) -> gym.Env:
    return apply_interventions(env, names, services=SERVICES)


# What the runner hands the standing interventions that use a service (nothing is called while wrapping).
_NOWHERE = ModelSettings(model="none", base_url="http://127.0.0.1:9/v1", api_key_env=None)
SERVICES = {PARTIES_SERVICE: PartyEngine(ModelClient(_NOWHERE), ModelClient(_NOWHERE))}


def check_combination(names: list[str]) -> None:
    check_stack([InterventionSpec.parse(name) for name in names])


@pytest.mark.parametrize("name", sorted(entry.name for entry in ENTRIES))
def test_every_catalog_name_is_the_wrappers_own_name_and_is_recorded_in_the_spec(name):
    env = wrap(gym.make("commitbench/Standing-v0", episode_id=_episode().id), [name])
    assert isinstance(env, Intervention)
    assert env.name == name
    assert intervention_names(env) == [name]
    recorded = env.spec.additional_wrappers[-1]
    assert recorded.entry_point.startswith("commitbench.oracles.")
    assert "env" not in recorded.kwargs


def test_stack_names_are_innermost_first_and_the_spec_records_every_wrapper():
    base = gym.make("commitbench/Standing-v0", episode_id=_episode().id)
    env = wrap(base, ["policy:paraphrase-1", "ledger:self-kept"])
    assert intervention_names(env) == ["policy:paraphrase-1", "ledger:self-kept"]
    names = [w.name for w in env.spec.additional_wrappers]
    assert names[-2:] == ["ReleasePolicy", "SelfKeptLedger"]
    assert env.spec.additional_wrappers[-2].kwargs == {"text": "paraphrase-1"}


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["policy:explicit", "policy:silent"], "two release policies"),
        (["oracle:B1", "oracle:B3"], "two oracle stores"),
        (["ledger:self-kept", "ledger:self-kept"], "two ledgers"),
        (["ledger:self-kept", "oracle:B3+"], "both show the promise's status"),
        (["oracle:B3", "ledger:self-kept"], "both show the promise's status"),
        (["oracle:B9"], "unknown intervention 'oracle:B9'"),
        (["policy:loud"], "unknown intervention 'policy:loud'"),
        (["telepathy"], "unknown intervention"),
    ],
)
def test_refused_combinations_name_what_is_wrong(names, message):
    with pytest.raises(InterventionError, match=message):
        wrap(_env(_episode()), names)


@pytest.mark.parametrize(
    "names",
    [
        ["policy:explicit", "ledger:self-kept"], ["ledger:self-kept", "policy:paraphrase-2"],
        ["ledger:self-kept", "oracle:B4"],
        ["oracle:B1", "ledger:self-kept"], ["policy:silent", "oracle:B3+"], ["oracle:B2", "policy:paraphrase-1"],
    ],
)
def test_sensible_combinations_are_accepted(names):
    check_combination(names)
    env = wrap(_env(_episode()), names)
    assert intervention_names(env) == names


def test_one_registry_checks_every_family_and_the_suite_each_wraps():
    check_combination(["claim_guard", "oracle:B3", "policy:explicit"])
    with pytest.raises(InterventionError, match="two oracle stores"):
        check_combination(["claim_guard", "oracle:B3", "oracle:B4"])
    with pytest.raises(InterventionError, match="two claim guards"):
        check_combination(["claim_guard", "claim_guard[count=writes]"])
    with pytest.raises(InterventionError, match="wraps commitbench/FollowUp-v0, not commitbench/Standing-v0"):
        check_stack([InterventionSpec(name="card")], env_id="commitbench/Standing-v0")
    with pytest.raises(ValueError, match="wraps commitbench/Standing-v0, not commitbench/FollowUp-v0"):
        ExperimentConfig(env="commitbench/FollowUp-v0", agents=["chat"],
                         models=[{"name": "m", "base_url": "http://127.0.0.1:9/v1"}], interventions=["oracle:B1"])


def test_factories_refuse_parameters_and_wrappers_refuse_other_environments():
    with pytest.raises(InterventionError, match="takes no parameters"):
        apply_interventions(_env(_episode()), [InterventionSpec(name="oracle:B3", params={"level": "B3+"})])
    assert INTERVENTIONS["oracle:B3"].cls is OracleStore
    with pytest.raises(InterventionError, match="wraps commitbench/Standing-v0"):
        ReleasePolicy(gym.make("CartPole-v1"))
    with pytest.raises(InterventionError, match="unknown oracle store 'B9'"):
        OracleStore(_env(_episode()), level="B9")
    with pytest.raises(InterventionError, match="unknown policy wording 'loud'"):
        ReleasePolicy(_env(_episode()), text="loud")


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_check_env_passes_through_a_full_stack():
    env = wrap(gym.make("commitbench/Standing-v0", cells=["DELEG-DIRECT"], split="test"),
               ["policy:paraphrase-1", "ledger:self-kept", "oracle:B2"])
    check_env(env, skip_render_check=True)


# ----------------------------------------------------------------------------- the policy paragraph
def _prompt(episode: Episode, names: list[str]) -> tuple[str, dict, dict]:
    env = wrap(_env(episode), names)
    obs, info = env.reset(seed=0)
    system = [e for e in obs["events"] if e["kind"] == "system"]
    assert len(system) == 1 and system[0]["text"] == info["system_prompt"]
    trace = env.unwrapped.trace
    assert trace.events[0].text == info["system_prompt"]  # the trace records what the agent saw
    return info["system_prompt"], dict(trace.factors), obs


@pytest.mark.parametrize("episode_policy", ["explicit", "silent"])
def test_policy_wrapper_replaces_the_paragraph_whatever_the_episode_says(episode_policy):
    episode = _episode(policy=episode_policy)
    explicit_prompt = _twin(episode, "explicit").system_prompt
    silent_prompt = _twin(episode, "silent").system_prompt
    assert prompt_without_policy(episode) == silent_prompt

    # No wrapper: the episode's own prompt, byte for byte.
    assert _prompt(episode, [])[0] == episode.system_prompt
    prompt, factors, _ = _prompt(episode, ["policy:explicit"])
    assert prompt == explicit_prompt
    assert factors["policy_shown"] == "explicit" and factors["policy_text"] == "explicit"
    assert factors["policy"] == episode_policy  # the design factor is kept
    prompt, factors, _ = _prompt(episode, ["policy:silent"])
    assert prompt == silent_prompt and factors["policy_shown"] == "silent"
    for text in ("paraphrase-1", "paraphrase-2"):
        prompt, factors, _ = _prompt(episode, [f"policy:{text}"])
        assert prompt == f"{silent_prompt}\n\n{policy_paragraph(text)}"
        assert episode.explicit_policy not in prompt
        assert factors == {**factors, "policy_shown": "explicit", "policy_text": text}


def test_paraphrases_differ_from_the_explicit_text_and_from_each_other():
    episode = _episode()
    texts = {policy_paragraph(t, episode) for t in ("explicit", "paraphrase-1", "paraphrase-2")}
    assert len(texts) == 3 and all(len(t) > 200 for t in texts)
    assert policy_paragraph("silent") == ""


def test_the_explicit_wording_is_the_episodes_own_under_either_profile():
    from commitbench.episodes.standing.compiler import load_episodes

    for profile in ("paper", "commitbench"):
        silent = next(e for e in load_episodes(settings=profile) if e.policy.value == "silent")
        _obs, info = wrap(StandingEnv(episodes=[silent]), ["policy:explicit"]).reset(seed=0)
        assert info["system_prompt"].endswith(silent.explicit_policy)
    paper, own = (next(e for e in load_episodes(settings=p)) for p in ("paper", "commitbench"))
    assert paper.explicit_policy != own.explicit_policy


def test_section_order_does_not_depend_on_the_order_of_wrapping():
    episode = _episode(policy="silent")
    a, _, obs_a = _prompt(episode, ["ledger:self-kept", "policy:paraphrase-2", "oracle:B4"])
    b, _, obs_b = _prompt(episode, ["oracle:B4", "policy:paraphrase-2", "ledger:self-kept"])
    assert a == b
    assert a.index(policy_paragraph("paraphrase-2")) < a.index("commitment ledger")
    assert obs_a["context"] == obs_b["context"]
    assert obs_a["context"].index("commitment ledger") < obs_a["context"].index("Commitment store")


def test_policy_wrapper_on_an_explicit_episode_changes_nothing_the_agent_does(tmp_path):
    episode = _episode("DELEG-DIRECT")
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": [episode.id]},
                              interventions=["none", "policy:explicit"])
    run_experiment(config, tmp_path)
    plain, wrapped = sorted(latest_traces(tmp_path), key=lambda t: len(t.interventions))
    assert wrapped.interventions == ["policy:explicit"]
    assert [e.model_dump() for e in plain.events] == [e.model_dump() for e in wrapped.events]
