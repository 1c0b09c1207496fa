"""Profiles: a suite's design as its paper ran it (``paper``), or with the project's own choices (``commitbench``).

A profile is a named bundle of design choices, each an option of the suite's episode filter (how
the creditor answers, which wording of the release policy, ...). Each suite lists the choices on
which its two profiles differ as :class:`ProfileChoice` rows: the option, its value under each
profile, what the choice is and why the project departs from the paper. That list is the one
source: :func:`resolve_options` fills the options from it, :func:`profile_table` renders the table
``docs/validity.md`` shows (a test holds the two equal), and reports print the profile of every run.

Under the ``paper`` profile an option set to another value than the paper's is refused: a run that
calls itself a replication departs from the paper nowhere. Under ``commitbench`` (the default) an
option may be set on its own, to vary one choice; the report names such options beside the profile.
Metric definitions are the papers' under both profiles and are not profile options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Profile",
    "ProfileChoice",
    "ProfileError",
    "ProfiledSelection",
    "overrides",
    "profile_table",
    "resolve_options",
    "settings_for",
]

SettingsT = TypeVar("SettingsT", bound=BaseModel)


class Profile(str, Enum):
    """Which design a run follows."""

    PAPER = "paper"  # the paper's design, to put the numbers next to its tables
    COMMITBENCH = "commitbench"  # the project's own choices (the default)


class ProfileError(ValueError):
    """An option contradicts the chosen profile; the message names the option, both values and the fix."""


class ProfileChoice(BaseModel):
    """One design choice on which a suite's two profiles differ: a row of the profile table."""

    model_config = ConfigDict(frozen=True)

    suite: str = Field(description="The suite the choice belongs to (standing, followup).")
    option: str = Field(description="The episode-filter option that holds the choice.")
    paper: str = Field(description="Its value under the paper profile.")
    commitbench: str = Field(description="Its value under the project's profile.")
    what: str = Field(description="What the choice is, in a few words.")
    reason: str = Field(description="Why the project's profile departs from the paper here.")

    def value(self, profile: Profile) -> str:
        return self.paper if profile is Profile.PAPER else self.commitbench


def resolve_options(
    profile: Profile, given: Mapping[str, str | None], choices: Sequence[ProfileChoice]
) -> dict[str, str]:
    """Every choice's value for a run: the option given, else the profile's; raises :class:`ProfileError`
    when an option given under the paper profile is not the paper's value."""
    values: dict[str, str] = {}
    for choice in choices:
        explicit = given.get(choice.option)
        if explicit is not None and profile is Profile.PAPER and explicit != choice.paper:
            raise ProfileError(
                f"{choice.option}: {explicit!r} contradicts profile 'paper' (the paper's {choice.what}: "
                f"{choice.paper!r}); leave {choice.option} out, or use profile 'commitbench' to vary it"
            )
        values[choice.option] = explicit if explicit is not None else choice.value(profile)
    return values


def _option_text(value: Any) -> str | None:
    return None if value is None else value.value if isinstance(value, Enum) else str(value)


def settings_for(
    model: type[SettingsT], profile: Profile | str, choices: Sequence[ProfileChoice], given: Mapping[str, Any]
) -> SettingsT:
    """A suite's settings model for ``profile`` with the options ``given`` (None: the profile's)."""
    options = {name: _option_text(value) for name, value in given.items()}
    return model.model_validate(resolve_options(Profile(profile), options, choices))


class ProfiledSelection(BaseModel):
    """An episode filter with a profile and the profile's options (a suite's filter derives from it and names its
    choices in ``CHOICES``); an option that contradicts the paper profile is refused when the filter is made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    CHOICES: ClassVar[tuple[ProfileChoice, ...]] = ()

    profile: Profile = Field(
        default=Profile.COMMITBENCH,
        description="paper: the suite's design as its paper ran it (a replication); commitbench: the project's own "
        "choices (docs/validity.md lists every difference). A config's top-level 'profile' sets it.",
    )

    def options(self) -> dict[str, str]:
        """Every choice's value for these episodes: the option set here, else the profile's."""
        given = {c.option: _option_text(getattr(self, c.option)) for c in self.CHOICES}
        return resolve_options(self.profile, given, self.CHOICES)

    def profile_label(self) -> str:
        """The profile, and any option set apart from it: 'commitbench' or 'commitbench (creditor_replies: paper)'."""
        changed = overrides(self.profile, self.options(), self.CHOICES)
        extra = ", ".join(f"{name}: {value}" for name, value in changed.items())
        return f"{self.profile.value} ({extra})" if extra else self.profile.value

    @model_validator(mode="after")
    def _fits_profile(self) -> ProfiledSelection:
        self.options()  # raises ProfileError (a ValueError) naming an option that contradicts the paper profile
        return self


def overrides(profile: Profile, values: Mapping[str, str], choices: Sequence[ProfileChoice]) -> dict[str, str]:
    """The options whose value is not the profile's own (what a report names beside the profile)."""
    return {c.option: values[c.option] for c in choices if c.option in values and values[c.option] != c.value(profile)}


def profile_table(choices: Sequence[ProfileChoice]) -> str:
    """The Markdown table of the differences between the two profiles (``docs/validity.md`` holds it)."""
    lines = [
        "| suite | option | paper | commitbench | what | why the project departs |",
        "|---|---|---|---|---|---|",
    ]
    for c in choices:
        cells = (c.suite, f"`{c.option}`", f"`{c.paper}`", f"`{c.commitbench}`", c.what, c.reason)
        lines.append("| " + " | ".join(text.replace("|", "\\|") for text in cells) + " |")
    return "\n".join(lines) + "\n"
