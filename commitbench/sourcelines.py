"""The line of a JSON-lines file an object was just parsed from, for a reader that writes the object out again.

The viewer writes each follow-up run's trace and label records into the site as JSON. Written anew from
the parsed models, that is about a sixth of the time its reading processes take; the lines the files hold
are that JSON already. A reader that parses a line (:func:`commitbench.traces.iter_latest_traces` and
:func:`commitbench.traces.map_latest_traces`, :class:`commitbench.judges.stored.StoredLabels`) calls
:func:`remember`; whoever converts the object just after asks :func:`line_of`. Only the last
:data:`KEPT` objects parsed are remembered, by identity, so nothing accumulates and an object parsed
elsewhere, or long ago, has no line (the caller writes it anew).
"""

from __future__ import annotations

import weakref

__all__ = ["KEPT", "line_of", "remember"]

KEPT = 16  # objects whose lines are remembered (a trace and its records from each labels file)

# id(object) -> (a weak reference to it, its line). One dict for every thread: an entry is found only for the very
# object it was made for (alive, so its id names no other), so a thread that parses meanwhile (or a clear) can only
# make a line unknown, never a wrong one; and it keeps no parsed object alive (a streaming read holds one at a time).
_recent: dict[int, tuple[weakref.ref[object], bytes]] = {}


def remember(parsed: object, line: bytes) -> None:
    """Remember that ``parsed`` (an object that takes weak references, such as a pydantic model) was parsed from
    ``line`` (its end of line included or not)."""
    if len(_recent) >= KEPT:
        _recent.clear()
    _recent[id(parsed)] = (weakref.ref(parsed), line)


def line_of(parsed: object) -> bytes | None:
    """The line ``parsed`` was parsed from, without its end of line, if it is one of the last objects parsed
    (:func:`remember`); None otherwise."""
    found = _recent.get(id(parsed))
    if found is None or found[0]() is not parsed:
        return None
    line = found[1]
    return line.rstrip(b"\r\n") if line.endswith(b"\n") else line
