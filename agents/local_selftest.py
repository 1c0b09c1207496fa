"""The embedded model's self-test: one multi-token prompt evaluated in a child process before serving.

llama-cpp-python builds llama.cpp from source, by default for the build machine's own CPU. Such a
native build can die on a CPU other than the one it was built on (an instruction it lacks: SIGILL),
and on some CPUs it dies on its own machine: measured on a CPU with AVX-512 and AMX, a native build
of llama-cpp-python 0.3.36 ends with SIGSEGV at the first batched prompt evaluation, while a
one-token prompt works. A server that dies there looks, from the harness, like a refused connection
on every call. So before the server starts, :func:`run_selftest` loads the model in a child process
(``python -m commitbench.agents.local_selftest``) and evaluates a prompt of several dozen tokens in
one batch, then generates a few tokens; :func:`failure_message` turns a crash or an error into a
message that names the exit signal, the CPU features the llama.cpp build uses (and those of this
CPU), and the exact command that reinstalls a portable build.

The portable build is llama.cpp with ``-DGGML_NATIVE=OFF`` (:data:`PORTABLE_CMAKE_ARGS`): it uses
SSE4.2, AVX, AVX2, FMA, F16C and BMI2 (:data:`PORTABLE_BASELINE`, x86-64-v3: Intel since 2013,
AMD since 2015) and nothing the build machine happens to have beyond them. The README's install and
CI's both build it that way, with pip's cache off so that no wheel built natively elsewhere is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, Field

from commitbench.processes import die_with_parent

__all__ = [
    "PORTABLE_BASELINE",
    "PORTABLE_CMAKE_ARGS",
    "SelfTestResult",
    "SelfTestStatus",
    "beyond_baseline",
    "build_features",
    "cpu_flags",
    "failure_message",
    "missing_on_cpu",
    "reinstall_command",
    "run_selftest",
]

# The CMake flags of the portable build; the README's install and .ci/run set the same (a test reads both).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF"
# Features that llama.cpp reports for a -DGGML_NATIVE=OFF build on x86-64 (SSE4.2 is on too, but not reported).
PORTABLE_BASELINE = ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2")
# llama.cpp's names of x86 features, and the flag Linux's /proc/cpuinfo shows for each.
_X86_FLAGS = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX_VNNI": "avx_vnni",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
# The flags that switch each baseline feature off, for a CPU below the baseline.
_OFF_FLAGS = {
    "AVX": "-DGGML_AVX=OFF",
    "AVX2": "-DGGML_AVX2=OFF",
    "F16C": "-DGGML_F16C=OFF",
    "FMA": "-DGGML_FMA=OFF",
    "BMI2": "-DGGML_BMI2=OFF",
}
# Words of llama.cpp's system information that name how it was built, not an instruction set.
_NOT_ISA = {"LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI", "ACCELERATE", "METAL", "BLAS"}
# About 60 tokens for SmolLM2's tokenizer: evaluated in one batch, as every real prompt is.
SELFTEST_PROMPT = (
    "The team agreed that the assistant will deploy the billing service once the integration tests are green, "
    "and that only the person who asked for it, or someone they name, may call the deployment off. "
    "Question: who may cancel the deployment? Answer:"
)
SELFTEST_TOKENS = 4
_LOG_TAIL = 2000


class SelfTestStatus(str, Enum):
    """How the self-test ended."""

    PASSED = "passed"
    CRASHED = "crashed"  # the child was killed by a signal
    FAILED = "failed"  # the child exited with an error of its own
    TIMED_OUT = "timed_out"


class SelfTestResult(BaseModel):
    """What the self-test child did, read from its output and exit status."""

    status: SelfTestStatus = Field(description="How the self-test ended.")
    returncode: int | None = Field(default=None, description="The child's exit code (negative: killed by a signal).")
    signal_name: str | None = Field(default=None, description="The signal that ended the child, e.g. SIGSEGV.")
    llama_cpp_version: str | None = Field(default=None, description="Version of the installed llama-cpp-python.")
    system_info: str | None = Field(default=None, description="llama.cpp's own description of its build.")
    features: list[str] = Field(default_factory=list, description="Instruction-set features the build uses.")
    stage: str | None = Field(default=None, description="The last stage the child reported before it ended.")
    prompt_tokens: int | None = Field(default=None, description="Tokens of the prompt evaluated in one batch.")
    completion_tokens: int | None = Field(default=None, description="Tokens generated after the prompt.")
    seconds: float | None = Field(default=None, description="Seconds for the prompt and the generated tokens.")
    error: str | None = Field(default=None, description="The child's own error message, if it reported one.")
    log_tail: str = Field(default="", description="The last lines the child wrote to stderr.")

    @property
    def ok(self) -> bool:
        return self.status is SelfTestStatus.PASSED


def build_features(system_info: str) -> list[str]:
    """The instruction-set features of llama.cpp's system information (``"CPU : AVX = 1 | AVX2 = 1 | ..."``).

    Only the features that are on; words that describe the build rather than an instruction set
    (``LLAMAFILE``, ``OPENMP``, ``REPACK``, ...) are left out.
    """
    features: list[str] = []
    for part in system_info.replace("\n", "|").split("|"):
        name, sep, value = part.rpartition("=")
        if not sep:
            continue
        name = name.rsplit(":", 1)[-1].strip().upper()
        if name and value.strip() == "1" and name not in _NOT_ISA and name not in features:
            features.append(name)
    return features


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's feature flags as Linux reports them; None where they cannot be read (another OS)."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        return None
    return None


def beyond_baseline(features: Sequence[str]) -> list[str]:
    """x86 features the build uses beyond the portable baseline (a native build's extras)."""
    return [f for f in features if f in _X86_FLAGS and f not in PORTABLE_BASELINE]


def missing_on_cpu(features: Sequence[str], flags: set[str] | None) -> list[str]:
    """x86 features the build uses that this CPU lacks (empty when the CPU's flags are unknown)."""
    if flags is None:
        return []
    return [f for f in features if f in _X86_FLAGS and _X86_FLAGS[f] not in flags]


def reinstall_command(version: str | None, flags: set[str] | None, python: str = sys.executable) -> str:
    """The command that replaces the installed llama-cpp-python with a portable build of the same version.

    On a CPU below the portable baseline (no AVX2, say), the baseline features it lacks are switched off too.
    """
    cmake = [PORTABLE_CMAKE_ARGS]
    if flags is not None and any(f in flags for f in ("avx", "sse4_2", "ssse3")):  # an x86 CPU whose flags we read
        cmake += [_OFF_FLAGS[f] for f in _OFF_FLAGS if _X86_FLAGS[f] not in flags]
    requirement = f"llama-cpp-python=={version}" if version else "llama-cpp-python"
    return (
        f"CMAKE_ARGS={shlex.quote(' '.join(cmake))} {shlex.quote(python)} -m pip install --force-reinstall "
        f"--no-deps --no-cache-dir {shlex.quote(requirement)}"
    )


def failure_message(result: SelfTestResult, model: Path | str, flags: set[str] | None) -> str:
    """Why the embedded model cannot serve, and what to do: the cause, the build's features, the remedy."""
    if result.status is SelfTestStatus.CRASHED:
        what = f"llama.cpp died with {result.signal_name or 'a signal'} (exit code {result.returncode})"
    elif result.status is SelfTestStatus.TIMED_OUT:
        what = "llama.cpp did not finish"
    else:
        what = f"llama.cpp failed (exit code {result.returncode})"
    stage = {
        "start": "before it could describe its build",
        "build": "while loading the model",
        "loaded": f"while evaluating a {result.prompt_tokens or 'multi'}-token prompt in one batch",
    }.get(result.stage or "start", "after evaluating the prompt")
    lines = [f"the embedded model failed its self-test: {what} {stage} ({model})."]
    if result.error:
        lines.append(f"Its error: {result.error}")
    build = " ".join(result.features) if result.features else "unknown (it died before reporting them)"
    version = result.llama_cpp_version or "unknown version"
    lines.append(f"The llama.cpp build (llama-cpp-python {version}) uses: {build}.")
    if flags is not None:
        shown = sorted(flags & set(_X86_FLAGS.values()))
        lines.append(f"This CPU has: {' '.join(shown) if shown else 'none of the x86 features llama.cpp reports'}.")
    missing = missing_on_cpu(result.features, flags)
    extras = beyond_baseline(result.features)
    if missing:
        lines.append(f"The build uses {', '.join(missing)}, which this CPU lacks: it was built for another CPU "
                     "(a wheel from pip's cache, or a shared environment).")
    elif extras:
        lines.append(f"The build is native to this CPU ({', '.join(extras)} beyond the portable baseline); native "
                     "builds have been measured to crash on batched prompt evaluation on CPUs with AVX-512 and AMX.")
    lines.append("Reinstall a portable build (docs/models.md, 'The llama.cpp build'):")
    lines.append(f"    {reinstall_command(result.llama_cpp_version, flags)}")
    if result.log_tail.strip():
        lines.append(f"The self-test's last output:\n{result.log_tail.strip()}")
    return "\n".join(lines)


def selftest_command(model: Path | str, n_threads: int, python: str = sys.executable) -> list[str]:
    """The child process's command line."""
    return [python, "-m", "commitbench.agents.local_selftest", "--model", str(model), "--threads", str(n_threads)]


def run_selftest(command: Sequence[str], timeout_s: float = 120.0) -> SelfTestResult:
    """Run the self-test child (:func:`selftest_command`, or a stand-in) and read what it reported.

    The child prints one JSON object per stage on stdout (``build``, ``loaded``, ``done``); a crash
    leaves the last stage it reached. It dies with this process (it is short-lived, and killed at the
    timeout).
    """
    try:
        proc = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )
    except OSError as exc:
        return SelfTestResult(status=SelfTestStatus.FAILED, error=f"could not start {command[0]}: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    result = _read_stages(out.decode("utf-8", errors="replace"))
    result.returncode = proc.returncode
    result.log_tail = err.decode("utf-8", errors="replace")[-_LOG_TAIL:]
    if timed_out:
        result.status = SelfTestStatus.TIMED_OUT
        result.error = result.error or f"no result within {timeout_s:.0f} s"
    elif proc.returncode < 0:
        result.status = SelfTestStatus.CRASHED
        result.signal_name = _signal_name(-proc.returncode)
    elif proc.returncode != 0 or result.stage != "done":
        result.status = SelfTestStatus.FAILED
    else:
        result.status = SelfTestStatus.PASSED
    return result


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_stages(stdout: str) -> SelfTestResult:
    result = SelfTestResult(status=SelfTestStatus.FAILED, stage="start")
    for line in stdout.splitlines()[:20]:
        try:
            stage = json.loads(line)
        except ValueError:
            continue
        if not isinstance(stage, dict):
            continue
        name = stage.get("stage")
        if name in ("build", "loaded", "done", "error"):
            result.stage = name if name != "error" else result.stage
        if isinstance(stage.get("system_info"), str):
            result.system_info = stage["system_info"][:2000]
            result.features = build_features(result.system_info)
        if isinstance(stage.get("version"), str):
            result.llama_cpp_version = stage["version"][:40]
        for field in ("prompt_tokens", "completion_tokens"):
            if isinstance(stage.get(field), int):
                setattr(result, field, stage[field])
        if isinstance(stage.get("seconds"), int | float):
            result.seconds = float(stage["seconds"])
        if isinstance(stage.get("error"), str):
            result.error = stage["error"][:1000]
    return result


def _emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def child_main(argv: Sequence[str] | None = None) -> int:
    """The child: describe the build, load the model, evaluate the prompt in one batch, generate a few tokens."""
    parser = argparse.ArgumentParser(prog="python -m commitbench.agents.local_selftest")
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    _emit(stage="build", version=getattr(llama_cpp, "__version__", None),
          system_info=info.decode("utf-8", errors="replace") if isinstance(info, bytes) else str(info))
    try:
        llm = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_batch=512, n_threads=args.threads,
                              n_threads_batch=args.threads, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        _emit(stage="error", error=f"{type(exc).__name__}: {exc}")
        return 1
    prompt_tokens = len(llm.tokenize(SELFTEST_PROMPT.encode("utf-8")))
    _emit(stage="loaded", prompt_tokens=prompt_tokens)
    started = time.perf_counter()
    out = llm.create_completion(SELFTEST_PROMPT, max_tokens=SELFTEST_TOKENS, temperature=0.0)
    seconds = time.perf_counter() - started
    usage = out.get("usage", {}) if isinstance(out, dict) else {}
    _emit(stage="done", prompt_tokens=usage.get("prompt_tokens", prompt_tokens),
          completion_tokens=usage.get("completion_tokens"), seconds=round(seconds, 4))
    os._exit(0)  # skip llama.cpp's teardown at interpreter exit: nothing is left to flush


if __name__ == "__main__":
    sys.exit(child_main())
