"""The follow-up suite's two profiles: the choices on which they differ, and the settings its episodes play under.

:data:`FOLLOWUP_CHOICES` is the one source of the differences (``docs/validity.md``'s profile table is
rendered from it with the standing suite's, and a test holds the two equal); :func:`followup_settings`
resolves a profile and the options a config sets into :class:`FollowupSettings`, which every episode
carries (an episode under other settings than the project's has another id).
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.digests import digest
from commitbench.profiles import Profile, ProfileChoice, settings_for

SUITE = "followup"


class StatedParagraph(str, Enum):
    """Which facts the stated variant's paragraph gives."""

    COMMITBENCH = "commitbench"  # the paper's facts, and that a scheduled task can wait for an event
    PAPER = "paper"  # exactly the paper's facts


class MonitoringDoability(str, Enum):
    """How doable, in C2, a monitoring request is whose source no tool can read (an inbox, a social feed, a card)."""

    COMMITBENCH = "commitbench"  # partial: a task can wait for the event, but nothing lets it see the event
    PAPER = "paper"  # doable, as the paper counts every monitoring request in C2


FOLLOWUP_CHOICES: tuple[ProfileChoice, ...] = (
    ProfileChoice(
        suite=SUITE, option="stated_paragraph", paper="paper", commitbench="commitbench",
        what="the stated variant's paragraph in C2",
        reason="schedule_task takes an on_event argument, so a task that waits for a named event is a fact of "
        "this runtime; the paper's C2 paragraph leaves it out, although monitoring requests are doable in C2 "
        "only through it. The project's paragraph states it, as a fact and without advice.",
    ),
    ProfileChoice(
        suite=SUITE, option="monitoring_doability", paper="paper", commitbench="commitbench",
        what="C2 doability of monitoring requests whose source no tool reads (inbox, Facebook, credit card)",
        reason="The paper counts every monitoring request as doable in C2 through an event-triggered task. But "
        "no tool of any setup reads the user's inbox, social feed or card statement, so a scheduled task cannot "
        "see the event it waits for: the runtime can serve such a request only in part. The project marks "
        "these twelve requests partial (so declining them is a deferral, not an over-refusal).",
    ),
)


class FollowupSettings(BaseModel):
    """The design choices the follow-up episodes play under (what a profile resolves to)."""

    model_config = ConfigDict(frozen=True)

    stated_paragraph: StatedParagraph = Field(
        default=StatedParagraph.COMMITBENCH, description="Which facts the stated paragraph gives."
    )
    monitoring_doability: MonitoringDoability = Field(
        default=MonitoringDoability.COMMITBENCH,
        description="C2 doability of monitoring requests whose source no tool reads.",
    )

    def tag(self) -> str:
        """'' for the project's profile, 'paper' for the paper's, else a short digest of the settings (for ids)."""
        if self == PROFILE_SETTINGS[Profile.COMMITBENCH]:
            return ""
        if self == PROFILE_SETTINGS[Profile.PAPER]:
            return Profile.PAPER.value
        return "s" + digest(self.model_dump_json(), length=8)


def followup_settings(profile: Profile | str = Profile.COMMITBENCH, **given: str | Enum | None) -> FollowupSettings:
    """The settings of ``profile`` with the options ``given`` (None: the profile's); raises
    :class:`~commitbench.profiles.ProfileError` when an option contradicts the paper profile."""
    return settings_for(FollowupSettings, profile, FOLLOWUP_CHOICES, given)


PROFILE_SETTINGS: dict[Profile, FollowupSettings] = {profile: followup_settings(profile) for profile in Profile}
