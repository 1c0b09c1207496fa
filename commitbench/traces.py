"""Episode traces: everything that happened in one run of one episode.

Traces are pydantic models written as JSON lines. Every observation, assistant turn, tool call
(with its result), model call and the agent/run identity are kept, so signals, judges and
reports can be recomputed from traces alone.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from commitbench.bounds import clip
from commitbench.jsonl import JsonlError, append_lines, iter_lines_at, iter_models, parse_line
from commitbench.jsonl import file_state as jsonl_file_state
from commitbench.ledger.models import AuditEvent
from commitbench.llm.response import ModelResponse, reasoning_token_count
from commitbench.protocol import Event, EventKind, Revision, ToolCallRecord
from commitbench.sourcelines import remember

TRACE_SCHEMA_VERSION = 1


class AgentIdentity(BaseModel):
    """Who played the episode; part of a run's identity."""

    name: str = Field(description="Agent name, e.g. 'creditor-rule' or 'chat:qwen3-8b'.")
    kind: str = Field(description="'reference' (no model) or 'chat' (model-backed).")
    settings: dict[str, Any] = Field(default_factory=dict, description="Model and generation settings, if any.")


class TurnRecord(BaseModel):
    """One assistant turn: the message that opened it, the calls made, how it ended."""

    index: int = Field(description="Turn number (0-based).")
    opened_by: Event = Field(description="The incoming message the turn answers.")
    calls: list[ToolCallRecord] = Field(default_factory=list, description="Tool calls in order.")
    reply: str | None = Field(default=None, description="Plain-text reply that ended the turn, if any.")
    reply_channel: str = Field(default="", description="Where the reply was posted.")
    ended_by: str = Field(default="", description="reply, end_turn, turn_limit or episode_end.")
    revisions: list[Revision] = Field(
        default_factory=list, description="Interventions that replaced the agent's reply, with the original."
    )


class ModelCallRecord(BaseModel):
    """One model call made while playing the episode (or its cache hit)."""

    turn: int = Field(description="Turn during which the call was made.")
    purpose: str = Field(default="agent", description="agent, judge, rewrite, ...")
    cache_key: str = Field(default="", description="Content hash of the request.")
    cache_hit: bool = Field(default=False, description="Served from the cache without an HTTP call.")
    latency_s: float = Field(default=0.0, description="Wall time of the call (a cache hit: the lookup).")
    model_time_s: float | None = Field(
        default=None,
        description="Wall time of the server call that produced the completion (for a cache hit, the original "
        "call's, so a resumed or replayed run reports what its calls cost); null when unknown.",
    )
    prompt_tokens: int = Field(default=0, description="Prompt tokens reported by the server.")
    completion_tokens: int = Field(default=0, description="Completion tokens reported by the server.")
    reasoning_tokens: int = Field(
        default=0, description="Reasoning tokens: the server's count, or an estimate from the reasoning text."
    )
    reasoning_tokens_estimated: bool = Field(
        default=False, description="Whether reasoning_tokens is estimated (the server reported none)."
    )
    finish_reason: str = Field(default="", description="Server finish reason.")
    text: str = Field(default="", description="Reply text.")
    reasoning: str = Field(default="", description="Reasoning text, kept apart from the reply.")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, description="Raw tool calls (name, arguments).")
    error: str = Field(default="", description="Error kind and message when the call failed.")
    replica_move: str = Field(
        default="",
        description="Set when the episode moved to another replica of the model for this call: 'FROM -> TO: why'.",
    )


def call_record(response: ModelResponse, turn: int, max_argument_bytes: int, purpose: str = "agent") -> ModelCallRecord:
    """The trace's record of one model call (its error, refusal, tokens, cache status, tool calls cut to the
    argument bound): every call an agent makes through the harness is recorded so."""
    if response.error is not None:
        error = f"{response.error.kind.value}: {response.error.message}"
    elif response.refusal:
        error = f"refusal: {response.refusal}"
    else:
        error = ""
    reasoning_tokens, estimated = reasoning_token_count(response.usage.reasoning_tokens, response.reasoning)
    return ModelCallRecord(
        turn=turn,
        purpose=purpose,
        cache_key=response.cache_key,
        cache_hit=response.cache_hit,
        latency_s=response.latency_s,
        model_time_s=response.model_time_s,
        prompt_tokens=response.usage.prompt_tokens,
        completion_tokens=response.usage.completion_tokens,
        reasoning_tokens=reasoning_tokens,
        reasoning_tokens_estimated=estimated,
        finish_reason=response.finish_reason or "",
        text=response.text or "",
        reasoning=response.reasoning or "",
        tool_calls=[{"id": c.id, "name": c.name, "arguments": clip(c.arguments_raw, max_argument_bytes)}
                    for c in response.tool_calls],
        error=error,
        replica_move="; ".join(response.replica_moves),
    )


