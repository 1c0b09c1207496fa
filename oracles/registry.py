"""The one registry of interventions: every wrapper of every suite, by the name configs and traces use.

An entry holds the intervention's class (its slot, the environments it wraps, its stacking rules)
and a factory ``(env, params, services) -> env``. Configs name interventions by entry name, with
optional ``params``; a stack is applied innermost first, so ``apply_interventions(env, [a, b])``
returns ``b(a(env))`` and the names, in order, are what ``trace.interventions`` records. The empty
stack (``none`` in configs) is the plain environment.

``services`` carries what an intervention needs from the harness rather than from the config (the
detect-and-rewrite fix gets its flagger there); the suite that builds the environment provides them.

Entries are registered through the ``commitbench.interventions`` entry-point group
(:mod:`commitbench.plugins`): commitbench's own families (:mod:`commitbench.oracles.standing.catalog`,
:mod:`commitbench.oracles.followup.fixes`, :mod:`commitbench.oracles.claim_guard`) in its
``pyproject.toml``, a plug-in's in its own; each entry point names an :class:`InterventionEntry` or a
list of them. The registry reads them at its first lookup, so it is complete whenever it is used;
:func:`register_intervention` adds one in code (a test's own).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench import plugins
from commitbench.identity import NO_ARM
from commitbench.oracles.base import (
    Intervention,
    InterventionEntry,
    InterventionError,
    check_stack_members,
)

__all__ = [
    "INTERVENTIONS",
    "InterventionEntry",
    "InterventionSpec",
    "UnknownInterventionError",
    "apply_interventions",
    "broken_intervention_plugins",
    "check_intervention",
    "check_stack",
    "intervention_source",
    "interventions",
    "register_intervention",
]

# Name -> entry (read it through interventions(), which loads the entry points first).
INTERVENTIONS: dict[str, InterventionEntry] = {}
_SOURCES: dict[str, plugins.Plugin] = {}
_BROKEN: list[plugins.BrokenPlugin] = []
_loaded_at: int | None = None
_lock = threading.RLock()


class UnknownInterventionError(InterventionError):
    """A config or caller named an intervention that is not registered."""


class InterventionSpec(BaseModel):
    """One intervention of a stack: a registered name and its parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Registered intervention name (a key of INTERVENTIONS).")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters passed to the factory.")

    def label(self) -> str:
        """The name, with parameters in brackets when there are any: ``claim_guard[count=writes]``."""
        if not self.params:
            return self.name
        inner = ",".join(f"{key}={self.params[key]}" for key in sorted(self.params))
        return f"{self.name}[{inner}]"

    @classmethod
    def parse(cls, label: str) -> InterventionSpec:
        """The spec a label stands for (the inverse of :meth:`label`; values are kept as strings)."""
        text = label.strip()
        if not text.endswith("]") or "[" not in text:
            return cls(name=text)
        name, _, inner = text[:-1].partition("[")
        params: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in inner.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{label!r}: parameters are written key=value, got {item!r}")
            params[key.strip()] = value.strip()
        return cls(name=name.strip(), params=params)


def register_intervention(entry: InterventionEntry) -> None:
    """Add an entry; registering a taken name with another entry is an error."""
    if not entry.name or entry.name == NO_ARM:
        raise ValueError(f"{entry.name!r} cannot name an intervention")
    existing = INTERVENTIONS.get(entry.name)
    if existing is not None and existing != entry:
        raise ValueError(f"intervention {entry.name!r} is already registered")
    INTERVENTIONS[entry.name] = entry


def _entries_of(value: Any) -> list[InterventionEntry]:
    if isinstance(value, InterventionEntry):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, str) and all(
            isinstance(v, InterventionEntry) for v in value):
        return list(value)
    raise TypeError(f"names a {type(value).__name__}, not an InterventionEntry or a list of them")


def _check(plugin: plugins.Plugin, value: Any) -> None:
    _entries_of(value)


def _load() -> None:
    """Register the entries of the commitbench.interventions entry points (again after plugins.refresh())."""
    global _loaded_at
    with _lock:
        if _loaded_at == plugins.generation():
            return
        _loaded_at = plugins.generation()
        broken = plugins.sync(plugins.Group.INTERVENTIONS, _check,
                              lambda item: [(e.name, e) for e in _entries_of(item.value)],
                              register_intervention, INTERVENTIONS, _SOURCES)
        _BROKEN[:] = broken


def interventions() -> dict[str, InterventionEntry]:
    """Every registered intervention, by name."""
    _load()
    return INTERVENTIONS


def intervention_source(name: str) -> plugins.Plugin | None:
    """The entry point that registered an intervention (None: registered in code)."""
    _load()
    return _SOURCES.get(name)


def broken_intervention_plugins() -> list[plugins.BrokenPlugin]:
    """Entry points of the commitbench.interventions group that could not be loaded."""
    _load()
    return list(_BROKEN)


def check_intervention(name: str) -> InterventionEntry:
    """The entry registered under ``name``; a clear error naming the known ones otherwise."""
    entry = interventions().get(name)
    if entry is None:
        known = ", ".join(sorted(INTERVENTIONS)) or "none are registered yet"
        broken = "".join(f"; a plug-in failed to load: {b.describe()}" for b in _BROKEN)
        raise UnknownInterventionError(
            f"unknown intervention {name!r} (known: {known}; use '{NO_ARM}' or an empty list for the "
            f"plain environment){broken}"
        )
    return entry


def check_stack(specs: Sequence[InterventionSpec], env_id: str | None = None) -> None:
    """Every name is registered, takes the parameters given, wraps ``env_id``, and the stack is allowed."""
    members: list[tuple[str, type[Intervention]]] = []
    for spec in specs:
        entry = check_intervention(spec.name)
        unknown = sorted(set(spec.params) - set(entry.params))
        if unknown:
            takes = ", ".join(entry.params) if entry.params else "no parameters"
            raise InterventionError(f"intervention {spec.name!r} takes {takes}, not {', '.join(unknown)}")
        if env_id is not None and env_id not in entry.env_ids:
            raise InterventionError(
                f"intervention {spec.name!r} wraps {', '.join(sorted(entry.env_ids))}, not {env_id}"
            )
        members.append((spec.label(), entry.cls))
    check_stack_members(members)


def apply_interventions(
    env: gym.Env[Any, Any],
    stack: Sequence[InterventionSpec | str],
    services: Mapping[str, Any] | None = None,
) -> gym.Env[Any, Any]:
    """Wrap ``env`` with every intervention of ``stack`` (specs, or labels), the first listed innermost."""
    specs = [spec if isinstance(spec, InterventionSpec) else InterventionSpec.parse(spec) for spec in stack]
    check_stack(specs)
    for spec in specs:
        entry = check_intervention(spec.name)
        wrapped = entry.factory(env, dict(spec.params), services or {})
        if not isinstance(wrapped, gym.Env):
            raise TypeError(f"intervention {spec.name!r} returned {type(wrapped).__name__}, not a gymnasium env")
        env = wrapped
    return env
