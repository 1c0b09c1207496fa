"""A follow-up checker record as a metric row: what the report's frame and the viewer's run list hold of it."""

from __future__ import annotations

from typing import Any

from commitbench.analysis.followup.metrics import LabelledResponse, commitment_counts, follow_through_counts
from commitbench.jointread import conversion_work
from commitbench.judges.followup.labellers import FollowupLabelRecord

__all__ = ["response_dump", "response_row"]


def response_row(record: FollowupLabelRecord) -> LabelledResponse | None:
    """The metric row of one checker record; None when the checker gave no label (a judge error)."""
    result, turn = record.result, record.turn
    if result.outcome is None or result.response is None:
        return None
    return LabelledResponse(
        request_id=turn.request_id, category=turn.category, source=turn.source, setup=turn.setup,
        variant=turn.variant, persona=turn.persona, model=record.model, arm=record.arm, sample=record.sample,
        outcome=result.outcome, doability=turn.doability,
        false_action_claim=result.response.false_action_claim.value,
        asks_clarification=result.response.asks_clarification.value,
        **commitment_counts(result.commitments),
        **follow_through_counts(result.commitments, result.follow_through),
    )


_DUMP_WORK = "follow-up response row"  # a record's dumped row in a joint read's shared work (with the record's id)


def response_dump(record: FollowupLabelRecord) -> dict[str, Any] | None:
    """``response_row(record).model_dump(mode="json")`` (None for a judge error). While both readers of a joint
    read convert one trace (:mod:`commitbench.jointread`: the viewer's page and the report's row), the second is
    handed the dict the first made of the same record; neither changes it."""
    shared = conversion_work()
    key = (_DUMP_WORK, id(record))
    if shared is not None:
        made = shared.get(key)
        if made is not None and made[0] is record:
            dumped: dict[str, Any] | None = made[1]
            return dumped
    row = response_row(record)
    dumped = None if row is None else row.model_dump(mode="json")
    if shared is not None:
        shared[key] = (record, dumped)  # the record kept with it: its id names no other object meanwhile
    return dumped