class PartyRefusal(BaseModel):
    """A text of a party model that never reached the agent, or an answer the budget did not allow."""

    role: str = Field(description="Role key of the person (creditor, delegate, peer, ...).")
    step: int = Field(description="Script step of the message voiced or answered.")
    kind: str = Field(description="event (a scripted message), answer (to the assistant) or budget (none allowed).")
    problems: list[str] = Field(default_factory=list, description="What the check found wrong, per rejected text.")


class PartiesRecord(BaseModel):
    """What the live parties did in one episode (the trace of a scripted-arm run has none)."""

    party_model: str = Field(description="The served name of the party model.")
    voiced_events: int = Field(default=0, description="Scripted messages a party model was asked to word.")
    event_fallbacks: int = Field(default=0, description="Of those, shown in the script's words (all failed).")
    answers: int = Field(default=0, description="Answers to the assistant a party model was asked for.")
    answer_fallbacks: int = Field(default=0, description="Of those, refused after every text failed the check.")
    budget_refusals: int = Field(default=0, description="Messages to a person left unanswered: the budget was spent.")
    refusals: list[PartyRefusal] = Field(default_factory=list, description="Each fallback and refusal.")


class EpisodeTrace(BaseModel):
    """The complete record of one episode run."""

    schema_version: int = Field(default=TRACE_SCHEMA_VERSION, description="Trace format version.")
    env_id: str = Field(description="Registered environment id.")
    episode_id: str = Field(description="Episode content-hash id.")
    factors: dict[str, str | int] = Field(description="Design factors of the episode.")
    agent: AgentIdentity | None = Field(default=None, description="Who played it.")
    interventions: list[str] = Field(default_factory=list, description="Names of the wrappers applied, outermost last.")
    sample: int = Field(default=0, description="Sample index (repeated runs of the same cell).")
    run_key: str = Field(default="", description="Identity of the (model, interventions, episode, sample) cell.")
    events: list[Event] = Field(default_factory=list, description="Every observed event, in order.")
    turns: list[TurnRecord] = Field(default_factory=list, description="Every assistant turn.")
    tool_errors: int = Field(default=0, description="Tool calls rejected or failed by bad input.")
    invalid_actions: int = Field(default=0, description="Actions that could not be parsed.")
    turn_limit_hits: int = Field(default=0, description="Turns ended because the call budget was spent.")
    terminated: bool = Field(default=False, description="The episode reached its end.")
    truncated: bool = Field(default=False, description="The episode was cut short.")
    reward: float = Field(default=0.0, description="Terminal reward (1.0 when the action outcome was correct).")
    steps: int = Field(default=0, description="Number of env.step calls.")
    started_at: float = Field(default=0.0, description="Unix time the episode started.")
    duration_s: float = Field(default=0.0, description="Wall time of the run.")
    model_calls: list[ModelCallRecord] = Field(default_factory=list, description="Model calls made by the agent.")
    prompt_hashes: dict[str, str] = Field(default_factory=dict, description="sha256 of prompt templates used.")
    infra_error: str | None = Field(default=None, description="Set when the run failed for infrastructure reasons.")
    parties: PartiesRecord | None = Field(
        default=None, exclude_if=lambda record: record is None,
        description="The live parties' counts (live-parties arm only; left out of scripted traces).",
    )
    ledger_audit: list[AuditEvent] = Field(
        default_factory=list,
        description="The audit trail of the commitment ledger the environment kept for the episode (the follow-up "
        "suite's follow-through mode: created, fired, delivered or failed); empty when it kept none.",
    )

    def assistant_messages(self) -> list[Event]:
        """Messages the assistant wrote after its pre-seeded promise."""
        return [e for e in self.events if e.kind is EventKind.ASSISTANT and e.act != "promise"]

    def tool_calls(self) -> Iterator[ToolCallRecord]:
        for turn in self.turns:
            yield from turn.calls


