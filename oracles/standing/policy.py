"""The release-policy intervention: sets the policy paragraph of the system prompt.

Episodes already carry a policy factor (explicit: the paragraph of ``policies.yaml`` ends the
system prompt; silent: no paragraph). :class:`ReleasePolicy` *replaces* that paragraph, whatever
the episode's factor, with one of:

=================  ==========================================================================
``explicit``       the episode's own explicit paragraph, in the wording of its profile
                   (``policies.yaml``; on an explicit episode: no change at all)
``paraphrase-1``   the same rules in other words (``prompts/policy_paraphrase_1.txt``)
``paraphrase-2``   the same rules in a third wording (``prompts/policy_paraphrase_2.txt``)
``silent``         no paragraph (on a silent episode: no change at all)
=================  ==========================================================================

So ``policy:explicit`` on a silent episode shows the policy, ``policy:silent`` on an explicit
one hides it, and the paraphrases test wording on either. The trace records what was shown in
``factors["policy_shown"]`` (explicit or silent) and ``factors["policy_text"]`` (which wording);
analysis groups and excludes by the policy shown, and keeps the episode's own factor apart.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym

from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.prompts import POLICY_PARAGRAPH
from commitbench.extras import EnvExtras, PromptSection
from commitbench.oracles.base import Intervention, InterventionError, prompt_text, text_hash

POLICY_TEXTS: tuple[str, ...] = ("explicit", "paraphrase-1", "paraphrase-2", "silent")
_FILES = {"paraphrase-1": "policy_paraphrase_1.txt", "paraphrase-2": "policy_paraphrase_2.txt"}


def policy_paragraph(text: str, episode: Episode | None = None) -> str:
    """The paragraph shown for a policy wording ('' for silent); ``explicit`` is the episode's own wording."""
    if text == "explicit":
        if episode is None:
            raise InterventionError("the explicit wording is the episode's own (its profile's): pass the episode")
        return episode.explicit_policy
    if text == "silent":
        return ""
    if text in _FILES:
        return prompt_text(_FILES[text])
    raise InterventionError(f"unknown policy wording {text!r}; choose one of {', '.join(POLICY_TEXTS)}")


class ReleasePolicy(Intervention):
    """Shows one release-policy wording (or none) in place of the episode's own paragraph."""

    kind: ClassVar[str] = "policy"
    slot: ClassVar[str] = "policy"
    slot_plural: ClassVar[str] = "release policies"
    order: ClassVar[int] = 10
    env_ids: ClassVar[frozenset[str]] = frozenset({STANDING_ENV_ID})

    def __init__(self, env: gym.Env[Any, Any], text: str = "explicit") -> None:
        if text not in POLICY_TEXTS:
            raise InterventionError(f"unknown policy wording {text!r}; choose one of {', '.join(POLICY_TEXTS)}")
        self.text = text
        super().__init__(env, text=text)

    def param(self) -> str:
        return self.text

    def extras(self) -> EnvExtras:
        if self.text == "explicit":  # the episode's own wording (its profile's), whatever its policy factor
            section = PromptSection(source=self.name, order=self.order, render=_episode_policy,
                                    replaces=POLICY_PARAGRAPH)
            identity = text_hash("explicit: the episode's own wording")
        else:
            paragraph = policy_paragraph(self.text)
            section = PromptSection(source=self.name, order=self.order, text=paragraph, replaces=POLICY_PARAGRAPH)
            identity = text_hash(paragraph)
        return EnvExtras(
            sections=(section,),
            factors={"policy_shown": "silent" if self.text == "silent" else "explicit", "policy_text": self.text},
            prompt_hashes={"intervention:policy": identity},
        )


def _episode_policy(episode: Episode) -> str:
    return policy_paragraph("explicit", episode)
