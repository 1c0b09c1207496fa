"""A fixed corpus of traces for pinning what the labellers make of them (``tests/test_labeller_versions.py``).

The traces are stored, not played at test time: a labeller's fingerprint must move when the labeller's
outputs move, never because an environment, an episode or an agent changed the traces it is shown. The
standing traces come with the episodes they were played on (the judges read both), since an episode's id is
a digest of its text and a later episode set would not hold them.

``labeller_corpus/`` holds three gzipped JSON-lines files, written once by :func:`write_corpus`:

* ``standing-traces``: 14 traces of the reference agents and the behaviour agents of
  ``tests/_behaviour_agents.py`` on six cells (asking, telling, announcing a drop, acting, saying nothing);
* ``standing-episodes``: the episodes those traces were played on;
* ``followup-traces``: the 10 single-turn traces of ``tests/test_followup_run.py`` (every outcome label) and
  the 16 follow-through traces of ``tests/test_follow_through_run.py`` (every grade), played by the scripted
  mock models of those tests.

Never rewrite these files to make a test pass: the pins of the labellers' versions are fingerprints over them.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from commitbench.episodes.standing.episode import Episode
from commitbench.traces import EpisodeTrace

CORPUS = Path(__file__).resolve().parent / "labeller_corpus"
STANDING_TRACES = CORPUS / "standing-traces.jsonl.gz"
STANDING_EPISODES = CORPUS / "standing-episodes.jsonl.gz"
FOLLOWUP_TRACES = CORPUS / "followup-traces.jsonl.gz"

# (agent, cell) of the standing traces kept: every kind of message the judges label, and traces with none.
STANDING_PICKS = (
    ("creditor-rule", "MGR-IMPLICIT"),
    ("creditor-rule", "DELEG-DIRECT"),
    ("creditor-rule", "FACT-FALSE"),
    ("creditor-rule", "REINSTATE-BYSTANDER"),
    ("drop-on-any-cancel", "FACT-FALSE"),
    ("drop-on-any-cancel", "PEER-DIRECT"),
    ("always-execute", "RELAY-TRUE"),
    ("last-speaker-wins", "REINSTATE-BYSTANDER"),
    ("_behaviour_agents:TellTheCanceller", "DELEG-DIRECT"),
    ("_behaviour_agents:TellTheCanceller", "PEER-DIRECT"),
    ("_behaviour_agents:TellTheCreditorInTheChannel", "DELEG-DIRECT"),
    ("_behaviour_agents:TellTheCreditorInTheChannel", "RELAY-TRUE"),
    ("_behaviour_agents:ActThenApologise", "PEER-DIRECT"),
    ("_behaviour_agents:AskAfterActing", "MGR-IMPLICIT"),
)


def _read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line for line in handle.read().splitlines() if line]


def standing_corpus() -> tuple[list[EpisodeTrace], dict[str, Episode]]:
    """The stored standing traces, in their stored order, and their episodes by id."""
    traces = [EpisodeTrace.model_validate_json(line) for line in _read_lines(STANDING_TRACES)]
    episodes = [Episode.model_validate_json(line) for line in _read_lines(STANDING_EPISODES)]
    return traces, {e.id: e for e in episodes}


def followup_corpus() -> list[EpisodeTrace]:
    """The stored follow-up traces, in their stored order."""
    return [EpisodeTrace.model_validate_json(line) for line in _read_lines(FOLLOWUP_TRACES)]


def _write(path: Path, models: Iterable[BaseModel]) -> None:
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write("".join(m.model_dump_json() + "\n" for m in models).encode("utf-8"))


def write_corpus(folder: Path = CORPUS) -> None:
    """Play the corpus and store it under ``folder`` (done once; see the module docstring)."""
    import test_follow_through_run as through
    import test_followup_run as single

    from commitbench.config import ExperimentConfig
    from commitbench.envs import STANDING_ENV_ID
    from commitbench.mock import MockServer
    from commitbench.runner import run_experiment
    from commitbench.suites.standing import episodes_by_id
    from commitbench.traces import latest_traces

    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    try:
        agents = sorted({agent for agent, _ in STANDING_PICKS})
        cells = sorted({cell for _, cell in STANDING_PICKS})
        config = ExperimentConfig(env=STANDING_ENV_ID, agents=agents, concurrency=4, episodes={
            "cells": cells, "policies": ["explicit"], "gaps": [1], "surfaces": [0], "types": ["send_report"]})
        run_experiment(config, work / "standing")
        played = {(t.agent.name if t.agent else "", t.factors["cell"]): t for t in latest_traces(work / "standing")}
        standing = [played[pick] for pick in STANDING_PICKS]
        known = episodes_by_id()
        _write(folder / STANDING_TRACES.name, standing)
        _write(folder / STANDING_EPISODES.name, [known[i] for i in dict.fromkeys(t.episode_id for t in standing)])

        followup: list[EpisodeTrace] = []
        server = MockServer().start()
        try:
            for name, module, config_of in (("single", single, single.followup_config),
                                            ("through", through, through.config)):
                (work / name).mkdir()
                server.reset()
                server.set_responder(module.responder)
                run_experiment(config_of(server.base_url, work / name), work / name / "run")
                followup += sorted(latest_traces(work / name / "run"), key=lambda t: t.run_key)
        finally:
            server.stop()
        _write(folder / FOLLOWUP_TRACES.name, followup)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":  # python tests/_labeller_corpus.py [FOLDER]
    write_corpus(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
