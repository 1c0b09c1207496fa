"""A follow-up checker record as a metric row: the plain row (:func:`response_dump`, made without building the
model) is the validated model's JSON dump, field for field and in the same order, on every kind of record."""

from __future__ import annotations

from typing import Any

import pytest
from _labeller_corpus import followup_corpus

from commitbench.analysis.followup.metrics import LabelledResponse
from commitbench.analysis.followup.rows import response_dump, response_row
from commitbench.judges.followup.labellers import CheckerLabeller, FollowupLabelRecord, make_checker


@pytest.fixture(scope="module")
def records() -> list[FollowupLabelRecord]:
    labeller = CheckerLabeller(make_checker("rules"))
    return [labeller.label_now(trace) for trace in followup_corpus()]


def _dumped(record: FollowupLabelRecord) -> dict[str, Any] | None:
    row = response_row(record)
    return None if row is None else row.model_dump(mode="json")


def _with_turn(record: FollowupLabelRecord, **turn: Any) -> FollowupLabelRecord:
    return record.model_copy(update={"turn": record.turn.model_copy(update=turn)})


def test_the_corpus_holds_every_kind_of_row(records: list[FollowupLabelRecord]) -> None:
    """Single-turn and follow-through rows, every outcome the corpus plays, and counts that are not all zero."""
    rows = [row for row in map(_dumped, records) if row is not None]
    assert {row["follow_through"] for row in rows} == {True, False}
    assert len({row["outcome"] for row in rows}) >= 8
    assert any(row["n_empty"] for row in rows) and any(row["n_kept"] for row in rows)


def test_the_plain_row_is_the_models_dump_in_its_order(records: list[FollowupLabelRecord]) -> None:
    for record in records:
        for changed in (record, _with_turn(record, variant="stated"), _with_turn(record, variant="inferred"),
                        record.model_copy(update={"sample": 7, "arm": "card", "model": "other"})):
            plain, expected = response_dump(changed), _dumped(changed)
            assert plain == expected, changed.run_key
            if plain is not None and expected is not None:
                assert list(plain) == list(LabelledResponse.model_fields)
                assert all(type(plain[name]) is type(value) for name, value in expected.items())


def test_a_judge_error_has_no_row(records: list[FollowupLabelRecord]) -> None:
    record = records[0]
    failed = record.model_copy(update={"result": record.result.model_copy(update={"outcome": None})})
    assert response_dump(failed) is None and response_row(failed) is None


def test_a_variant_that_is_no_variant_is_refused_by_both(records: list[FollowupLabelRecord]) -> None:
    """The record types the variant as a text; the row as one of two. Neither way makes a row of another."""
    labelled = next(r for r in records if response_row(r) is not None)
    odd = _with_turn(labelled, variant="sometimes")
    with pytest.raises(ValueError, match="variant"):
        response_row(odd)
    with pytest.raises(ValueError, match="variant 'sometimes' is no Variant"):
        response_dump(odd)
