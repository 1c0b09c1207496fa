"""What interventions hand an environment at reset: prompt sections, tools, settings, recorded facts.

Wrappers never reach into the environment they wrap. An intervention that adds a paragraph to the
system prompt, a tool, or a setting does so through ``reset(options=...)``: it adds an
:class:`EnvExtras` under the key :data:`EXTRAS_KEY` with :func:`add_extras` and passes the options on.
Because the outermost wrapper's ``reset`` runs first, every wrapper of a stack has added its part
by the time the base environment reads :func:`extras_of`. The environment applies all of it, records
it in the trace (prompt, factors, prompt hashes) and shows the agent the result.

Each environment documents the ``settings`` keys it understands (the follow-up environment's
``variant``, say) and refuses any other, so a misspelled setting is an error, never a silent no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.tools import Tool

__all__ = ["EXTRAS_KEY", "EnvExtras", "PromptSection", "add_extras", "extras_of"]

EXTRAS_KEY = "commitbench_extras"


class PromptSection(BaseModel):
    """A block of the system prompt that an intervention adds (or that replaces the episode's own)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    source: str = Field(description="Name of the intervention that adds it.")
    order: int = Field(description="Position among the added sections (lower first): a fixed slot order.")
    text: str = Field(default="", description="The section's text, when it is the same for every episode.")
    render: Callable[[Any], str] | None = Field(
        default=None, description="Renders the text from the episode, when it depends on the episode."
    )
    replaces: str = Field(
        default="", description="Name of a paragraph of the environment's own prompt this section replaces."
    )

    def text_for(self, episode: Any) -> str:
        return (self.render(episode) if self.render is not None else self.text).strip()


class EnvExtras(BaseModel):
    """Everything the interventions of one stack hand the environment at reset."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    sections: tuple[PromptSection, ...] = Field(default=(), description="System-prompt sections.")
    tools: tuple[Tool, ...] = Field(default=(), description="Extra tools (handlers bound to the intervention).")
    settings: dict[str, Any] = Field(default_factory=dict, description="Environment settings (documented per env).")
    factors: dict[str, str | int] = Field(default_factory=dict, description="Design factors to record on the trace.")
    prompt_hashes: dict[str, str] = Field(
        default_factory=dict, description="sha256 of the texts interventions show, to record on the trace."
    )
    privileged: tuple[str, ...] = Field(
        default=(), description="Wrappers that asked for the script annotations through the privileged channel."
    )


def extras_of(options: Mapping[str, Any] | None) -> EnvExtras:
    """The extras in reset options (empty when there are none)."""
    value = (options or {}).get(EXTRAS_KEY)
    if value is None:
        return EnvExtras()
    if not isinstance(value, EnvExtras):
        raise TypeError(f"reset option {EXTRAS_KEY!r} must be EnvExtras, got {type(value).__name__}")
    return value


def _merge(what: str, left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    clash = sorted(k for k in set(left) & set(right) if left[k] != right[k])
    if clash:
        raise ValueError(f"two interventions set different {what} for {', '.join(clash)}")
    return {**left, **right}


def add_extras(options: Mapping[str, Any] | None, extras: EnvExtras) -> dict[str, Any]:
    """New reset options with ``extras`` added to those already there (the input is not changed)."""
    current = extras_of(options)
    merged = EnvExtras(
        sections=(*current.sections, *extras.sections),
        tools=(*current.tools, *extras.tools),
        settings=_merge("settings", current.settings, extras.settings),
        factors=_merge("factors", current.factors, extras.factors),
        prompt_hashes={**current.prompt_hashes, **extras.prompt_hashes},
        privileged=(*current.privileged, *extras.privileged),
    )
    return {**(options or {}), EXTRAS_KEY: merged}
