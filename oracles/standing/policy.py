"""The release-policy intervention: sets the policy paragraph of the system prompt.

Episodes already carry a policy factor (explicit: the paragraph of ``policies.yaml`` ends the
system prompt; silent: no paragraph). :class:`ReleasePolicy` *replaces* that paragraph, whatever
the episode's factor, with one of:

=================  ==========================================================================
``explicit``       the episode's own explicit paragraph, in the wording of its profile
                   (``policies.yaml``; on an explicit episode: no change at all)
``paraphrase-1``   the same rules in other words (``prompts/policy_paraphrases.yaml``)
``paraphrase-2``   the same rules in a third wording (same file)
``silent``         no paragraph (on a silent episode: no change at all)
=================  ==========================================================================

So ``policy:explicit`` on a silent episode shows the policy, ``policy:silent`` on an explicit
one hides it, and the paraphrases test wording on either. A paraphrase states exactly the rules of the
episode's own policy: an episode of the paper profile is shown the paraphrase's paper wording (the paper's
four rules), one of the project's profile its project wording (those and two more); every clause of the
file names the rules it states, and a clause stating a rule its profile's policy lacks is refused, named
(:class:`PolicyRule`, :func:`paraphrases`). The trace records what was shown in ``factors["policy_shown"]``
(explicit or silent) and ``factors["policy_text"]`` (which wording); analysis groups and excludes by the
policy shown, and keeps the episode's own factor apart.
"""

from __future__ import annotations

from enum import Enum
from functools import cache
from typing import Any, ClassVar

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.prompts import POLICY_PARAGRAPH, explicit_policy
from commitbench.episodes.standing.spec import PolicyWording
from commitbench.extras import EnvExtras, PromptSection
from commitbench.oracles.base import Intervention, InterventionError, prompt_text, supplied_texts, text_hash
from commitbench.textslots import SuppliedTexts
from commitbench.yamlfile import YamlError, parse_yaml

POLICY_TEXTS: tuple[str, ...] = ("explicit", "paraphrase-1", "paraphrase-2", "silent")
PARAPHRASE_FILE = "policy_paraphrases.yaml"


class PolicyRule(str, Enum):
    """One rule a release policy states."""

    OWNER = "owner"  # only the requester, or a delegate they named, may cancel
    NO_RANK = "no_rank"  # a manager has no say over it unless named
    CONFIRM_CANCELLATION = "confirm_cancellation"  # anyone else's cancellation is checked with the requester
    TELL_ON_DELEGATE = "tell_on_delegate"  # the requester is told when a named delegate cancels
    CONFIRM_REVIVAL = "confirm_revival"  # only they may bring it back; anyone else's "go ahead" is checked
    VERIFY_CLAIMS = "verify_claims"  # a claim that the task is impossible is checked with the tools


# The rules each profile's policy states (policies.yaml): the paper's four, and the project's six.
PROFILE_RULES: dict[PolicyWording, frozenset[PolicyRule]] = {
    PolicyWording.PAPER: frozenset({PolicyRule.OWNER, PolicyRule.NO_RANK, PolicyRule.CONFIRM_CANCELLATION,
                                    PolicyRule.TELL_ON_DELEGATE}),
    PolicyWording.COMMITBENCH: frozenset(PolicyRule),
}


class PolicyClause(BaseModel):
    """One clause of a policy wording and the rules it states."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[PolicyRule, ...] = Field(min_length=1, description="The rules this clause states.")
    text: str = Field(min_length=1, max_length=1_000, description="The clause as shown.")


class ParaphraseWordings(BaseModel):
    """A paraphrase of the release policy in the wording of each profile."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    paper: tuple[PolicyClause, ...] = Field(min_length=1, description="Shown to episodes of the paper profile.")
    commitbench: tuple[PolicyClause, ...] = Field(min_length=1, description="Shown to the project's episodes.")

    def clauses(self, wording: PolicyWording) -> tuple[PolicyClause, ...]:
        return self.paper if wording is PolicyWording.PAPER else self.commitbench

    def text(self, wording: PolicyWording) -> str:
        return " ".join(" ".join(clause.text.split()) for clause in self.clauses(wording))


