"""JSON read and written fast with ``orjson``, with the standard library's values, errors and bytes.

The gateway parses every request, every reply (and every streamed event) and writes every reply and log line,
and the model-call cache hashes the canonical JSON of every call's prompt; ``orjson`` does that in a fraction
of the standard library's time. The two differ at the edges, so the standard library decides there, and every
value and every error is the one ``json`` would give:

* ``orjson`` refuses what ``json`` accepts (``NaN``, ``Infinity``, numbers too large for a double, lone
  surrogates, UTF-16 bytes) and words its errors differently: on any ``orjson`` error the text is parsed again
  by ``json``, which returns the value or raises the error it always raised;
* ``orjson`` reads integers beyond 64 bits as floats: a text with 19 digits in a row goes to ``json`` (a text
  over 64 KiB is read by ``orjson`` first and goes to ``json`` when a float of 2**63 or more is in it);
* ``orjson`` writes non-finite floats as ``null`` and refuses lone surrogates, integers beyond 64 bits and
  non-string keys: the non-finite floats ``json`` reads are kept as :class:`NonFinite`, which ``orjson``
  refuses, and whatever ``orjson`` refuses is written by ``json`` (as ``NaN``, ``Infinity``, ...).

Written JSON is compact (no spaces after ``:`` and ``,``). :func:`canonical` writes sorted keys too, byte for
byte what ``json`` writes (see there).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

_LONG_DIGITS_BYTES = re.compile(rb"\d{19}")
_LONG_DIGITS_TEXT = re.compile(r"\d{19}")


class NonFinite(float):
    """A NaN or infinity read by the standard library (written back as it writes them, not as ``null``)."""


def _constant(name: str) -> float:
    return NonFinite(name)  # NaN, Infinity, -Infinity: float() reads the same names


def _float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else NonFinite(value)


# Texts longer than this are parsed first and then looked over for a float that was a long integer (a walk over
# the values is cheaper than a scan of every byte, which holds the interpreter for 170 ms on 12 MB).
_SCAN_LIMIT = 64 * 1024
# orjson reads an integer beyond 64 bits as a float at least this large.
_LONG_INTEGER_FLOAT = float(2**63)


def _holds_long_integer_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if abs(item) >= _LONG_INTEGER_FLOAT:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads(data: bytes | str) -> Any:
    """The value of a JSON text; raises what ``json.loads`` raises (``ValueError``, ``RecursionError``)."""
    if len(data) <= _SCAN_LIMIT:
        long_digits = (_LONG_DIGITS_BYTES.search(data) if isinstance(data, bytes)
                       else _LONG_DIGITS_TEXT.search(data))
        if long_digits is None:
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
    else:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if not _holds_long_integer_float(value):
                return value
    return json.loads(data, parse_constant=_constant, parse_float=_float)


_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _refuse(value: Any) -> Any:
    raise TypeError(f"not a plain JSON value: {type(value).__name__}")


def canonical_text(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is; NaN, infinities and values that are not JSON are refused."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_refuse
    )


def canonical(value: Any) -> bytes:
    """:func:`canonical_text` as UTF-8, through ``orjson`` where it writes the same bytes.

    For every value :func:`canonical_text` writes, these are its bytes. What it refuses is refused here
    too (lone surrogates, integers beyond 64 bits, non-string keys, sets, datetimes, dataclasses and
    other objects raise as they do there), except three kinds of value ``orjson`` writes without a word:
    a non-finite float (written ``null``), a UUID and an enum member that is no ``str`` or ``int``.
    """
    try:
        out = orjson.dumps(value, default=_refuse, option=_CANONICAL)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return canonical_text(value).encode("utf-8")
    if _may_hold_small_float(out):
        return canonical_text(value).encode("utf-8")
    return out


def _may_hold_small_float(out: bytes) -> bool:
    """Whether orjson's text may hold a float it writes otherwise than json.

    That is a float of magnitude between 1e-9 and 1e-4: orjson writes ``0.00001`` and ``1e-7`` where json
    writes ``1e-05`` and ``1e-07``; every other number and every string it writes as json does. These bytes
    also occur inside strings (``0.0000``, ``e-5`` to ``e-9``): such a text is written by json, to no harm.
    """
    if b"0.0000" in out:
        return True
    at = out.find(b"e-")
    while at >= 0:  # one pass over the text, however many times "e-" occurs in it
        if at + 2 < len(out) and 0x35 <= out[at + 2] <= 0x39:  # "5" to "9"
            return True
        at = out.find(b"e-", at + 2)
    return False


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, non-ASCII characters as they are (lone surrogates kept, as ``json`` does)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
