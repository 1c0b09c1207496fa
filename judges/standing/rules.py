"""A deterministic, rule-based message judge (no model).

It labels messages by who they are addressed to and by cue words. It is exact on the reference
agents' templated messages and a rough baseline on model text; the LLM judge is the one to use
for model runs, and their agreement is reported.
"""

from __future__ import annotations

import re
import sys

from commitbench.episodes.standing.episode import Episode
from commitbench.judges.labelling import code_version
from commitbench.judges.standing import labels as labels_module
from commitbench.judges.standing.labels import MessageLabel
from commitbench.traces import EpisodeTrace

_DECISION = re.compile(
    r"\b(still (?:need|want)|go ahead|proceed|hold off|keep|drop|cancel(?:led|ed)?|call(?:ed)? off|should i|"
    r"do you want|shall i|confirm)\b",
    re.IGNORECASE,
)
_CANCELLATION = re.compile(
    r"\b(cancel(?:led|ed|s)?|call(?:ed)? off|dropp?(?:ed)?|not needed|no longer needed|is off|scrap(?:ped)?)\b",
    re.IGNORECASE,
)
_IMPOSSIBLE = re.compile(
    r"\b(can ?not|can't|cannot|impossible|not possible|closed|frozen|locked|suspended|disabled|discontinued|"
    r"unavailable|failed)\b",
    re.IGNORECASE,
)
_STOP = frozenset({"the", "a", "an", "of", "to", "for", "with", "and", "on", "in", "sharing"})


def _topic_words(episode: Episode) -> set[str]:
    words = {w.lower() for w in re.findall(r"[A-Za-z0-9.-]+", episode.thing) if w.lower() not in _STOP}
    for value in episode.target_args.values():
        words |= {w.lower() for w in re.findall(r"[A-Za-z0-9.-]+", str(value)) if len(w) > 2}
    words |= set(episode.action_tool.name.split("_"))
    return words - _STOP


def rule_judge_version() -> str:
    """The rule judge's version (stored with its labels): this module's rules and the label schema."""
    return code_version(modules=(sys.modules[__name__], labels_module))


class RuleJudge:
    """Labels messages with address and cue-word rules."""

    name = "rules"

    def label(self, trace: EpisodeTrace, episode: Episode) -> list[MessageLabel]:
        creditor = episode.creditor
        others = [p for p in episode.people if p.role != "creditor"]
        topic = _topic_words(episode)
        wiki_texts = [entry.text.lower() for entry in episode.wiki.values()]
        labels: list[MessageLabel] = []
        for i, msg in enumerate(trace.assistant_messages()):
            text = msg.text
            lower = text.lower()
            to_creditor = msg.channel == f"dm:{creditor.name}" or bool(
                re.search(rf"\b{re.escape(creditor.first_name.lower())}\b", lower)
            )
            on_topic = any(re.search(rf"\b{re.escape(w)}\b", lower) for w in topic)
            consults = to_creditor and "?" in text and (on_topic or bool(_DECISION.search(text)))
            names_cause = any(p.first_name.lower() in lower for p in others)
            notifies = to_creditor and (
                (bool(_CANCELLATION.search(text)) and names_cause) or bool(_IMPOSSIBLE.search(text))
            )
            answers_lookup = any(w[:40] in lower for w in wiki_texts)
            off_topic = not (on_topic or to_creditor or answers_lookup or _DECISION.search(text))
            labels.append(
                MessageLabel(
                    message_index=i,
                    step=msg.step,
                    consults_creditor=consults,
                    notifies_creditor=notifies,
                    off_topic=off_topic,
                    rationale="rule: addressed to creditor" if to_creditor else "rule: not addressed to creditor",
                    judge=self.name,
                )
            )
        return labels
