"""The wheel carries every subpackage and the episode data, and works from another directory."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_every_python_folder_is_a_declared_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(config["packages"])
    mapping = config["package-dir"]
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            name = ".".join([package, *rel.parts]) if rel.parts else package
            assert name in declared, f"{init.parent} is not listed in pyproject packages as {name}"


@pytest.mark.slow
def test_wheel_installs_and_imports_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
    )
    (wheel,) = dist.glob("commitbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "commitbench/episodes/data/standing/cells.yaml" in names
    assert "commitbench/episodes/data/standing/system_prompt.jinja" in names
    assert "commitbench/episodes/data/followup/VERSION" in names  # the follow-up data version
    assert any(n.startswith("commitbench/envs/standing/env.py") for n in names)
    assert {f"commitbench/analysis/view/assets/{n}" for n in ("index.html", "app.js", "style.css")} <= set(names)
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import commitbench.envs, commitbench.episodes.standing.compiler as c;"
        "print(commitbench.envs.__file__); print(len(c.load_episodes()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    path, count = out.stdout.split()
    assert path.startswith(str(target)) and count == "1440"
    cli = subprocess.run(
        [sys.executable, "-c", "from commitbench.cli import main; main(['--help'])"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )
    assert "episodes" in cli.stdout
