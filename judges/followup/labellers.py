"""The follow-up suite's labellers: the offline checker and the LLM checker behind the one labeller protocol.

Each reads a trace as a :class:`~commitbench.judges.followup.llm.FollowUpTurn` and returns a
:class:`FollowupLabelRecord` holding what it read and what it concluded; ``error`` is set when the
checker could not label the reply (a judge error, excluded from metrics and counted), and
``judge_errors`` counts the promises whose follow-through the delivery judge could not grade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import Field

from commitbench.identity import arm_label
from commitbench.jointread import shared_work
from commitbench.judges.followup.llm import LLM_CHECKER_VERSION, CheckResult
from commitbench.judges.followup.rules import OFFLINE_CHECKER_VERSION
from commitbench.judges.followup.turn import FollowUpTurn, turn_from_trace
from commitbench.judges.labelling import LabelRecord
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle
from commitbench.traces import EpisodeTrace

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

OFFLINE_NAME = "rules"


def labeller_version(name: str) -> tuple[str, bool]:
    """The current version of the follow-up labeller stored under ``name``, and whether it is cheap (offline)."""
    if name == OFFLINE_NAME:
        return OFFLINE_CHECKER_VERSION, True
    if name.startswith("llm:"):
        return LLM_CHECKER_VERSION, False
    raise ValueError(f"unknown follow-up labeller {name!r} (rules, or llm:<model>)")


class FollowupLabelRecord(LabelRecord):
    """A checker's result for one follow-up trace."""

    model: str = Field(description="The tested model.")
    arm: str = Field(description="The intervention stack ('none' when none).")
    sample: int = Field(description="Sample index.")
    turn: FollowUpTurn = Field(description="What the checker read.")
    result: CheckResult = Field(description="What it concluded.")


class Checker(Protocol):
    """The offline or the LLM checker."""

    name: str

    async def check(self, turn: FollowUpTurn) -> CheckResult: ...


def arm_name(interventions: Sequence[str], flagger: str | None = None) -> str:
    """The arm label of a trace's intervention names ('none' for the plain environment). A rewrite arm whose
    flagger was the offline checker says so (``rewrite (offline flagger)``): its numbers are not those of the
    paper's fix, whose flagger is the LLM checker."""
    return arm_label(interventions, {"rewrite": "offline flagger"} if flagger == OFFLINE_NAME else None)


def trace_arm(trace: EpisodeTrace) -> str:
    """The arm label of a trace (its interventions, and which checker flagged for a rewrite arm)."""
    flagger = trace.factors.get("flagger")
    return arm_name(trace.interventions, str(flagger) if flagger is not None else None)


def trace_model(trace: EpisodeTrace) -> str:
    """The tested model's label in its run: the config entry's name (unique in a run, so two entries of one
    served model, thinking on and off say, stay apart), as the trace's agent identity records it."""
    if trace.agent is not None and trace.agent.name.startswith("chat:"):
        return trace.agent.name.removeprefix("chat:")
    settings = trace.agent.settings if trace.agent else {}
    model = settings.get("model", {})
    if isinstance(model, dict):
        return str(model.get("model", trace.agent.name if trace.agent else "unknown"))
    return str(model)


def make_checker(
    kind: str, client: ModelClient | None = None, style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, fresh_retries: bool = False,
) -> Checker:
    """The offline checker (``rules``) or the LLM checker (``llm``, on ``client``): the one factory of both."""
    from commitbench.judges.followup.llm import LLMChecker
    from commitbench.judges.followup.rules import OfflineChecker

    if kind == "rules":
        return OfflineChecker()
    if kind == "llm":
        if client is None:
            raise ValueError("the LLM checker needs a model")
        return LLMChecker(client, max_attempts=max_attempts, style=style, fresh=fresh_retries)
    raise ValueError(f"unknown checker {kind!r} (rules or llm)")


_RECORD_WORK = "follow-up checker record"  # its key in a joint read's shared work


class CheckerLabeller:
    """A checker as a labeller (its name is the checker's: 'rules', or 'llm:<model>')."""

    record_type = FollowupLabelRecord

    def __init__(self, checker: Checker, name: str | None = None) -> None:
        self.checker = checker
        self._name = name or checker.name

    @property
    def name(self) -> str:
        return self._name

    @property
    def cheap(self) -> bool:
        """An offline checker calls no model: its stale labels are simply made again."""
        return hasattr(self.checker, "check_now")

    @property
    def version(self) -> str:
        return OFFLINE_CHECKER_VERSION if self.cheap else LLM_CHECKER_VERSION

    async def label(self, trace: EpisodeTrace) -> FollowupLabelRecord:
        turn = turn_from_trace(trace)
        return self._record(trace, turn, await self.checker.check(turn))

    def label_now(self, trace: EpisodeTrace) -> FollowupLabelRecord:
        """Label without an event loop; only for a checker that calls no model (the offline one).

        Within a joint read (:mod:`commitbench.jointread`: the viewer's page and the report's row of one trace
        made one after the other where it was parsed), a checker of the same class and settings asked again of
        that trace returns the record made the first time (one object: its readers only read it).
        """
        check_now = getattr(self.checker, "check_now", None)
        if check_now is None:
            raise TypeError(f"checker {self.name!r} calls a model; use label()")
        shared = shared_work(trace)
        asked = (type(self.checker), vars(self.checker), self.name, self.version)
        if shared is not None:
            made = shared.get(_RECORD_WORK)
            if made is not None and made[0] == asked:
                return made[1]
        turn = turn_from_trace(trace)
        record = self._record(trace, turn, check_now(turn))
        if shared is not None:
            shared[_RECORD_WORK] = (asked, record)
        return record

    def _record(self, trace: EpisodeTrace, turn: FollowUpTurn, result: CheckResult) -> FollowupLabelRecord:
        ungraded = sum(1 for grade in result.follow_through or () if grade.grade is None)
        return FollowupLabelRecord(
            run_key=trace.run_key, labeller=self.name, error=result.error, judge_errors=ungraded,
            labeller_version=self.version,
            model=trace_model(trace),
            arm=trace_arm(trace), sample=trace.sample, turn=turn, result=result,
        )
