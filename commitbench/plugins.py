"""Plug-ins: suites, agents and interventions that packages register through entry points.

A package adds to commitbench by naming objects in one of three entry-point groups of its
``pyproject.toml``; commitbench's own suites, reference agents and interventions are registered the
same way (its own ``pyproject.toml``), so a plug-in is no second-class citizen::

    [project.entry-points."commitbench.suites"]
    echo = "echo_plugin:SUITE"                  # a commitbench.suites.Suite
    [project.entry-points."commitbench.agents"]
    parrot = "echo_plugin:PARROT"               # an AgentEntry, a list of them, or a player class
    [project.entry-points."commitbench.interventions"]
    shout = "echo_plugin:INTERVENTIONS"         # an InterventionEntry or a list of them

Each registry (:mod:`commitbench.suites`, :mod:`commitbench.agents.registry`,
:mod:`commitbench.oracles.registry`) loads its group on first use through :func:`load`. An entry
point that cannot be loaded is never skipped in silence: it is kept as a :class:`BrokenPlugin`, named
(with its package and the error) wherever a lookup fails and by ``commitbench plugins``, which lists
everything installed and where it comes from.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["BrokenPlugin", "Group", "LoadedPlugin", "Plugin", "generation", "installed", "load", "refresh", "sync"]


class Group(str, Enum):
    """The entry-point groups commitbench reads."""

    SUITES = "commitbench.suites"
    AGENTS = "commitbench.agents"
    INTERVENTIONS = "commitbench.interventions"


@dataclass(frozen=True)
class Plugin:
    """One entry point of a group: what it names and which installed package declares it."""

    group: Group
    name: str
    target: str  # module:attribute
    package: str  # the distribution that declares it
    version: str

    def where(self) -> str:
        return f"{self.name} = {self.target} (package {self.package} {self.version})"


@dataclass(frozen=True)
class LoadedPlugin:
    """An entry point and the object it names."""

    plugin: Plugin
    value: Any


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that could not be loaded, and why."""

    plugin: Plugin
    error: str

    def describe(self) -> str:
        return f"{self.plugin.where()}: {self.error}"


_lock = threading.Lock()
_generation = 0


def generation() -> int:
    """A counter that :func:`refresh` moves on: a registry that loaded its group at another count loads it again."""
    return _generation


def refresh() -> None:
    """Read the installed entry points again at the next lookup (after a package was installed in-process)."""
    global _generation
    with _lock:
        _generation += 1


def installed(group: Group) -> list[Plugin]:
    """The entry points of a group, by package and name (one per name and package)."""
    found: dict[tuple[str, str], Plugin] = {}
    for point in importlib.metadata.entry_points(group=group.value):
        dist = point.dist
        package = dist.name if dist is not None else "unknown"
        version = dist.version if dist is not None else "?"
        found.setdefault((package, point.name), Plugin(group, point.name, point.value, package, version))
    return [found[key] for key in sorted(found)]


def load(group: Group, check: Callable[[Plugin, Any], None] | None = None) -> tuple[list[LoadedPlugin],
                                                                                  list[BrokenPlugin]]:
    """Load every entry point of a group: (those loaded, those that could not be). ``check`` may refuse a
    loaded object (raise ValueError or TypeError saying why): it is then broken too."""
    loaded: list[LoadedPlugin] = []
    broken: list[BrokenPlugin] = []
    for plugin in installed(group):
        module, _, attribute = plugin.target.partition(":")
        try:
            value: Any = importlib.import_module(module.strip())
            for part in filter(None, attribute.strip().split(".")):
                value = getattr(value, part)
            if check is not None:
                check(plugin, value)
        except Exception as exc:  # whatever a plug-in's import raises is reported, naming the plug-in
            broken.append(BrokenPlugin(plugin, f"{type(exc).__name__}: {exc}"))
            continue
        loaded.append(LoadedPlugin(plugin, value))
    return loaded, broken


def sync(
    group: Group,
    check: Callable[[Plugin, Any], None],
    entries: Callable[[LoadedPlugin], Iterable[tuple[str, Any]]],
    register: Callable[[Any], None],
    registry: MutableMapping[str, Any],
    sources: dict[str, Plugin],
) -> list[BrokenPlugin]:
    """Read a group's entry points into a registry again: what they registered before is taken out of
    ``registry``, every entry of every loaded entry point (``entries``: name and entry) goes through
    ``register``, and ``sources`` says which entry point registered each name. An entry that ``register``
    refuses (ValueError: it clashes with one registered already) makes its entry point broken, never skipped
    in silence. The broken entry points, in order."""
    for name in list(sources):
        registry.pop(name, None)
    sources.clear()
    loaded, broken = load(group, check)
    for item in loaded:
        for name, entry in entries(item):
            try:
                register(entry)
            except ValueError as exc:
                broken.append(BrokenPlugin(item.plugin, str(exc)))
                continue
            sources[name] = item.plugin
    return broken
