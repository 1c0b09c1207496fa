"""The write-claim guard as an intervention on either environment.

Contract
--------
* ``reset`` passes through unchanged and forgets the previous episode's firings.
* ``step(action)``: every action except a final reply passes through unchanged. A reply is checked
  with :func:`commitbench.claimguard.guard.should_guard`, where

  - *executed tool calls* are the calls of the current turn that executed, as the guard saw their
    results (with ``count="writes"`` only calls of write tools count, as ``info["write_tools"]``
    names them at reset);
  - *write context* is every turn (``context="always"``), or only the turns that
    :func:`~commitbench.claimguard.routing.route_turn` plans as write turns from the message that
    opened the turn and the assistant's message before it (``context="routed"``);
  - *approval pending* is the latest ``info["approval_pending"]`` of the environment (False when
    the environment has no approvals, as the current ones do not).

  When the guard fires, the reply the environment receives is the honest replacement, marked as a
  :class:`~commitbench.protocol.Revision` (``kind="claim_guarded"``, the original kept), which the
  environment records on the turn and on the posted message; that is the only thing this wrapper
  changes.
* ``info["claim_guard"]`` is set on every reply step: ``fired``, ``reason``, ``explanation``, the
  matched ``claim`` and, when fired, the ``original`` reply, the ``replacement`` and a ``nudge`` for
  the next model call. ``firings`` lists every firing of the episode; ``take_nudge()`` hands the
  pending nudge to the agent once.

The registry entry ``claim_guard`` takes the parameters ``context`` and ``count``; the follow-up
suite's guard fix is ``claim_guard[count=writes]`` (a read tool does not back a write claim).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard.guard import ClaimMatch, GuardDecision, GuardReason, should_guard
from commitbench.claimguard.routing import route_turn
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.oracles.base import Intervention, InterventionEntry
from commitbench.protocol import ActionKind, Revision, parse_action, reply

CONTEXT_MODES = ("always", "routed")
COUNT_MODES = ("any", "writes")
GUARDED_ACT = "claim_guarded"


class GuardFiring(BaseModel):
    """One reply the guard replaced."""

    model_config = ConfigDict(frozen=True)

    turn: int = Field(description="Index of the assistant turn whose reply was replaced.")
    original: str = Field(description="The reply the agent sent.")
    replacement: str = Field(description="The reply the environment received instead.")
    claim: ClaimMatch = Field(description="The completed-write claim that triggered the guard.")
    reason: GuardReason = Field(description="Always unbacked_claim for a firing.")
    explanation: str = Field(description="Why, in one sentence.")


class ClaimGuard(Intervention):
    """Replaces a final reply that claims a completed write when no tool executed in the turn."""

    kind: ClassVar[str] = "claim_guard"
    slot: ClassVar[str] = "claim_guard"
    slot_plural: ClassVar[str] = "claim guards"
    order: ClassVar[int] = 90
    env_ids: ClassVar[frozenset[str]] = frozenset({STANDING_ENV_ID, FOLLOWUP_ENV_ID})

    def __init__(self, env: gym.Env[Any, Any], context: str = "always", count: str = "any") -> None:
        if context not in CONTEXT_MODES:
            raise ValueError(f"context must be one of {CONTEXT_MODES}, got {context!r}")
        if count not in COUNT_MODES:
            raise ValueError(f"count must be one of {COUNT_MODES}, got {count!r}")
        self.context = context
        self.count = count
        super().__init__(env, context=context, count=count)
        self.firings: list[GuardFiring] = []
        self.pending_nudge: str | None = None
        self._approval_pending = False
        self._write_tools: frozenset[str] = frozenset()
        self._can_write = True
        self._executed = 0
        self._executed_writes = 0
        self._opener = ""
        self._before_opener: str | None = None
        self._last_assistant: str | None = None
        self._turn = 0
        self._decision: GuardDecision | None = None
        self._original = ""

    def param(self) -> str:
        params = [p for p, default in ((self.context, "always"), (self.count, "any")) if p != default]
        return ",".join(params)

    def take_nudge(self) -> str | None:
        """The nudge for the next model call, once (None when the guard has not fired since)."""
        nudge, self.pending_nudge = self.pending_nudge, None
        return nudge

    # ------------------------------------------------------------------ what the guard sees
    def begin(self, info: dict[str, Any]) -> None:
        self.firings = []
        self.pending_nudge = None
        self._approval_pending = bool(info.get("approval_pending", False))
        self._write_tools = frozenset(info.get("write_tools") or ())
        self._can_write = bool(self._write_tools) if "write_tools" in info else True
        self._executed = self._executed_writes = 0
        self._opener, self._before_opener, self._last_assistant = "", None, None
        self._turn = int(info.get("turn") or 0)

    def observe(self, event: dict[str, Any], annotation: dict[str, Any] | None) -> None:
        kind = event.get("kind")
        if kind == "message":  # a message to answer opens a turn: the calls before it back nothing
            self._opener = str(event.get("text", ""))
            self._before_opener = self._last_assistant
            self._executed = self._executed_writes = 0
        elif kind == "assistant":
            self._last_assistant = str(event.get("text", ""))
        elif kind == "tool_result" and int(event.get("ok", 0)) == 1:
            self._executed += 1
            if event.get("tool") in self._write_tools:
                self._executed_writes += 1

    # ------------------------------------------------------------------ the decision
    def decide(self, text: str) -> GuardDecision:
        """The guard's decision for ``text`` as the reply of the current turn."""
        executed = self._executed if self.count == "any" else self._executed_writes
        write_context = True
        if self.context == "routed":
            write_context = route_turn(self._opener, self._before_opener, can_write=self._can_write).write_context
        return should_guard(
            text, executed_tool_calls=executed, approval_pending=self._approval_pending, write_context=write_context
        )

    def act(self, action: Any) -> Any:
        self._decision = None
        act = parse_action(action)
        if act.kind is not ActionKind.REPLY:
            return action
        text = act.text or ""
        decision = self.decide(text)
        self._decision, self._original = decision, text
        self._last_assistant = text
        if not decision.guard:
            return action
        assert decision.replacement is not None and decision.claim is not None
        self.firings.append(
            GuardFiring(
                turn=self._turn, original=text, replacement=decision.replacement, claim=decision.claim,
                reason=decision.reason, explanation=decision.explanation,
            )
        )
        self.pending_nudge = decision.nudge
        self._last_assistant = decision.replacement
        revision = Revision(by=self.name, kind=GUARDED_ACT, original=text, note=decision.explanation)
        return reply(decision.replacement, revision=revision)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        self._approval_pending = bool(info.get("approval_pending", False))
        if isinstance(info.get("turn"), int):
            self._turn = info["turn"]
        decision = self._decision
        if decision is not None:
            record = self._record(decision, fired=decision.guard)
            if decision.guard:
                record["original"] = self._original
            info = {**info, "claim_guard": record}
        return obs, reward, terminated, truncated, info

    @staticmethod
    def _record(decision: GuardDecision, fired: bool) -> dict[str, Any]:
        return {
            "fired": fired,
            "reason": decision.reason.value,
            "explanation": decision.explanation,
            "claim": decision.claim.model_dump(mode="json") if decision.claim is not None else None,
            "replacement": decision.replacement,
            "nudge": decision.nudge,
        }


def claim_guard_factory(
    env: gym.Env[Any, Any], params: Mapping[str, Any], services: Mapping[str, Any] | None = None
) -> ClaimGuard:
    """Registry factory: ``params`` may set ``context`` and ``count``; anything else is an error."""
    unknown = sorted(set(params) - {"context", "count"})
    if unknown:
        raise ValueError(f"claim_guard takes the parameters context and count, not {', '.join(unknown)}")
    return ClaimGuard(env, **params)


ENTRIES: tuple[InterventionEntry, ...] = (
    InterventionEntry(
        "claim_guard", ClaimGuard, claim_guard_factory, "the deterministic write-claim guard",
        params=("context", "count"),
    ),
)
