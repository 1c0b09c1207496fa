"""What a run cost: the original call's model time survives the cache, reasoning tokens are counted or
estimated, and the cost table sums them per model and arm."""

from __future__ import annotations

import asyncio

import pandas as pd
import pytest

from commitbench.analysis.cost import cost_table, run_cost
from commitbench.cache import CacheMode, CallCache
from commitbench.llm import ModelClient, ModelSettings, reasoning_token_count
from commitbench.mock import MockServer, ReplySpec
from commitbench.traces import EpisodeTrace, ModelCallRecord

MESSAGES = [{"role": "user", "content": "hello"}]


def test_a_cache_hit_reports_the_original_calls_model_time(mock_server: MockServer, mock_settings: ModelSettings,
                                                           tmp_path) -> None:
    mock_server.script(ReplySpec(text="hi", latency_ms=300))

    async def twice() -> tuple[float | None, float | None, float]:
        cache = CallCache(tmp_path / "c.sqlite", CacheMode.READ_WRITE)
        async with ModelClient(mock_settings, cache=cache) as client:
            first = await client.complete(MESSAGES)
        cache.close()
        # A new process would open the same file: the hit carries the first call's time.
        cache = CallCache(tmp_path / "c.sqlite", CacheMode.READ_WRITE)
        async with ModelClient(mock_settings, cache=cache) as client:
            second = await client.complete(MESSAGES)
        cache.close()
        assert not first.cache_hit and second.cache_hit
        return first.model_time_s, second.model_time_s, second.latency_s

    original, replayed, lookup = asyncio.run(twice())
    assert original is not None and original >= 0.3
    assert replayed == pytest.approx(original)
    assert lookup < original  # the lookup itself is fast; the cost reported is the original call's


def test_reasoning_tokens_are_the_servers_count_or_an_estimate() -> None:
    assert reasoning_token_count(12, "some reasoning") == (12, False)
    assert reasoning_token_count(0, "x" * 41) == (11, True)  # 41 characters at 4 per token, rounded up
    assert reasoning_token_count(0, None) == (0, False) and reasoning_token_count(0, "") == (0, False)


def _trace(key: str, calls: list[ModelCallRecord]) -> EpisodeTrace:
    return EpisodeTrace(env_id="e", episode_id="x", factors={}, run_key=key, model_calls=calls)


def test_run_cost_and_the_cost_table_by_hand() -> None:
    a = _trace("a", [
        ModelCallRecord(turn=0, prompt_tokens=100, completion_tokens=20, model_time_s=1.0, reasoning="r",
                        reasoning_tokens=5),
        ModelCallRecord(turn=1, prompt_tokens=150, completion_tokens=30, model_time_s=3.0, cache_hit=True),
        ModelCallRecord(turn=1, purpose="notice", error="limit"),
    ])
    b = _trace("b", [ModelCallRecord(turn=0, prompt_tokens=10, completion_tokens=10, model_time_s=None,
                                     reasoning="long", reasoning_tokens=1, reasoning_tokens_estimated=True)])
    cost_a, cost_b = run_cost(a), run_cost(b)
    assert cost_a["model_calls"] == 2 and cost_a["model_time_s"] == 4.0 and cost_a["reasoning_returned"]
    assert cost_b["model_time_unknown_calls"] == 1 and cost_b["reasoning_estimated"]
    rows = pd.DataFrame([{"model": "m", **cost_a}, {"model": "m", **cost_b}])
    (row,) = cost_table(rows, ["model"])
    assert (row.runs, row.model_calls, row.prompt_tokens, row.completion_tokens) == (2, 3, 260, 60)
    assert row.reasoning_tokens == 6 and row.reasoning_estimated and row.reasoning_calls == 2
    assert row.tokens_per_run == 160.0
    # Run b's time is unknown, so only run a's 4 s enters the time figures.
    assert row.model_time_median_s == 4.0 and row.model_time_unknown_calls == 1
