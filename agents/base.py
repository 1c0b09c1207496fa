"""The player protocol: what the runner plays a cell with.

A player plays one episode at a time: :meth:`Agent.begin` receives the opening observation and info,
then :meth:`Agent.act` is called with each observation and returns the next action (anything
:func:`commitbench.protocol.parse_action` accepts: an :class:`~commitbench.protocol.AgentAction`, its
dict, or a JSON string). Either method may be ``async``; the runner awaits what they return. The
reference agents, the chat agent and any class of the user's own (``--agent module:Class``,
:mod:`commitbench.agents.custom`) meet it; ``docs/agents.md`` shows one.

Optional members:

* ``identity()`` returns the :class:`~commitbench.traces.AgentIdentity` that enters every run key of
  the player (what the player is: a changed identity is a changed experiment);
* ``privileged = True`` asks for the privileged channel (the script's annotations in ``info``), as the
  reference agents that read the script do; it makes the player a reference, not a subject.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from commitbench.protocol import AgentAction

if TYPE_CHECKING:
    from commitbench.traces import AgentIdentity

__all__ = ["Action", "Agent", "IdentifiedAgent"]

Action: TypeAlias = AgentAction | str | dict[str, Any]


@runtime_checkable
class Agent(Protocol):
    """A player of one episode at a time (sync or async; see the module doc)."""

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> Awaitable[None] | None: ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> Action | Awaitable[Action]: ...


@runtime_checkable
class IdentifiedAgent(Agent, Protocol):
    """A player that names itself: the reference agents and the chat agent (its identity enters the run key)."""

    def identity(self) -> AgentIdentity: ...
