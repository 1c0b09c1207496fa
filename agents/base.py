"""The agent protocol.

An agent plays one episode at a time: ``begin`` receives the opening observation and info,
then ``act`` is called with each observation and returns the next action (anything
:func:`commitbench.protocol.parse_action` accepts). Model-backed agents implement the
async variant (``async def act``); the runner awaits either kind.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from commitbench.protocol import AgentAction
from commitbench.traces import AgentIdentity


@runtime_checkable
class Agent(Protocol):
    """A synchronous agent (reference agents)."""

    name: str

    def identity(self) -> AgentIdentity: ...

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None: ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> AgentAction | str | dict[str, Any]: ...
