"""Analysis at scale: time and peak memory of ``commitbench report`` and ``commitbench view`` over large runs.

    .venv/bin/python benchmarks/analysis_scale.py [--sizes 10000 100000] [--suites standing followup]
                                                  [--keep DIR] [--no-view]

1. *Fill* (not timed): for each suite and size, a run directory of about that many traces. The players
   need no model: the standing suite's five reference agents, named as ``module:Class`` so that they play
   every sample, and for the follow-up suite :class:`CannedReplies` below (a reply picked by the request,
   so the offline checker sees promises, claims, questions and answers). Sample 0 is played by
   ``commitbench run``; the players are deterministic, so the trace of sample k is that trace with the
   sample and the cell's run key changed, and the other samples are written that way (through
   :func:`commitbench.traces.append_traces`, with the run keys of the cells the config expands to). A
   last ``commitbench run --force`` of the full config then finds every cell played and writes the
   manifest, so the directory is an ordinary finished run that every reader checks line by line.
2. *Measure*: in a fresh process each, ``commitbench report DIR`` (tables), ``commitbench report DIR
   --json`` and ``commitbench view DIR`` (the site under a scratch directory); the wall time and the
   child's peak resident memory (``os.wait4``: the child's own high-water mark, interpreter and imports
   included), with the load average of the machine beside them.

It prints one line per suite, size and command, and per suite and command the ratio of the peak memory
(target: at most 1.3, memory bounded in the number of traces) and of the time per trace (about 1: time
linear) between the largest size and the smallest. ``--keep DIR`` keeps the run directories there and
reuses those already filled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET_RSS_RATIO = 1.3
STANDING_PLAYERS = tuple(
    f"commitbench.agents.standing.reference:{name}"
    for name in ("CreditorRuleAgent", "LastSpeakerWinsAgent", "RankWinsAgent", "AlwaysExecuteAgent",
                 "DropOnAnyCancelAgent")
)
STANDING_EPISODES = 1_080  # the test split
FOLLOWUP_EPISODES = 6_000  # every request x setup x variant x persona
BATCH = 500  # traces written per append


class CannedReplies:
    """A follow-up player without a model: one of a few fixed replies, picked by a hash of the request."""

    REPLIES = (
        "I'll remind you tomorrow morning about this.",
        "Done: I have scheduled it and you will get a message when it is due.",
        "I can't keep track of this after our conversation ends, so please set a reminder yourself.",
        "Sure. What time would you like me to follow up?",
        "Here is what you asked for, right now: the figures are attached above.",
    )

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        digest = hashlib.sha256(json.dumps(observation, sort_keys=True, default=str).encode()).digest()
        self.reply = self.REPLIES[digest[0] % len(self.REPLIES)]

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, str]:
        return {"reply": self.reply}


@dataclass(frozen=True)
class SuitePlan:
    name: str
    per_sample: int  # traces one sample of the config makes

    def config(self, samples: int) -> dict[str, Any]:
        if self.name == "standing":
            return {"name": "analysis-scale-standing", "env": "commitbench/Standing-v0",
                    "agents": list(STANDING_PLAYERS), "episodes": {"split": "test"}, "samples": samples}
        return {"name": "analysis-scale-followup", "env": "commitbench/FollowUp-v0",
                "agents": ["analysis_scale:CannedReplies"], "samples": samples}


PLANS = {"standing": SuitePlan("standing", len(STANDING_PLAYERS) * STANDING_EPISODES),
         "followup": SuitePlan("followup", FOLLOWUP_EPISODES)}


def _env() -> dict[str, str]:
    """The children's environment: this folder importable (the follow-up player lives here)."""
    here = str(Path(__file__).resolve().parent)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{here}" if path else here}


