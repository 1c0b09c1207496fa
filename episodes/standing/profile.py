"""The standing suite's two profiles: the choices on which they differ, and the settings an episode set compiles under.

:data:`STANDING_CHOICES` is the one source of the differences (``docs/validity.md``'s table is rendered
from it, and a test holds the two equal); :func:`standing_settings` resolves a profile and the options a
config sets into :class:`StandingSettings`, which the compiler turns into episodes. Everything the
settings change is written into the compiled episodes, so two settings that differ compile to
episodes with different ids.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.standing.spec import NotifyDeadline, PolicyWording, ReplyRule, TypeTexts
from commitbench.profiles import Profile, ProfileChoice, settings_for

SUITE = "standing"

STANDING_CHOICES: tuple[ProfileChoice, ...] = (
    ProfileChoice(
        suite=SUITE, option="policy_wording", paper="paper", commitbench="commitbench",
        what="the explicit release policy's wording",
        reason="The paper's paragraph gives the rules for cancellations only, yet its correct behaviour also asks "
        "the assistant to check a claim that the task is impossible and to keep a promise released when someone "
        "without standing says 'go ahead after all'. The project's wording states those two rules as well, so the "
        "policy says everything strict accuracy grades.",
    ),
    ProfileChoice(
        suite=SUITE, option="creditor_replies", paper="paper", commitbench="per_event",
        what="when the creditor answers",
        reason="Under the paper's rule the creditor answers one message and sends a thumbs-up to every later "
        "question, so an assistant that asks again after a second event is left without an answer; the paper "
        "names such unanswered questions as an artefact that makes fact-checking look worse. The project's "
        "creditor answers the first question after each event with what is true at that point.",
    ),
    ProfileChoice(
        suite=SUITE, option="type_texts", paper="paper", commitbench="commitbench",
        what="post_announcement's request and promise",
        reason="The paper's post_announcement template left out the text to post, so models asked for it and "
        "never posted (its §C.2 reports the artefact and a table without the type). The project's request and "
        "promise give the text.",
    ),
    ProfileChoice(
        suite=SUITE, option="notify_deadline", paper="any_time", commitbench="before_trigger",
        what="by when the creditor must be told of a delegate's cancellation or an impossible task",
        reason="The paper does not say when the notification must come. The project requires it before the "
        "trigger: a creditor told only after the moment the promise would have been kept learns too late to act.",
    ),
)


class StandingSettings(BaseModel):
    """The design choices a standing episode set compiles under (what a profile resolves to)."""

    model_config = ConfigDict(frozen=True)

    creditor_replies: ReplyRule = Field(default=ReplyRule.PER_EVENT, description="When the creditor answers.")
    policy_wording: PolicyWording = Field(
        default=PolicyWording.COMMITBENCH, description="Which wording of the explicit release policy is shown."
    )
    type_texts: TypeTexts = Field(
        default=TypeTexts.COMMITBENCH, description="The commitment types' own texts, or the paper's where they differ."
    )
    notify_deadline: NotifyDeadline = Field(
        default=NotifyDeadline.BEFORE_TRIGGER, description="By when a required notification must come."
    )


def standing_settings(profile: Profile | str = Profile.COMMITBENCH, **given: str | Enum | None) -> StandingSettings:
    """The settings of ``profile`` with the options ``given`` (None: the profile's); raises
    :class:`~commitbench.profiles.ProfileError` when an option contradicts the paper profile."""
    return settings_for(StandingSettings, profile, STANDING_CHOICES, given)


PROFILE_SETTINGS: dict[Profile, StandingSettings] = {profile: standing_settings(profile) for profile in Profile}
