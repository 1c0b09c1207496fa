"""Which standing episodes to play: the suite's episode filter, and the selection it stands for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from commitbench.episodes.selection import narrow
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.profile import STANDING_CHOICES, StandingSettings
from commitbench.episodes.standing.spec import (
    Language,
    NotifyDeadline,
    PolicyWording,
    ReplyRule,
    TypeTexts,
    split_part,
)
from commitbench.profiles import ProfiledSelection


class StandingSelection(ProfiledSelection):
    """The standing suite's episode filter; every list is optional (null: all values)."""

    CHOICES = STANDING_CHOICES

    split: str | None = Field(
        default=None,
        description="dev, test or train (null: dev and test; 'commitbench run standing' plays test unless types are "
        "named). train is the training split: its own commitment types, people and chat, compiled only when named "
        "(docs/rl.md, 'Splits for training'); English only.",
    )
    cells: list[str] | None = Field(default=None, description="Cell ids, e.g. BASE, PEER-DIRECT.")
    types: list[str] | None = Field(default=None, description="Commitment type ids, e.g. book_room.")
    policies: list[str] | None = Field(default=None, description="explicit and/or silent.")
    gaps: list[int] | None = Field(default=None, description="Filler gaps (1 and/or 20).")
    surfaces: list[int] | None = Field(default=None, description="Surface wordings (0, 1, 2): names, channel, text.")
    ids: list[str] | None = Field(default=None, description="Episode ids (the factors above must also match).")
    limit: int | None = Field(default=None, ge=1, description="Keep only the first N matching episodes (smoke runs).")
    language: list[Language] | None = Field(
        default=None,
        description="The episodes' language: en, tr, or both (null: en). Each Turkish episode is the twin of an "
        "English one; with both, the report pairs them (docs/languages.md).",
    )
    data: str | None = Field(
        default=None,
        description="An episode data directory (null: the shipped one, episodes/data/standing). A relative path "
        "is made absolute against the working directory, so the manifest names the directory played.",
    )
    creditor_replies: ReplyRule | None = Field(
        default=None,
        description="When the creditor answers (null: the profile's): per_event (an answer after each event that "
        "changes or challenges the promise) or paper (the paper's single answer, then a thumbs-up).",
    )
    policy_wording: PolicyWording | None = Field(
        default=None, description="The explicit release policy's wording, commitbench or paper (null: the profile's)."
    )
    type_texts: TypeTexts | None = Field(
        default=None,
        description="The commitment types' texts, commitbench or paper (post_announcement as the paper ran it; null: "
        "the profile's).",
    )
    notify_deadline: NotifyDeadline | None = Field(
        default=None,
        description="By when a required notification counts: before_trigger or any_time (null: the profile's).",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        if isinstance(data, dict) and "variants" in data:
            raise ValueError(
                "standing episodes have surface wordings, not variants: write 'surfaces' (0, 1, 2); "
                "'variants' names the follow-up suite's inferred/stated variants"
            )
        return data

    @field_validator("split")
    @classmethod
    def _a_split(cls, value: str | None) -> str | None:
        split_part(value)  # a ValueError naming the known splits
        return value

    @model_validator(mode="after")
    def _train_is_english(self) -> StandingSelection:
        overlay = split_part(self.split)
        others = [lang.value for lang in self.languages() if lang is not Language.EN]
        if overlay is not None and others:
            raise ValueError(f"the {overlay.value} split is English only: there is no {', '.join(others)} "
                             f"{overlay.value} split (drop 'language' or play dev/test)")
        return self

    @field_validator("language", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and len(set(map(str, value))) != len(value):
            raise ValueError("a language is named twice")
        return value

    @model_serializer(mode="wrap")
    def _without_default_language(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("language") is None:
            data.pop("language", None)  # an English filter keeps the config (and config hash) it always had
        return data

    def languages(self) -> list[Language]:
        """The languages played, in the order given (default: English)."""
        return list(self.language) if self.language else [Language.EN]

    def settings(self) -> StandingSettings:
        """The design choices these episodes compile under: the profile's, with the options set here."""
        return StandingSettings.model_validate(self.options())

    @field_validator("data")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"episode data directory {value!r} does not exist")
        return str(path)

    def select(self, pool: Sequence[Episode]) -> list[Episode]:
        """The episodes of ``pool`` (compiled under :meth:`settings`) this filter keeps, in compile order;
        raises ValueError on an unknown value."""
        wanted = set(self.languages())
        chosen = select_episodes(
            [e for e in pool if e.language in wanted], split=self.split, cells=self.cells,
            commitment_types=self.types, policies=self.policies,
            gaps=self.gaps, surfaces=self.surfaces,
        )
        return narrow(chosen, {e.id for e in pool}, self.ids, self.limit)


def select_episodes(
    episodes: Sequence[Episode],
    episode_id: str | None = None,
    split: str | None = None,
    cells: Sequence[str] | None = None,
    commitment_types: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    gaps: Sequence[int] | None = None,
    surfaces: Sequence[int] | None = None,
) -> list[Episode]:
    """Filter compiled episodes by id or by design factors; an unknown value is an error."""
    if episode_id is not None:
        found = [e for e in episodes if e.id == episode_id]
        if not found:
            raise ValueError(f"unknown episode id {episode_id!r}")
        return found
    known: dict[str, set[object]] = {
        "cell": {e.cell for e in episodes},
        "commitment type": {e.commitment_type for e in episodes},
        "policy": {e.policy.value for e in episodes},
        "gap": {e.gap for e in episodes},
        "surface": {e.variant for e in episodes},
        "split": {e.split.value for e in episodes},
    }
    checks: tuple[tuple[str, Sequence[object] | None], ...] = (
        ("cell", cells),
        ("commitment type", commitment_types),
        ("policy", policies),
        ("gap", gaps),
        ("surface", surfaces),
        ("split", [split] if split else None),
    )
    for what, wanted in checks:
        unknown = sorted(str(w) for w in (wanted or []) if w not in known[what])
        if unknown:
            raise ValueError(f"unknown {what}: {', '.join(unknown)} (known: {sorted(map(str, known[what]))})")
    return [
        e
        for e in episodes
        if (split is None or e.split.value == split)
        and (cells is None or e.cell in cells)
        and (commitment_types is None or e.commitment_type in commitment_types)
        and (policies is None or e.policy.value in policies)
        and (gaps is None or e.gap in gaps)
        and (surfaces is None or e.variant in surfaces)
    ]
