"""The chat agent's model client, served by inspect's model API instead of the project's HTTP client.

The suite's chat agent (:class:`commitbench.agents.chat.ChatAgent`) renders the conversation as OpenAI
messages and asks its client for one completion at a time (``complete``); it reads nothing else of the
client but its ``settings``. :class:`InspectModelClient` answers those calls with inspect's
``get_model().generate(...)``: the messages are converted with inspect's own OpenAI converter, the
episode's tools go as tool *definitions* (:class:`inspect_ai.tool.ToolInfo`) that inspect cannot run, and
the answer comes back as the :class:`commitbench.llm.ModelResponse` the agent parses, through the same
parser the project's client uses (:func:`commitbench.llm.response.parse_completion`), so argument bounds
and malformed calls are treated alike. Every tool call the model makes therefore reaches the environment
through ``env.step``, and inspect logs each call as a model event (input, tools, output, cache status).

The same client serves the LLM judge in the scorer: with ``role="grader"`` it asks the model of inspect's
model role ``grader``, with the judge's pinned generation settings (``config``), and a JSON-schema
``response_format`` goes to inspect as its :class:`~inspect_ai.model.ResponseSchema`.

Retries, rate limits, connection limits and the model-output cache are inspect's (``--max-retries``,
``--max-connections``, ``-T cache=true``); the project's SQLite cache is not used. A call that still
fails raises, the cell player records it as the trace's infrastructure error, and the solver fails the
sample, so inspect's ``--retry-on-error`` and ``inspect eval-retry`` play it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from inspect_ai.model import (
    CachePolicy,
    ChatMessage,
    GenerateConfig,
    ModelOutput,
    ResponseSchema,
    get_model,
    messages_from_openai,
)
from inspect_ai.model import ContentReasoning as ReasoningPart
from inspect_ai.tool import ToolInfo, ToolParams
from inspect_ai.util import JSONSchema

from commitbench.cache import cache_key
from commitbench.llm import ModelResponse, ModelSettings
from commitbench.llm.response import parse_completion

__all__ = ["InspectModelClient", "response_schema", "tool_infos"]

# What an OpenAI tool_choice becomes in inspect.
_TOOL_CHOICE: dict[str, Literal["auto", "any", "none"]] = {"auto": "auto", "required": "any", "none": "none"}


def tool_infos(tools: Sequence[Mapping[str, Any]]) -> list[ToolInfo]:
    """OpenAI function schemas as inspect tool definitions (a definition only: nothing inspect can execute)."""
    infos: list[ToolInfo] = []
    for tool in tools:
        function = tool.get("function") or {}
        schema = dict(function.get("parameters") or {"type": "object", "properties": {}})
        infos.append(ToolInfo(
            name=str(function.get("name", "")),
            description=str(function.get("description") or function.get("name", "")),
            parameters=ToolParams.model_validate({
                "type": "object", "properties": schema.get("properties") or {},
                "required": list(schema.get("required") or []),
                "additionalProperties": bool(schema.get("additionalProperties", False)),
            }),
        ))
    return infos


def _completion_payload(output: ModelOutput, fallback_model: str) -> dict[str, Any]:
    """inspect's answer as the chat-completion JSON the project's parser reads."""
    if not output.choices:
        return {"model": output.model or fallback_model, "choices": []}
    choice = output.choices[0]
    message = choice.message
    reasoning = ""
    if not isinstance(message.content, str):
        reasoning = "".join(part.reasoning for part in message.content if isinstance(part, ReasoningPart))
    calls = [
        {"id": call.id, "type": "function",
         "function": {"name": call.function,
                      # inspect keeps the parsed arguments; a call it could not parse keeps its error text
                      "arguments": call.parse_error if call.parse_error else json.dumps(call.arguments,
                                                                                        ensure_ascii=False)}}
        for call in message.tool_calls or []
    ]
    usage = output.usage
    return {
        "model": output.model or fallback_model,
        "choices": [{
            "message": {"role": "assistant", "content": message.text or None, "reasoning": reasoning or None,
                        "tool_calls": calls or None},
            "finish_reason": _FINISH.get(choice.stop_reason, choice.stop_reason),
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens if usage else 0,
            "completion_tokens": usage.output_tokens if usage else 0,
            "completion_tokens_details": {"reasoning_tokens": (usage.reasoning_tokens or 0) if usage else 0},
        },
    }


# inspect's stop reasons as OpenAI finish reasons (as traces record them for `commitbench run`).
_FINISH = {"stop": "stop", "max_tokens": "length", "tool_calls": "tool_calls", "content_filter": "content_filter",
           "model_length": "length"}


def response_schema(response_format: Mapping[str, Any]) -> ResponseSchema:
    """An OpenAI ``json_schema`` response format as inspect's response schema (the only form inspect sends)."""
    if response_format.get("type") != "json_schema":
        kind = response_format.get("type")
        raise ValueError(f"inspect's model API takes a json_schema response format, not {kind!r}")
    spec = response_format["json_schema"]
    return ResponseSchema(name=str(spec["name"]), json_schema=JSONSchema.model_validate(spec["schema"]),
                          description=spec.get("description"), strict=spec.get("strict"))


class InspectModelClient:
    """What the chat agent (or the LLM judge) calls for completions, answered by inspect's model (see the module doc).

    ``settings``: the model identity the run keys and the traces record (its URL is never used).
    ``cache``: inspect's model-output cache policy for every call, or None for none.
    ``role``: an inspect model role whose model answers (None: the task's model).
    ``config``: generation settings sent with every call (None: inspect's own).
    """

    def __init__(self, settings: ModelSettings, cache: CachePolicy | None = None, role: str | None = None,
                 config: GenerateConfig | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.role = role
        self.config = config or GenerateConfig()
        self.calls = 0
        self._identity = settings.identity()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        sample_index: int = 0,
        session_id: str | None = None,
        temperature: float | None = None,
    ) -> ModelResponse:
        """One completion from inspect's model (the signature of :meth:`commitbench.llm.ModelClient.complete`).

        ``response_format``: a ``json_schema`` one only (:func:`response_schema`). ``session_id`` has no
        meaning for inspect's providers and is not sent."""
        started = time.perf_counter()
        self.calls += 1
        options: dict[str, Any] = {}
        if tool_choice is not None:
            options["tool_choice"] = tool_choice
        if temperature is not None:
            options["temperature"] = temperature
        if response_format is not None:
            options["response_format"] = dict(response_format)
        key = cache_key(self._identity, messages, tools=tools, options=options, sample_index=sample_index)
        choice = _TOOL_CHOICE.get(tool_choice) if isinstance(tool_choice, str) else None
        config = self.config
        if temperature is not None:
            config = config.merge(GenerateConfig(temperature=temperature))
        if response_format is not None:
            config = config.merge(GenerateConfig(response_schema=response_schema(response_format)))
        model = get_model(role=self.role, required=True) if self.role is not None else get_model()
        history: list[ChatMessage] = await messages_from_openai(list(messages), model=None)  # type: ignore[arg-type]
        output = await model.generate(
            history, tools=tool_infos(tools or ()), tool_choice=choice, config=config,
            cache=self.cache if self.cache is not None else False,
        )
        fields, error = parse_completion(
            _completion_payload(output, self.settings.model), fallback_model=self.settings.model,
            max_argument_bytes=self.settings.max_argument_bytes,
        )
        seconds = output.time if output.time is not None else time.perf_counter() - started
        return ModelResponse(
            **fields, error=error, cache_key=key, latency_s=time.perf_counter() - started, model_time_s=seconds,
            attempts=1,
        )
