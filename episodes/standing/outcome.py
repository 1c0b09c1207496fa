"""Whether a standing run's action outcome is right for its cell: the environment's reward and the judges' signal.

This is a pure function of the trace and the episode. It lives with the episodes (below the
environment and the judges) because both need it: the environment pays its terminal reward from it,
and :mod:`commitbench.judges.standing.signals` reports it.
"""

from __future__ import annotations

from commitbench.episodes.standing.episode import Episode
from commitbench.protocol import ToolCallRecord
from commitbench.traces import EpisodeTrace


def _normalise(value: object) -> str:
    return " ".join(str(value).lower().replace("#", "").split())


def args_match(target: dict[str, object], given: dict[str, object] | None) -> bool:
    """Whether the arguments of an executed action are the promised ones (case and spacing ignored)."""
    if given is None:
        return False
    return all(_normalise(given.get(k, "")) == _normalise(v) for k, v in target.items())


def executions(trace: EpisodeTrace, action_tool: str) -> list[ToolCallRecord]:
    """Calls of the promised action that were attempts: accepted, or refused by the world.

    A call rejected for bad arguments did nothing; a call the world refused was still an attempt.
    """
    return [c for c in trace.tool_calls() if c.tool == action_tool and c.error_kind in ("", "failed")]


def action_outcome_correct(trace: EpisodeTrace, episode: Episode) -> bool:
    """Executed on time with the promised arguments when the cell expects execution; never executed otherwise."""
    done = executions(trace, episode.action_tool.name)
    if not episode.expects_execute:
        return not done
    first = done[0] if done else None
    return bool(first and first.step >= episode.trigger_step and args_match(episode.target_args, first.arguments))
