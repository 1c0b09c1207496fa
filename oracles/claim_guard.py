"""The write-claim guard as a gymnasium wrapper around any environment of the turn protocol.

Contract
--------
* ``reset`` passes through unchanged and forgets the previous episode's firings.
* ``step(action)``: every action except a final reply passes through unchanged. A reply is checked
  with :func:`commitbench.claimguard.guard.should_guard`, where

  - *executed tool calls* are the calls of the current turn that executed
    (``env.unwrapped.trace.turns[-1].calls`` with ``ok``; with ``count="writes"`` only calls of
    write tools count);
  - *write context* is every turn (``context="always"``), or only the turns that
    :func:`~commitbench.claimguard.routing.route_turn` plans as write turns from the message
    that opened the turn and the assistant's message before it (``context="routed"``);
  - *approval pending* is the latest ``info["approval_pending"]`` of the environment (False when
    the environment has no approvals, as the current ones do not).

  When the guard fires, the reply the environment receives is the honest replacement instead;
  that is the only thing this wrapper changes. The posted assistant event in the trace is marked
  ``act="claim_guarded"``.
* ``info["claim_guard"]`` is set on every reply step: ``fired``, ``reason``, ``explanation``, the
  matched ``claim`` and, when fired, the ``original`` reply, the ``replacement`` and a ``nudge`` for
  the next model call. ``firings`` lists every firing of the episode; ``take_nudge()`` hands the
  pending nudge to the agent once.

:func:`claim_guard_factory` is the ``(env, params) -> env`` factory for the intervention registry
(parameters ``context`` and ``count``); importing this module registers nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.claimguard.guard import ClaimMatch, GuardDecision, GuardReason, should_guard
from commitbench.claimguard.routing import route_turn
from commitbench.protocol import ActionKind, Event, EventKind, parse_action, reply

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


class ClaimGuard(gym.Wrapper[dict[str, Any], str, dict[str, Any], str], gym.utils.RecordConstructorArgs):
    """Replaces a final reply that claims a completed write when no tool executed in the turn."""

    def __init__(self, env: gym.Env[Any, Any], context: str = "always", count: str = "any") -> None:
        if context not in CONTEXT_MODES:
            raise ValueError(f"context must be one of {CONTEXT_MODES}, got {context!r}")
        if count not in COUNT_MODES:
            raise ValueError(f"count must be one of {COUNT_MODES}, got {count!r}")
        gym.utils.RecordConstructorArgs.__init__(self, context=context, count=count)
        gym.Wrapper.__init__(self, env)
        if not hasattr(env.unwrapped, "trace"):
            raise TypeError(
                f"ClaimGuard needs an environment that keeps a trace of the turn's tool calls "
                f"(env.unwrapped.trace); {type(env.unwrapped).__name__} has none"
            )
        self.context = context
        self.count = count
        self.firings: list[GuardFiring] = []
        self.pending_nudge: str | None = None
        self._approval_pending = False

    @property
    def name(self) -> str:
        """Stable identity of this wrapper's configuration, e.g. ``claim_guard`` or ``claim_guard:routed,writes``."""
        params = [p for p, default in ((self.context, "always"), (self.count, "any")) if p != default]
        return "claim_guard" + (":" + ",".join(params) if params else "")

    def take_nudge(self) -> str | None:
        """The nudge for the next model call, once (None when the guard has not fired since)."""
        nudge, self.pending_nudge = self.pending_nudge, None
        return nudge

    # ------------------------------------------------------------------ gymnasium
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.firings = []
        self.pending_nudge = None
        self._approval_pending = bool(info.get("approval_pending", False))
        return obs, info

    def step(self, action: Any):
        act = parse_action(action)
        trace = getattr(self.env.unwrapped, "trace", None)
        if act.kind is not ActionKind.REPLY or trace is None or not trace.turns:
            return self._pass(action)
        turn = trace.turns[-1]
        decision = self.decide(act.text or "", turn, trace.events)
        if not decision.guard:
            obs, reward, terminated, truncated, info = self._pass(action)
            info = {**info, "claim_guard": self._record(decision, fired=False)}
            return obs, reward, terminated, truncated, info
        assert decision.replacement is not None and decision.claim is not None
        firing = GuardFiring(
            turn=turn.index,
            original=act.text or "",
            replacement=decision.replacement,
            claim=decision.claim,
            reason=decision.reason,
            explanation=decision.explanation,
        )
        self.firings.append(firing)
        self.pending_nudge = decision.nudge
        events_before = len(trace.events)
        obs, reward, terminated, truncated, info = self._pass(reply(decision.replacement))
        for event in trace.events[events_before:]:
            if event.kind is EventKind.ASSISTANT and event.text == decision.replacement:
                event.act = GUARDED_ACT
                break
        record = {**self._record(decision, fired=True), "original": firing.original}
        return obs, reward, terminated, truncated, {**info, "claim_guard": record}

    # ------------------------------------------------------------------ the decision
    def decide(self, text: str, turn: Any, events: list[Event]) -> GuardDecision:
        """The guard's decision for ``text`` as the reply of ``turn`` (a TurnRecord)."""
        executed = sum(1 for call in turn.calls if call.ok and (self.count == "any" or call.is_write))
        return should_guard(
            text,
            executed_tool_calls=executed,
            approval_pending=self._approval_pending,
            write_context=self._write_context(turn, events),
        )

    def _write_context(self, turn: Any, events: list[Event]) -> bool:
        if self.context == "always":
            return True
        opened_by: Event = turn.opened_by
        previous = None
        seen_opening = False
        for event in reversed(events):
            if event is opened_by:
                seen_opening = True
            elif seen_opening and event.kind is EventKind.ASSISTANT:
                previous = event.text
                break
        tools = getattr(self.env.unwrapped, "tools", None)
        can_write = any(getattr(t, "is_write", False) for t in tools) if tools is not None else True
        return route_turn(opened_by.text, previous, can_write=can_write).write_context

    def _pass(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._approval_pending = bool(info.get("approval_pending", False))
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


def claim_guard_factory(env: gym.Env[Any, Any], params: Mapping[str, Any]) -> ClaimGuard:
    """Registry factory: ``params`` may set ``context`` and ``count``; anything else is an error."""
    unknown = sorted(set(params) - {"context", "count"})
    if unknown:
        raise ValueError(f"claim_guard takes the parameters context and count, not {', '.join(unknown)}")
    return ClaimGuard(env, **params)

