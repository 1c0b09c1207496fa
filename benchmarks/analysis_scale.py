"""Analysis at scale: time and peak memory of ``commitbench report`` and ``commitbench view`` over large runs.

    .venv/bin/python benchmarks/analysis_scale.py [--sizes 10000 100000] [--suites standing followup]
                                                  [--keep DIR] [--no-view] [--labelled] [--check-json FILE]

1. *Fill* (not timed): for each suite and size, a run directory of about that many traces. The players
   need no model: the standing suite's five reference agents, named as ``module:Class`` so that they play
   every sample, and for the follow-up suite :class:`CannedReplies` below (a reply picked by the request,
   so the offline checker sees promises, claims, questions and answers). Sample 0 is played by
   ``commitbench run``; the players are deterministic, so the trace of sample k is that trace with the
   sample and the cell's run key changed, and the other samples are written that way (through
   :func:`commitbench.traces.append_traces`, with the run keys of the cells the config expands to). A
   last ``commitbench run --force`` of the full config then finds every cell played and writes the
   manifest, so the directory is an ordinary finished run that every reader checks line by line.
2. *Measure*: in a fresh process each, the *floor* (``--floor DIR``: one streaming read of the run's
   ``traces.jsonl`` and labels files, every line parsed into its model, :class:`EpisodeTrace` or the
   suite's label record: what any reader of the run must at least do), ``commitbench report DIR``
   (tables), ``commitbench report DIR --json`` and ``commitbench view DIR`` (the site under a scratch
   directory); the wall time and the child's peak resident memory (``os.wait4``: the child's own
   high-water mark, interpreter and imports included, and the largest of the worker processes it
   started), with the load average of the machine beside them. ``report (cold)`` is timed first with the
   benchmark's read index (:mod:`commitbench.readindex`) emptied: the first read of a run, which checks every
   line of its trace file and indexes its labels; the commands after it find both in the index. Linux counts
   in a child's high-water mark what its parent held when the child started, so this process never imports
   commitbench itself: each fill runs in a process of its own.

It prints one line per suite, size and command, with the command's wall time over the floor's (target at
the largest size: at most 3), and per suite and command the ratio of the peak memory (target: at most
1.3, memory bounded in the number of traces) and of the time per trace (about 1: time linear) between
the largest size and the smallest. ``--labelled`` stores the offline labeller's labels once first
(``commitbench label RUN --judge rules --out RUN-labels``, its time on a line of its own) and measures the
run as a researcher reads it after that: the floor reads those labels too, and every command is given
``--labels RUN-labels``. ``--keep DIR`` keeps the run directories there and reuses those
already filled. ``--check-json FILE`` keeps the ``report --json`` documents of every run measured in
FILE (one JSON object: run name -> the document as printed), or, when FILE exists, says whether each
document is character for character the one kept there: run it once before a change to the readers
and once after.
"""

from __future__ import annotations

import argparse
import atexit
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
TARGET_FLOOR_RATIO = 3.0
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


# The read index the children keep (``commitbench.readindex``): the benchmark's own (set in its environment by
# main, inherited by every child), emptied before the "cold" report, so no index made before the benchmark is used.
INDEX_DIR = Path(tempfile.gettempdir()) / f"commitbench-bench-index-{os.getpid()}"


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
    """Make a finished run directory of ``samples`` x the plan's traces under ``out`` (in a process of its own:
    this one stays small, since a child's peak memory counts this process's at the child's start); returns its
    traces."""
    manifest = out / "manifest.json"
    if not (manifest.exists() and json.loads(manifest.read_text()).get("status") == "complete"):
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--fill", plan.name, str(samples),
                               str(out)], cwd=REPO, env=_env(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"filling {out} failed ({done.returncode})")
    return samples * plan.per_sample


