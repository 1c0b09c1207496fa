"""What both environments do the same way: compose the system prompt, run tool calls, build observations.

* :func:`compose_system_prompt`: the environment's own prompt, with the paragraphs interventions
  replace swapped out and their added sections appended in slot order;
* :func:`run_tool`: dispatch one call through the episode's :class:`~commitbench.tools.Toolbox`
  and count agent errors on the trace;
* :func:`observation` / :func:`privileged_info`: what the agent sees of events (no script
  annotations), and the annotations for the explicit privileged channel when a wrapper asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commitbench.extras import EnvExtras, PromptSection
from commitbench.protocol import AgentAction, Event, ToolCallRecord
from commitbench.tools import Toolbox, ToolErrorKind, is_agent_error
from commitbench.traces import EpisodeTrace

PRIVILEGED_KEY = "script"


def compose_system_prompt(
    head: str, own: Sequence[tuple[str, str]], sections: Sequence[PromptSection], episode: Any, full: str
) -> str:
    """The system prompt under the interventions' sections.

    ``head`` is the environment's prompt without its named paragraphs ``own`` (name, text); a
    section whose ``replaces`` names one of them takes its place, every other section follows in
    slot order. With no section at all the result is ``full``, the environment's own prompt, exactly.
    """
    if not sections:
        return full
    known = {name for name, _ in own}
    unknown = sorted({s.replaces for s in sections if s.replaces and s.replaces not in known})
    if unknown:
        raise ValueError(f"an intervention replaces the paragraph(s) {unknown}, which this prompt does not have")
    replacing = {s.replaces: s for s in sections if s.replaces}
    parts = [head]
    for name, text in own:
        section = replacing.get(name)
        parts.append(section.text_for(episode) if section is not None else text)
    added = sorted((s for s in sections if not s.replaces), key=lambda s: s.order)
    parts.extend(s.text_for(episode) for s in added)
    return "\n\n".join(p.strip() for p in parts if p.strip())


def record_extras(trace: EpisodeTrace, extras: EnvExtras) -> None:
    """Write what the interventions changed onto the trace (factors and prompt hashes)."""
    trace.factors.update(extras.factors)
    trace.prompt_hashes.update(extras.prompt_hashes)


def check_settings(extras: EnvExtras, known: Mapping[str, str]) -> None:
    """Refuse settings the environment does not understand (``known``: name -> meaning)."""
    unknown = sorted(set(extras.settings) - set(known))
    if unknown:
        described = ", ".join(f"{k} ({v})" for k, v in known.items()) or "none"
        raise ValueError(f"unknown environment setting(s) {unknown}; this environment knows: {described}")


def run_tool(toolbox: Toolbox, act: AgentAction, trace: EpisodeTrace, step: int, turn: int) -> ToolCallRecord:
    """Dispatch one tool call and count it on the trace when the agent got it wrong; never raises."""
    record = toolbox.dispatch(act, step, turn)
    if is_agent_error(record):
        trace.tool_errors += 1
        if record.error_kind == ToolErrorKind.INVALID_ACTION.value:
            trace.invalid_actions += 1
    return record


def observation(events: Sequence[Event], context: str = "") -> dict[str, Any]:
    """The observation of a step: what a participant sees of the events, and the context text."""
    return {"events": tuple(e.to_obs() for e in events), "context": context}


def privileged_info(extras: EnvExtras, events: Sequence[Event], **facts: Mapping[str, Any]) -> dict[str, Any]:
    """``{"script": {...}}`` for ``info`` when a wrapper asked for the privileged channel, else ``{}``.

    ``annotations`` lines up with the observation's events; each keyword adds one structured fact
    the script knows (the standing environment's ``promise``, the follow-up environment's ``episode``).
    """
    if not extras.privileged:
        return {}
    script: dict[str, Any] = {"annotations": tuple(e.annotation() for e in events)}
    script.update({name: dict(value) for name, value in facts.items()})
    return {PRIVILEGED_KEY: script}
