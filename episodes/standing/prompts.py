"""The parts of a standing episode's system prompt: the prompt without its release-policy paragraph, and the paragraph.

An episode's ``system_prompt`` ends with its explicit release policy (``Episode.explicit_policy``, in
the wording of the episode's profile) when its policy factor is explicit, and has no policy paragraph
when it is silent. Interventions that show another wording (or none) replace exactly that paragraph,
so the environment needs the two parts.
"""

from __future__ import annotations

from commitbench.episodes.standing.episode import Episode, Policy
from commitbench.episodes.standing.spec import PolicyWording
from commitbench.textslots import SuppliedTexts

POLICY_PARAGRAPH = "policy"
RELEASE_POLICY_SLOT = "standing.release_policy"


def explicit_policy(episode: Episode, texts: SuppliedTexts | None = None) -> str:
    """The explicit release policy in the episode's wording: the text supplied for the paper's paragraph (slot
    standing.release_policy) on an episode of the paper profile, when ``texts`` has one; else the episode's own."""
    if texts is not None and episode.policy_wording is PolicyWording.PAPER:
        supplied = texts.get(RELEASE_POLICY_SLOT)
        if supplied is not None:
            return supplied
    return episode.explicit_policy


def own_policy_paragraph(episode: Episode, texts: SuppliedTexts | None = None) -> str:
    """The policy paragraph the episode itself shows ('' when silent)."""
    return explicit_policy(episode, texts) if episode.policy is Policy.EXPLICIT else ""


def supplies_policy(episode: Episode, texts: SuppliedTexts | None) -> bool:
    """Whether ``texts`` changes the episode's own policy paragraph."""
    return own_policy_paragraph(episode, texts) != own_policy_paragraph(episode)


def prompt_without_policy(episode: Episode) -> str:
    """The episode's system prompt with its release-policy paragraph (if any) taken out."""
    prompt = episode.system_prompt
    if episode.policy is Policy.SILENT:
        return prompt
    policy = episode.explicit_policy
    if not prompt.endswith(policy):
        raise ValueError(
            f"episode {episode.id} has the explicit policy, but its system prompt does not end with its own "
            "explicit policy paragraph"
        )
    return prompt[: -len(policy)].rstrip()
