"""The scripts that need a real vLLM server (not run in CI): their syntax, and the study's dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ["scripts/gpu_study.sh", "scripts/vllm_cpu_check.sh"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this environment's commitbench
    return env


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_parses(script: str) -> None:
    result = subprocess.run(["bash", "-n", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def _dry_run(model: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/gpu_study.sh", "--dry-run", model, *extra], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=300)


def test_the_gpu_study_dry_run_plans_thinking_on_and_off_and_the_followup_matrix() -> None:
    result = _dry_run("/models/Qwen3-8B", "0,1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "--tool-call-parser hermes --reasoning-parser qwen3" in out and "devices 0,1" in out
    assert out.count("1080 episodes") == 2  # the standing test split, thinking on and off
    assert "standing-thinking-on" in out and "standing-thinking-off" in out
    assert "suite followup" in out and "nothing was played: --dry-run" in out
    # the live-parties arm: the test split at gap 1, scripted and live, the served model voicing and checking
    assert "standing-live: suite standing" in out and "540 episodes" in out and "parties:live" in out


@pytest.mark.slow
def test_the_gpu_study_picks_parsers_by_family() -> None:
    llama = _dry_run("/models/Meta-Llama-3.1-8B-Instruct")
    assert llama.returncode == 0 and "--tool-call-parser llama3_json" in llama.stdout
    assert llama.stdout.count("1080 episodes") == 1  # no thinking switch
    gemma = _dry_run("/models/gemma-3-12b-it")
    assert gemma.returncode == 0 and "--tool-call-parser pythonic" in gemma.stdout
    unknown = _dry_run("/models/mystery")
    assert unknown.returncode == 2 and "FAMILY=" in unknown.stderr


def test_the_gpu_training_dry_run_plans_grpo_on_the_train_split_and_the_held_out_study(tmp_path: Path) -> None:
    argv = [sys.executable, str(ROOT / "scripts" / "gpu_train.py"), "/models/Qwen3-0.6B", "--setups", "C2", "C4",
            "--variants", "inferred", "--out", str(tmp_path / "grpo"), "--dry-run"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # the templated train split: 157 requests, each under both personas in each of the two setups
    assert "628 train-split prompts (C2 314, C4 314), 157 requests" in out
    assert "157 optimizer steps of 4 prompts x 8 completions" in out and '"use_vllm": true' in out
    assert f"bash scripts/gpu_study.sh {tmp_path / 'grpo' / 'checkpoint'}" in out
    assert not (tmp_path / "grpo").exists()  # a dry run writes nothing
    bad = subprocess.run([*argv[:3], "--generations", "1", "--dry-run"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and "at least 2" in bad.stderr
