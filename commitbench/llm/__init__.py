"""Model calls: settings, an async client with cache, retries and adaptive concurrency.

Every model call in commitbench goes through :class:`ModelClient`, which wraps
``openai.AsyncOpenAI`` (pointed at any OpenAI-compatible base URL: vLLM, OpenAI, the embedded
llama.cpp server, the mock server) and adds what a long benchmark run needs:

* a content-addressed cache looked up before any request (:mod:`commitbench.cache`);
* one deadline per attempt (``timeout``: connecting, headers and body together), and response
  bodies read no further than ``max_response_bytes`` (:mod:`commitbench.bounds`);
* retries of what :data:`commitbench.callerrors.RETRYABLE_ERRORS` lists (429, 5xx, timeouts,
  connection errors, unreadable or malformed answers), with exponential backoff and full jitter
  from a seedable RNG (the ``openai`` client's own retries are off);
* an adaptive concurrency limit: halved on a 429 (once per window of in-flight requests), raised
  by one slot per window of successes (AIMD);
* replicas: a model served by several servers (``base_urls``) is one :class:`ReplicaPool`; every
  call of a session (an episode's run key) goes to one replica, chosen by rendezvous hashing on the
  session id with bounded loads, so that replica's prefix cache holds the growing conversation;
  each replica has its own concurrency limit, and one that refuses connections or times out
  repeatedly is taken out for a while, its sessions moving to the next replica in their hash
  order (each move is reported on the response, for the trace);
* a result that never raises for bad output or exhausted retries: :class:`ModelResponse` carries
  ``error`` (kind + message) instead, and malformed tool-call arguments (not JSON, nested too
  deep, holding a lone surrogate) become a ``parse_error`` on that tool call; lone surrogates in
  texts, names and ids are escaped as they arrive, so whatever a server sends can be cached and
  written to a trace. Configuration problems (bad API key, unknown model, a server that answered
  none of the model's first calls usably) do raise :class:`ModelEndpointError`, since no call of the
  run could succeed; a replay-only cache raises :class:`commitbench.cache.CacheMiss` on a miss;
* structured output (:mod:`commitbench.llm.structured`): a pydantic model asked for as JSON (its bounded
  strict schema in the server's ``response_format`` style) and read back, with one parse-and-retry loop
  for every judge, checker and detector.

Typical use::

    settings = ModelSettings(model="Qwen/Qwen3-8B", base_url="http://127.0.0.1:8000/v1",
                             extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    async with ModelClient(settings, cache=CallCache("runs/cache.sqlite")) as client:
        response = await client.complete(messages, tools=tools, session_id=episode_id)
        if response.error is None:
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from commitbench.callerrors import (
    INFRASTRUCTURE_ERRORS,
    RETRYABLE_ERRORS,
    ModelEndpointError,
    ModelError,
    ModelErrorKind,
)
from commitbench.llm.limiter import AdaptiveLimiter
from commitbench.llm.replicas import ReplicaPool
from commitbench.llm.response import (
    ModelResponse,
    ToolCall,
    Usage,
    parse_cache_entry,
    parse_completion,
    parse_tool_arguments,
    reasoning_token_count,
)
from commitbench.llm.settings import SESSION_HEADER, ModelSettings, ReplicaPolicy, RetryPolicy, backoff_delay
from commitbench.llm.stats import ClientStats, merge_client_stats
from commitbench.secrets import REDACTED, redact_credentials, split_credentials

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

__all__ = [
    "INFRASTRUCTURE_ERRORS",
    "REDACTED",
    "RETRYABLE_ERRORS",
    "SESSION_HEADER",
    "AdaptiveLimiter",
    "ClientStats",
    "ModelClient",
    "ModelEndpointError",
    "ModelError",
    "ModelErrorKind",
    "ModelResponse",
    "ModelSettings",
    "ReplicaPolicy",
    "ReplicaPool",
    "RetryPolicy",
    "ToolCall",
    "Usage",
    "backoff_delay",
    "merge_client_stats",
    "parse_cache_entry",
    "parse_completion",
    "parse_tool_arguments",
    "reasoning_token_count",
    "redact_credentials",
    "split_credentials",
]


def __getattr__(name: str) -> Any:
    """:class:`ModelClient` is imported when first asked for: it brings the ``openai`` SDK, which a command that
    makes no model call (``report``, ``view``) need not load."""
    if name == "ModelClient":
        from commitbench.llm.client import ModelClient

        return ModelClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
