"""Size bounds on what a model server sends: response bodies and tool-call arguments.

A server decides how much it sends; the harness decides how much it reads. Two bounds, both set per
model (``settings`` of a config's model entry, :class:`commitbench.llm.ModelSettings`):

* ``max_response_bytes`` (default :data:`DEFAULT_MAX_RESPONSE_BYTES`): a response body, success or
  error, is read up to this many bytes and no further. A body that declares more
  (``Content-Length``) is refused before a byte of it is read; one that runs past the bound while
  it is read is cut off there and the connection closed. Either way the attempt fails with
  :class:`ResponseTooLarge` (a ``response_too_large`` error of the call), and nothing of the body is
  parsed, cached or recorded.
* ``max_argument_bytes`` (default :data:`DEFAULT_MAX_ARGUMENT_BYTES`): the arguments of one tool call,
  as UTF-8. Larger arguments are a ``bad_arguments`` tool error; traces and the conversation sent
  back to the model hold only their beginning (:func:`clip`), never the whole text.

The response bound is enforced while bytes arrive (:mod:`commitbench.httpread`), not after
parsing, so memory per call stays within the bound whatever the server does.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "PREVIEW_CHARS",
    "ResponseTooLarge",
    "clip",
    "utf8_size",
]

# 2 MiB: over 500,000 tokens of English text; no completion a benchmark asks for comes near it.
DEFAULT_MAX_RESPONSE_BYTES = 2 * 1024 * 1024
# 64 KiB: real tools take a few hundred bytes; the reply tool's text is at most 4,000 characters.
DEFAULT_MAX_ARGUMENT_BYTES = 64 * 1024
# How much of an oversized text is kept where it is recorded or sent back.
PREVIEW_CHARS = 1000


class ResponseTooLarge(Exception):
    """A response body is larger than the bound; it was not read further."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        self.limit = limit
        self.declared = declared
        if declared is not None:
            text = f"the response declares {declared:,} bytes, more than max_response_bytes ({limit:,}); none was read"
        else:
            text = f"the response body ran past max_response_bytes ({limit:,} bytes); it was not read further"
        super().__init__(text)


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate counts as the 3 bytes it would take)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def clip(text: str, max_bytes: int) -> str:
    """``text`` itself when it fits in ``max_bytes`` (UTF-8), else its first :data:`PREVIEW_CHARS`
    characters and a note of how large it was."""
    size = utf8_size(text)
    if size <= max_bytes:
        return text
    return f"{text[:PREVIEW_CHARS]}... [cut: {size:,} bytes in all, more than {max_bytes:,}]"
