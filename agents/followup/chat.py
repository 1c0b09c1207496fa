"""The chat agent for the follow-up suite: the user's message shown as plain text.

The suite is a one-to-one chat, so the ``[channel] Name:`` prefix the workspace rendering adds would
only be noise; everything else is :class:`~commitbench.agents.chat.ChatAgent` unchanged, except two
things the follow-through mode asks of a player:

* when ``info["session"]`` moves on, the user has come back in a new conversation: the agent starts a
  fresh message history there (the new ``system`` event and the user's message open it), as a
  deployment without memory across conversations would;
* when ``info["tools"]`` comes with a step (a ticket came due and ``update_ticket`` is offered), the
  agent offers the model those tools from then on.
"""

from __future__ import annotations

from typing import Any

from commitbench.agents.chat import ChatAgent
from commitbench.envs.followup.env import USER_CHANNEL


class FollowUpChatAgent(ChatAgent):
    """The chat agent with user messages (channel ``chat``) rendered as plain user text."""

    _session: Any = None

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self._session = info.get("session")
        super().begin(observation, info)

    def _observe(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        session = info.get("session")
        if session is not None and self._session is not None and session != self._session:
            self._close_open_calls()
            self._messages = []  # a new conversation: nothing of the earlier one is shown
        self._session = session if session is not None else self._session
        if "tools" in info:
            self._tools = list(info.get("tools") or [])
        super()._observe(observation, info)

    def _ingest(self, events: Any, same_turn: bool = False) -> None:
        plain: list[Any] = []
        for event in events:
            if event.get("kind") == "message" and event.get("channel") == USER_CHANNEL:
                if plain:
                    super()._ingest(plain, same_turn)
                    plain = []
                self._close_open_calls()
                self._user_line(str(event.get("text", "")))
            else:
                plain.append(event)
        if plain:
            super()._ingest(plain, same_turn)
