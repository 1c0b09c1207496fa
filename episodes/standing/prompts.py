"""The parts of a standing episode's system prompt: the prompt without its release-policy paragraph, and the paragraph.

An episode's ``system_prompt`` ends with its explicit release policy (``Episode.explicit_policy``, in
the wording of the episode's profile) when its policy factor is explicit, and has no policy paragraph
when it is silent. Interventions that show another wording (or none) replace exactly that paragraph,
so the environment needs the two parts.
"""

from __future__ import annotations

from commitbench.episodes.standing.episode import Episode, Policy

POLICY_PARAGRAPH = "policy"


def own_policy_paragraph(episode: Episode) -> str:
    """The policy paragraph the episode itself shows ('' when silent)."""
    return episode.explicit_policy if episode.policy is Policy.EXPLICIT else ""


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
