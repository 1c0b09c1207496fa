"""What every standing intervention shares: naming, stacking rules, and how texts reach the agent.

An intervention is a gymnasium wrapper around :class:`~commitbench.envs.standing.env.StandingEnv` that
changes what the agent is told, never what happens in the workspace. It has a stable ``name``
(its ``kind`` plus its parameter, e.g. ``policy:paraphrase-1`` or ``oracle:B3+``); the names of a
stack, innermost first, are what a run records in ``trace.interventions``.

Two channels carry an intervention's text to the agent:

* **system sections** are static for the episode and go into the system prompt (the first
  observation's ``system`` event, ``info["system_prompt"]`` and the trace's system event). The
  prompt is rebuilt from the episode by :func:`compose_system_prompt` as
  ``base + policy paragraph + other sections``, so the result does not depend on the order in
  which wrappers were applied;
* **context sections** may change after every message and go into ``observation["context"]``,
  which agents show after everything else (so the stable prompt prefix stays cacheable). Each
  wrapper rebuilds the whole context from every intervention in the stack, in a fixed slot order.

Stacking rules (:func:`check_combination`): at most one intervention per slot (one release policy,
one oracle store, one ledger), and the ledger does not combine with the B3/B3+ ownership stores
(both would show the commitment's status, from two different sources).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from enum import Enum
from functools import lru_cache
from importlib import resources
from typing import Any, ClassVar

import gymnasium as gym
import yaml

from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.episode import Episode, Policy
from commitbench.protocol import EventKind


class InterventionError(ValueError):
    """An intervention cannot be applied: bad parameter, wrong environment or a refused combination."""


class Slot(str, Enum):
    """What part of the agent's information an intervention owns."""

    POLICY = "policy"
    LEDGER = "ledger"
    ORACLE = "oracle"


# Order of sections in the system prompt and in the context.
SLOT_ORDER: tuple[Slot, ...] = (Slot.POLICY, Slot.LEDGER, Slot.ORACLE)

# Oracle stores that show the commitment's status; they would contradict a ledger the agent keeps.
STATUS_STORES = frozenset({"B3", "B3+"})


@lru_cache(maxsize=64)
def prompt_text(filename: str) -> str:
    """A text shipped in ``oracles/prompts`` (trailing whitespace removed)."""
    return resources.files("commitbench.oracles").joinpath("prompts", filename).read_text(encoding="utf-8").rstrip()


def text_hash(*texts: str) -> str:
    return hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------- names and combinations
def parse_name(name: str) -> tuple[str, str]:
    """Split ``kind:param`` (or a bare ``kind``) into its parts."""
    kind, _, param = name.partition(":")
    return kind.strip(), param.strip()


_KIND_SLOTS: dict[str, Slot] = {"policy": Slot.POLICY, "oracle": Slot.ORACLE, "ledger": Slot.LEDGER}


def check_combination(names: Sequence[str]) -> None:
    """Raise :class:`InterventionError` when the standing interventions named cannot be stacked.

    Names of other kinds (interventions of other environments, test doubles) are left alone, so
    a config validator may pass a whole arm.
    """
    by_slot: dict[Slot, str] = {}
    for name in names:
        kind, _ = parse_name(name)
        slot = _KIND_SLOTS.get(kind)
        if slot is None:
            continue
        if slot in by_slot:
            what = {Slot.POLICY: "release policies", Slot.ORACLE: "oracle stores", Slot.LEDGER: "ledgers"}[slot]
            raise InterventionError(f"two {what} in one stack ({by_slot[slot]} and {name}); apply at most one")
        by_slot[slot] = name
    oracle = by_slot.get(Slot.ORACLE)
    if Slot.LEDGER in by_slot and oracle is not None and parse_name(oracle)[1] in STATUS_STORES:
        raise InterventionError(
            f"{oracle} and the self-kept ledger both show the promise's status; "
            "combine the ledger with at most oracle:B1, oracle:B2 or oracle:B4"
        )


