"""JSON-lines files that survive a crash: fsynced appends, torn-tail repair, streaming typed reads.

Every append-only file of a run directory (traces, labels) goes through these three functions, so
they share one guarantee: a line is either whole and on disk, or it is a *torn tail* (the last line,
cut short by a crash in mid-write), which :func:`repair_torn_tail` removes before the next append
and :func:`iter_models` skips when reading. Any other unreadable line is an error that names the
file and the line number.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["JsonlError", "append_lines", "iter_lines", "iter_lines_at", "iter_models", "parse_line", "repair_torn_tail",
           "write_atomic"]

ModelT = TypeVar("ModelT", bound=BaseModel)
_BLOCK = 65536


class JsonlError(ValueError):
    """A line of a JSON-lines file could not be read; the message names the file and the line."""


def file_state(path: Path | str) -> tuple[object, ...]:
    """What tells one state of a file from another (an append, a rewrite, another file at the same path): a
    reader that indexed the file in one state may reuse its index while the state is the same."""
    path = Path(path)
    stat = path.stat()
    return (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def append_lines(path: Path | str, lines: Iterable[str]) -> int:
    """Append ``lines`` (each without its newline) in one write, flushed and fsynced; returns the count.

    A crash loses no line that this function returned for: either the whole batch is on disk, or
    the file ends in a torn tail that :func:`repair_torn_tail` removes.
    """
    path = Path(path)
    items = list(lines)
    if not items:
        return 0
    payload = "".join(f"{line}\n" for line in items)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    return len(items)


def repair_torn_tail(path: Path | str) -> int:
    """Cut a partial last line (a crash in mid-write) off a file; returns the bytes removed.

    Reads backwards from the end in blocks, so a large file costs one block, not a full read.
    """
    path = Path(path)
    if not path.exists():
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        position, keep = size, 0
        while position > 0:
            start = max(0, position - _BLOCK)
            handle.seek(start)
            chunk = handle.read(position - start)
            index = chunk.rfind(b"\n")
            if index >= 0:
                keep = start + index + 1
                break
            position = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error.get("loc", ())) or "(line)"
        return f"{where}: {error['msg']}"[:500]
    if isinstance(exc, RecursionError):
        return "nested too deep to read"
    return str(exc)[:500]


def iter_lines(path: Path | str) -> Iterator[tuple[int, str]]:
    """The non-blank lines of ``path`` with their numbers (1-based), decoded, newline kept.

    Reads bytes and decodes line by line, so a line that is not UTF-8 is named exactly: it raises
    :class:`JsonlError` with the file, the line and the byte, unless it is a torn tail (the last
    line, without its newline: a crash can cut a character in two), which is skipped.
    """
    for number, _, line in iter_lines_at(path):
        yield number, line


def iter_lines_at(
    path: Path | str, start: int = 0, stop: int | None = None, first_number: int = 1,
    counted: list[int] | None = None,
) -> Iterator[tuple[int, int, str]]:
    """As :func:`iter_lines`, with the byte offset at which each line starts (to read it again by a seek).

    ``start`` and ``stop`` read only the lines that start in that byte range (``start`` at a line's start);
    ``first_number`` is the number of the first of them. ``counted[0]``, when given, holds the number of
    lines read so far, blank ones included.
    """
    path = Path(path)
    offset = start
    with path.open("rb") as handle:
        if start:
            handle.seek(start)
        for number, raw in enumerate(handle, start=first_number):
            if stop is not None and offset >= stop:
                return
            if counted is not None:
                counted[0] = number - first_number + 1
            at, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not raw.endswith(b"\n"):
                    return  # a torn tail
                raise JsonlError(
                    f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the line: {exc.reason})"
                ) from None
            yield number, at, line


def iter_models(path: Path | str, model: type[ModelT], what: str = "record") -> Iterator[ModelT]:
    """Stream the lines of ``path`` as ``model`` instances, in order.

    Blank lines are ignored. A last line without its newline that does not decode or parse is a
    torn tail and is skipped; any other line that does not parse raises :class:`JsonlError`
    naming the file, the line and why.
    """
    path = Path(path)
    for number, line in iter_lines(path):
        parsed = parse_line(path, model, what, number, line)
        if parsed is not None:
            yield parsed


def parse_line(path: Path, model: type[ModelT], what: str, number: int, line: str) -> ModelT | None:
    """Line ``number`` of ``path`` as a ``model`` (see :func:`iter_models`): None for a torn tail, a
    :class:`JsonlError` naming the file and line for any other line that does not parse."""
    try:
        return model.model_validate_json(line)
    except (ValidationError, json.JSONDecodeError, ValueError, RecursionError) as exc:
        if not line.endswith("\n"):
            return None  # a torn tail: the crash cut the final write short
        raise JsonlError(f"{path}:{number}: not a valid {what}: {_reason(exc)}") from None


def write_atomic(path: Path | str, text: str) -> None:
    """Replace ``path`` with ``text`` through a temporary file and a rename (readers never see half a file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # leave no half-written file behind (a full disk, a read-only directory)
        raise
