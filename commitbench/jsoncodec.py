"""JSON in and out of the gateway: ``orjson`` where it gives what the standard library gives, the standard
library everywhere else.

The gateway parses every request, every reply (and every streamed event) and writes every reply and log line;
``orjson`` does that in a fraction of the standard library's time. The two differ at the edges, so the standard
library decides there, and every value and every error is the one ``json`` would give:

* ``orjson`` refuses what ``json`` accepts (``NaN``, ``Infinity``, numbers too large for a double, lone
  surrogates, UTF-16 bytes) and words its errors differently: on any ``orjson`` error the text is parsed again
  by ``json``, which returns the value or raises the error it always raised;
* ``orjson`` reads integers beyond 64 bits as floats: a text with 19 digits in a row goes to ``json``;
* ``orjson`` writes non-finite floats as ``null`` and refuses lone surrogates, integers beyond 64 bits and
  non-string keys: the non-finite floats ``json`` reads are kept as :class:`NonFinite`, which ``orjson``
  refuses, and whatever ``orjson`` refuses is written by ``json`` (as ``NaN``, ``Infinity``, ...).

Written JSON is compact (no spaces after ``:`` and ``,``).
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


def loads(data: bytes | str) -> Any:
    """The value of a JSON text; raises what ``json.loads`` raises (``ValueError``, ``RecursionError``)."""
    long_digits = (_LONG_DIGITS_BYTES.search(data) if isinstance(data, bytes)
                   else _LONG_DIGITS_TEXT.search(data))
    if long_digits is None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data, parse_constant=_constant, parse_float=_float)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, non-ASCII characters as they are (lone surrogates kept, as ``json`` does)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
