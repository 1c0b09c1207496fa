"""What every suite's episode filter does after choosing by design factors: keep named ids, cap the count."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, TypeVar


class HasId(Protocol):
    @property
    def id(self) -> str: ...


E = TypeVar("E", bound=HasId)


def narrow(chosen: Sequence[E], known: Collection[str], ids: Sequence[str] | None, limit: int | None) -> list[E]:
    """``chosen`` kept to ``ids`` (each must be among ``known``) and to its first ``limit`` episodes.

    Raises ValueError naming unknown ids, and when nothing is left.
    """
    out = list(chosen)
    if ids is not None:
        unknown = sorted(set(ids) - set(known))
        if unknown:
            raise ValueError(f"unknown episode id(s) in this selection: {', '.join(unknown[:5])}")
        wanted = set(ids)
        out = [e for e in out if e.id in wanted]
    if limit is not None:
        out = out[:limit]
    if not out:
        raise ValueError("no episode matches the episode filter")
    return out
