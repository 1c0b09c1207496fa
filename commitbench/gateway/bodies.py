"""A chat request's body, read and refused with the reason: not UTF-8, not JSON, not an object, too deep.

A body larger than :data:`THREAD_BYTES` is parsed on a worker thread, so that one large request (a thousand
tools, a long conversation) does not hold up the small ones the event loop serves meanwhile.
"""

from __future__ import annotations

import json
from typing import Any

from commitbench import jsoncodec
from commitbench.protocol import json_value_problem

__all__ = ["THREAD_BYTES", "RequestProblem", "parse_request"]

# Bodies larger than this are parsed (and their turn read) off the event loop.
THREAD_BYTES = 256 * 1024


class RequestProblem(ValueError):
    """A request the gateway refuses (400)."""


def parse_request(body: bytes, max_depth: int) -> dict[str, Any]:
    """The request's JSON object, or :class:`RequestProblem` naming what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestProblem(f"the request body is not UTF-8 (invalid byte at position {exc.start})") from None
    try:
        data = jsoncodec.loads(text)
    except RecursionError:
        raise RequestProblem(f"the request body is nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)[:200]
        raise RequestProblem(f"the request body is not JSON ({message})") from None
    if not isinstance(data, dict):
        raise RequestProblem(f"the request body must be a JSON object, not {type(data).__name__}")
    problem = json_value_problem(data, max_depth)
    if problem is not None:
        raise RequestProblem(f"the request body's values {problem}")
    return data
