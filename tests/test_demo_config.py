"""The README's main job (configs/demo.yaml): the embedded model, one episode of every cell family, played
one at a time so that the local server reuses each episode's prompt from one call to the next."""

from __future__ import annotations

from pathlib import Path

from commitbench.config import load_config
from commitbench.planning import plan, select_config_episodes

DEMO = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
FAMILIES = {"BASE", "CRED", "DELEG", "PEER", "MGR", "RELAY", "FACT", "REINSTATE"}


def test_the_main_job_plays_every_cell_family_once_on_the_embedded_model() -> None:
    config = load_config(DEMO)
    episodes = select_config_episodes(config)
    families = [episode.cell.split("-", 1)[0] for episode in episodes]
    assert sorted(families) == sorted(FAMILIES)
    assert [model.local for model in config.models] == [True]
    assert config.agents == ["chat"]
    assert config.concurrency == 1
    rows = plan(config).rows
    assert [row.cells for row in rows] == [len(FAMILIES)]
