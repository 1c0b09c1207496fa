"""The parts of a standing episode's system prompt: the prompt without its release-policy paragraph, and the paragraph.

An episode's ``system_prompt`` ends with the explicit release policy of ``policies.yaml`` when its
policy factor is explicit, and has no policy paragraph when it is silent. Interventions that show
another wording (or none) replace exactly that paragraph, so the environment needs the two parts.
"""

from __future__ import annotations

from functools import lru_cache

from commitbench.episodes.standing.episode import Episode, Policy
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, PoliciesSpec
from commitbench.yamlfile import read_yaml

POLICY_PARAGRAPH = "policy"


@lru_cache(maxsize=1)
def explicit_policy_text() -> str:
    """The explicit release policy as the episode data states it (``policies.yaml``)."""
    data = read_yaml(DEFAULT_DATA_DIR / "policies.yaml")
    return PoliciesSpec.model_validate(data).explicit.strip()


def own_policy_paragraph(episode: Episode) -> str:
    """The policy paragraph the episode itself shows ('' when silent)."""
    return explicit_policy_text() if episode.policy is Policy.EXPLICIT else ""


def prompt_without_policy(episode: Episode) -> str:
    """The episode's system prompt with its release-policy paragraph (if any) taken out."""
    prompt = episode.system_prompt
    if episode.policy is Policy.SILENT:
        return prompt
    policy = explicit_policy_text()
    if not prompt.endswith(policy):
        raise ValueError(
            f"episode {episode.id} has the explicit policy, but its system prompt does not end with the "
            "explicit policy paragraph of policies.yaml; was it compiled from another data directory?"
        )
    return prompt[: -len(policy)].rstrip()