TRACES_FILE = "traces.jsonl"
# What to do about a damaged line of a trace file (said with every error that names one).
REPAIR_HINT = "delete or repair that line; 'commitbench run' plays its cell again"
T = TypeVar("T")
P = TypeVar("P")


class KeyedRun(Protocol):
    """What :func:`latest_by_key` reads of a trace (a trace, or a record holding only these two fields)."""

    @property
    def run_key(self) -> str: ...

    @property
    def infra_error(self) -> str | None: ...


K = TypeVar("K", bound=KeyedRun)


class TraceFileError(JsonlError):
    """A trace file line could not be read; names the file and line."""


def append_traces(path: Path | str, traces: Iterable[EpisodeTrace]) -> int:
    """Append traces to a JSONL file, one line each, flushed and fsynced (a crash loses no finished trace)."""
    return append_lines(path, (t.model_dump_json() for t in traces))


def trace_file(path: Path | str) -> Path:
    """The trace file of a run directory (FileNotFoundError when it has none), or ``path`` itself."""
    path = Path(path)
    if path.is_dir():
        if not (path / TRACES_FILE).exists():
            raise FileNotFoundError(f"{path / TRACES_FILE} does not exist; is {path} a run directory?")
        return path / TRACES_FILE
    return path


def iter_traces(path: Path | str) -> Iterator[EpisodeTrace]:
    """Stream the traces of a JSONL file (or of a run directory's ``traces.jsonl``), one at a time.

    A torn last line (a crash mid-write) is skipped; any other bad line raises
    :class:`TraceFileError` naming the file and line.
    """
    try:
        yield from iter_models(trace_file(path), EpisodeTrace, what="trace")
    except JsonlError as exc:
        raise TraceFileError(f"{exc}; {REPAIR_HINT}") from None


def read_traces(path: Path | str) -> list[EpisodeTrace]:
    """Every trace of a JSONL file (see :func:`iter_traces`)."""
    return list(iter_traces(path))


def latest_by_key(traces: Iterable[K], convert: Callable[[K], T], include_failed: bool = False) -> list[T]:
    """One item per run key, converted from the trace that counts for it, in first-seen order.

    The last good trace of a key counts; a trace with an infrastructure error never replaces a good
    one. When every try of a key failed, the key is left out, or (``include_failed``) its last
    failed trace counts. Traces without a run key count each on their own.
    """
    order: dict[str, None] = {}
    good: dict[str, T] = {}
    failed: dict[str, T] = {}
    for index, trace in enumerate(traces):
        key = trace.run_key or f"#{index}"
        order.setdefault(key)
        if not trace.infra_error:
            good[key] = convert(trace)
        elif include_failed and key not in good:
            failed[key] = convert(trace)
    return [good[key] if key in good else failed[key] for key in order if key in good or key in failed]


def latest_traces(path: Path | str, include_failed: bool = False) -> list[EpisodeTrace]:
    """The trace that counts for each run key of a trace file or run directory (see :func:`latest_by_key`)."""
    return latest_by_key(iter_traces(path), lambda trace: trace, include_failed)


class _TraceHead(BaseModel):
    """The two fields of a trace line that decide whether it counts (the rest of the line is not read)."""

    run_key: str = ""
    infra_error: str | None = None


def count_latest_traces(path: Path | str, include_failed: bool = False) -> int:
    """How many traces :func:`iter_latest_traces` yields (only each line's run key and error are read, and not
    again by the reads of the same file, unchanged, that follow in this process)."""
    try:
        return _latest_lines(trace_file(path)).count(include_failed)
    except JsonlError as exc:
        raise TraceFileError(str(exc)) from None


