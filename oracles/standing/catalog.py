"""The standing interventions by name, as ``(env, params) -> env`` factories.

Each variant is its own name, equal to the wrapper's ``name``, so the label a config writes, the
name a trace records and the wrapper's own name are one string:

=======================  =================================================================
``policy:explicit``      the release policy of ``policies.yaml`` in the system prompt
``policy:paraphrase-1``  the same rules, second wording
``policy:paraphrase-2``  the same rules, third wording
``policy:silent``        no release policy
``oracle:B1`` ...        an oracle store (B1, B2, B3, B3+, B4), see :mod:`.stores`
``ledger:self-kept``     the self-kept ledger, see :mod:`.ledger`
=======================  =================================================================

The factories take no parameters (the variant is in the name); passing any is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import gymnasium as gym

from commitbench.oracles.standing.base import InterventionError, check_combination
from commitbench.oracles.standing.ledger import SelfKeptLedger
from commitbench.oracles.standing.policy import POLICY_TEXTS, ReleasePolicy
from commitbench.oracles.standing.stores import STORE_LEVELS, OracleStore

LEDGER_NAME = "ledger:self-kept"

Factory = Callable[[gym.Env[Any, Any], Mapping[str, Any]], gym.Env[Any, Any]]


def _no_params(name: str, params: Mapping[str, Any]) -> None:
    if params:
        raise InterventionError(
            f"intervention {name!r} takes no parameters (the variant is part of its name), got {sorted(params)}"
        )


def _policy(text: str, env: gym.Env[Any, Any], params: Mapping[str, Any]) -> gym.Env[Any, Any]:
    _no_params(f"policy:{text}", params)
    return ReleasePolicy(env, text=text)


def _store(level: str, env: gym.Env[Any, Any], params: Mapping[str, Any]) -> gym.Env[Any, Any]:
    _no_params(f"oracle:{level}", params)
    return OracleStore(env, level=level)


def _ledger(env: gym.Env[Any, Any], params: Mapping[str, Any]) -> gym.Env[Any, Any]:
    _no_params(LEDGER_NAME, params)
    return SelfKeptLedger(env)


STANDING_INTERVENTIONS: dict[str, Factory] = {
    **{f"policy:{text}": partial(_policy, text) for text in POLICY_TEXTS},
    **{f"oracle:{level}": partial(_store, level) for level in STORE_LEVELS},
    LEDGER_NAME: _ledger,
}


def wrap(env: gym.Env[Any, Any], names: Sequence[str]) -> gym.Env[Any, Any]:
    """Apply the named interventions, the first innermost; the combination is checked first."""
    check_combination(names)
    for name in names:
        factory = STANDING_INTERVENTIONS.get(name)
        if factory is None:
            raise InterventionError(f"unknown intervention {name!r}; known: {', '.join(STANDING_INTERVENTIONS)}")
        env = factory(env, {})
    return env
