"""What the benchmarks that play the chat agent against the mock server share: the model entry of a
config, and the repeating script of model moves the server answers with."""

from __future__ import annotations

from typing import Any

from commitbench.mock import ReplySpec, ToolCallSpec

MOCK_MODEL = "mock-model"


def mock_model(urls: list[str], timeout: float = 60.0) -> dict[str, Any]:
    """A config's model entry for the mock server at ``urls`` (one URL, or replicas of one model)."""
    where: dict[str, Any] = {"base_url": urls[0]} if len(urls) == 1 else {"base_urls": urls}
    return {
        "name": "mock",
        **where,
        "api_key_env": None,
        "settings": {"model": MOCK_MODEL, "timeout": timeout},
        "retry": {"max_attempts": 3, "base_delay_s": 0.01},
    }


def scripted_replies(n: int) -> list[ReplySpec]:
    """``n`` model moves, repeating: a lookup, a reply, end of turn, a reply. Past the script the
    server echoes the last user message, so ``n`` need not be exact."""
    pattern = [
        ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": "printer"})]),
        ReplySpec(text="Noted, thanks."),
        ReplySpec(tool_calls=[ToolCallSpec(name="end_turn", arguments={})]),
        ReplySpec(text="Happy to help with that."),
    ]
    return [pattern[i % len(pattern)] for i in range(n)]
