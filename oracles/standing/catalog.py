"""The standing interventions by name, as registry entries.

Each variant is its own name, equal to the wrapper's ``name``, so the label a config writes, the
name a trace records and the wrapper's own name are one string:

=======================  =================================================================
``policy:explicit``      the release policy of ``policies.yaml`` in the system prompt
``policy:paraphrase-1``  the same rules, second wording
``policy:paraphrase-2``  the same rules, third wording
``policy:silent``        no release policy
``oracle:B1`` ...        an oracle store (B1, B2, B3, B3+, B4), see :mod:`.stores`
``ledger:self-kept``     the self-kept ledger, see :mod:`.ledger`
``parties:live``         people voiced by a party model, see :mod:`.parties`
=======================  =================================================================

The factories take no parameters (the variant is in the name).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import gymnasium as gym

from commitbench.oracles.base import InterventionEntry
from commitbench.oracles.standing.ledger import SelfKeptLedger
from commitbench.oracles.standing.parties import ENTRIES as PARTY_ENTRIES
from commitbench.oracles.standing.policy import POLICY_TEXTS, ReleasePolicy
from commitbench.oracles.standing.stores import STORE_LEVELS, OracleStore

LEDGER_NAME = "ledger:self-kept"


Env = gym.Env[Any, Any]


def _policy(text: str, env: Env, params: Mapping[str, Any], services: Mapping[str, Any]) -> Env:
    return ReleasePolicy(env, text=text)


def _store(level: str, env: Env, params: Mapping[str, Any], services: Mapping[str, Any]) -> Env:
    return OracleStore(env, level=level)


def _ledger(env: Env, params: Mapping[str, Any], services: Mapping[str, Any]) -> Env:
    return SelfKeptLedger(env)


ENTRIES: tuple[InterventionEntry, ...] = (
    *(
        InterventionEntry(f"policy:{text}", ReleasePolicy, partial(_policy, text), f"release policy wording {text}")
        for text in POLICY_TEXTS
    ),
    *(
        InterventionEntry(f"oracle:{level}", OracleStore, partial(_store, level), f"oracle store {level}")
        for level in STORE_LEVELS
    ),
    InterventionEntry(LEDGER_NAME, SelfKeptLedger, _ledger, "the self-kept ledger (ledger_add, ledger_update)"),
    *PARTY_ENTRIES,
)
