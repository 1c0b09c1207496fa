"""The standing suite's labellers: the rule judge and the LLM judge behind the one labeller protocol.

Both label every assistant message of a trace (:class:`~commitbench.judges.standing.labels.MessageLabel`)
and return them as one :class:`StandingLabelRecord`; ``judge_errors`` counts the messages the judge
could not label.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from commitbench.episodes.standing.episode import Episode
from commitbench.judges.labelling import LabelRecord
from commitbench.judges.standing.labels import MessageLabel
from commitbench.judges.standing.llm import LLM_JUDGE_VERSION, LLMJudge
from commitbench.judges.standing.rules import RULE_JUDGE_VERSION, RuleJudge
from commitbench.traces import EpisodeTrace


class StandingLabelRecord(LabelRecord):
    """The labels of every assistant message of one standing trace."""

    labels: list[MessageLabel] = Field(default_factory=list, description="One label per assistant message.")


def _record(trace: EpisodeTrace, name: str, labels: list[MessageLabel], version: str) -> StandingLabelRecord:
    return StandingLabelRecord(
        run_key=trace.run_key, labeller=name, labels=labels, judge_errors=sum(1 for label in labels if label.error),
        labeller_version=version,
    )


def labeller_version(name: str) -> tuple[str, bool]:
    """The current version of the standing labeller stored under ``name``, and whether it is cheap (offline)."""
    if name == RuleJudge.name:
        return RULE_JUDGE_VERSION, True
    if name.startswith("llm:"):
        return LLM_JUDGE_VERSION, False
    raise ValueError(f"unknown standing labeller {name!r} (rules, or llm:<model>)")


class _EpisodeLookup:
    def __init__(self, episodes: Mapping[str, Episode]) -> None:
        self.episodes = episodes

    def episode(self, trace: EpisodeTrace) -> Episode:
        episode = self.episodes.get(trace.episode_id)
        if episode is None:
            raise KeyError(f"episode {trace.episode_id} of run {trace.run_key[:12]} is not in the compiled episodes")
        return episode


class RulesLabeller(_EpisodeLookup):
    """The deterministic rule judge (no model)."""

    record_type = StandingLabelRecord
    cheap = True

    def __init__(self, episodes: Mapping[str, Episode]) -> None:
        super().__init__(episodes)
        self.judge = RuleJudge()

    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def version(self) -> str:
        return RULE_JUDGE_VERSION

    def label_now(self, trace: EpisodeTrace) -> StandingLabelRecord:
        return _record(trace, self.name, self.judge.label(trace, self.episode(trace)), self.version)

    async def label(self, trace: EpisodeTrace) -> StandingLabelRecord:
        return self.label_now(trace)


class LLMLabeller(_EpisodeLookup):
    """The LLM judge (four labels per message, through the model client and its cache)."""

    record_type = StandingLabelRecord
    cheap = False

    def __init__(self, judge: LLMJudge, episodes: Mapping[str, Episode]) -> None:
        super().__init__(episodes)
        self.judge = judge

    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def version(self) -> str:
        return LLM_JUDGE_VERSION

    async def label(self, trace: EpisodeTrace) -> StandingLabelRecord:
        return _record(trace, self.name, await self.judge.alabel(trace, self.episode(trace)), self.version)