def _fill_here(plan: SuitePlan, samples: int, out: Path) -> None:
    from commitbench.config import ExperimentConfig
    from commitbench.planning import expand_cells, select_config_episodes
    from commitbench.traces import TRACES_FILE, append_traces

    full = out.with_name(out.name + ".yaml")
    full.write_text(json.dumps(plan.config(samples)))
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


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_rss_mb: float
    load_before: float
    load_after: float


def measure(args: list[str], keep: Path | None = None) -> Measured:
    """Run ``commitbench ARGS`` (or, ``args[0]`` being ``--floor``, this script's floor) in a fresh process; its
    wall time and peak memory. Its output is discarded, or kept in ``keep``."""
    load_before = os.getloadavg()[0]
    command = [str(Path(__file__).resolve()), *args] if args[0] == "--floor" else ["-m", "commitbench.cli", *args]
    start = time.perf_counter()
    with (keep.open("wb") if keep is not None else open(os.devnull, "wb")) as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, *command], cwd=REPO, env=_env(), stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        err.seek(0)
        error = err.read().decode(errors="replace")
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({child.returncode}):\n{error[-3000:]}")
    return Measured(wall, usage.ru_maxrss / 1024.0, load_before, os.getloadavg()[0])  # ru_maxrss: KiB on Linux


def floor(run_dir: Path, labels_dir: Path | None = None) -> int:
    """The least any reader of a run does: one streaming read of its trace file and labels files (those of
    ``labels_dir`` too), every line parsed into its model (a trace, the suite's label record); returns the lines
    read."""
    from commitbench.jsonl import iter_models
    from commitbench.traces import TRACES_FILE, EpisodeTrace

    read = sum(1 for _ in iter_models(run_dir / TRACES_FILE, EpisodeTrace, what="trace"))
    labels = sorted(run_dir.glob("labels-*.jsonl"))
    if labels_dir is not None:
        labels += sorted(labels_dir.glob("labels-*.jsonl"))
    if labels:
        suite = json.loads((run_dir / "manifest.json").read_text()).get("suite")
        record: type[Any]
        if suite == "standing":
            from commitbench.judges.standing.labellers import StandingLabelRecord

            record = StandingLabelRecord
        else:
            from commitbench.judges.followup.labellers import FollowupLabelRecord

            record = FollowupLabelRecord
        for path in labels:
            read += sum(1 for _ in iter_models(path, record, what="labels record"))
    return read


def _check_json(path: Path | None, documents: dict[str, str]) -> None:
    """Keep the report documents (as printed) in ``path``, or compare them, character for character, with those
    kept there."""
    if path is None:
        return
    if not path.exists():
        path.write_text(json.dumps(documents, sort_keys=True))
        print(f"report --json documents of {len(documents)} run(s) kept in {path}", flush=True)
        return
    kept = json.loads(path.read_text())
    for name, document in sorted(documents.items()):
        if name not in kept:
            print(f"{name}: report --json: no document kept in {path} to compare with", flush=True)
            continue
        same = document == kept[name]
        print(f"{name}: report --json {'identical to' if same else 'DIFFERS FROM'} the document kept in {path}",
              flush=True)


