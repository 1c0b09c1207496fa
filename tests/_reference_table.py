"""The reference agents' table: strict accuracy cell by cell under the explicit policy, the same on every split and
in every language (tests/test_reference_agents.py on dev/test in each language, tests/test_train_split.py on the
train split)."""

from __future__ import annotations

CELLS = [
    "BASE", "CRED-DIRECT", "CRED-IMPLICIT", "DELEG-DIRECT", "DELEG-IMPLICIT", "PEER-DIRECT", "PEER-IMPLICIT",
    "MGR-DIRECT", "MGR-IMPLICIT", "RELAY-TRUE", "RELAY-FALSE", "FACT-TRUE", "FACT-FALSE",
    "REINSTATE-BYSTANDER", "REINSTATE-CRED",
]

# Strict accuracy (1 = every run correct, 0 = none) under the explicit policy, cell by cell.
# This table is the specification of the reference agents; the README shows it too.
EXPECTED_STRICT: dict[str, dict[str, int]] = {
    "creditor-rule": dict.fromkeys(CELLS, 1),
    "last-speaker-wins": {
        **dict.fromkeys(CELLS, 1),
        **dict.fromkeys(
            ["PEER-DIRECT", "PEER-IMPLICIT", "MGR-DIRECT", "MGR-IMPLICIT", "RELAY-TRUE", "RELAY-FALSE",
             "REINSTATE-BYSTANDER"], 0),
    },
    "rank-wins": {
        **dict.fromkeys(CELLS, 1),
        **dict.fromkeys(
            ["DELEG-DIRECT", "DELEG-IMPLICIT", "PEER-DIRECT", "PEER-IMPLICIT", "MGR-DIRECT", "MGR-IMPLICIT",
             "RELAY-TRUE", "RELAY-FALSE"], 0),
    },
    "always-execute": {**dict.fromkeys(CELLS, 0), "BASE": 1, "REINSTATE-CRED": 1},
    "drop-on-any-cancel": {
        **dict.fromkeys(CELLS, 0),
        **dict.fromkeys(["BASE", "CRED-DIRECT", "CRED-IMPLICIT", "DELEG-DIRECT", "DELEG-IMPLICIT",
                         "REINSTATE-BYSTANDER"], 1),
    },
}
