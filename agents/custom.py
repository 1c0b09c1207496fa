"""Players of the user's own: any importable class that meets the player protocol, named ``module:Class``.

``commitbench run standing --agent mypkg.agents:MyAgent`` (or ``agents: [mypkg.agents:MyAgent]`` in a
config) plays the suite with a fresh ``MyAgent()`` per cell, through the same runner, cache, report and
viewer as the built-in players. The class is constructed without arguments; its ``act`` (and
``begin``) may be sync or async (:class:`commitbench.agents.base.Agent`).

Its identity enters the run key of every cell it plays: the class's own ``identity()`` when it has one
(an :class:`~commitbench.traces.AgentIdentity`, or a dict of its fields), else its module, qualified
name and the sha256 of its module's source. Editing the agent's code therefore makes another
experiment, and resuming a run directory with an edited agent is refused.

A class that declares ``uses_model = True`` calls the run's model through the harness
(:class:`commitbench.agents.harness.HarnessModel`): it is played once per model of the config, as
``module:Class@model``, made per cell as ``Class(model)``, and the model's identity (no URL, no key) joins
its identity. A class that brings a client of its own still plays; the harness cannot see those calls,
and the report says its calls are not recorded.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Any

from commitbench.agents.base import Agent
from commitbench.digests import digest
from commitbench.llm import ModelSettings
from commitbench.traces import AgentIdentity

__all__ = [
    "CUSTOM_KIND",
    "AgentLoadError",
    "custom_identity",
    "is_agent_path",
    "load_agent_class",
    "model_player_identity",
    "new_agent",
    "uses_harness_model",
]

# The kind of a player of the user's own in its identity (reference agents are 'reference', models 'chat').
CUSTOM_KIND = "custom"
# module.path:Qualified.Name, as Python spells identifiers.
_PATH = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*\Z")


class AgentLoadError(ValueError):
    """A ``module:Class`` that cannot be imported, or names no player."""


def is_agent_path(name: str) -> bool:
    """Whether an agent name is written as ``module:Class``."""
    return len(name) <= 300 and _PATH.match(name) is not None


def load_agent_class(path: str) -> type[Any]:
    """The class ``module:Class`` names, checked against the player protocol (AgentLoadError says why not)."""
    if not is_agent_path(path):
        raise AgentLoadError(f"{path!r} is not of the form module:Class")
    module_name, qualname = path.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or anything the module raises while it loads
        raise AgentLoadError(
            f"cannot import {module_name!r} for agent {path!r}: {type(exc).__name__}: {exc} "
            "(is its package installed, or its folder on PYTHONPATH?)"
        ) from None
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise AgentLoadError(f"{module_name!r} has no {qualname!r} (agent {path!r})")
    if not inspect.isclass(target):
        raise AgentLoadError(f"agent {path!r} is not a class")
    missing = [m for m in ("begin", "act") if not callable(getattr(target, m, None))]
    if missing:
        raise AgentLoadError(
            f"agent {path!r} lacks {' and '.join(missing)}: a player has begin(observation, info) and "
            "act(observation, info) (docs/agents.md)"
        )
    return target


def uses_harness_model(cls: type[Any]) -> bool:
    """Whether a player class calls the run's model through the harness (``uses_model = True``)."""
    return getattr(cls, "uses_model", False) is True


def custom_identity(path: str, cls: type[Any]) -> AgentIdentity:
    """The identity of a player of the user's own (see the module doc): its own ``identity()``, called on
    a fresh instance, or its module, qualified name and source digest."""
    own = getattr(cls, "identity", None)
    if callable(own) and not uses_harness_model(cls):
        value = own(_instance(path, cls))
        identity = value if isinstance(value, AgentIdentity) else AgentIdentity.model_validate(value)
        return identity.model_copy(update={"name": path})
    settings = {"module": cls.__module__, "class": cls.__qualname__, "source_sha256": _source_digest(cls)}
    return AgentIdentity(name=path, kind=CUSTOM_KIND, settings=settings)


def model_player_identity(player: str, path: str, cls: type[Any], settings: ModelSettings) -> AgentIdentity:
    """The identity of a class that calls the harness's model, on one model: the class's identity (module,
    name, source digest) with the model's identity (name, sampling, extra body; never the URL or key)."""
    own = custom_identity(path, cls)
    return AgentIdentity(name=player, kind=CUSTOM_KIND, settings={**own.settings, "model": settings.identity()})


def new_agent(path: str, cls: type[Any], model: Any = None) -> Agent:
    """A fresh player of the class (one per cell; ``model``: the harness's model for a class that uses one);
    its methods were checked by :func:`load_agent_class`."""
    agent: Agent = _instance(path, cls, model)
    return agent


def _instance(path: str, cls: type[Any], model: Any = None) -> Any:
    made = f"{cls.__qualname__}(model)" if model is not None else f"{cls.__qualname__}()"
    try:
        return cls(model) if model is not None else cls()
    except Exception as exc:
        raise AgentLoadError(f"agent {path!r} cannot be made with {made}: {type(exc).__name__}: {exc}") from None


def _source_digest(cls: type[Any]) -> str:
    """sha256 of the source of the module that defines ``cls`` (of the class alone where the module's
    file cannot be read)."""
    module = sys.modules.get(cls.__module__)
    try:
        text = inspect.getsource(module) if module is not None else inspect.getsource(cls)
    except (OSError, TypeError):
        try:
            text = inspect.getsource(cls)
        except (OSError, TypeError):
            raise AgentLoadError(
                f"the source of {cls.__module__}:{cls.__qualname__} cannot be read to identify it; give the class "
                "an identity() method"
            ) from None
    return digest(text)
