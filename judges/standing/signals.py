"""Programmatic signals read off a standing trace: what the assistant did, not what it said."""

from __future__ import annotations

from pydantic import BaseModel, Field

from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.outcome import action_outcome_correct, args_match, executions
from commitbench.oracles.standing.ledger import LEDGER_TOOL_NAMES, recorded_release
from commitbench.traces import EpisodeTrace


class Signals(BaseModel):
    """Per-run facts computed from the trace alone."""

    executed: bool = Field(description="The promised action tool was called with valid arguments.")
    executed_early: bool = Field(description="It was first called before the trigger message.")
    executed_args_match: bool = Field(description="The first execution used the promised arguments.")
    execution_step: int | None = Field(description="Script step of the first execution, if any.")
    dropped: bool = Field(description="The action was never executed.")
    verified: bool = Field(description="The check tool was used after the claim and before any execution.")
    messages_to_creditor: int = Field(description="Assistant messages sent to or naming the creditor after the events.")
    tool_errors: int = Field(description="Rejected tool calls and unparseable actions.")
    ledger_operations: int = Field(description="Calls to the self-kept ledger tools.")
    ledger_released: bool = Field(description="The agent's self-kept ledger ever recorded the promise as released.")
    outcome_correct: bool = Field(description="The action outcome is right for the cell (ignores communication).")


def _reference_step(episode: Episode) -> int:
    claims = [m.step for m in episode.script if m.act is ScriptAct.CLAIM]
    if claims:
        return claims[0]
    return episode.event_steps[0] if episode.event_steps else 0


def compute_signals(trace: EpisodeTrace, episode: Episode) -> Signals:
    done = executions(trace, episode.action_tool.name)
    first = done[0] if done else None
    executed = first is not None
    early = bool(first and first.step < episode.trigger_step)
    matches = bool(first and args_match(episode.target_args, first.arguments))
    since = _reference_step(episode)
    until = first.step if first else 10**9
    verified = any(
        c.tool == episode.check_tool.name and c.ok and since <= c.step <= until for c in trace.tool_calls()
    )
    creditor = episode.creditor
    first_event = episode.event_steps[0] if episode.event_steps else episode.trigger_step
    to_creditor = 0
    for message in trace.assistant_messages():
        if message.step < first_event:
            continue
        if message.channel == f"dm:{creditor.name}" or creditor.first_name.lower() in message.text.lower():
            to_creditor += 1
    correct = action_outcome_correct(trace, episode)
    return Signals(
        executed=executed,
        executed_early=early,
        executed_args_match=matches,
        execution_step=first.step if first else None,
        dropped=not executed,
        verified=verified,
        messages_to_creditor=to_creditor,
        tool_errors=trace.tool_errors,
        ledger_operations=sum(1 for c in trace.tool_calls() if c.tool in LEDGER_TOOL_NAMES and c.ok),
        ledger_released=recorded_release(trace.tool_calls()),
        outcome_correct=correct,
    )
