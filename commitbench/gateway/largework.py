"""Large chat requests read in a worker process, so that the event loop keeps serving the small ones.

A request body over :data:`LARGE_BYTES` (a thousand tools, a long conversation) is parsed, bounded, read
into its turn, matched against the tool catalogue and digested in a process of its own. A worker thread
would not do: threads share the interpreter, and parsing 12 MB and matching a thousand tool descriptions
hold it for more than 100 ms, during which every small request waits. Nor does the body travel to the
worker pickled (a copy of 12 MB that holds the interpreter for several milliseconds): the gateway keeps
it as the chunks it arrived in, a worker thread writes them to a spool file (the write releases the
interpreter), and the worker reads the file. The worker sends back only what the gateway needs
(:class:`LargeRead`): the request's small top-level fields (everything but ``messages``, ``tools`` and
``functions``), its turn and deployment, its digest, and, when a nudge was added to it, the spool file
of the new body.

:class:`LargeReader` holds the pool: one worker by default, started at the first large request (a
gateway that never sees one never starts it), run at a lower priority (``nice`` 10) so that on a busy
machine the event loop's small requests come first, and ended with the gateway, however the gateway ends
(the kernel ends a worker whose parent died: ``PR_SET_PDEATHSIG``). A worker that dies is replaced and the
request read again once, in a fresh pool; a second failure is the request's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commitbench import jsoncodec
from commitbench.gateway.actions import with_nudge
from commitbench.gateway.bodies import parse_request
from commitbench.gateway.catalog import Deployment, ToolCatalog
from commitbench.gateway.turn import Turn, extract_turn, turn_digest
from commitbench.processes import end_with_parent

__all__ = ["BULKY_FIELDS", "LARGE_BYTES", "LargeRead", "LargeReader", "read_request"]

# Bodies larger than this are read in the worker process.
LARGE_BYTES = 256 * 1024
# The request fields the worker keeps to itself (the gateway reads them only through the turn).
BULKY_FIELDS = ("messages", "tools", "functions")
# The worker's scheduling priority, above the gateway's (a higher nice value yields the cores first).
WORKER_NICE = 10

_catalog: ToolCatalog | None = None


@dataclass(frozen=True)
class LargeRead:
    """What the worker read of one large request."""

    data: dict[str, Any]  # the request's top-level fields but BULKY_FIELDS
    digest: str  # the turn digest (with the creditor the request names)
    turn: Turn | None  # None when the turn could not be read (turn_error says why)
    deployment: Deployment | None
    turn_error: str | None
    body_path: str | None  # the spool file of the body a nudge made (the gateway reads and removes it), else None


def _start_worker(catalog: ToolCatalog, parent: int) -> None:
    """Pool initializer: keep the catalogue, end with the gateway, and yield the cores to it."""
    global _catalog
    _catalog = catalog
    end_with_parent(parent)
    if hasattr(os, "nice"):  # POSIX
        with contextlib.suppress(OSError):  # not permitted here: the worker runs at the gateway's priority
            os.nice(WORKER_NICE)


def read_request(
    body: bytes | Path, max_depth: int, creditor_header: str | None, approval: bool, nudge: str | None = None,
    catalog: ToolCatalog | None = None,
) -> LargeRead:
    """Read one request as the chat route does (in the worker; ``catalog`` defaults to the worker's).

    ``body``: the bytes, or the spool file that holds them. Raises
    :class:`commitbench.gateway.bodies.RequestProblem` for a body the gateway refuses. ``creditor_header``
    is what the request's headers name as its creditor (the user header, else the session header); the
    request's ``user`` field comes first, as in the chat route. With a ``nudge``, the new body is written
    beside the spool file (or to a temporary file) and named in the result.
    """
    found = catalog if catalog is not None else _catalog
    if found is None:
        raise RuntimeError("the worker was started without the tool catalogue")
    data = parse_request(body.read_bytes() if isinstance(body, Path) else body, max_depth)
    new_body: str | None = None
    if nudge is not None:
        data = with_nudge(data, nudge)
        folder = body.parent if isinstance(body, Path) else None
        handle, new_body = tempfile.mkstemp(prefix="nudged-", suffix=".json", dir=folder)
        with os.fdopen(handle, "wb") as out:
            out.write(jsoncodec.dumps(data))
    user = data.get("user") if isinstance(data.get("user"), str) and data.get("user") else None
    creditor = user or creditor_header or None
    digest = turn_digest(data, creditor or "")
    turn: Turn | None = None
    deployment: Deployment | None = None
    error: str | None = None
    try:
        turn = extract_turn(data, approval)
        deployment = found.deployment(turn.offered)
    except Exception as exc:  # recorded on the request's checks, as a turn read in the gateway would be
        turn, deployment, error = None, None, f"{type(exc).__name__}: {exc}"
    small = {key: value for key, value in data.items() if key not in BULKY_FIELDS}
    return LargeRead(data=small, digest=digest, turn=turn, deployment=deployment, turn_error=error, body_path=new_body)


class LargeReader:
    """The pool that reads large requests (see the module docstring)."""

    def __init__(self, catalog: ToolCatalog, workers: int = 1) -> None:
        self.catalog = catalog
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._spool: tempfile.TemporaryDirectory[str] | None = None

    def _start(self) -> tuple[ProcessPoolExecutor, Path]:
        if self._spool is None:
            self._spool = tempfile.TemporaryDirectory(prefix="commitbench-gateway-")
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker, initargs=(self.catalog, os.getpid()))
        return self._pool, Path(self._spool.name)

    async def read(
        self, chunks: list[bytes], max_depth: int, creditor_header: str | None, approval: bool,
        nudge: str | None = None,
    ) -> tuple[LargeRead, list[bytes]]:
        """The worker's :func:`read_request` of the body made of ``chunks``, and the chunks of the body to send
        upstream (those given, or a nudge's new body); the event loop serves other requests meanwhile."""
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            pool, spool = self._start()
            path = await asyncio.to_thread(_spool_file, spool, chunks)
            try:
                read = await loop.run_in_executor(pool, read_request, path, max_depth, creditor_header, approval,
                                                  nudge)
            except BrokenProcessPool:
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)
                if attempt:
                    raise
                continue
            finally:
                path.unlink(missing_ok=True)
            if read.body_path is None:
                return read, chunks
            return read, [await asyncio.to_thread(_take_file, Path(read.body_path))]
        raise AssertionError("unreachable")

    def close(self) -> None:
        """End the workers (pending reads are cancelled) and remove the spool."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._spool is not None:
            self._spool.cleanup()
            self._spool = None


def _spool_file(folder: Path, chunks: list[bytes]) -> Path:
    """Write ``chunks`` to a new file in ``folder`` (on a worker thread: the writes release the interpreter)."""
    handle, name = tempfile.mkstemp(prefix="request-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.writelines(chunks)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _take_file(path: Path) -> bytes:
    """The bytes of ``path``, which is then removed."""
    try:
        return path.read_bytes()
    finally:
        path.unlink(missing_ok=True)
