"""One mechanism per job: names that once had twins are defined exactly once in the package.

Read from the source with :mod:`ast`, so a copy cannot hide behind an import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest
from test_layers import MODULES

ROOT = Path(__file__).resolve().parent.parent


def _definitions() -> dict[str, list[str]]:
    """Name -> the modules that define it at their top level (class, function or assignment)."""
    found: dict[str, list[str]] = defaultdict(list)
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names: list[str] = []
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                found[name].append(module)
    return found


DEFINITIONS = _definitions()

ONCE = [
    "latest_traces",
    "repair_torn_tail",
    "cohen_kappa",
    "HumanLabel",
    "make_checker",
    "Cell",
    "Ledger",
    "EventKind",
    "STANDING_ENV_ID",
    "FOLLOWUP_ENV_ID",
    "INFRASTRUCTURE_ERRORS",
    "ClaimGuard",
    "LabelRecord",
    "select_episodes",
    "label_run",
    "judge_name",
]


@pytest.mark.parametrize("name", ONCE)
def test_defined_exactly_once(name: str) -> None:
    assert len(DEFINITIONS[name]) == 1, f"{name} is defined in {DEFINITIONS[name]}"


def test_the_followup_run_loop_and_the_test_play_loop_are_gone() -> None:
    assert not (ROOT / "commitbench" / "followup_run.py").exists()
    assert not (ROOT / "commitbench" / "play.py").exists()
    assert "commitbench.followup_run" not in MODULES and "commitbench.play" not in MODULES


def test_environment_ids_are_written_once_in_the_code() -> None:
    for env_id in ("commitbench/Standing-v0", "commitbench/FollowUp-v0"):
        holders = [m for m, path in MODULES.items() if f'"{env_id}"' in path.read_text(encoding="utf-8")]
        assert holders == ["commitbench.envs"], (env_id, holders)


def test_one_claim_guard_wrapper_decides() -> None:
    # The guard engine decides; one wrapper applies it to episodes, one command to text you give it, and the
    # commitment gateway's checks to a deployment's replies.
    callers = sorted(
        m for m, path in MODULES.items()
        if "should_guard(" in path.read_text(encoding="utf-8") and not m.startswith("commitbench.claimguard")
    )
    assert callers == [
        "commitbench.commands.guard_cmd", "commitbench.gateway.checks", "commitbench.oracles.claim_guard"
    ]
