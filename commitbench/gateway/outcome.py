"""What checking one completion produced (:class:`RequestOutcome`): the checks of every choice, what the gateway
did with each, the rewrites it checked, the promises it recorded, and the ``commitbench`` object and verdict
header made of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commitbench.gateway.verdicts import ChoiceCheck, Mode, header_value

__all__ = ["LEDGER_SKIP", "RequestOutcome"]

# How a promise left out of the ledger on purpose is said (in the error and the response's ``ledger``).
LEDGER_SKIP = "ledger: not recorded"


@dataclass
class RequestOutcome:
    """What checking one completion produced."""

    checks: list[ChoiceCheck]
    actions: dict[int, str]
    originals: dict[int, str]
    rewrites: dict[int, ChoiceCheck]
    recorded: list[int]
    error: str | None
    checks_ms: float
    rewrite_ms: float
    changed: bool

    def verdict(self) -> str:
        """The verdict header: every label of every choice and of every rewrite the gateway checked."""
        return header_value([*self.checks, *self.rewrites.values()])

    def report(self, mode: Mode, digest: str, detector: str) -> dict[str, Any]:
        """The ``commitbench`` object of the response."""
        choices = []
        for check in self.checks:
            item: dict[str, Any] = {
                "index": check.index, "labels": [label.value for label in check.labels],
                "verdicts": [v.model_dump(mode="json", exclude_none=True) for v in check.verdicts],
                "action": self.actions.get(check.index, "none"),
            }
            rewrite = self.rewrites.get(check.index)
            if rewrite is not None:
                item["rewrite"] = {"labels": [label.value for label in rewrite.labels]}
            choices.append(item)
        report = {"verdict": self.verdict(), "mode": mode.value, "turn": digest, "detector": detector,
                  "choices": choices, "recorded": self.recorded}
        skipped = [e.removeprefix("ledger: ") for e in (self.error or "").split("; ") if e.startswith(LEDGER_SKIP)]
        if skipped:
            report["ledger"] = skipped[0]
        return report
