"""The episode-set version: recorded in every manifest; run directories of two versions never mix."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.spec import SpecError, episode_set_version
from commitbench.rundir import MANIFEST_FILE, read_manifest
from commitbench.rundir.reader import run_suite
from commitbench.runner import run_experiment
from commitbench.suites import EpisodeSetMismatchError

# The ids each version compiles to (sha256 of the sorted ids of the project profile's episodes). A change
# to the data that moves any id must bump episodes/data/standing/VERSION and add its line here.
KNOWN_SETS = {
    "2": "0a8f7b8b0ebd90ae59065ff89d995d146e6ac8742b5eebd61b9466f360833b2d",
    "3": "83ddc3e5873821481f36c7a1faf7866b38413e7a07033e2af74cdb98a049b389",
    "4": "e82d182155f7884a0a6496b91e15305396eb18189020922ea508dd17fee88eeb",
}
CURRENT = "4"


def _ids_digest() -> str:
    return hashlib.sha256("\n".join(sorted(e.id for e in load_episodes())).encode()).hexdigest()


def test_a_change_to_the_episodes_comes_with_a_new_version():
    version = episode_set_version()
    assert version == CURRENT
    digest = _ids_digest()
    assert KNOWN_SETS.get(version) == digest, (
        f"the standing episodes changed (ids digest {digest}) but episodes/data/standing/VERSION still says "
        f"{version}: bump it and record the new digest here"
    )


def test_a_missing_or_malformed_version_file_names_the_file(tmp_path):
    with pytest.raises(SpecError, match="VERSION: <file>: file not found"):
        episode_set_version(tmp_path)
    (tmp_path / "VERSION").write_text("two words\n")
    with pytest.raises(SpecError, match="not a version"):
        episode_set_version(tmp_path)


def _run(out: Path) -> None:
    ids = [e.id for e in load_episodes() if e.cell == "BASE"][:2]
    run_experiment(ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": ids}), out)


def _age(out: Path, version: str | None) -> None:
    """Make the directory look as if an older checkout had played it."""
    path = out / MANIFEST_FILE
    document = json.loads(path.read_text(encoding="utf-8"))
    document["episode_set_version"] = version
    path.write_text(json.dumps(document), encoding="utf-8")


def test_the_manifest_records_the_version_and_the_runner_refuses_another_even_with_force(tmp_path, capsys):
    out = tmp_path / "run"
    _run(out)
    manifest = read_manifest(out)
    assert manifest is not None and manifest.episode_set_version == CURRENT
    _age(out, "1")
    with pytest.raises(EpisodeSetMismatchError, match="version 1 of the standing episode set; this checkout"):
        _run(out)
    config = tmp_path / "c.yaml"
    config.write_text("env: commitbench/Standing-v0\n"
                      "agents: [creditor-rule]\nepisodes: {cells: [BASE], limit: 1}\n", encoding="utf-8")
    assert main(["run", str(config), "--out", str(out), "--force", "--no-progress", "--no-report"]) == 2
    assert "cannot be mixed" in capsys.readouterr().err
    _age(out, None)  # a manifest from before versions were recorded
    with pytest.raises(EpisodeSetMismatchError, match="before versions were recorded"):
        run_suite(out)


@pytest.mark.parametrize("verb", ["report", "label"])
def test_the_report_and_the_labeller_refuse_a_directory_of_another_version(tmp_path, capsys, verb):
    out = tmp_path / "run"
    _run(out)
    assert main(["report", str(out), "--n-boot", "10", "--json", "--no-figure"]) == 0
    capsys.readouterr()
    _age(out, "1")
    args = [verb, str(out)] + (["--n-boot", "10"] if verb == "report" else ["--judge", "rules"])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "was played on version 1 of the standing episode set" in err and f"compiles version {CURRENT}" in err


def test_a_followup_run_records_its_request_set_version_and_refuses_another(tmp_path, mock_server, capsys):
    from commitbench.episodes.followup.requests import followup_data_version

    config = tmp_path / "f.yaml"
    config.write_text(
        "env: commitbench/FollowUp-v0\nagents: [chat]\n"
        f"models: [{{name: m, base_url: '{mock_server.base_url}', api_key_env: null}}]\n"
        "episodes: {setups: [C0], variants: [inferred], personas: [generic], limit: 2}\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--no-progress", "--no-report"]) == 0
    manifest = read_manifest(out)
    assert manifest is not None and manifest.episode_set_version == str(followup_data_version())
    capsys.readouterr()
    _age(out, "1")
    assert main(["report", str(out), "--n-boot", "10"]) == 2
    assert "version 1 of the followup episode set" in capsys.readouterr().err
