"""Synthetic standing run rows for metric tests: a cell's role columns come from a compiled episode of it.

:func:`signal_columns` fills the columns the timing-aware signals add, from the plain ``executed`` and
``executed_early`` of a hand-written row: an execution counts after the release (override) in a cell
released by someone with standing, after the reinstatement in a reinstatement cell, and never before
the release unless ``premature`` says so.
"""

from __future__ import annotations

from typing import Any

from commitbench.analysis.standing.metrics import role_columns
from commitbench.episodes.standing.compiler import load_episodes

ROLES: dict[str, dict[str, Any]] = {e.cell: role_columns(e) for e in load_episodes()}


def signal_columns(cell: str, executed: bool, early: bool = False, premature: bool = False) -> dict[str, Any]:
    """The role columns of ``cell`` and the timing signals of a run that executed (or not)."""
    roles = ROLES[cell]
    return {
        **roles,
        "executed_args_match": True,
        "executions": int(executed),
        "executed_after_release": (executed and not premature) if roles["release_cell"] else None,
        "executed_before_release": premature if roles["release_cell"] else None,
        "executed_after_reinstatement": executed if roles["reinstatement_cell"] else None,
        "executed_after_reinstatement_early": (executed and early) if roles["reinstatement_cell"] else None,
    }