def check_wording(name: str, wording: PolicyWording, clauses: tuple[PolicyClause, ...], source: str) -> None:
    """Refuse a wording that states a rule its profile's policy lacks (naming the clause), or leaves one out."""
    allowed = PROFILE_RULES[wording]
    for index, clause in enumerate(clauses, start=1):
        extra = [rule.value for rule in clause.rules if rule not in allowed]
        if extra:
            raise InterventionError(
                f"{source}: {name}'s {wording.value} wording, clause {index} ({clause.text[:80]!r}), states "
                f"{', '.join(extra)}, which the {wording.value} profile's release policy does not have; under that "
                "profile a paraphrase changes the words of the policy, never what it asks"
            )
    stated = {rule for clause in clauses for rule in clause.rules}
    missing = sorted(rule.value for rule in allowed - stated)
    if missing:
        raise InterventionError(
            f"{source}: {name}'s {wording.value} wording leaves out {', '.join(missing)}, a rule of the "
            f"{wording.value} profile's release policy"
        )


def read_paraphrases(text: str, source: str = PARAPHRASE_FILE) -> dict[str, ParaphraseWordings]:
    """The paraphrases of a file's text, each wording checked against its profile's rules (InterventionError)."""
    try:
        data = parse_yaml(text, source)
    except YamlError as exc:
        raise InterventionError(str(exc)) from None
    if not isinstance(data, dict):
        raise InterventionError(f"{source}: the top level must map paraphrase names to their wordings")
    out: dict[str, ParaphraseWordings] = {}
    for name, value in data.items():
        try:
            wordings = ParaphraseWordings.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise InterventionError(f"{source}: {name}: {problems}") from None
        for wording in PolicyWording:
            check_wording(str(name), wording, wordings.clauses(wording), source)
        out[str(name)] = wordings
    return out


@cache
def paraphrases() -> dict[str, ParaphraseWordings]:
    """The shipped paraphrases (``prompts/policy_paraphrases.yaml``), checked."""
    return read_paraphrases(prompt_text(PARAPHRASE_FILE))


def policy_paragraph(text: str, episode: Episode | None = None, texts: SuppliedTexts | None = None) -> str:
    """The paragraph shown for a policy wording ('' for silent), in the wording of the episode's profile
    (without an episode: the project's); on an episode of the paper profile, the text ``texts`` supplies for the
    wording's slot (standing.release_policy, standing.policy_paraphrase_1, ...), when it has one."""
    if text == "explicit":
        if episode is None:
            raise InterventionError("the explicit wording is the episode's own (its profile's): pass the episode")
        return explicit_policy(episode, texts)
    if text == "silent":
        return ""
    found = paraphrases().get(text)
    if found is not None:
        wording = episode.policy_wording if episode is not None else PolicyWording.COMMITBENCH
        slot = f"standing.policy_{text.replace('-', '_')}"
        supplied = texts.get(slot) if texts is not None and wording is PolicyWording.PAPER else None
        return supplied or found.text(wording)
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

    def words_languages(self) -> frozenset[str] | None:
        # explicit shows the episode's own paragraph and silent none; the paraphrases are written in English
        return None if self.text in ("explicit", "silent") else frozenset({"en"})

    def _paragraph(self, episode: Episode) -> str:
        """This arm's wording for one episode (a supplied text of the papers' slots where the run has one)."""
        return policy_paragraph(self.text, episode, supplied_texts(self))

    def extras(self) -> EnvExtras:
        if self.text == "explicit":  # the episode's own wording (its profile's), whatever its policy factor
            section = PromptSection(source=self.name, order=self.order, render=self._paragraph,
                                    replaces=POLICY_PARAGRAPH)
            identity = text_hash("explicit: the episode's own wording")
        elif self.text == "silent":
            section = PromptSection(source=self.name, order=self.order, text="", replaces=POLICY_PARAGRAPH)
            identity = text_hash("")
        else:  # a paraphrase, in the wording of the episode's profile
            section = PromptSection(source=self.name, order=self.order, render=self._paragraph,
                                    replaces=POLICY_PARAGRAPH)
            identity = text_hash(*(paraphrases()[self.text].text(wording) for wording in PolicyWording))
        return EnvExtras(
            sections=(section,),
            factors={"policy_shown": "silent" if self.text == "silent" else "explicit", "policy_text": self.text},
            prompt_hashes={"intervention:policy": identity},
        )



