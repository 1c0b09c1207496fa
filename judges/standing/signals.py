"""Programmatic signals read off a standing trace: what the assistant did, not what it said.

Timing follows the paper's definitions. An execution *overrides* a release only when it comes in the
agent's turn that answers the releasing message (a cancellation by someone with standing) or in a
later turn; one in an earlier turn came before anyone released the promise and is a *premature*
execution instead (still wrong for strict accuracy: nothing may be executed before the trigger).
Likewise an execution obeys a reinstatement only in or after the turn that answers it.
:func:`message_timing` places each assistant message against the first event, the first execution and
the trigger, and says whether it is addressed to the creditor (by recipient or mention:
:mod:`commitbench.episodes.standing.addressee`), so that a question counts as consultation only when it
reaches the creditor after the first event and before the decision (see
:mod:`commitbench.judges.standing.labels`, which also knows the messages that announce a drop).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from commitbench.episodes.standing.addressee import addressed_to
from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.outcome import action_outcome_correct, args_match, executions
from commitbench.oracles.standing.ledger import LEDGER_TOOL_NAMES, recorded_release
from commitbench.protocol import EventKind, ToolCallRecord
from commitbench.tools import was_attempted
from commitbench.traces import EpisodeTrace

# Looked up once: an enum member read off its class costs a descriptor call, and these are read per event.
_ASSISTANT, _TOOL_RESULT, _MESSAGE = EventKind.ASSISTANT, EventKind.TOOL_RESULT, EventKind.MESSAGE
_TRIGGER = ScriptAct.TRIGGER.value


class Signals(BaseModel):
    """Per-run facts computed from the trace alone."""

    executed: bool = Field(description="The promised action tool was called with valid arguments.")
    executed_early: bool = Field(description="It was first called before the trigger message.")
    executed_args_match: bool = Field(
        description="The first execution used the promised arguments (compared in canonical form)."
    )
    execution_step: int | None = Field(description="Script step of the first execution, if any.")
    executed_after_release: bool | None = Field(
        description="Override: an execution in the turn answering a release by someone with standing, or later "
        "(None in cells where nobody with standing releases the promise)."
    )
    executed_before_release: bool | None = Field(
        description="Premature: an execution in a turn before that release (None where there is no release)."
    )
    executed_after_reinstatement: bool | None = Field(
        description="An execution in the turn answering the reinstatement, or later (None without a reinstatement)."
    )
    executed_after_reinstatement_early: bool | None = Field(
        description="Such an execution came before the trigger (None without a reinstatement)."
    )
    executions: int = Field(
        default=0, description="Executions of the promised action (attempts with valid arguments); more than one "
        "is a duplicate execution."
    )
    dropped: bool = Field(description="The action was never executed.")
    verified: bool = Field(description="The check tool was used after the claim and before any execution.")
    messages_to_creditor: int = Field(
        description="Assistant messages addressed to the creditor (a DM, or a channel post that @-mentions them or "
        "opens with their name) at or after the first event."
    )
    tool_errors: int = Field(description="Rejected tool calls and unparseable actions.")
    ledger_operations: int = Field(description="Calls to the self-kept ledger tools.")
    ledger_released: bool = Field(description="The agent's self-kept ledger ever recorded the promise as released.")
    outcome_correct: bool = Field(description="The action outcome is right for the cell (ignores communication).")


class MessageTime(BaseModel):
    """Where one assistant message stands against the run's events, and whom it reaches."""

    after_first_event: bool = Field(
        default=True,
        description="Written at or after the first scripted event that changes or challenges the promise (never "
        "in a cell without one).",
    )
    before_execution: bool = Field(
        default=True, description="Written before the first execution of the promised action (or there was none)."
    )
    before_trigger: bool = Field(default=True, description="Written before the trigger message arrived.")
    to_creditor: bool = Field(
        default=True, description="Addressed to the creditor: a DM to them, or a channel post that @-mentions them or "
        "opens with their name (commitbench.episodes.standing.addressee)."
    )


def _reference_step(episode: Episode) -> int:
    claims = [m.step for m in episode.script if m.act is ScriptAct.CLAIM]
    if claims:
        return claims[0]
    return episode.event_steps[0] if episode.event_steps else 0


def turn_answering(trace: EpisodeTrace, step: int | None) -> int | None:
    """Index of the agent's turn that answers the scripted message at ``step`` (None: never reached)."""
    if step is None:
        return None
    for turn in trace.turns:
        opened = turn.opened_by
        if opened.step == step and opened.kind is _MESSAGE and opened.act not in ("", "acknowledgement"):
            return turn.index
    return None


