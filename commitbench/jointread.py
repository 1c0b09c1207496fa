"""One read of a run's traces for two readers at once: the viewer's pages and the report's rows.

``commitbench view`` writes a page per run and builds the report, and each reads every trace that counts
through :func:`commitbench.traces.map_latest_traces`. Reading, parsing and converting a large run is most
of the time either takes; a :class:`JointRead` makes it once. The thread that opens it (the *host*) reads;
the first call of :func:`~commitbench.traces.map_latest_traces` over the same traces from another thread
(the *guest*: the report, built beside the pages) hands its ``convert`` over and receives what it would
have read itself, in the same order. Each trace is converted by both readers' functions in the process
that parsed it (a pool's worker on a large run), so neither reader's code changes. Either reader may read
through :func:`~commitbench.traces.map_latest_batches` instead: each chunk of its items is then packed
where the chunk was converted, with its own ``pack`` (the guest's handed over with its ``convert``).

The host's read waits until the guest has handed its ``convert`` over, or until the guest's thread says it
will not (:meth:`JointRead.guest_done`); it then reads alone. The guest's read ends when the host says so
(:meth:`JointRead.host_done`), so the host can first let go of what its own read held: the viewer writes and
drops its run index before the report computes its tables, and the two never hold their peaks at once.
A guest call that comes once the host's read has started, a second guest call, or one over other traces
reads alone, as it would without a joint read.
Either side stopping early is seen by the other: a guest that stops taking makes the host drop what it
would send; a host that stops (an error, the site abandoned) makes the guest's read raise
:class:`JointReadStopped`. What waits between the two is bounded (:data:`QUEUED_BATCHES` batches of
:data:`BATCH` items, or of one pack each).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BATCH = 250  # guest items handed over at once
QUEUED_BATCHES = 8  # batches waiting for the guest at most (then the host waits for it)
_POLL_S = 0.05  # how often a host held up by a full queue looks whether the guest has gone

_END = object()


class JointReadStopped(RuntimeError):
    """The host's read stopped before its end: the guest's items are incomplete."""


class _Stopped:
    def __init__(self, reason: str) -> None:
        self.reason = reason


_converting = threading.local()  # .trace, .shared: the trace both readers convert now on this thread, their dict


def shared_work(trace: Any) -> dict[Any, Any] | None:
    """While both readers of a joint read convert ``trace`` (one after the other, on this thread), a dict they
    share, so the second can reuse what the first made of it; None at any other time."""
    if getattr(_converting, "trace", None) is trace:
        shared: dict[Any, Any] = _converting.shared
        return shared
    return None


def conversion_work() -> dict[Any, Any] | None:
    """The dict of :func:`shared_work` for whichever trace both readers convert now on this thread (None outside
    a joint conversion): for work keyed by something other than the trace (a stored labels record by its file
    and run key)."""
    shared: dict[Any, Any] | None = getattr(_converting, "shared", None)
    return shared


class _Both:
    """The host's and the guest's conversion of one trace, made where the trace was parsed (with a dict the two
    share while they convert it: :func:`shared_work`)."""

    def __init__(self, host: Callable[[Any], Any], guest: Callable[[Any], Any]) -> None:
        self.host, self.guest = host, guest

    def __call__(self, trace: Any) -> tuple[Any, Any]:
        _converting.trace, _converting.shared = trace, {}
        try:
            return self.host(trace), self.guest(trace)
        finally:
            _converting.trace = _converting.shared = None


class _Split:
    """A chunk of pairs (host's item, guest's) as two parts, each packed where it is asked to be (see
    :meth:`JointRead.split`)."""

    def __init__(self, host: Callable[[list[Any]], Any] | None, guest: Callable[[list[Any]], Any] | None) -> None:
        self.host, self.guest = host, guest

    def __call__(self, pairs: list[tuple[Any, Any]]) -> tuple[Any, Any]:
        mine = [pair[0] for pair in pairs]
        theirs = [pair[1] for pair in pairs]
        return (mine if self.host is None else self.host(mine)), (theirs if self.guest is None else self.guest(theirs))


class JointRead:
    """A read of the traces that count of ``file`` (``include_failed`` as given) shared by two threads."""

    def __init__(self, file: Path, include_failed: bool) -> None:
        self.key = (str(Path(file).resolve()), include_failed)
        self.host = threading.get_ident()
        self._lock = threading.Lock()
        self._guest: Callable[[Any], Any] | None = None
        self._guest_pack: Callable[[list[Any]], Any] | None = None  # a guest reading batches: how it packs a chunk
        self._started = False  # the host's read has begun (a guest that comes later reads alone)
        self._settled = threading.Event()  # a guest handed its convert over, or none will
        self._gone = threading.Event()  # the guest stopped taking
        self._over = threading.Event()  # the host sends nothing more
        self._complete = False  # the host's read reached its end (the guest's ends at host_done)
        self._items: queue.Queue[Any] = queue.Queue(maxsize=QUEUED_BATCHES)
        self.shared = False  # whether a read was shared

    def guest_done(self) -> None:
        """The guest's thread has finished: a host still waiting for its ``convert`` reads alone."""
        self._settled.set()
        self._gone.set()

    # ------------------------------------------------------------------ called by map_latest_traces
    def claim(
        self, key: tuple[str, bool], convert: Callable[[Any], Any], pack: Callable[[list[Any]], Any] | None = None
    ) -> Iterator[Any] | None:
        """A guest's items (with ``pack``, a batch per chunk of them, packed where they were made), when this call
        of another thread than the host's can share the read; else None."""
        if key != self.key or threading.get_ident() == self.host:
            return None
        with self._lock:
            if self._guest is not None or self._started or self._gone.is_set():
                return None
            self._guest, self._guest_pack = convert, pack
        self._settled.set()
        return self._take()

    def hosting(self, key: tuple[str, bool]) -> bool:
        """Whether this call is the host's read (its thread, these traces, not read yet)."""
        return key == self.key and threading.get_ident() == self.host and not self._started

    def host_convert(self, convert: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
        """Wait for the guest; the function that converts a trace for both (None: the host reads alone)."""
        self._settled.wait()
        with self._lock:
            self._started = True
            guest = self._guest
        if guest is None:
            return None
        self.shared = True
        return _Both(convert, guest)

    @property
    def guest_packs(self) -> bool:
        """Whether the guest reads batches (its items packed a chunk at a time where they are made)."""
        return self._guest_pack is not None

    def split(self, pack: Callable[[list[Any]], Any] | None = None) -> _Split:
        """How a chunk of pairs converted by :meth:`host_convert` is split where it was converted: the host's items
        (with ``pack``, packed), and the guest's (packed as the guest asked, else a list)."""
        return _Split(pack, self._guest_pack)

    def feed(self, chunks: Iterable[tuple[Any, Any]], packed: bool = False) -> Iterator[Any]:
        """The host's items of ``chunks`` (each split by :meth:`split`: the host's part, the guest's), or with
        ``packed`` its packs, as they are; the guest's parts handed over as they come. The guest's read ends when
        the host's thread calls :meth:`host_done` (having let go of what its own read held)."""
        batch: list[Any] = []  # the guest's items, handed over :data:`BATCH` at a time (its packs one at a time)
        try:
            for mine, theirs in chunks:
                if self._guest_pack is not None:
                    batch.append(theirs)
                else:
                    batch.extend(theirs)
                if len(batch) >= BATCH or self._guest_pack is not None:
                    self._send(batch)
                    batch = []
                if packed:
                    yield mine
                else:
                    yield from mine
            self._send(batch)
            self._complete = True
        except BaseException as exc:  # the site abandoned, or an error: the guest must not wait for the rest
            self._send(_Stopped(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__))
            self._over.set()
            raise

    def host_done(self) -> None:
        """The host sends nothing more: after a complete read the guest's read ends; otherwise (a read that
        never began, or stopped) a guest waiting for items raises :class:`JointReadStopped`."""
        with self._lock:
            complete, self._complete = self._complete, False
        if complete:
            self._send(_END)
        self._over.set()

    # ------------------------------------------------------------------ both sides
    def _send(self, item: Any) -> None:
        if isinstance(item, list) and not item:
            return
        while not self._gone.is_set():
            try:
                self._items.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def _take(self) -> Iterator[Any]:
        try:
            while True:
                try:
                    item = self._items.get(timeout=_POLL_S)
                except queue.Empty:
                    if self._over.is_set() and self._items.empty():  # what the host sent last was taken
                        raise JointReadStopped("the viewer's read of the traces ended before it began, or before "
                                               "its end") from None
                    continue
                if item is _END:
                    return
                if isinstance(item, _Stopped):
                    raise JointReadStopped(f"the read shared with the viewer stopped before its end ({item.reason})")
                yield from item
        finally:
            self._gone.set()


_ACTIVE: list[JointRead] = []
_ACTIVE_LOCK = threading.Lock()


def active_joint() -> JointRead | None:
    """The joint read open in this process, if any."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def joint_read(file: Path, include_failed: bool) -> Iterator[JointRead]:
    """Open a joint read of ``file``'s traces that count for this thread (the host) and one guest thread.

    The guest's thread must call :meth:`JointRead.guest_done` when it ends (however it ends), or the host's
    read waits for it. Leaving the block ends both sides: a guest still waiting for items raises
    :class:`JointReadStopped`.
    """
    joint = JointRead(file, include_failed)
    with _ACTIVE_LOCK:
        if _ACTIVE:
            raise RuntimeError("a joint read is already open in this process")
        _ACTIVE.append(joint)
    try:
        yield joint
    finally:
        joint.host_done()
        joint.guest_done()
        with _ACTIVE_LOCK:
            _ACTIVE.remove(joint)
