"""Who may release a commitment.

The rule is fixed: the creditor, or a delegate the creditor named. A :class:`StandingPolicy`
can add parties (a workspace rule that lets an on-call lead cancel, say); it can never take
standing away from the creditor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from commitbench.ledger.models import Commitment, StandingBasis


@runtime_checkable
class StandingPolicy(Protocol):
    """Grants standing beyond the creditor and the creditor's delegates."""

    name: str

    def grants(self, commitment: Commitment, actor: str) -> bool: ...


class CreditorRule:
    """No one beyond the creditor and named delegates."""

    name = "creditor-rule"

    def grants(self, commitment: Commitment, actor: str) -> bool:
        return False


class AllowParties:
    """Also lets the listed parties release (optionally only within some scopes)."""

    def __init__(self, parties: Iterable[str], scopes: Iterable[str] | None = None, name: str = "") -> None:
        self.parties = frozenset(p.strip() for p in parties)
        self.scopes = frozenset(scopes) if scopes is not None else None
        self.name = name or "allow:" + ",".join(sorted(self.parties))

    def grants(self, commitment: Commitment, actor: str) -> bool:
        if self.scopes is not None and commitment.scope not in self.scopes:
            return False
        return actor.strip() in self.parties


def standing_of(commitment: Commitment, actor: str, policy: StandingPolicy) -> StandingBasis | None:
    """Why ``actor`` may release ``commitment``, or None when they may not."""
    who = actor.strip()
    if who == commitment.creditor:
        return StandingBasis.CREDITOR
    if who in commitment.delegates:
        return StandingBasis.DELEGATE
    if policy.grants(commitment, who):
        return StandingBasis.POLICY
    return None
