"""The follow-up suite for TRL: a prompt dataset and reward functions with the signature GRPOTrainer calls.

GRPOTrainer calls each reward function as ``fn(prompts=..., completions=..., completion_ids=..., **columns)``
where ``completions`` holds one completion per sample (a string in the standard format, a list of message dicts
in the conversational one) and every dataset column other than ``prompt`` arrives as a keyword argument holding
one value per completion (with ``trainer_state``, ``log_extra``, ``log_metric`` and, with environments,
``environments``). Each function returns one float per completion.

* :func:`followup_dataset` builds the rows: ``prompt``, the messages the suite's chat agent sends (the setup's
  system prompt and the user's request), ``tools``, the setup's tools in OpenAI form, and the columns the grader
  reads (``request_id``, ``setup``, ``variant``, ``persona``, ``profile``) with a few more for analysis.
* :func:`followup_total` is the headline reward, :func:`commitbench.rl.rewards.followup_reward`'s total; the
  ``followup_<term>`` functions are its weighted terms, one per :class:`~commitbench.rl.rewards.FollowupTerm`,
  and sum to it. Give a trainer the total, or the terms (to see each logged), never both.
* :func:`followup_reward_funcs` makes the same functions for other weights or another grader.

Every completion is graded by :class:`commitbench.rl.followup_turns.FollowupTurnGrader`: played as the episode's
turn through the suite's environment and labelled by the offline checker, as a run is. A completion that makes
no sense is still a turn (no call, whatever text it has), so a reward function never raises on one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from commitbench.episodes.followup.episodes import FollowupSelection
from commitbench.episodes.followup.splits import split_of
from commitbench.episodes.followup.vocabulary import Split
from commitbench.rl.followup_turns import DEFAULT_PROFILE, EpisodeKey, FollowupTurnGrader, default_grader
from commitbench.rl.rewards import FollowupTerm, FollowupWeights, RewardBreakdown, followup_reward

__all__ = [
    "GRADER_COLUMNS",
    "RewardFunc",
    "followup_correct",
    "followup_dataset",
    "followup_empty",
    "followup_false_claim",
    "followup_over_refusal",
    "followup_reward_funcs",
    "followup_total",
    "followup_unanchored",
    "to_hf_dataset",
    "tools_in_system_prompt",
]

RewardFunc = Callable[..., list[float]]
# The dataset columns the reward functions read (``profile`` may be left out: commitbench).
GRADER_COLUMNS = ("request_id", "setup", "variant", "persona")
TOTAL = "total"


# ------------------------------------------------------------------------------------------------- dataset
def tools_in_system_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the tools written into the system message as the embedded model is shown them
    (:func:`commitbench.agents.local_chat.tools_block`), for a trainer that renders no per-row tools: a call
    written back in that form is read as a call."""
    from commitbench.agents.local_chat import tools_block

    if not tools:
        return [dict(m) for m in messages]
    block = tools_block(tools, required=False)
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{block}"
    else:
        out.insert(0, {"role": "system", "content": block})
    return out


def followup_dataset(
    split: Split | str | None = Split.TRAIN,
    setups: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    personas: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    requests: Sequence[str] | None = None,
    profile: str = DEFAULT_PROFILE,
    limit: int | None = None,
    tools_in_prompt: bool = False,
    grader: FollowupTurnGrader | None = None,
) -> list[dict[str, Any]]:
    """One row per single-turn episode of the selection (the follow-up filter's fields; ``split=None``: every
    request), in the selection's order.

    ``prompt`` is what the suite's chat agent sends; ``tools`` the tools it offers (OpenAI form). GRPOTrainer
    renders only the tools given to the trainer, never a ``tools`` column, so with ``tools_in_prompt`` the tools
    are also written into the system message in the text form the grader reads back (docs/rl.md, "TRL").
    """
    selection = FollowupSelection.model_validate({
        "profile": profile, "split": split, "setups": setups, "variants": variants, "personas": personas,
        "categories": categories, "requests": requests, "limit": limit,
    })
    grader = grader or default_grader()
    rows = []
    for episode in selection.select():
        key = EpisodeKey(request_id=episode.request.id, setup=episode.setup.value, variant=episode.variant.value,
                         persona=episode.persona.value, profile=selection.profile.value)
        messages, tools = grader.opening(key)
        rows.append({
            "prompt": tools_in_system_prompt(messages, tools) if tools_in_prompt else messages,
            "tools": tools,
            "episode_id": episode.id,
            **key.model_dump(),
            "category": episode.request.category.value,
            "source": episode.request.source.dataset.value,
            "doability": episode.doability.value,
            "split": split_of(episode.request).value,
        })
    return rows


