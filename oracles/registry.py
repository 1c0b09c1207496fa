"""The registry of interventions: named gymnasium wrappers applied to an environment.

An intervention is a factory ``(env, params) -> env`` that wraps an environment and changes one
thing (the system prompt, an extra tool, what the agent is shown after every message, ...). Each
factory is registered under a stable name in :data:`INTERVENTIONS`; experiment configs refer to
interventions by that name (with optional ``params``), and the names, in order, become part of
every run's identity.

A stack of interventions is applied innermost first: ``apply_interventions(env, [a, b])`` returns
``b(a(env))``, so the last name listed is the outermost wrapper, as in
:attr:`commitbench.traces.EpisodeTrace.interventions`.

The empty stack (written ``none`` in configs) is the plain environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INTERVENTIONS",
    "NO_INTERVENTION",
    "InterventionFactory",
    "InterventionSpec",
    "StackCheck",
    "UnknownInterventionError",
    "apply_interventions",
    "check_intervention",
    "check_stack",
    "register_intervention",
    "register_stack_check",
]

InterventionFactory = Callable[[gym.Env[Any, Any], Mapping[str, Any]], gym.Env[Any, Any]]

# Name -> factory. Wrapper modules add themselves with register_intervention().
INTERVENTIONS: dict[str, InterventionFactory] = {}

# A check of a whole stack (names, innermost first) that raises ValueError when the names cannot
# be applied together (two release policies, say). Each family of wrappers may add one.
StackCheck = Callable[[Sequence[str]], None]
STACK_CHECKS: list[StackCheck] = []

# How configs write "no intervention at all".
NO_INTERVENTION = "none"


class UnknownInterventionError(ValueError):
    """A config or caller named an intervention that is not registered."""


class InterventionSpec(BaseModel):
    """One intervention of a stack: a registered name and its parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Registered intervention name (a key of INTERVENTIONS).")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters passed to the factory.")

    def label(self) -> str:
        """The name, with parameters in brackets when there are any (for run labels)."""
        if not self.params:
            return self.name
        inner = ",".join(f"{key}={self.params[key]}" for key in sorted(self.params))
        return f"{self.name}[{inner}]"


def register_intervention(name: str, factory: InterventionFactory) -> None:
    """Add a factory under ``name``; registering a taken name twice is an error."""
    if not name or name == NO_INTERVENTION:
        raise ValueError(f"{name!r} cannot name an intervention")
    existing = INTERVENTIONS.get(name)
    if existing is not None and existing is not factory:
        raise ValueError(f"intervention {name!r} is already registered")
    INTERVENTIONS[name] = factory


def check_intervention(name: str) -> InterventionFactory:
    """The factory registered under ``name``; a clear error naming the known ones otherwise."""
    factory = INTERVENTIONS.get(name)
    if factory is None:
        known = ", ".join(sorted(INTERVENTIONS)) or "none are registered yet"
        raise UnknownInterventionError(
            f"unknown intervention {name!r} (known: {known}; use '{NO_INTERVENTION}' or an empty list for the "
            "plain environment)"
        )
    return factory


def register_stack_check(check: StackCheck) -> None:
    """Add a check run on every stack before it is applied (and when a config is validated)."""
    if check not in STACK_CHECKS:
        STACK_CHECKS.append(check)


def check_stack(names: Sequence[str]) -> None:
    """Every name is registered and the registered stack checks accept the combination."""
    for name in names:
        check_intervention(name)
    for check in STACK_CHECKS:
        check(names)


def apply_interventions(env: gym.Env[Any, Any], stack: Sequence[InterventionSpec]) -> gym.Env[Any, Any]:
    """Wrap ``env`` with every intervention of ``stack``, the first listed innermost."""
    check_stack([spec.name for spec in stack])
    for spec in stack:
        factory = check_intervention(spec.name)
        wrapped = factory(env, dict(spec.params))
        if not isinstance(wrapped, gym.Env):
            raise TypeError(f"intervention {spec.name!r} returned {type(wrapped).__name__}, not a gymnasium env")
        env = wrapped
    return env


def _register_standing_interventions() -> None:
    """The standing interventions: release-policy wordings, oracle stores B1-B4, the self-kept ledger."""
    from commitbench.oracles.standing.base import check_combination
    from commitbench.oracles.standing.catalog import STANDING_INTERVENTIONS

    for name, factory in STANDING_INTERVENTIONS.items():
        register_intervention(name, factory)

    def standing_combination(names: Sequence[str]) -> None:
        check_combination([n for n in names if n in STANDING_INTERVENTIONS])

    register_stack_check(standing_combination)


_register_standing_interventions()


def _register_claim_guard() -> None:
    """The deterministic write-claim guard, usable on both environments."""
    from commitbench.oracles.claim_guard import claim_guard_factory

    register_intervention("claim_guard", claim_guard_factory)


_register_claim_guard()
