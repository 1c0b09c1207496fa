"""Agreement between two labellers of the same messages: accuracy and Cohen's kappa per label.

Used to validate the LLM judge against human labels (``commitbench agreement``) and to compare the
rule judge with the LLM judge (``commitbench judge``). Everything here is a pure function of
labels; reading files happens in the commands.

Cohen's kappa for two raters over n items and any label set (yes/no is the two-label case)::

    p_o = share of items where they agree
    p_e = sum over labels k of p_a(k) * p_b(k)     (p_a(k), p_b(k): each rater's share of label k)
    kappa = (p_o - p_e) / (1 - p_e)

It is undefined (None) when there are no items, or when p_e = 1 (both raters gave one and the
same answer to every item: agreement is then perfect but carries no information beyond chance).
An item a rater could not label (a judge error, a blank cell in a sheet) is left out and counted
as ``excluded``; it is never read as "no".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

from pydantic import BaseModel, Field

LABEL_FIELDS: tuple[str, ...] = ("consults_creditor", "notifies_creditor", "off_topic")


def observed_agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Share of items on which the two raters agree (None for no items)."""
    check_same_items(a, b)
    if not a:
        return None
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters over any label set (yes/no is the two-label case).

    ``p_o`` is the share of agreement, ``p_e = sum_k p_a(k) * p_b(k)`` the agreement expected by
    chance from each rater's label shares; kappa is ``(p_o - p_e) / (1 - p_e)``. None when there are
    no items or ``p_e`` is 1 (both raters used one and the same label throughout).
    """
    check_same_items(a, b)
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    p_e = sum(count_a[k] * count_b[k] for k in count_a) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


def check_same_items(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"the two raters must label the same items: {len(a)} vs {len(b)} labels")


class LabelPair(BaseModel):
    """Two raters' labels of one message, with the groups it belongs to."""

    groups: dict[str, str] = Field(default_factory=dict, description="Grouping values, e.g. {'model': ...}.")
    a: dict[str, bool | None] = Field(description="Rater A's label per field (None: no label).")
    b: dict[str, bool | None] = Field(description="Rater B's label per field (None: no label).")


class AgreementRow(BaseModel):
    """Agreement on one label within one group."""

    group: dict[str, str] = Field(description="Grouping values ({} for the pooled row).")
    label: str = Field(description="Label field.")
    n: int = Field(description="Messages both raters labelled.")
    excluded: int = Field(description="Messages left out because one rater gave no label.")
    accuracy: float | None = Field(description="Share of agreement (rater B judged against rater A).")
    kappa: float | None = Field(description="Cohen's kappa (None when undefined).")
    yes_a: int = Field(description="Messages rater A labelled yes.")
    yes_b: int = Field(description="Messages rater B labelled yes.")


def agreement_rows(
    pairs: Iterable[LabelPair], group_by: Sequence[str] = (), fields: Sequence[str] = LABEL_FIELDS
) -> list[AgreementRow]:
    """One row per (group, label): pooled when ``group_by`` is empty, else per value of those keys."""
    buckets: dict[tuple[str, ...], list[LabelPair]] = {}
    for pair in pairs:
        key = tuple(pair.groups.get(g, "") for g in group_by)
        buckets.setdefault(key, []).append(pair)
    rows: list[AgreementRow] = []
    for key in sorted(buckets):
        members = buckets[key]
        for field in fields:
            both = [(p.a.get(field), p.b.get(field)) for p in members]
            kept = [(x, y) for x, y in both if x is not None and y is not None]
            a = [bool(x) for x, _ in kept]
            b = [bool(y) for _, y in kept]
            rows.append(
                AgreementRow(
                    group=dict(zip(group_by, key, strict=True)),
                    label=field,
                    n=len(kept),
                    excluded=len(both) - len(kept),
                    accuracy=observed_agreement(a, b),
                    kappa=cohen_kappa(a, b),
                    yes_a=sum(a),
                    yes_b=sum(b),
                )
            )
    return rows


def label_dict(label: object, fields: Sequence[str] = LABEL_FIELDS) -> dict[str, bool | None]:
    """The yes/no values of a label object (None for every field when it carries an error)."""
    if getattr(label, "error", ""):
        return dict.fromkeys(fields)
    return {field: getattr(label, field, None) for field in fields}
