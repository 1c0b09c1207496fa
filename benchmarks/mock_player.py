"""What the benchmarks that play against the mock server share: the model entry of a config, the repeating
script of model moves the server answers with, the same script served without a server
(:class:`ScriptedBroker`, to fill a cache for a replay), and how a process's CPU time and the machine's
load are read (Linux ``/proc``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from commitbench.llm import ModelResponse
from commitbench.llm.response import parse_completion
from commitbench.mock import ReplySpec, ToolCallSpec
from commitbench.mock.replies import completion_json

MOCK_MODEL = "mock-model"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (all its threads; Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def load_text() -> str:
    """The load average (1, 5 and 15 minutes), to print beside every figure: other work shows in all of them."""
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


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


MOVES = (
    ReplySpec(tool_calls=[ToolCallSpec(name="lookup", arguments={"query": "printer"})]),
    ReplySpec(text="Noted, thanks."),
    ReplySpec(tool_calls=[ToolCallSpec(name="end_turn", arguments={})]),
    ReplySpec(text="Happy to help with that."),
)


def scripted_replies(n: int) -> list[ReplySpec]:
    """``n`` model moves, repeating: a lookup, a reply, end of turn, a reply. Past the script the
    server echoes the last user message, so ``n`` need not be exact."""
    return [MOVES[i % len(MOVES)] for i in range(n)]


class ScriptedBroker:
    """A :class:`~commitbench.cache.CallBroker` that answers every call the cache lacks with one of the
    script's moves (chosen by the call's key), as the mock server would have answered it, without a server.

    Given to the runner's cell player (``CellPlayer(config, broker=ScriptedBroker())``) in cache mode
    ``read_write``, it fills the cache through the client's own path (the completion parsed as a server's,
    stored with ``cache.put``) with exactly the entries a replay of the same config reads, at the speed of
    a replay rather than of live calls.
    """

    def __init__(self) -> None:
        self.answered = 0

    async def claim(self, key: str, model: str) -> dict[str, Any] | None:
        move = MOVES[int(key[:8], 16) % len(MOVES)]
        self.answered += 1
        body = completion_json({"model": model, "messages": []}, move, self.answered)
        fields, error = parse_completion(body, fallback_model=model)
        if error is not None:
            raise RuntimeError(f"the scripted move is no completion: {error.message}")
        return ModelResponse(**fields, cache_key=key).cache_payload()

    def settle(self, key: str, model: str, value: dict[str, Any] | None) -> None:
        return None