class LatestLines:
    """Where the traces that count of a trace file are (see :func:`latest_by_key`): the byte offset and line
    number of each, in file order, and whether it finished without an infrastructure error.

    Filled a line at a time (:meth:`add`, in file order) by whichever pass checks the file's lines, so the
    traces that count are then read by a seek each, and no line is parsed as a trace that does not count.
    Kept as arrays: 17 bytes a trace.
    """

    def __init__(self) -> None:
        self._offsets = array("q")
        self._numbers = array("q")
        self._good: dict[str, int] = {}
        self._failed: dict[str, int] = {}
        self.offsets = array("q")
        self.numbers = array("q")
        self.good = bytearray()

    def add(self, number: int, offset: int, run_key: str, good: bool) -> None:
        """One more line (its number, where it starts, its run key, whether it finished well)."""
        index = len(self._offsets)
        self._offsets.append(offset)
        self._numbers.append(number)
        key = run_key or f"#{index}"
        if good:
            self._good[key] = index
        elif key not in self._good:
            self._failed[key] = index

    def finish(self) -> LatestLines:
        """Keep the lines that count (the last good line of each key, else its last failed one), in file order."""
        chosen = set(self._good.values())
        chosen.update(index for key, index in self._failed.items() if key not in self._good)
        good = set(self._good.values())
        for index in sorted(chosen):
            self.offsets.append(self._offsets[index])
            self.numbers.append(self._numbers[index])
            self.good.append(index in good)
        self._offsets, self._numbers, self._good, self._failed = array("q"), array("q"), {}, {}
        return self

    def count(self, include_failed: bool = False) -> int:
        return len(self.good) if include_failed else sum(self.good)

    def to_bytes(self) -> bytes:
        """The lines that count (once :meth:`finish` ran) as bytes, for :mod:`commitbench.readindex`."""
        return len(self.good).to_bytes(8, "little") + self.offsets.tobytes() + self.numbers.tobytes() + bytes(self.good)

    @classmethod
    def from_bytes(cls, data: bytes) -> LatestLines | None:
        """What :meth:`to_bytes` wrote; None for bytes of another length than it writes."""
        count = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
        if count < 0 or len(data) != 8 + 17 * count:
            return None
        lines = cls()
        lines.offsets.frombytes(data[8:8 + 8 * count])
        lines.numbers.frombytes(data[8 + 8 * count:8 + 16 * count])
        lines.good = bytearray(data[8 + 16 * count:])
        return lines


_SCANNED: dict[tuple[Any, ...], LatestLines] = {}  # the last file whose lines were checked: its state -> its lines
# The lines that count, in the read index of :mod:`commitbench.readindex` (the version of their bytes in the name).
LINES_INDEX = "trace-lines/1"


def remember_latest_lines(file: Path, state: tuple[Any, ...], lines: LatestLines) -> None:
    """Keep the lines that count of ``file``, as found by a pass that checked every line of it while it was in
    ``state`` (:func:`commitbench.jsonl.file_state`, taken before that pass), for the next read of the same file
    unchanged: in this process, and for a large file in the read index (:mod:`commitbench.readindex`), for the
    next process too."""
    from commitbench.readindex import save_index, worth_indexing

    _SCANNED.clear()
    _SCANNED[state] = lines
    if worth_indexing(state):
        save_index(LINES_INDEX, state, lines.to_bytes())


def stored_latest_lines(state: tuple[Any, ...]) -> LatestLines | None:
    """The lines that count of a file in ``state``, as a pass over it in that state found them (in this process,
    or one before it: :func:`remember_latest_lines`); None when none did."""
    from commitbench.readindex import load_index, worth_indexing

    known = _SCANNED.get(state)
    if known is None and worth_indexing(state):
        data = load_index(LINES_INDEX, state)
        known = LatestLines.from_bytes(data) if data is not None else None
        if known is not None:
            _SCANNED.clear()
            _SCANNED[state] = known
    return known


def file_state(path: Path | str) -> tuple[Any, ...]:
    """The state of a trace file (or a run directory's) to pass to :func:`remember_latest_lines`."""
    return jsonl_file_state(trace_file(path))


def _latest_lines(file: Path) -> LatestLines:
    """The lines that count: as the last pass over the file found them (the line check's, or this function's; in
    this process or, for a large file, in the read index) when the file has not changed since, else from a pass
    that reads only each line's run key and error (remembered in turn)."""
    state = jsonl_file_state(file)
    known = stored_latest_lines(state)
    if known is not None:
        return known
    lines = LatestLines()
    for number, offset, line in iter_lines_at(file):
        head = parse_line(file, _TraceHead, "trace", number, line)
        if head is not None:
            lines.add(number, offset, head.run_key, not head.infra_error)
    remember_latest_lines(file, state, lines.finish())
    return lines


