"""How the standing environment receives the words of live parties: the ``voices`` setting.

In the scripted arm the environment shows the script's texts and the creditor's scripted answers. In the
live-parties arm (:mod:`commitbench.oracles.standing.parties`) a party model words them; that arm hands the
environment, through the reset setting :data:`VOICES_SETTING`, a :class:`PartyVoices` holding

* the voiced text of scripted messages, by script step (made before the episode starts: they depend on the
  script alone), and
* the answers people give to the assistant's next message, by role, offered just before the environment
  executes that message (the model calls are awaited outside the environment, which stays synchronous).

The environment decides everything else exactly as in the scripted arm: who speaks at which step, what each
message does, whether the creditor's scripted answer is due. A text comes with its :class:`VoiceMark`, which
the trace keeps and the agent never sees. Without the setting the environment is the scripted arm, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from commitbench.protocol import VoiceMark

__all__ = ["ANSWER_ACT", "VOICES_SETTING", "Outgoing", "PartyVoices", "VoicedText"]

VOICES_SETTING = "voices"
# The act annotation of a live party's answer shown inside the assistant's turn (it opens no turn of its own).
ANSWER_ACT = "answer"


@dataclass(frozen=True)
class VoicedText:
    """A text a person says, and how it came to be."""

    text: str
    mark: VoiceMark


class Outgoing(BaseModel):
    """A message the assistant is about to send, as the environment will deliver it."""

    model_config = ConfigDict(frozen=True)

    channel: str = Field(description="Where it will appear: the team channel or 'dm:<name>'.")
    text: str = Field(description="What it says.")
    step: int = Field(description="The script step of the turn it is sent in.")
    addressees: tuple[str, ...] = Field(
        description="Role keys of the people it is addressed to, in the episode's order."
    )
    creditor_answer_due: bool = Field(
        description="The creditor is among the addressees and their scripted answer is due (not yet given)."
    )


class PartyVoices:
    """The live parties' texts for one episode (see the module doc)."""

    def __init__(self, scripted: Mapping[int, VoicedText]) -> None:
        self.scripted = dict(scripted)
        self._replies: dict[str, VoicedText] = {}

    def offer_reply(self, role: str, voiced: VoicedText) -> None:
        """The answer of the person with role key ``role`` to the assistant's next message."""
        self._replies[role] = voiced

    def take_reply(self, role: str) -> VoicedText | None:
        """The answer offered for ``role``, once (None: none was offered)."""
        return self._replies.pop(role, None)

    def clear_replies(self) -> None:
        """Drop answers that were offered for a message the environment did not deliver."""
        self._replies.clear()
