"""The chat agent for the follow-up suite: the user's message shown as plain text.

The suite is a one-to-one chat, so the ``[channel] Name:`` prefix the workspace rendering adds would
only be noise; everything else is :class:`~commitbench.agents.chat.ChatAgent` unchanged.
"""

from __future__ import annotations

from typing import Any

from commitbench.agents.chat import ChatAgent
from commitbench.envs.followup.env import USER_CHANNEL


class FollowUpChatAgent(ChatAgent):
    """The chat agent with user messages (channel ``chat``) rendered as plain user text."""

    def _ingest(self, events: Any) -> None:
        plain: list[Any] = []
        for event in events:
            if event.get("kind") == "message" and event.get("channel") == USER_CHANNEL:
                if plain:
                    super()._ingest(plain)
                    plain = []
                self._close_open_calls()
                self._user_line(str(event.get("text", "")))
            else:
                plain.append(event)
        if plain:
            super()._ingest(plain)
