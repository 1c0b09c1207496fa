"""The one registry of players by name: the suites' reference agents and the agents plug-ins bring.

A config's ``agents:`` names its players: ``chat`` (the chat agent on each model), ``module:Class`` (a
class of the user's own, :mod:`commitbench.agents.custom`), or a name registered here. Packages register
players through the ``commitbench.agents`` entry-point group (:mod:`commitbench.plugins`), commitbench's
own reference agents included; an entry point names an :class:`AgentEntry`, a list of them, or a player
class (registered under the entry point's name, as a player of the user's own would be).

A *reference* entry is a deterministic rule (played once per episode; its ``identity()`` is its run
identity; it may read the script through the privileged channel). Any other entry is a subject, played
``samples`` times, identified as a class of the user's own is (:func:`commitbench.agents.custom.custom_identity`).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from commitbench import plugins
from commitbench.agents.base import Agent

__all__ = [
    "AgentEntry",
    "UnknownAgentError",
    "agent_entries",
    "agent_source",
    "broken_agent_plugins",
    "find_agent",
    "register_agent",
    "unregister_agent",
]


@dataclass(frozen=True)
class AgentEntry:
    """A player registered by name."""

    name: str
    make: Callable[..., Agent]  # a fresh player per cell (a class, or a function of no arguments)
    suites: tuple[str, ...] = ()  # the suites it plays (empty: every suite)
    reference: bool = False  # a deterministic reference rule rather than a subject
    description: str = ""

    def plays(self, suite: str) -> bool:
        return not self.suites or suite in self.suites


class UnknownAgentError(ValueError):
    """No player of that name is registered for the suite."""


_AGENTS: dict[str, AgentEntry] = {}
_BROKEN: list[plugins.BrokenPlugin] = []
_SOURCES: dict[str, plugins.Plugin] = {}
_loaded_at: int | None = None
_lock = threading.RLock()


def register_agent(entry: AgentEntry) -> None:
    """Add a player; another entry under a taken name is an error."""
    if not entry.name or entry.name == "chat" or ":" in entry.name:
        raise ValueError(f"{entry.name!r} cannot name a registered agent ('chat' and module:Class are taken)")
    with _lock:
        existing = _AGENTS.get(entry.name)
        if existing is not None and existing != entry:
            raise ValueError(f"agent {entry.name!r} is already registered")
        _AGENTS[entry.name] = entry


def unregister_agent(name: str) -> None:
    """Remove a player (a test's own)."""
    with _lock:
        _AGENTS.pop(name, None)


def _entries_of(plugin: plugins.Plugin, value: Any) -> list[AgentEntry]:
    if isinstance(value, AgentEntry):
        return [value]
    if inspect.isclass(value):
        make = cast(Callable[..., Agent], value)
        return [AgentEntry(name=plugin.name, make=make, suites=tuple(getattr(value, "suites", ()) or ()),
                           reference=bool(getattr(value, "reference", False)),
                           description=str(getattr(value, "description", "") or ""))]
    if isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(v, AgentEntry) for v in value):
        return list(value)
    raise TypeError(f"names a {type(value).__name__}, not an AgentEntry, a list of them or a player class")


def _check(plugin: plugins.Plugin, value: Any) -> None:
    _entries_of(plugin, value)


def _load() -> None:
    global _loaded_at
    with _lock:
        if _loaded_at == plugins.generation():
            return
        _loaded_at = plugins.generation()
        broken = plugins.sync(plugins.Group.AGENTS, _check,
                              lambda item: [(e.name, e) for e in _entries_of(item.plugin, item.value)],
                              register_agent, _AGENTS, _SOURCES)
        _BROKEN[:] = broken


def agent_entries(suite: str | None = None) -> list[AgentEntry]:
    """The registered players (of one suite, when named), by name."""
    _load()
    return [e for name, e in sorted(_AGENTS.items()) if suite is None or e.plays(suite)]


def find_agent(name: str, suite: str) -> AgentEntry:
    """The player registered as ``name`` for ``suite``; :class:`UnknownAgentError` naming the known ones (and
    any plug-in that failed to load) otherwise."""
    _load()
    entry = _AGENTS.get(name)
    if entry is not None and entry.plays(suite):
        return entry
    known = ", ".join(["chat", *(e.name for e in agent_entries(suite))])
    where = f" (it plays {', '.join(entry.suites)})" if entry is not None else ""
    broken = "".join(f"; a plug-in failed to load: {b.describe()}" for b in _BROKEN)
    raise UnknownAgentError(f"unknown agent {name!r} for the {suite} suite{where}; known: {known}, or a class of "
                            f"your own as module:Class{broken}")


def agent_source(name: str) -> plugins.Plugin | None:
    """The entry point that registered a player (None: registered in code)."""
    _load()
    return _SOURCES.get(name)


def broken_agent_plugins() -> list[plugins.BrokenPlugin]:
    """Entry points of the ``commitbench.agents`` group that could not be loaded."""
    _load()
    return list(_BROKEN)
