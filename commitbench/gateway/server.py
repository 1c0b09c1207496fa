"""The gateway's process: uvicorn serving the app on a socket it binds first, so ``--port 0`` works and the
address is known; ``listening on http://HOST:PORT/v1`` is printed once it accepts connections (as the mock
server prints it). :class:`GatewayProcess` starts ``commitbench gateway`` as a child that dies with its parent
and reads that line (tests and benchmarks)."""

from __future__ import annotations

import asyncio
import gc
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence

import uvicorn

from commitbench.processes import die_with_parent, wait_for_line


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: a response written in two pieces (head, then body) must not wait for
    # the client's delayed acknowledgement (about 40 ms a request on Linux).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (``[gateway]`` extra; not on Windows), else None: asyncio's.

    A proxy's CPU goes largely to its sockets; uvloop's transports cost a fraction of asyncio's per write.
    """
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def serve(app: object, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until stopped; print the listening line when ready."""
    # No access log and no X-Forwarded-* rewriting (the gateway never reads the client's address); uvicorn takes
    # httptools for HTTP/1.1 where it is installed (the [gateway] extra), h11 otherwise.
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",  # type: ignore[arg-type]
                            timeout_keep_alive=75, backlog=2048, proxy_headers=False)
    server = uvicorn.Server(config)
    # What is loaded by now (modules, catalogue, patterns: some 100,000 objects) lives as long as the process:
    # out of the collector's reach, a full collection scans only what requests made, not pausing every reply.
    gc.collect()
    gc.freeze()
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(f"listening on {base_url(sock)}", flush=True)
    await task


class GatewayProcess:
    """``commitbench gateway ARGS`` as a child process (dies with its parent); ``base_url`` once it listens."""

    def __init__(self, args: Sequence[str], python: str = sys.executable, env: Mapping[str, str] | None = None) -> None:
        self._args = [python, "-m", "commitbench.cli", "gateway", *args]
        self._env = dict(env) if env is not None else None  # the process's environment (None: this one's)
        self._proc: subprocess.Popen[str] | None = None
        # stderr goes to a file: a pipe nobody reads would stall a gateway that reports many check errors
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 (kept open for the process)
        self.base_url = ""

    def start(self, timeout_s: float = 60.0) -> GatewayProcess:
        self._proc = subprocess.Popen(
            self._args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, bufsize=1,
            preexec_fn=die_with_parent(), env=self._env,
        )
        ready = wait_for_line(self._proc, "listening on ", timeout_s)
        if ready.value is None:
            err = self.stop()
            raise RuntimeError(f"the gateway did not start within {timeout_s:g} s; last output {ready.last_line!r}; "
                               f"stderr: {err[-2000:]}")
        self.base_url = ready.value
        return self

    @property
    def pid(self) -> int:
        """The process id of the running gateway."""
        if self._proc is None:
            raise RuntimeError("the gateway is not running")
        return self._proc.pid

    def stderr(self) -> str:
        """What the process has written on stderr so far."""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self) -> str:
        """Stop the process; what it wrote on stderr."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        return self.stderr()

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
