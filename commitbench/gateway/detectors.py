"""Which commitments a reply makes: the follow-up checker's offline cue detector, or its LLM detector.

Both return the checker's ``DetectorOutput``. The offline detector
(:func:`commitbench.judges.followup.cues.detect_commitments`) is the default: deterministic, and fast
enough to run on every reply. The LLM detector asks the checker's detector prompt through
:class:`commitbench.llm.ModelClient`, so every call goes through the client's cache; output that does not
parse is asked for again, as in the checker, and a detector that gives no usable answer raises
:class:`DetectorUnavailable` (the reply is then marked ``check_error``, never held up).
"""

from __future__ import annotations

from typing import Protocol

from commitbench.gateway.promises import whole_promises
from commitbench.gateway.turn import ReplyChoice, Turn
from commitbench.judges.followup.cues import detect_commitments
from commitbench.judges.followup.llm import ask_json
from commitbench.judges.followup.schemas import DetectorOutput
from commitbench.judges.followup.turn import TurnToolCall, render_exchange
from commitbench.judges.labelling import LabellerUnavailable
from commitbench.llm import ModelClient
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle


class DetectorUnavailable(RuntimeError):
    """The detector gave no usable answer for a reply."""


class Detector(Protocol):
    """Finds the commitments of one choice of a reply."""

    @property
    def name(self) -> str: ...

    async def detect(self, turn: Turn, choice: ReplyChoice) -> DetectorOutput: ...


class OfflineDetector:
    """The cue detector: no model call."""

    name = "cues"

    async def detect(self, turn: Turn, choice: ReplyChoice) -> DetectorOutput:
        return self.detect_now(choice)

    def detect_now(self, choice: ReplyChoice) -> DetectorOutput:
        """The cue detector's findings, each coordinated promise apart and every action whole."""
        return whole_promises(detect_commitments(choice.text))


def judge_view(turn: Turn, choice: ReplyChoice) -> str:
    """The exchange as the LLM detector reads it: the user's message, the turn's calls, the reply."""
    calls = [
        TurnToolCall(name=c.name, arguments=c.arguments, ok=c.ran, result=c.result or "", call_id=c.call_id)
        for c in turn.activity
    ]
    calls += [TurnToolCall(name=c.name, arguments=c.arguments, ok=True, result="(called in this reply)",
                           call_id=c.call_id) for c in choice.calls]
    return render_exchange(turn.user_message, calls, choice.text)


class LLMDetector:
    """The checker's LLM detector on a judge model (temperature 0, cached)."""

    def __init__(
        self, client: ModelClient, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    ) -> None:
        self.client = client
        self.max_attempts = max_attempts
        self.style = style
        self.name = f"llm:{client.settings.model}"

    async def detect(self, turn: Turn, choice: ReplyChoice) -> DetectorOutput:
        try:
            value, _calls, error = await ask_json(
                self.client, "detector", "followup_detector", judge_view(turn, choice), DetectorOutput,
                self.max_attempts, self.style,
            )
        except LabellerUnavailable as exc:
            raise DetectorUnavailable(str(exc)) from None
        if value is None:
            raise DetectorUnavailable(error or "the detector gave no usable answer")
        return value
