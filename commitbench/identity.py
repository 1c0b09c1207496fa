"""What identifies a run, its cells, an intervention arm and a judge: one definition of each.

Every writer and reader of a run directory computes these through this module, so a run, its Ray
twin and the merge of its shards agree on them by construction:

* :func:`run_key` — a cell's key: the sha256 of the canonical JSON of the player's identity, the
  arm's interventions, the environment id, the episode id and the sample index (and the identity of
  the harness services the arm uses, when it uses any). Stable across processes and machines: it
  never holds a URL or an API key.
* :func:`cells_hash` — what an experiment plays: the sha256 of its sorted run keys.
* :func:`config_hash` — the sha256 of the canonical JSON of a config as a manifest records it.
* :func:`in_shard` — which shard of ``--shard I/N`` a cell belongs to (its run key alone decides).
* :func:`arm_label` — the label of an arm in plans, reports and the viewer ('none' for no intervention).
* :func:`judge_name` and :func:`stored_judge_name` — the name a judge's labels are stored under.

Which trace lines count as traces of a run's cells is :mod:`commitbench.runcells`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from commitbench.cache import canonical_json
from commitbench.digests import digest
from commitbench.traces import AgentIdentity

__all__ = [
    "NO_ARM",
    "arm_label",
    "cells_hash",
    "config_hash",
    "in_shard",
    "judge_name",
    "run_key",
    "stored_judge_name",
]

# The label of the arm without interventions (and its name in a config: ``interventions: [none]``).
NO_ARM = "none"


def run_key(
    agent: AgentIdentity,
    interventions: Sequence[Mapping[str, Any]],
    env_id: str,
    episode_id: str,
    sample: int,
    services: Mapping[str, Any] | None = None,
    texts: str | None = None,
) -> str:
    """The key of one cell (see the module doc). ``interventions``: the arm's stack as ``{name, params}``
    objects; ``services``: the identity of each harness service the arm's interventions use (left out of
    the key when there are none, so arms without services keep the keys they always had); ``texts``: the
    digest of a texts file the run takes texts from (left out without one, likewise)."""
    payload: dict[str, Any] = {
        "agent": agent.model_dump(mode="json"),
        "interventions": [dict(spec) for spec in interventions],
        "env": env_id,
        "episode": episode_id,
        "sample": sample,
    }
    if services:
        payload["services"] = dict(services)
    if texts:
        payload["texts"] = texts
    # The json module's canonical text, which refuses NaN and infinities (digest(json=...) would write them as
    # null, so a config with a NaN and one with a null would share a key).
    return digest(canonical_json(payload))


def cells_hash(run_keys: Iterable[str]) -> str:
    """What an experiment plays: the sha256 of its run keys, sorted, one per line."""
    return digest(*sorted(run_keys), sep="\n")


def config_hash(config_json: Mapping[str, Any]) -> str:
    """The sha256 of the canonical JSON of a config as a manifest records it (credentials already redacted)."""
    return digest(canonical_json(dict(config_json)))


def in_shard(key: str, shard: tuple[int, int]) -> bool:
    """Whether the cell with run key ``key`` belongs to shard ``(index, count)``: the key's leading 64 bits
    modulo ``count``. The key alone decides, so the shards of an experiment are disjoint and cover it on
    any machine, whatever the order of its config."""
    index, count = shard
    return int(key[:16], 16) % count == index


def arm_label(interventions: Sequence[str], notes: Mapping[str, str] | None = None) -> str:
    """An arm's label: its intervention names joined by '+', or 'none'. ``notes`` adds a remark to an
    intervention's name where the same name was played in a way that changes what it measures (the
    rewrite fix with an offline flagger is ``rewrite (offline flagger)``)."""
    if not interventions:
        return NO_ARM
    notes = notes or {}
    return "+".join(f"{name} ({notes[name]})" if name in notes else name for name in interventions)


def judge_name(served_model: str) -> str:
    """The name an LLM judge's labels are stored under: ``llm:<served model>``."""
    return f"llm:{served_model}"


def stored_judge_name(offline_labeller: str, served_model: str | None) -> str:
    """The name a run's judge stores its labels under: the suite's offline labeller when the judge has no
    model (``kind: rules``), else :func:`judge_name` of the model it is served as."""
    return offline_labeller if served_model is None else judge_name(served_model)
