"""Episodes of the follow-up suite: one request in one setup, variant and persona, and how a selection is made.

Personas are crossed: unless a selection names personas, every request is played under both, whatever
persona its text was written for. Playing each request only under its own persona would confound persona
with request category (almost every callback is written for the support persona), so a persona or
category contrast could not be read from the results. A full run is therefore
requests x 5 setups x 2 variants x 2 personas episodes per model and arm (:func:`full_run_size`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from commitbench.episodes.followup.profile import FOLLOWUP_CHOICES, FollowupSettings
from commitbench.episodes.followup.requests import FollowupRequest
from commitbench.episodes.followup.splits import split_requests
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId, Split, Variant
from commitbench.episodes.selection import narrow
from commitbench.profiles import ProfiledSelection

FOLLOW_THROUGH_SUFFIX = "follow-through"


class FollowUpEpisode(BaseModel):
    """One request in one setup, variant and persona."""

    model_config = ConfigDict(frozen=True)

    request: FollowupRequest = Field(description="The user's request with its context.")
    setup: SetupId = Field(description="Which tools exist and what persists.")
    variant: Variant = Field(description="Whether the system prompt states what persists.")
    persona: Persona = Field(description="Generic assistant or utility support agent.")
    doability: Doability = Field(description="Whether the setup can fully serve the request.")
    follow_through: bool = Field(
        default=False,
        description="Play on after the reply: what the agent scheduled comes due and must be delivered "
        "(docs/follow-through.md). Part of the id, so such runs never mix with single-turn ones.",
    )
    settings: FollowupSettings = Field(
        default_factory=FollowupSettings,
        description="The profile's design choices the episode plays under (docs/validity.md); other settings "
        "than the project's are part of the id.",
    )

    @property
    def base_id(self) -> str:
        """request:setup:variant:persona[:profile], whatever the mode (':paper' under the paper profile)."""
        tag = self.settings.tag()
        base = f"{self.request.id}:{self.setup.value}:{self.variant.value}:{self.persona.value}"
        return f"{base}:{tag}" if tag else base

    @property
    def id(self) -> str:
        return f"{self.base_id}:{FOLLOW_THROUGH_SUFFIX}" if self.follow_through else self.base_id

    def factors(self) -> dict[str, str | int]:
        return {
            "request_id": self.request.id,
            "category": self.request.category.value,
            "source": self.request.source.dataset.value,
            "setup": self.setup.value,
            "variant": self.variant.value,
            "persona": self.persona.value,
            "doability": self.doability.value,
            "required_capabilities": ",".join(c.value for c in self.request.required_capabilities),
            **(self._follow_through_factors() if self.follow_through else {}),
        }

    def _follow_through_factors(self) -> dict[str, str | int]:
        """What the checker needs of the request in the follow-through mode (recorded on the trace)."""
        factors: dict[str, str | int] = {"follow_through": 1, "request_text": self.request.text}
        if self.request.event is not None:
            factors["event_at"] = self.request.event.at.isoformat(timespec="minutes")
        if self.request.second_session is not None:
            factors["second_session_at"] = self.request.second_session.at.isoformat(timespec="minutes")
        if self.request.facts is not None:
            factors["delivery_facts"] = 1
        return factors


# ----------------------------------------------------------------------------------- selection
def _as_list(value: Any, enum: type[Enum], what: str) -> list[Any] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, (str, enum)) else list(value)
    out = []
    for item in items:
        try:
            out.append(enum(item))
        except ValueError:
            known = ", ".join(e.value for e in enum)
            raise ValueError(f"unknown {what} {item!r} (known: {known})") from None
    return out


def build_episodes(
    requests: Sequence[FollowupRequest],
    setups: Sequence[SetupId],
    variants: Sequence[Variant],
    personas: Sequence[Persona],
    doability: Callable[[FollowupRequest, SetupId], Doability],
    settings: FollowupSettings | None = None,
) -> list[FollowUpEpisode]:
    """Every (request, setup, variant, persona) combination: each request under every persona given."""
    if not personas:
        raise ValueError("at least one persona is needed (both: every request under each)")
    settings = settings or FollowupSettings()
    episodes = []
    for request, setup, variant in itertools.product(requests, setups, variants):
        for persona in personas:
            episodes.append(
                FollowUpEpisode(
                    request=request, setup=setup, variant=variant, persona=persona,
                    doability=doability(request, setup), settings=settings,
                )
            )
    return episodes


def select_followup_episodes(
    requests: Sequence[FollowupRequest] | None = None,
    setup: str | Sequence[str] | None = None,
    variant: str | Sequence[str] | None = None,
    persona: str | Sequence[str] | None = None,
    category: str | Sequence[str] | None = None,
    request_id: str | Sequence[str] | None = None,
    doability: Callable[[FollowupRequest, SetupId], Doability] | None = None,
    settings: FollowupSettings | None = None,
    split: str | Split | None = None,
) -> list[FollowUpEpisode]:
    """The episodes of a selection; an unknown setup, variant, persona, category, split or request id is an error.

    ``persona=None`` plays every request under both personas (crossed); ``variant=None`` plays the inferred one.
    ``settings`` are the profile's choices (default: the project's); they also pick the doability overrides.
    ``split`` keeps the requests of one split (:mod:`commitbench.episodes.followup.splits`; None: every request).
    """
    if requests is None:
        from commitbench.episodes.followup.requests import load_requests

        requests = load_requests()
    setups = _as_list(setup, SetupId, "setup") or list(SetupId)
    variants = _as_list(variant, Variant, "variant") or [Variant.INFERRED]
    personas = _as_list(persona, Persona, "persona") or list(Persona)
    categories = _as_list(category, RequestCategory, "category")
    if split is not None and not isinstance(split, Split) and split not in {s.value for s in Split}:
        raise ValueError(f"unknown split {split!r} (known: {', '.join(s.value for s in Split)})")
    chosen = split_requests(requests, split)
    if categories is not None:
        chosen = [r for r in chosen if r.category in categories]
    if request_id is not None:
        wanted = [request_id] if isinstance(request_id, str) else list(request_id)
        known = {r.id for r in chosen}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ValueError(f"unknown request id(s) {unknown} in this selection")
        chosen = [r for r in chosen if r.id in wanted]
    settings = settings or FollowupSettings()
    return build_episodes(chosen, setups, variants, personas, doability or _packaged_doability(settings), settings)


def full_run_size(requests: int) -> int:
    """Episodes of a full run (every setup, variant and persona) of ``requests`` requests, per model and arm."""
    return requests * len(SetupId) * len(Variant) * len(Persona)


def _packaged_doability(settings: FollowupSettings) -> Callable[[FollowupRequest, SetupId], Doability]:
    """The packaged matrix's doability under a profile's settings."""
    from commitbench.episodes.followup.doability import load_doability

    options = {name: value.value for name, value in settings}

    def lookup(request: FollowupRequest, setup: SetupId) -> Doability:
        return load_doability().lookup(request.id, request.category, setup, options)

    return lookup




class FollowupSelection(ProfiledSelection):
    """The follow-up suite's episode filter; every list is optional (null: all values)."""

    CHOICES = FOLLOWUP_CHOICES

    setups: list[SetupId] | None = Field(default=None, description="Setups C0-C4 (null: all five).")
    variants: list[Variant] | None = Field(default=None, description="inferred and/or stated (null: both).")
    personas: list[Persona] | None = Field(
        default=None, description="Personas every request is played under (null: both, crossed with every request)."
    )
    categories: list[RequestCategory] | None = Field(default=None, description="Request categories (null: all).")
    requests: list[str] | None = Field(default=None, description="Request ids, e.g. rem-001 (null: all).")
    split: Split | None = Field(
        default=None,
        description="train or test: the requests of one split, by source and category (docs/rl.md, 'TRL'; null: "
        "every request, as before the split existed).",
    )
    ids: list[str] | None = Field(
        default=None,
        description="Episode ids, request:setup:variant:persona (null: all); with or without the "
        "':follow-through' ending of the follow-through mode.",
    )
    limit: int | None = Field(default=None, ge=1, description="Keep only the first N matching episodes (null: all).")
    request_file: str | None = Field(
        default=None,
        description="A JSONL file of requests (the schema of the packaged requests.jsonl) played instead of the "
        "packaged set; doability comes from the packaged matrix by category.",
    )
    follow_through: bool = Field(
        default=False,
        description="The follow-through mode: after the reply, what the agent scheduled comes due on a simulated "
        "clock and must be delivered, and the checker grades whether each promise was kept (outcome labels are "
        "still taken on the first turn). Off: single-turn episodes, as in the original study. Episode ids carry "
        "':follow-through' when on.",
    )
    stated_paragraph: str | None = Field(
        default=None, description="The stated paragraph's facts, commitbench or paper (null: the profile's)."
    )
    monitoring_doability: str | None = Field(
        default=None,
        description="C2 doability of monitoring requests whose source no tool reads, commitbench (partial) or paper "
        "(doable); null: the profile's.",
    )

    @model_serializer(mode="wrap")
    def _without_default_split(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("split") is None:
            data.pop("split", None)  # a filter without a split keeps the config (and config hash) it always had
        return data

    def settings(self) -> FollowupSettings:
        """The design choices these episodes play under: the profile's, with the options set here."""
        return FollowupSettings.model_validate(self.options())

    def select(
        self,
        requests: Sequence[FollowupRequest] | None = None,
        doability: Callable[[FollowupRequest, SetupId], Doability] | None = None,
    ) -> list[FollowUpEpisode]:
        """The episodes this filter keeps, in a fixed order; raises ValueError on an unknown id or an empty result."""
        if requests is None and self.request_file is not None:
            from pathlib import Path

            from commitbench.episodes.followup.requests import load_requests_file

            path = Path(self.request_file)
            if not path.is_file():
                raise ValueError(f"request_file {path} does not exist")
            requests = load_requests_file(path)
        chosen = select_followup_episodes(
            requests,
            setup=[s.value for s in self.setups] if self.setups else None,
            variant=[v.value for v in self.variants] if self.variants else [v.value for v in Variant],
            persona=[p.value for p in self.personas] if self.personas else [p.value for p in Persona],
            category=[c.value for c in self.categories] if self.categories else None,
            request_id=self.requests,
            doability=doability,
            settings=self.settings(),
            split=self.split,
        )
        if self.follow_through:
            chosen = [e.model_copy(update={"follow_through": True}) for e in chosen]
        # An id may be given with or without the follow-through mode's ending.
        full = {e.base_id: e.id for e in chosen}
        ids = None if self.ids is None else [full.get(i, i) for i in self.ids]
        return narrow(chosen, {e.id for e in chosen}, ids, self.limit)
