"""The embedded model's chat handler (prompt, schemas, grammar, output) and its server's request fixes.

The pure parts need no model; the grammar needs llama-cpp-python (the [local] extra)."""

from __future__ import annotations

import json

import pytest

from commitbench.agents.local_chat import (
    CHAT_FORMATS,
    MAX_STRING,
    bound_schema,
    call_schema,
    parse_output,
    render_prompt,
)
from commitbench.agents.local_server import fix_request

TOOLS = [
    {"type": "function", "function": {
        "name": "deploy", "description": "Deploy a service.",
        "parameters": {"type": "object", "properties": {
            "service": {"type": "string", "maxLength": 4000}, "environment": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["service", "environment"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "end_turn", "description": "Finish the turn.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
]
CONVERSATION = [
    {"role": "system", "content": "You are Aide & you help <Alice>."},
    {"role": "user", "content": "[#ops] Alice (lead): it's \"green\" now & <b>ready</b>"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call00001", "type": "function",
         "function": {"name": "deploy", "arguments": "{\"service\": \"billing-api\", \"environment\": \"staging\"}"}}]},
    {"role": "tool", "tool_call_id": "call00001", "content": "Deployed billing-api to staging; it's live."},
]


def test_the_prompt_shows_tools_calls_and_results_unescaped() -> None:
    prompt = render_prompt(CONVERSATION, CHAT_FORMATS["chatml"], TOOLS, required=True)
    for text in ("You are Aide & you help <Alice>.", "it's \"green\" now & <b>ready</b>",
                 "Result of deploy: Deployed billing-api to staging; it's live."):
        assert text in prompt
    assert "&amp;" not in prompt and "&#39;" not in prompt and "&lt;" not in prompt and "&quot;" not in prompt
    assert "- deploy(service: string, environment: string, tags?: array): Deploy a service." in prompt
    assert '{"name": "deploy", "arguments": {"service": "billing-api", "environment": "staging"}}' in prompt
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert "exactly one tool call" in prompt


def test_gemma_has_no_system_turn_and_names_the_model_turn() -> None:
    prompt = render_prompt(CONVERSATION, CHAT_FORMATS["gemma"], TOOLS)
    assert prompt.startswith("<start_of_turn>user\nYou are Aide & you help <Alice>.")
    assert "<start_of_turn>system" not in prompt
    assert "<start_of_turn>model\n{\"name\": \"deploy\"" in prompt and prompt.endswith("<start_of_turn>model\n")
    # The tool result is the user's side; consecutive turns of one side are one turn.
    assert prompt.count("<start_of_turn>user") == 2


def test_tools_are_hidden_without_tools_and_a_call_is_one_known_tool() -> None:
    prompt = render_prompt(CONVERSATION[:2], CHAT_FORMATS["chatml"])
    assert "Tools you can call" not in prompt
    schema = call_schema(TOOLS)
    assert [o["properties"]["name"]["const"] for o in schema["anyOf"]] == ["deploy", "end_turn"]
    assert call_schema(TOOLS, only="end_turn")["properties"]["name"] == {"const": "end_turn"}
    with pytest.raises(ValueError, match="no tool named 'book'"):
        call_schema(TOOLS, only="book")


def test_schema_bounds_drop_string_lengths_and_cap_arrays() -> None:
    bounded = bound_schema(TOOLS[0]["function"]["parameters"])
    assert "maxLength" not in bounded["properties"]["service"]
    assert bounded["properties"]["tags"]["maxItems"] == 16
    assert TOOLS[0]["function"]["parameters"]["properties"]["service"]["maxLength"] == 4000  # a copy


def test_parse_output_accepts_only_known_tools() -> None:
    assert parse_output('{"name": "deploy", "arguments": {"service": "x"}}', ["deploy"]) == (
        "", {"name": "deploy", "arguments": {"service": "x"}})
    assert parse_output('{"name": "rm", "arguments": {}}', ["deploy"])[1] is None
    assert parse_output("Sure, I'll do it.", ["deploy"]) == ("Sure, I'll do it.", None)
    assert parse_output('{"name": "deploy", "arguments": {', ["deploy"])[1] is None
    # The grammar's strings may hold raw control characters (a newline): still a call.
    assert parse_output('{"arguments": {"service": "a\nb"}, "name": "deploy"}', ["deploy"])[1] == {
        "name": "deploy", "arguments": {"service": "a\nb"}}


def test_the_grammar_bounds_every_string() -> None:
    pytest.importorskip("llama_cpp")
    from commitbench.agents.local_chat import grammar_text

    text = grammar_text(call_schema(TOOLS))
    assert f"char{{0,{MAX_STRING}}}" in text and "char*" not in text
    assert '"\\"deploy\\""' in text and '"\\"end_turn\\""' in text
    judge = {"type": "object", "properties": {"answer": {"type": "boolean"}, "reason": {"type": "string"}},
             "required": ["answer", "reason"]}
    assert "char*" not in grammar_text(judge)
    judge["properties"]["reason"]["maxLength"] = 80  # a smaller bound the schema sets is kept for every string
    assert "char{0,80}" in grammar_text(judge)
    from llama_cpp import llama_grammar

    llama_grammar.LlamaGrammar.from_string(text, verbose=False)  # llama.cpp parses it


def test_the_server_accepts_null_content_and_json_schema() -> None:
    body = {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": []}, {"role": "user"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}
    fixed = json.loads(fix_request(json.dumps(body).encode()))
    assert fixed["messages"][0]["content"] == ""
    assert fixed["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    plain = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    assert fix_request(plain) is plain and fix_request(b"not json") == b"not json"


def test_a_finished_completion_streams_as_a_message_chunk_and_an_end_chunk() -> None:
    from commitbench.agents.local_chat import stream_chunks

    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "smollm2",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                               "finish_reason": "tool_calls", "logprobs": None}],
                  "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
    first, last = list(stream_chunks(completion))
    assert first["object"] == last["object"] == "chat.completion.chunk" and first["id"] == "chatcmpl-1"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": None,
                                            "tool_calls": [{"index": 0, **call}]}
    assert first["choices"][0]["finish_reason"] is None
    assert last["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls", "logprobs": None}
    assert last["usage"]["total_tokens"] == 8
    text = {**completion, "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."},
                                       "finish_reason": "stop", "logprobs": None}]}
    first, last = list(stream_chunks(text))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "Hello."}
    assert last["choices"][0]["finish_reason"] == "stop"
