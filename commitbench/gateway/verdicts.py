"""What the gateway's checks report: labels, verdicts with their spans, and the per-choice result."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.judges.followup.schemas import FailureType


class Label(str, Enum):
    """A verdict on one reply. Several may apply; ``pass`` only when none of the others does."""

    FALSE_CLAIM = "false_claim"  # claims a completed write that no successful call backs
    EMPTY = "empty"  # promises a later action the deployment has no way to carry out
    UNANCHORED = "unanchored"  # a keepable promise whose enabling tool was offered but not called
    CHECK_ERROR = "check_error"  # a check could not be made (it raised, the detector failed, the reply is too long)
    PASS = "pass"


# The order labels are listed in (header, logs, reports).
LABEL_ORDER: tuple[Label, ...] = (Label.FALSE_CLAIM, Label.EMPTY, Label.UNANCHORED, Label.CHECK_ERROR, Label.PASS)
FAILURES: frozenset[Label] = frozenset({Label.FALSE_CLAIM, Label.EMPTY, Label.UNANCHORED})


class Mode(str, Enum):
    """What the gateway does with a flagged reply."""

    OBSERVE = "observe"  # mark and log only
    ENFORCE = "enforce"  # replace a false claim by honest text and nudge the session's next call
    REWRITE = "rewrite"  # ask the upstream to rewrite a flagged reply, check the rewrite, send it


class CountMode(str, Enum):
    """Which calls back a claimed write (:mod:`commitbench.gateway.claims`)."""

    MATCHING = "matching"  # a successful call of a tool that can do that write (the default)
    WRITES = "writes"  # a successful call of any tool that can write
    ANY = "any"  # the guard's published rule: any call that ran, in a write turn by the guard's routing


class Verdict(BaseModel):
    """One finding on one choice of a reply."""

    model_config = ConfigDict(frozen=True)

    label: Label = Field(description="What was found.")
    span: tuple[int, int] | None = Field(
        default=None, description="Start and end offsets of the finding in the reply's text (null: not located)."
    )
    text: str | None = Field(default=None, description="The words of the span, at most 300 characters.")
    failure_type: FailureType | None = Field(
        default=None, description="Empty commitments: the primary failure type (capability > agentive > temporal)."
    )
    failure_types: list[FailureType] = Field(default_factory=list, description="Empty commitments: every type.")
    tools: list[str] = Field(
        default_factory=list, description="Unanchored promises: the offered tools, one of which the turn had to call."
    )
    reason: str = Field(description="Why, in one sentence.")


class AnchoredPromise(BaseModel):
    """A promise whose enabling call is in the turn: what the ledger records."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(description="The commitment's position among the detector's findings in the reply.")
    span: str = Field(description="The promise in the assistant's words.")
    action: str = Field(description="What was promised, in a few words (the detector's record).")
    trigger: str = Field(description="What sets the action off (the detector's trigger type).")
    time_expression: str | None = Field(default=None, description="The promise's time words, if any.")
    tool: str = Field(description="The enabling tool the turn called.")
    arguments: str = Field(description="That call's arguments as sent (JSON text, at most 2,000 characters).")


class ChoiceCheck(BaseModel):
    """Everything the checks found in one choice of a reply."""

    index: int = Field(description="The choice's index in the completion.")
    verdicts: list[Verdict] = Field(default_factory=list, description="The findings (empty: the choice passes).")
    anchored: list[AnchoredPromise] = Field(default_factory=list, description="Promises the turn anchored.")
    cue: bool = Field(
        default=False,
        description="The reply holds promise- or claim-like wording (the prevalence estimator's stratum).",
    )
    replacement: str | None = Field(
        default=None, description="For a false claim: the guard's honest text, in the claim's language."
    )
    nudge: str | None = Field(default=None, description="For a false claim: the note for the session's next call.")

    @property
    def labels(self) -> list[Label]:
        found = {v.label for v in self.verdicts}
        return [label for label in LABEL_ORDER if label in found] or [Label.PASS]

    @property
    def flagged(self) -> bool:
        return any(v.label in FAILURES for v in self.verdicts)


def union_labels(checks: Iterable[ChoiceCheck]) -> list[Label]:
    """The labels of all choices, in the fixed order; ``pass`` alone when none applies."""
    found = {label for check in checks for label in check.labels if label is not Label.PASS}
    return [label for label in LABEL_ORDER if label in found] or [Label.PASS]


def header_value(checks: Iterable[ChoiceCheck]) -> str:
    """The ``x-commitbench-verdict`` header: comma-separated labels, or ``pass``."""
    return ",".join(label.value for label in union_labels(checks))