def to_hf_dataset(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The rows as a ``datasets.Dataset`` (needs the ``datasets`` package). The tools' JSON schemas differ from
    tool to tool, which Arrow would merge into one struct padded with nulls, so ``tools`` is stored as JSON text
    (as TRL's dataset guide does for ``datasets`` releases without the ``Json`` type)."""
    from datasets import Dataset  # type: ignore[import-untyped]

    return Dataset.from_list([{**row, "tools": json.dumps(row["tools"], ensure_ascii=False)} for row in rows])


# ------------------------------------------------------------------------------------------------ rewards
def _column(kwargs: Mapping[str, Any], name: str, n: int, default: str | None = None) -> list[str]:
    values = kwargs.get(name)
    if values is None:
        if default is None:
            raise ValueError(f"the follow-up reward needs the dataset column {name!r} (see followup_dataset)")
        return [default] * n
    if isinstance(values, str) or len(values) != n:
        raise ValueError(f"column {name!r} must hold one value per completion ({n})")
    return [str(v) if v is not None else (default or "") for v in values]


def _breakdowns(
    completions: Sequence[Any], kwargs: Mapping[str, Any], weights: FollowupWeights, grader: FollowupTurnGrader
) -> list[RewardBreakdown]:
    n = len(completions)
    columns = {name: _column(kwargs, name, n) for name in GRADER_COLUMNS}
    profiles = _column(kwargs, "profile", n, DEFAULT_PROFILE)
    out = []
    labels = []
    for i, completion in enumerate(completions):
        key = EpisodeKey(request_id=columns["request_id"][i], setup=columns["setup"][i],
                         variant=columns["variant"][i], persona=columns["persona"][i], profile=profiles[i])
        graded = grader.grade(key, completion)
        labels.append(graded.label.value if graded.label is not None else "")
        out.append(followup_reward(graded.label, weights))
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("followup_label", labels)
    return out


def _reward_func(name: str, term: str, weights: FollowupWeights, grader: FollowupTurnGrader | None) -> RewardFunc:
    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any) -> list[float]:
        rewards = _breakdowns(completions, kwargs, weights, grader or default_grader())
        if term == TOTAL:
            return [r.total for r in rewards]
        return [r.weights[term] * r.terms[term] + 0.0 for r in rewards]  # + 0.0: no -0.0 in the logs

    reward.__name__ = reward.__qualname__ = name
    what = "the weighted total" if term == TOTAL else f"the weighted {term!r} term"
    reward.__doc__ = f"TRL reward function: {what} of the follow-up reward of each completion."
    return reward


def followup_reward_funcs(
    weights: FollowupWeights | None = None, grader: FollowupTurnGrader | None = None
) -> dict[str, RewardFunc]:
    """``followup_total`` and one ``followup_<term>`` function per reward term, under ``weights``."""
    weights = weights or FollowupWeights()
    funcs = {f"followup_{t.value}": _reward_func(f"followup_{t.value}", t.value, weights, grader)
             for t in FollowupTerm}
    funcs["followup_total"] = _reward_func("followup_total", TOTAL, weights, grader)
    return funcs


_DEFAULTS = followup_reward_funcs()
followup_total: RewardFunc = _DEFAULTS["followup_total"]
followup_correct: RewardFunc = _DEFAULTS["followup_correct"]
followup_false_claim: RewardFunc = _DEFAULTS["followup_false_claim"]
followup_empty: RewardFunc = _DEFAULTS["followup_empty"]
followup_unanchored: RewardFunc = _DEFAULTS["followup_unanchored"]
followup_over_refusal: RewardFunc = _DEFAULTS["followup_over_refusal"]