def _chosen(path: Path | str, include_failed: bool) -> tuple[Path, array[int], array[int]]:
    """The trace file, and the byte offsets and line numbers of the lines that count."""
    file = trace_file(path)
    try:
        lines = _latest_lines(file)
    except JsonlError as exc:
        raise TraceFileError(str(exc)) from None
    if include_failed:
        return file, lines.offsets, lines.numbers
    keep = [index for index, good in enumerate(lines.good) if good]
    return file, array("q", (lines.offsets[i] for i in keep)), array("q", (lines.numbers[i] for i in keep))


def _read_lines(file: Path, offsets: array[int], numbers: array[int], start: int, stop: int) -> Iterator[EpisodeTrace]:
    """The traces at ``offsets[start:stop]`` (a seek each, none where the lines follow each other)."""
    with file.open("rb") as handle:
        position = 0
        for index in range(start, stop):
            offset = offsets[index]
            if offset != position:
                handle.seek(offset)
            raw = handle.readline()
            position = offset + len(raw)
            trace = _parse_trace(file, numbers[index], raw)
            if trace is not None:
                remember(trace, raw)  # for a reader that writes the trace out again (commitbench.sourcelines)
                yield trace


def iter_latest_traces(path: Path | str, include_failed: bool = False) -> Iterator[EpisodeTrace]:
    """The traces that count (see :func:`latest_by_key`), streamed in file order, never all in memory.

    Which lines count is found first (by the line check of :func:`commitbench.runcells.scan_trace_file` when
    this process just made it on the unchanged file, else by a pass that reads only each line's run key and
    error); then only those lines are read again and parsed. A long read shows its progress when
    :func:`commitbench.progress.reading_progress` asks for it.
    """
    from commitbench.progress import reading

    file, offsets, numbers = _chosen(path, include_failed)
    progress = reading(f"reading {file.parent.name or file.name}", len(offsets))
    try:
        for trace in _read_lines(file, offsets, numbers, 0, len(offsets)):
            yield trace
            if progress is not None:
                progress.advance()
                progress.poll()
    finally:
        if progress is not None:
            progress.close()


# Traces read by one task of a process pool (:func:`map_latest_traces`), and how many a read must count for
# the pool to be worth its start (about a second).
POOL_CHUNK = 250
POOL_THRESHOLD = 4_000
_POOL_WORK: tuple[Path, array[int], array[int], Callable[[EpisodeTrace], Any], Callable[[list[Any]], Any]] | None = None


def _pool_task(bounds: tuple[int, int]) -> Any:
    assert _POOL_WORK is not None  # set before the pool's processes were forked
    file, offsets, numbers, convert, pack = _POOL_WORK
    return pack([convert(trace) for trace in _read_lines(file, offsets, numbers, *bounds)])


