"""Structured output (commitbench.llm.structured): the judge style, the bounded strict schema, and the
parse-and-retry loop on the mock server (a value, a recorded error, an unreachable model, fresh attempts)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from commitbench.cache import CallCache
from commitbench.llm import ModelClient, ModelSettings, RetryPolicy
from commitbench.llm.structured import (
    GRAMMAR_MAX_ITEMS,
    GRAMMAR_MAX_STRING,
    ResponseFormatStyle,
    StructuredAnswer,
    ask_structured,
    judge_style,
    response_format_for,
    strict_json_schema,
)
from commitbench.mock import MockServer


class Colour(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The colour's name.")
    shades: list[str] = Field(default_factory=list, description="Its shades.")
    bright: bool | None = Field(default=None, description="Whether it is bright.")


GOOD = '{"name": "red", "shades": ["crimson"], "bright": true}'
MESSAGES = [{"role": "user", "content": "A colour, please."}]


@pytest.mark.parametrize(
    ("configured", "local", "style"),
    [
        (None, True, ResponseFormatStyle.JSON_OBJECT),
        (None, False, ResponseFormatStyle.JSON_SCHEMA),
        ("", True, ResponseFormatStyle.JSON_OBJECT),
        ("json_schema", True, ResponseFormatStyle.JSON_SCHEMA),
        ("json_object", False, ResponseFormatStyle.JSON_OBJECT),
    ],
)
def test_the_judge_style_is_the_configured_one_else_json_object_for_the_local_model(
    configured: str | None, local: bool, style: ResponseFormatStyle
) -> None:
    assert judge_style(configured, local) is style


def test_an_unknown_configured_style_is_refused() -> None:
    with pytest.raises(ValueError):
        judge_style("grammar", False)


def test_the_strict_schema_is_closed_and_bounded() -> None:
    schema = strict_json_schema(Colour)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["name", "shades", "bright"]
    assert "title" not in schema and "default" not in schema["properties"]["shades"]
    assert schema["properties"]["name"]["maxLength"] == GRAMMAR_MAX_STRING
    assert schema["properties"]["shades"]["maxItems"] == GRAMMAR_MAX_ITEMS
    assert strict_json_schema(Colour, max_string=12)["properties"]["name"]["maxLength"] == 12


def test_both_styles_carry_the_same_schema() -> None:
    as_schema = response_format_for(Colour, "colour", ResponseFormatStyle.JSON_SCHEMA)
    as_object = response_format_for(Colour, "colour", ResponseFormatStyle.JSON_OBJECT)
    assert as_schema == {"type": "json_schema", "json_schema": {"name": "colour", "schema": strict_json_schema(Colour),
                                                                "strict": True}}
    assert as_object == {"type": "json_object", "schema": strict_json_schema(Colour)}


def ask(settings: ModelSettings, max_attempts: int = 3, cache: CallCache | None = None, fresh: bool = False,
        retry: RetryPolicy | None = None) -> StructuredAnswer[Colour]:
    async def go() -> StructuredAnswer[Colour]:
        async with ModelClient(settings, cache=cache, retry=retry) as client:
            return await ask_structured(client, MESSAGES, response_format_for(Colour, "colour"), Colour,
                                        max_attempts=max_attempts, fresh=fresh)

    return asyncio.run(go())


def test_unusable_replies_are_asked_for_again_each_as_a_new_sample(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script("not json", '{"name": 3}', GOOD)
    answer = ask(mock_settings.model_copy(update={"seed": 7}))
    assert answer.value == Colour(name="red", shades=["crimson"], bright=True)
    assert [c.sample_index for c in answer.calls] == [0, 1, 2]
    assert answer.calls[0].error.startswith("not JSON") and answer.calls[1].error.startswith("schema mismatch")
    assert answer.calls[2].error == "" and answer.unavailable is None
    seeds = [r["body"]["seed"] for r in mock_server.requests() if r["path"].endswith("/chat/completions")]
    assert len(set(seeds)) == 3


def test_no_usable_reply_is_a_recorded_error_never_a_value(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.script("garbage", "```json\n{\"name\": \"red\"\n```", GOOD)
    answer = ask(mock_settings, max_attempts=2)
    assert answer.value is None and answer.unavailable is None
    assert len(answer.calls) == 2
    assert answer.last_error is not None and answer.last_error.startswith("not JSON")


def test_an_unreachable_model_ends_the_loop_as_unavailable(
    mock_server: MockServer, mock_settings: ModelSettings
) -> None:
    mock_server.set_faults(rates={"http_500": 1.0})
    answer = ask(mock_settings, retry=RetryPolicy(max_attempts=1, base_delay_s=0.0))
    assert answer.value is None and len(answer.calls) == 1
    assert answer.unavailable is not None and answer.unavailable.startswith("server_error")


def test_fresh_attempts_pass_over_unusable_replies_the_cache_holds(
    mock_server: MockServer, mock_settings: ModelSettings, tmp_path: Path
) -> None:
    with CallCache(tmp_path / "cache.sqlite") as cache:
        mock_server.script("garbage", "more garbage")
        assert ask(mock_settings, max_attempts=2, cache=cache).value is None
        mock_server.script(GOOD)
        replayed = ask(mock_settings, max_attempts=2, cache=cache)
        assert replayed.value is None and all(c.cache_hit for c in replayed.calls)
        answer = ask(mock_settings, max_attempts=2, cache=cache, fresh=True)
    assert answer.value is not None
    assert [(c.sample_index, c.cache_hit, c.passed_over) for c in answer.calls] == [
        (0, True, True), (1, True, True), (2, False, False)
    ]