def main() -> None:
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--floor":  # the floor, timed by the parent
        floor(Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) == 4 else None)
        return
    if len(sys.argv) == 5 and sys.argv[1] == "--fill":  # a fill, in a process of its own
        _fill_here(PLANS[sys.argv[2]], int(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="traces per run, about")
    parser.add_argument("--suites", nargs="+", choices=sorted(PLANS), default=["standing", "followup"])
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the run directories here")
    parser.add_argument("--no-view", action="store_true", help="time the report only")
    parser.add_argument("--labelled", action="store_true",
                        help="store the offline labeller's labels first (commitbench label --judge rules --out "
                        "RUN-labels, timed on a line of its own), and read them: the floor reads them too, and "
                        "the commands are given --labels RUN-labels")
    parser.add_argument("--check-json", type=Path, default=None,
                        help="keep the report --json documents here, or compare them with those kept here")
    args = parser.parse_args()
    os.environ["COMMITBENCH_CACHE_DIR"] = str(INDEX_DIR)
    atexit.register(shutil.rmtree, INDEX_DIR, ignore_errors=True)
    commands = {"floor": ["--floor"], "report (cold)": ["report"], "report": ["report"],
                "report --json": ["report", "--json"]}
    if not args.no_view:
        commands["view"] = ["view"]
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        print(f"{'suite':<9} {'traces':>8} {'command':<14} {'wall s':>8} {'x floor':>8} {'ms/1k':>7} "
              f"{'peak RSS MB':>12} {'load 1-min':>11}", flush=True)
        documents: dict[str, str] = {}
        for suite in args.suites:
            plan = PLANS[suite]
            results: dict[str, list[tuple[int, Measured]]] = {name: [] for name in commands}
            for size in args.sizes:
                samples = max(1, round(size / plan.per_sample))
                run_dir = work / f"{suite}-{samples * plan.per_sample}"
                traces = fill(plan, samples, run_dir)
                labelled: list[str] = []
                if args.labelled:
                    labels_dir = run_dir.with_name(run_dir.name + "-labels")
                    if not (labels_dir / "labels-rules.jsonl").exists():
                        shutil.rmtree(labels_dir, ignore_errors=True)
                        got = measure(["label", str(run_dir), "--judge", "rules", "--out", str(labels_dir)])
                        print(f"{suite:<9} {traces:>8,} {'label (once)':<14} {got.wall_s:>8.1f} {'':>8} "
                              f"{got.wall_s / traces * 1e6:>7.0f} {got.peak_rss_mb:>12.1f} "
                              f"{got.load_before:>5.2f}-{got.load_after:<5.2f}", flush=True)
                    labelled = [str(labels_dir)]
                base = 0.0
                for name, command in commands.items():
                    extra = ["--out", str(Path(scratch) / f"site-{suite}-{traces}")] if name == "view" else []
                    if labelled:
                        extra += labelled if name == "floor" else ["--labels", *labelled]
                    keep = Path(scratch) / "report.json" if name == "report --json" else None
                    if name == "report (cold)":  # the first read of the run: the lines and labels not indexed yet
                        shutil.rmtree(INDEX_DIR, ignore_errors=True)
                    got = measure([*command, str(run_dir), *extra], keep=keep)
                    if keep is not None:
                        documents[run_dir.name] = keep.read_text(encoding="utf-8")
                    base = got.wall_s if name == "floor" else base
                    results[name].append((traces, got))
                    print(f"{suite:<9} {traces:>8,} {name:<14} {got.wall_s:>8.1f} {got.wall_s / base:>8.2f} "
                          f"{got.wall_s / traces * 1e6:>7.0f} {got.peak_rss_mb:>12.1f} "
                          f"{got.load_before:>5.2f}-{got.load_after:<5.2f}", flush=True)
            for name, rows in results.items():
                (small, first), (large, last) = rows[0], rows[-1]
                ratio = last.peak_rss_mb / first.peak_rss_mb
                per_trace = (last.wall_s / large) / (first.wall_s / small)
                verdict = "ok" if ratio <= TARGET_RSS_RATIO else "ABOVE TARGET"
                over = last.wall_s / results["floor"][-1][1].wall_s
                floor_verdict = "ok" if over <= TARGET_FLOOR_RATIO else "ABOVE TARGET"
                print(f"{suite} {name}: {large:,} / {small:,} traces: peak RSS x{ratio:.2f} (target <= "
                      f"{TARGET_RSS_RATIO}: {verdict}), time per trace x{per_trace:.2f}; at {large:,} traces "
                      f"x{over:.2f} the floor (target <= {TARGET_FLOOR_RATIO}: {floor_verdict})", flush=True)
        _check_json(args.check_json, documents)


if __name__ == "__main__":
    main()