def pool_workers() -> int:
    """The processes :func:`map_latest_traces` reads with: one per core this process may use."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def map_latest_traces(
    path: Path | str, convert: Callable[[EpisodeTrace], T], include_failed: bool = False, workers: int | None = None,
    threshold: int | None = None,
) -> Iterator[T]:
    """``convert`` of each trace that counts (see :func:`iter_latest_traces`), in file order.

    With more than one core and at least ``threshold`` traces (:data:`POOL_THRESHOLD`), the traces are read,
    parsed and converted in a pool of ``workers`` forked processes (:func:`pool_workers` by default), a
    chunk of lines each (two chunks a process read ahead at most, so memory stays bounded however slowly
    the results are used), and only what ``convert`` returns comes back (so it must pickle, and should be
    small and cheap to pickle: a row, text, not the trace); elsewhere in this process, one trace at a time.
    ``convert`` sees the same traces in the same order either way, and an unreadable line raises the same
    error. Within a joint read (:mod:`commitbench.jointread`) of these traces, the host's call and a guest
    thread's call share one read: each trace is converted by both functions where it was parsed.
    """
    from commitbench.jointread import active_joint

    joint = active_joint()
    if joint is not None:
        key = (str(trace_file(path).resolve()), include_failed)
        taken = joint.claim(key, convert)
        if taken is not None:  # a guest: what the host's read converts for it
            yield from taken
            return
        if joint.hosting(key):
            both = joint.host_convert(convert)
            if both is not None:
                # A guest reading batches has them packed in chunks here too (a trace at a time otherwise).
                here = POOL_CHUNK if joint.guest_packs else 1
                yield from joint.feed(_map_latest(path, both, include_failed, workers, threshold, joint.split(), here))
                return
    for batch in _map_latest(path, convert, include_failed, workers, threshold):
        yield from batch


def map_latest_batches(
    path: Path | str, convert: Callable[[EpisodeTrace], T], pack: Callable[[list[T]], P], include_failed: bool = False,
    workers: int | None = None, threshold: int | None = None,
) -> Iterator[P]:
    """:func:`map_latest_traces`, with ``pack`` of each chunk of ``convert``'s results (at most :data:`POOL_CHUNK`
    of them, in file order) made where they were made, and only that coming back: what comes back of a chunk
    is one object (columns of values, say), made and taken in a few steps instead of one per trace. A joint
    read's guest call gets its items packed the same way, in chunks of :data:`POOL_CHUNK`."""
    from commitbench.jointread import active_joint

    joint = active_joint()
    if joint is not None:
        key = (str(trace_file(path).resolve()), include_failed)
        taken = joint.claim(key, convert, pack)
        if taken is not None:  # a guest: the host's read packs its chunks as this call would
            yield from taken
            return
        if joint.hosting(key):
            both = joint.host_convert(convert)
            if both is not None:
                yield from joint.feed(_map_latest(path, both, include_failed, workers, threshold, joint.split(pack),
                                                  POOL_CHUNK), packed=True)
                return
    yield from _map_latest(path, convert, include_failed, workers, threshold, pack, POOL_CHUNK)


def _map_latest(
    path: Path | str, convert: Callable[[EpisodeTrace], T], include_failed: bool, workers: int | None,
    threshold: int | None, pack: Callable[[list[T]], Any] = list, here: int = 1,
) -> Iterator[Any]:
    """``pack`` of each chunk of ``convert``'s results: of :data:`POOL_CHUNK` traces in a pool, of ``here`` traces
    in this process."""
    from commitbench.forkpool import can_fork, ordered_map
    from commitbench.progress import reading

    global _POOL_WORK
    file, offsets, numbers = _chosen(path, include_failed)
    count = len(offsets)
    workers = pool_workers() if workers is None else workers
    forking = can_fork()
    progress = reading(f"reading {file.parent.name or file.name}", count)
    try:
        if workers < 2 or count < (POOL_THRESHOLD if threshold is None else threshold) or not forking:
            items: list[T] = []
            for trace in _read_lines(file, offsets, numbers, 0, count):
                items.append(convert(trace))
                if len(items) == here:
                    yield pack(items)
                    _advance(progress, len(items))
                    items = []
            if items:
                yield pack(items)
                _advance(progress, len(items))
            return
        _POOL_WORK = (file, offsets, numbers, convert, pack)
        chunks = [(start, min(start + POOL_CHUNK, count)) for start in range(0, count, POOL_CHUNK)]
        # At most two chunks per process are read ahead: what comes back waits here no longer than that.
        with closing(ordered_map(_pool_task, chunks, workers)) as batches:
            for start, batch in zip(range(0, count, POOL_CHUNK), batches, strict=False):
                yield batch
                _advance(progress, min(POOL_CHUNK, count - start))
    finally:
        _POOL_WORK = None
        if progress is not None:
            progress.close()


def _advance(progress: Any, traces: int) -> None:
    if progress is not None:
        for _ in range(traces):
            progress.advance()
        progress.poll()


def _parse_trace(file: Path, number: int, raw: bytes) -> EpisodeTrace | None:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not raw.endswith(b"\n"):
            return None  # a torn tail
        raise TraceFileError(f"{file}:{number}: not UTF-8 text (byte {exc.start + 1} of the line: {exc.reason}); "
                             f"{REPAIR_HINT}") from None
    try:
        return parse_line(file, EpisodeTrace, "trace", number, line)
    except JsonlError as exc:
        raise TraceFileError(f"{exc}; {REPAIR_HINT}") from None
