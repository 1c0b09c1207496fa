"""A local OpenAI-compatible chat-completions server for tests and benchmarks (not part of a run).

It serves real HTTP on 127.0.0.1 (aiohttp.web), so the ``openai`` client talks to it exactly as it
talks to vLLM or OpenAI: scripted replies (text, tool calls, reasoning), responder callables for
scripted "models" that react to the conversation, latency, a service capacity, streaming, and seeded
fault injection (HTTP 500, 429 with Retry-After, held and dropped connections, truncated bodies,
malformed tool-call arguments, empty ``choices``, refusals).

One module per job:

* :mod:`~commitbench.mock.specs`: what a test tells the server (:class:`ReplySpec`, :class:`FaultConfig`)
  and what it reports (:class:`ServerStats`);
* :mod:`~commitbench.mock.replies`: the wire form of completions, streamed events and errors;
* :mod:`~commitbench.mock.behaviour`: the scripted model (reply queue, responder, faults, latency,
  capacity, counters), which knows nothing of HTTP;
* :mod:`~commitbench.mock.app`: the HTTP application and :class:`MockServer` (its endpoints);
* :mod:`~commitbench.mock.process`: :class:`MockServerProcess`, the server in a child process;
* :mod:`~commitbench.mock.cli`: the options of ``commitbench serve-mock``, its one command line.

Run it in a background thread (``with MockServer() as server: ...``) for tests, or as a separate
process for benchmarks so that it does not share the client's GIL::

    commitbench serve-mock --port 0 --latency-ms 50 --fault http_500=0.01 --seed 7

The command prints ``listening on http://127.0.0.1:PORT/v1`` once it accepts connections;
:class:`MockServerProcess` starts it and parses that line.

How it compares with the hand-written HTTP/1.1 server it replaced is measured in the docstring of
:mod:`~commitbench.mock.app`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from commitbench.mock.process import MockServerProcess
from commitbench.mock.specs import (
    DEFAULT_MODEL,
    FaultConfig,
    FaultKind,
    ReasoningField,
    ReplySpec,
    Responder,
    ServerStats,
    ToolCallSpec,
)

if TYPE_CHECKING:
    from commitbench.mock.app import MockServer

__all__ = [
    "DEFAULT_MODEL",
    "FaultConfig",
    "FaultKind",
    "MockServer",
    "MockServerProcess",
    "ReasoningField",
    "ReplySpec",
    "Responder",
    "ServerStats",
    "ToolCallSpec",
]


def __getattr__(name: str) -> Any:
    # The server needs aiohttp (the [dev] extra): it is imported on first use, so that the specs and the
    # options of ``commitbench serve-mock`` (its parser is built for every ``commitbench --help``) do not.
    if name == "MockServer":
        from commitbench.mock.app import MockServer

        return MockServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