def _commitbench(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "commitbench.cli", *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"commitbench {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def _copies(source: Path, keys: dict[tuple[str, tuple[str, ...], str, int], str], samples: int) -> Iterator[Any]:
    """Every trace of ``source`` (sample 0) again for samples 1 .. samples-1, with the run keys of those cells."""
    from commitbench.traces import iter_traces

    for trace in iter_traces(source):
        name = trace.agent.name if trace.agent else ""
        for sample in range(1, samples):
            key = keys[(name, tuple(trace.interventions), trace.episode_id, sample)]
            yield trace.model_copy(update={"sample": sample, "run_key": key})


def fill(plan: SuitePlan, samples: int, out: Path) -> int:
    """Make a finished run directory of ``samples`` x the plan's traces under ``out``; returns its traces."""
    from commitbench.config import ExperimentConfig
    from commitbench.planning import expand_cells, select_config_episodes
    from commitbench.traces import TRACES_FILE, append_traces

    full = out.with_name(out.name + ".yaml")
    full.write_text(json.dumps(plan.config(samples)))
    manifest = out / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("status") == "complete":
        return samples * plan.per_sample
    shutil.rmtree(out, ignore_errors=True)  # an unfinished fill is made again
    first = out.with_name(out.name + "-sample0.yaml")
    first.write_text(json.dumps(plan.config(1)))
    _commitbench("run", str(first), "--out", str(out), "--no-progress", "--no-report")
    if samples > 1:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        config = ExperimentConfig.model_validate(plan.config(samples))
        keys = {(c.player.name, tuple(c.arm.names()), c.episode_id, c.sample): c.run_key
                for c in expand_cells(config, select_config_episodes(config))}
        source = out / TRACES_FILE
        played = out.with_name(out.name + "-sample0.jsonl")
        shutil.copyfile(source, played)
        batch: list[Any] = []
        for copy in _copies(played, keys, samples):
            batch.append(copy)
            if len(batch) == BATCH:
                append_traces(source, batch)
                batch = []
        append_traces(source, batch)
        played.unlink()
        _commitbench("run", str(full), "--out", str(out), "--force", "--no-progress", "--no-report")
    return samples * plan.per_sample


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_rss_mb: float
    load_before: float
    load_after: float


def measure(args: list[str]) -> Measured:
    """Run ``commitbench ARGS`` in a fresh process (output discarded); its wall time and peak memory."""
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "commitbench.cli", *args], cwd=REPO, env=_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    error = child.stderr.read().decode(errors="replace") if child.stderr else ""
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"commitbench {' '.join(args)} failed ({child.returncode}):\n{error[-3000:]}")
    return Measured(wall, usage.ru_maxrss / 1024.0, load_before, os.getloadavg()[0])  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="traces per run, about")
    parser.add_argument("--suites", nargs="+", choices=sorted(PLANS), default=["standing", "followup"])
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the run directories here")
    parser.add_argument("--no-view", action="store_true", help="time the report only")
    args = parser.parse_args()
    commands = {"report": ["report"], "report --json": ["report", "--json"]}
    if not args.no_view:
        commands["view"] = ["view"]
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        print(f"{'suite':<9} {'traces':>8} {'command':<14} {'wall s':>8} {'ms/1k':>7} {'peak RSS MB':>12} "
              f"{'load 1-min':>11}", flush=True)
        for suite in args.suites:
            plan = PLANS[suite]
            results: dict[str, list[tuple[int, Measured]]] = {name: [] for name in commands}
            for size in args.sizes:
                samples = max(1, round(size / plan.per_sample))
                run_dir = work / f"{suite}-{samples * plan.per_sample}"
                traces = fill(plan, samples, run_dir)
                for name, command in commands.items():
                    extra = ["--out", str(Path(scratch) / f"site-{suite}-{traces}")] if name == "view" else []
                    got = measure([*command, str(run_dir), *extra])
                    results[name].append((traces, got))
                    print(f"{suite:<9} {traces:>8,} {name:<14} {got.wall_s:>8.1f} {got.wall_s / traces * 1e6:>7.0f} "
                          f"{got.peak_rss_mb:>12.1f} {got.load_before:>5.2f}-{got.load_after:<5.2f}", flush=True)
            for name, rows in results.items():
                (small, first), (large, last) = rows[0], rows[-1]
                ratio = last.peak_rss_mb / first.peak_rss_mb
                per_trace = (last.wall_s / large) / (first.wall_s / small)
                verdict = "ok" if ratio <= TARGET_RSS_RATIO else "ABOVE TARGET"
                print(f"{suite} {name}: {large:,} / {small:,} traces: peak RSS x{ratio:.2f} (target <= "
                      f"{TARGET_RSS_RATIO}: {verdict}), time per trace x{per_trace:.2f}", flush=True)


if __name__ == "__main__":
    main()
