"""A chat request's body, read and refused with the reason: not UTF-8, not JSON, not an object, too deep.

The gateway reads a large body in a worker process with the same function
(:mod:`commitbench.gateway.largework`), so that one large request does not hold up the small ones.
"""

from __future__ import annotations

import json
from typing import Any

from commitbench import jsoncodec
from commitbench.protocol import json_value_problem

__all__ = ["RequestProblem", "parse_request"]


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