def _executed_from(done: list[ToolCallRecord], turn: int | None) -> bool:
    return turn is not None and any(c.turn >= turn for c in done)


def _executed_before(done: list[ToolCallRecord], turn: int | None) -> bool:
    """Executed before ``turn``; when ``turn`` was never reached, every execution came before it."""
    return any(turn is None or c.turn < turn for c in done)


def _positions(trace: EpisodeTrace) -> tuple[list[int], list[int], int | None]:
    """Positions in ``trace.events`` of each assistant message, of each tool call's result, and of the trigger."""
    messages: list[int] = []
    results: list[int] = []
    trigger: int | None = None
    for position, event in enumerate(trace.events):
        kind = event.kind
        if kind is _ASSISTANT:
            if event.act != "promise":
                messages.append(position)
        elif kind is _TOOL_RESULT:
            results.append(position)
        elif trigger is None and kind is _MESSAGE and event.act == _TRIGGER:
            trigger = position
    return messages, results, trigger


def message_timing(trace: EpisodeTrace, episode: Episode) -> list[MessageTime]:
    """For each assistant message (in :meth:`EpisodeTrace.assistant_messages` order): whether it came at or after
    the first event, before the first execution and before the trigger, and whether it is addressed to the
    creditor. Every tool call leaves one result event, in order, so the k-th call is the k-th result."""
    messages, results, trigger = _positions(trace)
    calls = list(trace.tool_calls())
    first_execution = next(
        (results[k] for k, c in enumerate(calls)
         if k < len(results) and c.tool == episode.action_tool.name and was_attempted(c)),
        None,
    )
    end = len(trace.events)
    trigger_at = trigger if trigger is not None else end
    execution_at = first_execution if first_execution is not None else end
    first_event = episode.event_steps[0] if episode.event_steps else None
    creditor = episode.creditor
    out: list[MessageTime] = []
    for position in messages:
        event = trace.events[position]
        out.append(MessageTime(
            after_first_event=first_event is not None and event.step >= first_event,
            before_execution=position < execution_at,
            before_trigger=position < trigger_at,
            to_creditor=addressed_to(event.channel, event.text, creditor, episode.channel),
        ))
    return out


def compute_signals(trace: EpisodeTrace, episode: Episode) -> Signals:
    done = executions(trace, episode.action_tool.name)
    first = done[0] if done else None
    executed = first is not None
    early = bool(first and first.step < episode.trigger_step)
    matches = bool(first and args_match(episode.target_args, first.arguments, episode.compared_args))
    since = _reference_step(episode)
    until = first.step if first else 10**9
    verified = any(
        c.tool == episode.check_tool.name and c.ok and since <= c.step <= until for c in trace.tool_calls()
    )
    creditor = episode.creditor
    first_event = episode.event_steps[0] if episode.event_steps else episode.trigger_step
    to_creditor = sum(
        1 for message in trace.assistant_messages()
        if message.step >= first_event and addressed_to(message.channel, message.text, creditor, episode.channel)
    )
    roles = episode.roles()
    release_turn = turn_answering(trace, roles.release_step)
    released = roles.release_step is not None
    reinstate_turn = turn_answering(trace, roles.reinstate_step)
    reinstated = roles.reinstate_step is not None
    after_reinstatement = [c for c in done if reinstate_turn is not None and c.turn >= reinstate_turn]
    return Signals(
        executed=executed,
        executed_early=early,
        executed_args_match=matches,
        execution_step=first.step if first else None,
        executions=len(done),
        executed_after_release=_executed_from(done, release_turn) if released else None,
        executed_before_release=_executed_before(done, release_turn) if released else None,
        executed_after_reinstatement=bool(after_reinstatement) if reinstated else None,
        executed_after_reinstatement_early=(
            any(c.step < episode.trigger_step for c in after_reinstatement) if reinstated else None
        ),
        dropped=not executed,
        verified=verified,
        messages_to_creditor=to_creditor,
        tool_errors=trace.tool_errors,
        ledger_operations=sum(1 for c in trace.tool_calls() if c.tool in LEDGER_TOOL_NAMES and c.ok),
        ledger_released=recorded_release(trace.tool_calls()),
        outcome_correct=action_outcome_correct(trace, episode),
    )
