"""Model-call errors of a run, by player and kind: what failed, how often, and which cells it cost.

A report shows them beside its metrics, so a misconfigured server cannot hide behind plausible
tables. Read from the traces that count (the last good trace of each cell, else its last failed
one): every model call recorded with an error of a :class:`~commitbench.callerrors.ModelErrorKind`,
and every cell left out of the metrics (no good trace: an infrastructure error), by the reason its
trace records. ``context_length`` errors are facts about the model and the episode: their cells
count in the metrics, and this table is where they show.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, Field

from commitbench.analysis.tables import TableView
from commitbench.callerrors import error_kind_of

__all__ = ["CallErrorRow", "CallErrorTally", "call_error_lines", "call_error_rows", "call_error_view"]

EXAMPLE_CHARS = 300


class CallErrorRow(BaseModel):
    """One player's failures of one kind."""

    player: str = Field(description="The player (chat:<model>, or a reference agent).")
    kind: str = Field(
        description="The call error's kind (rate_limited, timeout, bad_request, invalid_response, context_length, "
        "...), or for a cell that failed without a failed call, the reason its trace records (crash, cache_miss)."
    )
    calls: int = Field(description="Model calls that ended with this error (after their retries).")
    cells: int = Field(description="Cells whose trace holds such a call (or failed for this reason).")
    cells_left_out: int = Field(
        description="Of those, cells without a good trace (an infrastructure error): left out of every metric "
        "until a run plays them again."
    )
    example: str = Field(description="The first such error's message (cut short).")


def _reason(infra_error: str) -> str:
    kind = error_kind_of(infra_error)
    return kind.value if kind is not None else infra_error.split(":", 1)[0].strip()[:40]


class CallErrorTally:
    """The call errors of the traces that count, added one trace at a time (one per cell)."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.cells: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.left_out: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.examples: dict[tuple[str, str], str] = {}
        self.seen = 0

    def add(self, head: Any) -> None:
        """Count one trace that counts (its player, run key, infrastructure error and model calls are read)."""
        index, self.seen = self.seen, self.seen + 1
        player = head.agent.name if head.agent is not None else "?"
        cell = head.run_key or f"#{index}"
        for call in head.model_calls:
            kind = error_kind_of(call.error) if call.purpose != "notice" else None
            if kind is None:
                continue
            key = (player, kind.value)
            self.calls[key] += 1
            self.cells[key].add(cell)
            self.examples.setdefault(key, call.error[:EXAMPLE_CHARS])
        if head.infra_error:
            key = (player, _reason(head.infra_error))
            self.cells[key].add(cell)
            self.left_out[key].add(cell)
            self.examples.setdefault(key, head.infra_error[:EXAMPLE_CHARS])

    def rows(self) -> list[CallErrorRow]:
        """The table, sorted by player and kind."""
        return [
            CallErrorRow(player=player, kind=kind, calls=self.calls[(player, kind)],
                         cells=len(self.cells[(player, kind)]), cells_left_out=len(self.left_out[(player, kind)]),
                         example=self.examples.get((player, kind), ""))
            for player, kind in sorted(self.cells)
        ]


def call_head(trace: Any) -> SimpleNamespace:
    """What :meth:`CallErrorTally.add` reads of a trace, alone (small enough to send between processes): its
    player, run key and infrastructure error, and its model calls that recorded an error."""
    return SimpleNamespace(
        agent=SimpleNamespace(name=trace.agent.name) if trace.agent is not None else None, run_key=trace.run_key,
        infra_error=trace.infra_error,
        model_calls=[SimpleNamespace(purpose=c.purpose, error=c.error) for c in trace.model_calls if c.error],
    )


def call_error_rows(heads: Iterable[Any]) -> list[CallErrorRow]:
    """The rows of the traces that count (one per cell), sorted by player and kind."""
    tally = CallErrorTally()
    for head in heads:
        tally.add(head)
    return tally.rows()


def call_error_view(rows: list[CallErrorRow]) -> TableView:
    """The table a report prints (empty rows: no call failed)."""
    return TableView(
        title="Model-call errors: calls that got no usable answer (cells left out of every metric until played again)",
        columns=["player", "kind", "calls", "cells", "left out", "example"],
        rows=[[r.player, r.kind, str(r.calls), str(r.cells), str(r.cells_left_out), r.example] for r in rows],
        numeric=[False, False, True, True, True, False],
    )


def call_error_lines(rows: list[CallErrorRow]) -> list[str]:
    """One summary line for a report: the errors by kind, and the cells left out (nothing when none failed)."""
    if not rows:
        return []
    by_kind: Counter[str] = Counter()
    for row in rows:
        by_kind[row.kind] += row.calls or row.cells
    left_out = sum(row.cells_left_out for row in rows)
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(by_kind.items()))
    return [f"model-call errors: {kinds}; cells left out of every metric (infrastructure errors): {left_out}"]
