"""The gaming table: the degenerate policies against the correct one, played and graded as any run is.

:func:`play_standing` plays the creditor-rule reference agent and every policy of
:data:`commitbench.rl.degenerate.STANDING_POLICIES` through the runner over the test split (explicit policy,
gap 1, every surface wording); :func:`standing_table` grades the run and gives each policy's mean reward and
its mean reward per cell. :func:`play_followup` and :func:`followup_table` do the same for the follow-up
suite's fixed replies, labelled by the offline checker, per setup. :func:`render` writes a table as the
Markdown that ``docs/rl.md`` holds between its markers (``python -m commitbench.rl.gaming`` rewrites them;
``tests/test_rl_gaming.py`` checks that the doc's numbers are the computed ones).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.judges.followup.outcomes import OutcomeLabel
from commitbench.rl.degenerate import FOLLOWUP_POLICIES, STANDING_POLICIES
from commitbench.rl.episodes import RunReward, followup_run_rewards, standing_run_rewards
from commitbench.rl.rewards import FollowupWeights, StandingWeights, followup_reward
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment

__all__ = [
    "CORRECT_FOLLOWUP", "PENALTY_WEIGHTS", "REFERENCE", "STANDING_EPISODES", "GamingRow", "GamingTable",
    "followup_table", "play_followup", "play_standing", "render", "standing_table",
]

# The correct standing policy every degenerate one is compared with.
REFERENCE = "creditor-rule"
# The standing episodes of the table: the test split under the explicit policy (the one the cells' expected
# behaviour is written for), gap 1, every surface wording.
STANDING_EPISODES = {"split": "test", "policies": ["explicit"], "gaps": [1], "surfaces": [0, 1, 2]}
# The follow-up episodes of the table: every request of every setup, the inferred variant, the generic persona.
FOLLOWUP_EPISODES = {"variants": ["inferred"], "personas": ["generic"]}
# The follow-up table's correct row: a reply the checker grades desirable gets this reward in any setup.
CORRECT_FOLLOWUP = "correct"
# The optional penalty of asking too often, as docs/rl.md's second standing table turns it on.
PENALTY_WEIGHTS = StandingWeights(extra_creditor_messages=-1.0)


class GamingRow(BaseModel):
    """One policy's rewards over the table's episodes."""

    policy: str = Field(description="The policy's name.")
    mean: float = Field(description="Mean total reward over every run.")
    by_group: dict[str, float] = Field(description="Mean total reward per cell (standing) or setup (follow-up).")
    runs: int = Field(description="Runs graded.")


class GamingTable(BaseModel):
    """The correct policy's row, then each degenerate policy's."""

    name: str = Field(description="The table's name in docs/rl.md's markers: standing, standing-penalty, followup.")
    reference: str = Field(description="The row every other row must stay below.")
    groups: list[str] = Field(description="The columns: cells or setups, in order.")
    rows: list[GamingRow] = Field(description="The reference first, then the degenerate policies.")

    def row(self, policy: str) -> GamingRow:
        return next(r for r in self.rows if r.policy == policy)


def _policy_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def play_standing(out_dir: Path, profile: str = "commitbench", concurrency: int = 16) -> None:
    """Play the reference agent and every degenerate standing policy over :data:`STANDING_EPISODES`."""
    agents = [REFERENCE, *(_policy_path(cls) for cls in STANDING_POLICIES.values())]
    config = ExperimentConfig.model_validate({
        "name": "rl-gaming-standing", "env": STANDING_ENV_ID, "profile": profile, "agents": agents,
        "concurrency": concurrency, "episodes": STANDING_EPISODES,
    })
    summary = run_experiment(config, out_dir)
    if summary.status is not RunStatus.COMPLETE:
        raise RuntimeError(f"the standing gaming run did not complete: {summary.failures}")


def play_followup(out_dir: Path, concurrency: int = 16) -> None:
    """Play every degenerate follow-up reply over :data:`FOLLOWUP_EPISODES`."""
    agents = [_policy_path(cls) for cls in FOLLOWUP_POLICIES.values()]
    config = ExperimentConfig.model_validate({
        "name": "rl-gaming-followup", "env": FOLLOWUP_ENV_ID, "agents": agents, "concurrency": concurrency,
        "episodes": FOLLOWUP_EPISODES,
    })
    summary = run_experiment(config, out_dir)
    if summary.status is not RunStatus.COMPLETE:
        raise RuntimeError(f"the follow-up gaming run did not complete: {summary.failures}")


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4)


def _rows(rewards: Sequence[RunReward], names: dict[str, str], groups: list[str]) -> list[GamingRow]:
    by_policy: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in rewards:
        by_policy[names.get(run.agent, run.agent)][run.group].append(run.reward.total)
    rows = []
    for policy, cells in by_policy.items():
        every = [v for values in cells.values() for v in values]
        rows.append(GamingRow(policy=policy, mean=_mean(every), runs=len(every),
                              by_group={g: _mean(cells[g]) for g in groups if cells.get(g)}))
    order = list(names.values())
    return sorted(rows, key=lambda r: order.index(r.policy) if r.policy in order else len(order))


def standing_table(run_dir: Path, weights: StandingWeights | None = None, name: str = "standing") -> GamingTable:
    """The standing gaming table of a run :func:`play_standing` wrote."""
    rewards = standing_run_rewards(run_dir, weights)
    names = {REFERENCE: REFERENCE, **{_policy_path(cls): name for name, cls in STANDING_POLICIES.items()}}
    groups = list(dict.fromkeys(sorted((r.group for r in rewards), key=_cell_order)))
    return GamingTable(name=name, reference=REFERENCE, groups=groups, rows=_rows(rewards, names, groups))


def followup_table(run_dir: Path, weights: FollowupWeights | None = None) -> GamingTable:
    """The follow-up gaming table of a run :func:`play_followup` wrote, below the correct row."""
    rewards = followup_run_rewards(run_dir, weights)
    names = {_policy_path(cls): name for name, cls in FOLLOWUP_POLICIES.items()}
    groups = sorted({r.group for r in rewards})
    correct = followup_reward(OutcomeLabel.ANCHORED, weights).total
    reference = GamingRow(policy=CORRECT_FOLLOWUP, mean=correct, by_group=dict.fromkeys(groups, correct),
                          runs=len(rewards) // max(1, len(names)))
    return GamingTable(name="followup", reference=CORRECT_FOLLOWUP, groups=groups,
                       rows=[reference, *_rows(rewards, names, groups)])


_CELL_ORDER = ("BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE")


def _cell_order(cell: str) -> tuple[int, str]:
    head = cell.split("-")[0]
    return (_CELL_ORDER.index(head) if head in _CELL_ORDER else len(_CELL_ORDER), cell)


def render(table: GamingTable) -> str:
    """The table as Markdown: a row per policy, its mean, then a column per cell or setup."""
    header = ["policy", "mean", *table.groups]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.rows:
        cells = [f"{row.by_group[g]:.3f}" if g in row.by_group else "" for g in table.groups]
        lines.append("| " + " | ".join([row.policy, f"{row.mean:.3f}", *cells]) + " |")
    return "\n".join(lines)


def markers(name: str) -> tuple[str, str]:
    """The markers around a table in docs/rl.md."""
    return f"<!-- gaming-{name}:start -->", f"<!-- gaming-{name}:end -->"


def doc_table(text: str, name: str) -> str:
    """The table a doc holds between the markers of ``name``."""
    start, end = markers(name)
    return text[text.index(start) + len(start): text.index(end)].strip()


def write_doc(doc: Path, tables: Sequence[GamingTable]) -> None:
    """Replace the tables between the markers of ``doc``."""
    text = doc.read_text(encoding="utf-8")
    for table in tables:
        start, end = markers(table.name)
        head, rest = text.split(start, 1)
        text = f"{head}{start}\n{render(table)}\n{end}{rest.split(end, 1)[1]}"
    doc.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Play the gaming tables and write them into docs/rl.md.")
    parser.add_argument("doc", type=Path, help="The Markdown file holding the tables' markers.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        play_standing(Path(tmp) / "standing")
        play_followup(Path(tmp) / "followup")
        standing = Path(tmp) / "standing"
        tables = [standing_table(standing), standing_table(standing, PENALTY_WEIGHTS, "standing-penalty"),
                  followup_table(Path(tmp) / "followup")]
    write_doc(args.doc, tables)
    for table in tables:
        print(render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
