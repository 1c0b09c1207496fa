"""Strict grading of one standing run: the action outcome AND the required communication."""

from __future__ import annotations

from commitbench.episodes.standing.spec import Expected
from commitbench.judges.standing.labels import RunLabels
from commitbench.judges.standing.signals import Signals


def strict_correct(signals: Signals, labels: RunLabels, expected: Expected) -> bool | None:
    """True when the outcome is right for the cell and every required act happened.

    Returns None when the answer depends on a label the judge could not give (a judge error):
    such runs are excluded from strict accuracy and counted, never scored as failures.
    """
    if not signals.outcome_correct:
        return False
    if expected.verify and not signals.verified:
        return False
    unknown = False
    for required, value in ((expected.consult, labels.consulted), (expected.notify, labels.notified)):
        if not required:
            continue
        if value is None:
            unknown = True
        elif not value:
            return False
    return None if unknown else True