# ----------------------------------------------------------------------------- the base wrapper
class StandingIntervention(gym.Wrapper[dict[str, Any], str, dict[str, Any], str], gym.utils.RecordConstructorArgs):
    """Base class of the standing interventions (see the module docstring).

    Subclasses set ``kind`` and ``slot`` and override any of :meth:`param`,
    :meth:`system_section`, :meth:`context_section`, :meth:`observe` and :meth:`prompt_hashes`.
    ``reset`` and ``step`` pass actions through unchanged; only observations and info change.
    """

    kind: ClassVar[str] = ""
    slot: ClassVar[Slot]

    def __init__(self, env: gym.Env[Any, Any], **params: Any) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, **params)
        gym.Wrapper.__init__(self, env)
        if not isinstance(env.unwrapped, StandingEnv):
            raise InterventionError(
                f"{type(self).__name__} wraps the standing environment, not {type(env.unwrapped).__name__}"
            )
        check_combination([*intervention_names(env), self.name])

    # -------------------------------------------------------------- identity
    def param(self) -> str:
        """The parameter that enters the name ('' for none)."""
        return ""

    @property
    def name(self) -> str:
        param = self.param()
        return f"{self.kind}:{param}" if param else self.kind

    @property
    def base_env(self) -> StandingEnv:
        unwrapped = self.env.unwrapped
        assert isinstance(unwrapped, StandingEnv)
        return unwrapped

    # -------------------------------------------------------------- hooks
    def system_section(self, episode: Episode) -> str:
        """Static text for the system prompt ('' for none)."""
        return ""

    def context_section(self) -> str:
        """Text shown after the latest message ('' for none)."""
        return ""

    def begin(self, episode: Episode) -> None:
        """Reset per-episode state (called before the opening events are observed)."""

    def observe(self, event: dict[str, Any]) -> None:
        """Update state from one event the agent observes."""

    def prompt_hashes(self) -> dict[str, str]:
        """sha256 of the texts this intervention shows, recorded in the trace."""
        return {}

    # -------------------------------------------------------------- gymnasium
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        episode = self.base_env.episode
        self.begin(episode)
        for event in obs["events"]:
            self.observe(event)
        stack = intervention_stack(self)
        prompt = compose_system_prompt(episode, stack)
        obs = {**obs, "events": _with_system_prompt(obs["events"], prompt)}
        info = {**info, "system_prompt": prompt}
        trace = self.base_env.trace
        if trace is not None:
            for event in trace.events:
                if event.kind is EventKind.SYSTEM:
                    event.text = prompt
            trace.prompt_hashes.update(self.prompt_hashes())
            trace.factors.update(self.factors())
        obs["context"] = compose_context(stack)
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        for event in obs["events"]:
            self.observe(event)
        obs = {**obs, "context": compose_context(intervention_stack(self))}
        return obs, reward, terminated, truncated, info

    def factors(self) -> dict[str, str | int]:
        """Extra design factors this intervention sets on the trace (the policy shown, for one)."""
        return {}


def _with_system_prompt(events: Iterable[dict[str, Any]], prompt: str) -> tuple[dict[str, Any], ...]:
    return tuple({**e, "text": prompt} if e.get("kind") == EventKind.SYSTEM.value else e for e in events)


# ----------------------------------------------------------------------------- stack helpers
def intervention_stack(env: gym.Env[Any, Any]) -> list[StandingIntervention]:
    """The interventions wrapped around an environment, innermost first."""
    found: list[StandingIntervention] = []
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, StandingIntervention):
            found.append(current)
        current = current.env
    return list(reversed(found))


def intervention_names(env: gym.Env[Any, Any]) -> list[str]:
    """Names of the interventions around ``env``, innermost first (the order of ``trace.interventions``)."""
    return [w.name for w in intervention_stack(env)]


def _in_slot_order(stack: Sequence[StandingIntervention]) -> list[StandingIntervention]:
    return sorted(stack, key=lambda w: SLOT_ORDER.index(w.slot))


@lru_cache(maxsize=1)
def explicit_policy_text() -> str:
    """The explicit release policy as the episode data states it (``policies.yaml``)."""
    from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, PoliciesSpec

    data = yaml.safe_load((DEFAULT_DATA_DIR / "policies.yaml").read_text(encoding="utf-8"))
    return PoliciesSpec.model_validate(data).explicit.strip()


def prompt_without_policy(episode: Episode) -> str:
    """The episode's system prompt with its release-policy paragraph (if any) taken out."""
    prompt = episode.system_prompt
    if episode.policy is Policy.SILENT:
        return prompt
    policy = explicit_policy_text()
    if not prompt.endswith(policy):
        raise InterventionError(
            f"episode {episode.id} has the explicit policy, but its system prompt does not end with the "
            "explicit policy paragraph of policies.yaml; was it compiled from another data directory?"
        )
    return prompt[: -len(policy)].rstrip()


def compose_system_prompt(episode: Episode, stack: Sequence[StandingIntervention]) -> str:
    """The system prompt the agent sees under ``stack``.

    Without a policy intervention the episode's own policy factor decides the paragraph (the
    explicit text, or nothing); a policy intervention replaces it. With no intervention adding a
    section the result equals the episode's prompt exactly.
    """
    from commitbench.oracles.standing.policy import ReleasePolicy

    policies = [w for w in stack if isinstance(w, ReleasePolicy)]
    sections: list[str] = []
    if policies:
        sections.append(policies[-1].policy_text())
    elif episode.policy is Policy.EXPLICIT:
        sections.append(explicit_policy_text())
    others = [w.system_section(episode) for w in _in_slot_order(stack) if not isinstance(w, ReleasePolicy)]
    sections.extend(others)
    sections = [s for s in sections if s]
    if not policies and not any(others):
        return episode.system_prompt
    return "\n\n".join([prompt_without_policy(episode), *sections])


def compose_context(stack: Sequence[StandingIntervention]) -> str:
    """Every context section of the stack, in slot order, separated by blank lines."""
    return "\n\n".join(s for s in (w.context_section() for w in _in_slot_order(stack)) if s)
