"""Content digests: the one way the harness hashes what it stores or compares.

A cache key, a run key, a config or cells hash, a data version, a prompt hash, an episode id, a texts file's
digest, the gateway's turn digest and pseudonyms are all the sha256 hex digest of some bytes, made here by
:func:`digest`. What the bytes are is up to the caller, and every key keeps the bytes it always had:

* parts, each ``bytes`` as given or a ``str`` as UTF-8, joined by ``sep`` (nothing by default);
* or the canonical JSON of a value (:func:`commitbench.jsoncodec.canonical`: sorted keys, no whitespace);
* cut to its first ``length`` hex digits where a short id is wanted.

A ``str`` is written with the ``surrogatepass`` error handler: text decoded from JSON may hold a lone
surrogate (``"\\ud800"``), and it is hashed as its code unit's bytes rather than refused. Every other string
has the same bytes as under plain UTF-8, so the handler changes no digest of valid text.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from commitbench import jsoncodec

__all__ = ["digest", "digest_bytes"]


class _Unset:
    """The default of ``json``: no value (``None`` is a value, hashed as ``null``)."""


_UNSET: Final = _Unset()


def _bytes(part: str | bytes) -> bytes:
    return part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part


def digest(
    *parts: str | bytes, sep: str | bytes = b"", json: Any = _UNSET, length: int | None = None
) -> str:
    """The sha256 hex digest of ``parts`` joined by ``sep``, or of the canonical JSON of ``json``.

    ``length`` keeps the first ``length`` hex digits (all 64 when None). Give parts or ``json``, not both.
    """
    if not isinstance(json, _Unset):
        if parts:
            raise TypeError("digest() takes parts or json=, not both")
        data = jsoncodec.canonical(json)
    else:
        data = _bytes(sep).join(_bytes(part) for part in parts)
    hexdigest = hashlib.sha256(data).hexdigest()
    if length is None:
        return hexdigest
    if not 1 <= length <= len(hexdigest):
        raise ValueError(f"a digest's length is 1 to {len(hexdigest)} hex digits, not {length}")
    return hexdigest[:length]


def digest_bytes(part: str | bytes, size: int) -> bytes:
    """The first ``size`` bytes of the sha256 digest of one part (:func:`digest` of it, as bytes rather than hex
    digits): a key kept by the million, compared for equality only."""
    if not 1 <= size <= 32:
        raise ValueError(f"a digest has 1 to 32 bytes, not {size}")
    return hashlib.sha256(_bytes(part)).digest()[:size]
