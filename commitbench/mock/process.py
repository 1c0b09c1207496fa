"""The mock server in a child process, for benchmarks: it then shares no GIL with the client it serves.

The child runs ``commitbench serve-mock`` (the one command line of the mock server) with the options
of :class:`MockServerProcess`, and dies with the process that started it, however that one ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.request
from typing import IO, Any

from commitbench.mock.cli import ServeOptions, command_line
from commitbench.mock.replies import json_bytes
from commitbench.mock.specs import FaultConfig, ReplySpec, ServerStats, coerce_reply
from commitbench.processes import die_with_parent, wait_for_line

__all__ = ["MockServerProcess"]


class MockServerProcess:
    """Run the mock server as a separate Python process (benchmarks); same control methods.

    Scripting and faults travel over HTTP (``/script``, ``/faults``); responders cannot, since
    they are Python callables.
    """

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        latency_jitter_ms: float = 0.0,
        faults: FaultConfig | None = None,
        record_requests: int = 0,
        capacity: int | None = None,
        streaming: bool = False,
        python: str = sys.executable,
    ) -> None:
        options = ServeOptions(
            latency_ms=latency_ms, latency_jitter_ms=latency_jitter_ms, record_requests=record_requests,
            capacity=capacity, streaming=streaming,
        )
        self._args = [python, "-m", "commitbench.cli", "serve-mock", *command_line(options)]
        self._faults = faults
        self._proc: subprocess.Popen[str] | None = None
        # The child's stderr goes to a file, not a pipe: a pipe nobody reads while it serves could fill up
        # (aiohttp logs the errors it meets there) and stall it.
        self._stderr: IO[bytes] | None = None
        self.base_url = ""

    def start(self, timeout_s: float = 20.0) -> MockServerProcess:
        """Start the child and wait until it listens (its ``listening on URL`` line)."""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (kept open as long as the child; closed by stop)
        self._proc = subprocess.Popen(
            self._args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1,
            preexec_fn=die_with_parent(),  # the server ends with this process, however it ends
        )
        ready = wait_for_line(self._proc, "listening on ", timeout_s)
        if ready.value is None:
            err = self._read_stderr() if self._proc.poll() is not None else ""
            self.stop()
            raise RuntimeError(f"mock server process did not start within {timeout_s:g} s; last output "
                               f"{ready.last_line!r}; stderr: {err}")
        self.base_url = ready.value
        if self._faults is not None:
            self.set_faults(self._faults)
        return self

    @property
    def pid(self) -> int:
        """The process id of the running server (benchmarks read its CPU time)."""
        if self._proc is None:
            raise RuntimeError("the mock server is not running")
        return self._proc.pid

    def _post(self, path: str, payload: Any) -> Any:
        root = self.base_url.rsplit("/v1", 1)[0]
        request = urllib.request.Request(
            root + path, data=json_bytes(payload), headers={"content-type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> ServerStats:
        """Counts since the last reset (this request included)."""
        root = self.base_url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(root + "/stats", timeout=10) as response:
            return ServerStats.model_validate_json(response.read())

    def script(self, *replies: ReplySpec | str | dict[str, Any]) -> None:
        """Append replies to the server's queue."""
        specs = [coerce_reply(r) for r in replies]
        self._post("/script", [s.model_dump(mode="json", exclude_none=True) for s in specs if s is not None])

    def set_faults(self, config: FaultConfig | None = None, **fields: Any) -> None:
        """Replace the server's fault configuration."""
        config = config or FaultConfig(**fields)
        self._post("/faults", config.model_dump(mode="json"))

    def reset(self) -> None:
        """Empty the queue, clear faults and counters."""
        self._post("/reset", {})

    def stop(self) -> None:
        """End the child (SIGTERM, then SIGKILL after 5 s)."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5.0)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._proc = None

    def _read_stderr(self) -> str:
        """The end of what the child wrote on stderr (its last 2,000 characters)."""
        if self._stderr is None:
            return ""
        size = self._stderr.seek(0, 2)
        self._stderr.seek(max(0, size - 8000))
        return self._stderr.read().decode("utf-8", "replace")[-2000:]

    def __enter__(self) -> MockServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
