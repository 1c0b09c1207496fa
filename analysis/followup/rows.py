"""A follow-up checker record as a metric row: what the report's frame and the viewer's run list hold of it."""

from __future__ import annotations

from enum import Enum
from typing import Any

from commitbench.analysis.followup.metrics import LabelledResponse, commitment_counts, follow_through_counts
from commitbench.jointread import conversion_work
from commitbench.judges.followup.labellers import FollowupLabelRecord

__all__ = ["response_dump", "response_row"]


def _row_values(record: FollowupLabelRecord) -> dict[str, Any] | None:
    """The values of the metric row of one checker record, as ``LabelledResponse`` takes them (a field left out
    takes its default); None for a judge error."""
    result, turn = record.result, record.turn
    if result.outcome is None or result.response is None:
        return None
    return dict(
        request_id=turn.request_id, category=turn.category, source=turn.source, setup=turn.setup,
        variant=turn.variant, persona=turn.persona, model=record.model, arm=record.arm, sample=record.sample,
        outcome=result.outcome, doability=turn.doability,
        false_action_claim=result.response.false_action_claim.value,
        asks_clarification=result.response.asks_clarification.value,
        **commitment_counts(result.commitments),
        **follow_through_counts(result.commitments, result.follow_through),
    )


def response_row(record: FollowupLabelRecord) -> LabelledResponse | None:
    """The metric row of one checker record; None when the checker gave no label (a judge error)."""
    values = _row_values(record)
    return None if values is None else LabelledResponse(**values)


# Every field of the row, in the order ``model_dump`` writes them, with its default (None for a required field);
# and the required fields.
_TEMPLATE: dict[str, Any] = {
    name: None if info.is_required() else info.get_default(call_default_factory=True)
    for name, info in LabelledResponse.model_fields.items()
}
_REQUIRED = frozenset(name for name, info in LabelledResponse.model_fields.items() if info.is_required())
# The fields typed by an enum, with its members by value.
_ENUM_FIELDS: tuple[tuple[str, type[Enum], dict[Any, Enum]], ...] = tuple(
    (name, info.annotation, {member.value: member for member in info.annotation})
    for name, info in LabelledResponse.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Enum)
)


def _plain_row(values: dict[str, Any]) -> dict[str, Any]:
    """``LabelledResponse(**values).model_dump(mode="json")``, made without building the model: the fields in
    their order, a field left out as its default, an enum field as its value. ``values`` come from a validated
    record, typed as the row types them except the variant (a text in the record), so only the enum fields are
    checked again: ValueError names a value that is no member. A test holds the two equal over the checker's
    records."""
    if not values.keys() >= _REQUIRED:
        raise ValueError(f"the metric row needs {sorted(_REQUIRED - values.keys())}")
    out = {**_TEMPLATE, **values}
    if len(out) != len(_TEMPLATE):
        raise ValueError(f"the metric row has no field {sorted(values.keys() - _TEMPLATE.keys())}")
    for name, kind, members in _ENUM_FIELDS:
        value = out[name]
        member = value if type(value) is kind else members.get(value)
        if member is None:
            raise ValueError(f"the metric row's {name} {value!r} is no {kind.__name__}")
        out[name] = member.value
    return out


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
    values = _row_values(record)
    dumped = None if values is None else _plain_row(values)
    if shared is not None:
        shared[key] = (record, dumped)  # the record kept with it: its id names no other object meanwhile
    return dumped
