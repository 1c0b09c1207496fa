"""The embedded model's chat handler: how a conversation with tools becomes a prompt, and back.

llama.cpp's server hands each chat request to a *chat handler*. The one commitbench registers
(:func:`register_handlers`, done by :mod:`commitbench.agents.local_server` in the server process)
replaces llama-cpp-python's ``chatml-function-calling`` handler, which the embedded model needs
differently in four ways:

* the prompt is built by plain string joining, never by a template engine, so nothing is escaped:
  ``it's`` reaches the model as ``it's``, not ``it&#39;s``;
* the tools are shown whenever the request has them (``tool_choice`` absent or ``"auto"`` lets the
  model choose between a call and text; ``"required"`` constrains it to one call of any tool; a
  named function to a call of that one; ``"none"`` hides them);
* tool results (``tool`` messages) and earlier calls are part of the prompt, so the model sees what
  its calls did;
* every string of a tool's arguments and of a ``json_schema`` response format is bounded
  (:data:`MAX_STRING`), so a small model cannot write past the token limit inside a value.

A tool call is written, and constrained by a grammar built from the tools' JSON schemas, as one JSON
object ``{"name": TOOL, "arguments": {...}}``; earlier calls appear in the prompt the same way. The
chat formats (:data:`CHAT_FORMATS`) say how turns are marked: ChatML for SmolLM2, Gemma's turns for
Gemma 3 (which has no system role: the system text opens the first user turn).

The pure parts (rendering, schemas, parsing) need no llama.cpp; :func:`complete_chat` runs one
request on a ``llama_cpp.Llama``.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "CHAT_FORMATS",
    "HANDLER_PREFIX",
    "MAX_STRING",
    "ChatFormat",
    "bound_schema",
    "call_schema",
    "complete_chat",
    "grammar_text",
    "parse_output",
    "register_handlers",
    "render_prompt",
    "tools_block",
]

HANDLER_PREFIX = "commitbench-"
# Longest string the grammar lets the model write inside a tool argument or a judge's JSON value
# (about 50 tokens: every generated token costs a pass of the grammar over the whole vocabulary).
MAX_STRING = 200
# Longest array the grammar lets the model write where a schema sets no bound.
MAX_ITEMS = 16
# Bound on how many tools are rendered and turned into a grammar (more is a caller's bug).
MAX_TOOLS = 64


@dataclass(frozen=True)
class ChatFormat:
    """How a model marks turns."""

    name: str
    turn: str  # format string with {role} and {content}
    generation: str  # what opens the model's turn
    stop: tuple[str, ...]
    roles: dict[str, str]  # our role -> the model's role word
    system_role: bool  # False: the system text opens the first user turn

    def role(self, role: str) -> str:
        return self.roles.get(role, role)


CHAT_FORMATS: dict[str, ChatFormat] = {
    "chatml": ChatFormat(
        name="chatml",
        turn="<|im_start|>{role}\n{content}<|im_end|>\n",
        generation="<|im_start|>assistant\n",
        stop=("<|im_end|>", "<|im_start|>"),
        roles={"system": "system", "user": "user", "assistant": "assistant", "tool": "user"},
        system_role=True,
    ),
    "gemma": ChatFormat(
        name="gemma",
        turn="<start_of_turn>{role}\n{content}<end_of_turn>\n",
        generation="<start_of_turn>model\n",
        stop=("<end_of_turn>", "<start_of_turn>"),
        roles={"user": "user", "assistant": "model", "tool": "user"},
        system_role=False,
    ),
}


# ------------------------------------------------------------------------------- prompt
def _signature(tool: dict[str, Any]) -> str:
    function = tool.get("function") or {}
    params = function.get("parameters") or {}
    props = params.get("properties") or {}
    required = set(params.get("required") or ())
    args = []
    for name, spec in props.items():
        kind = spec.get("type", "value") if isinstance(spec, dict) else "value"
        args.append(f"{name}: {kind}" if name in required else f"{name}?: {kind}")
    description = str(function.get("description") or "").strip()
    line = f"- {function.get('name', '')}({', '.join(args)})"
    return f"{line}: {description}" if description else line


def tools_block(tools: Sequence[dict[str, Any]], *, required: bool) -> str:
    """The text that shows the model its tools and how to call one."""
    lines = ["Tools you can call (name, arguments, what it does):"]
    lines.extend(_signature(t) for t in tools[:MAX_TOOLS])
    lines.append(
        'To call a tool, answer with one JSON object and nothing else: {"name": "TOOL", "arguments": {...}}. '
        "You will see its result, then you may call another."
    )
    if required:
        lines.append("Every answer of yours is exactly one tool call.")
    else:
        lines.append("Otherwise answer in plain text.")
    return "\n".join(lines)


def _call_text(name: str, arguments: Any) -> str:
    """A tool call as the model writes it (and sees its earlier calls)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # else shown as the string it was
            arguments = json.loads(arguments) if arguments.strip() else {}
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def render_prompt(
    messages: Sequence[dict[str, Any]],
    chat_format: ChatFormat,
    tools: Sequence[dict[str, Any]] = (),
    *,
    required: bool = False,
) -> str:
    """The whole prompt, up to and including the opening of the model's turn. Nothing is escaped."""
    turns: list[tuple[str, str]] = []  # (our role, text)
    names: dict[str, str] = {}  # tool-call id -> tool name
    system = "\n\n".join(_content(m) for m in messages if m.get("role") == "system")
    if tools:
        block = tools_block(tools, required=required)
        system = f"{system}\n\n{block}" if system else block
    if system:
        turns.append(("system", system))
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        if role == "assistant":
            parts = [_content(message)] if _content(message) else []
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[str(call.get("id", ""))] = str(function.get("name", ""))
                parts.append(_call_text(str(function.get("name", "")), function.get("arguments", "")))
            turns.append(("assistant", "\n".join(parts)))
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id", "")), "the tool")
            turns.append(("tool", f"Result of {name}: {_content(message)}"))
        else:  # user, and anything unknown, is shown as the user's
            turns.append(("user", _content(message)))
    return _join(turns, chat_format)


def _join(turns: list[tuple[str, str]], chat_format: ChatFormat) -> str:
    if not chat_format.system_role and turns and turns[0][0] == "system":
        system = turns.pop(0)[1]
        if turns and turns[0][0] in ("user", "tool"):
            turns[0] = (turns[0][0], f"{system}\n\n{turns[0][1]}")
        else:
            turns.insert(0, ("user", system))
    merged: list[tuple[str, str]] = []
    for role, text in turns:  # consecutive turns of one side are one turn
        model_role = chat_format.role(role)
        if merged and merged[-1][0] == model_role:
            merged[-1] = (model_role, f"{merged[-1][1]}\n{text}")
        else:
            merged.append((model_role, text))
    body = "".join(chat_format.turn.format(role=role, content=text) for role, text in merged)
    return body + chat_format.generation


# ------------------------------------------------------------------------------- schemas
_LENGTH_KEYS = ("minLength", "maxLength")


def bound_schema(schema: Any, max_items: int = MAX_ITEMS) -> Any:
    """A copy of a JSON schema ready for :func:`grammar_text`: string lengths dropped, arrays bounded.

    String lengths are left out because llama.cpp's schema converter spells ``maxLength: n`` as ``n``
    nested optional groups; :func:`grammar_text` bounds every string at once instead. Every array gets
    a ``maxItems`` (an existing smaller one is kept). Walks the schema with an explicit stack.
    """
    schema = copy.deepcopy(schema)
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "string" in kinds:
            for key in _LENGTH_KEYS:
                node.pop(key, None)
        if "array" in kinds:
            node["maxItems"] = min(int(node.get("maxItems", max_items)), max_items)
        stack.extend(v for k, v in node.items() if k not in ("enum", "const", "default", "examples"))
    return schema


_STRING_RULE = 'string ::= "\\"" char* "\\"" space'


def _smallest_max_length(schema: Any) -> int | None:
    found: list[int] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if isinstance(node.get("maxLength"), int):
                found.append(node["maxLength"])
            stack.extend(node.values())
    return min(found) if found else None


def grammar_text(schema: dict[str, Any], max_string: int = MAX_STRING) -> str:
    """The GBNF grammar of ``schema`` in which no string is longer than ``max_string`` characters, nor
    than the smallest ``maxLength`` the schema sets (one bound for every string of the grammar)."""
    from llama_cpp import llama_grammar

    smallest = _smallest_max_length(schema)
    if smallest is not None:
        max_string = max(1, min(max_string, smallest))
    text = llama_grammar.json_schema_to_gbnf(json.dumps(bound_schema(schema)))
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == _STRING_RULE:
            lines[index] = f'string ::= "\\"" char{{0,{max_string}}} "\\"" space'
    text = "\n".join(lines) + "\n"
    if "char*" in text:
        raise ValueError("the grammar still has an unbounded string (llama.cpp's converter changed)")
    return text


def call_schema(tools: Sequence[dict[str, Any]], only: str | None = None) -> dict[str, Any]:
    """The JSON schema of one call of any of ``tools`` (or of the tool named ``only``)."""
    options = []
    for tool in tools[:MAX_TOOLS]:
        function = tool.get("function") or {}
        name = str(function.get("name", ""))
        if only is not None and name != only:
            continue
        params = function.get("parameters") or {"type": "object", "properties": {}}
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    if not options:
        raise ValueError(f"no tool named {only!r} among the request's tools" if only else "the request has no tools")
    return options[0] if len(options) == 1 else {"anyOf": options}


def _response_schema(response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_object":  # with the schema a json_schema request carried (see local_server)
        schema = response_format.get("schema")
        return dict(schema) if isinstance(schema, dict) and schema else {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") or {"type": "object"}
        return dict(schema)
    return None


# ------------------------------------------------------------------------------- output
def parse_output(text: str, tool_names: Sequence[str]) -> tuple[str, dict[str, Any] | None]:
    """``(text, call)``: the model's output as text, or as a call ``{"name", "arguments"}`` of a known tool."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return text, None
    try:
        value = json.loads(stripped, strict=False)  # the grammar lets strings hold raw newlines
    except ValueError:
        return text, None
    if not isinstance(value, dict) or value.get("name") not in tool_names:
        return text, None
    arguments = value.get("arguments")
    return "", {"name": value["name"], "arguments": arguments if isinstance(arguments, dict) else {}}


# ------------------------------------------------------------------------------- llama.cpp
@lru_cache(maxsize=256)
def _grammar(schema_json: str) -> Any:
    from llama_cpp import llama_grammar

    return llama_grammar.LlamaGrammar.from_string(grammar_text(json.loads(schema_json)), verbose=False)


def _choice(tool_choice: Any) -> tuple[str, str | None]:
    """``(mode, named tool)`` with mode ``none``, ``auto``, ``required`` or ``named``."""
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        return "named", str(name) if name else None
    if tool_choice in ("none", "required", "auto"):
        return str(tool_choice), None
    return "auto", None


def complete_chat(
    llama: Any,
    chat_format: ChatFormat,
    messages: Sequence[dict[str, Any]],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    response_format: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.2,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
    repeat_penalty: float = 1.1,
    seed: int | None = None,
    stop: str | list[str] | None = None,
    **_: Any,
) -> dict[str, Any]:
    """One chat completion on ``llama`` (a ``llama_cpp.Llama``), as an OpenAI response dict."""
    tools = list(tools or [])
    mode, named = _choice(tool_choice)
    if not tools:
        mode = "none"
    names = [str((t.get("function") or {}).get("name", "")) for t in tools]
    forced = mode in ("required", "named")
    prompt = render_prompt(messages, chat_format, tools if mode != "none" else (), required=forced)
    grammar = None
    if forced:
        grammar = _grammar(json.dumps(call_schema(tools, named if mode == "named" else None), sort_keys=True))
    elif mode == "none":
        schema = _response_schema(response_format)
        if schema is not None:
            grammar = _grammar(json.dumps(schema, sort_keys=True))
    stops = list(chat_format.stop) + ([stop] if isinstance(stop, str) else list(stop or []))
    if seed is not None:
        llama.set_seed(seed)
    completion = llama.create_completion(
        prompt=prompt, max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
        repeat_penalty=repeat_penalty, stop=stops, grammar=grammar, stream=False,
    )
    choice = completion["choices"][0]
    text = str(choice.get("text") or "")
    finish = choice.get("finish_reason") or "stop"
    call = parse_output(text, names)[1] if mode != "none" else None
    message: dict[str, Any] = {"role": "assistant", "content": text if call is None else None}
    if call is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{completion['id'][-12:]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)},
            }
        ]
        finish = "tool_calls"
    return {
        "id": "chat" + str(completion["id"]),
        "object": "chat.completion",
        "created": completion["created"],
        "model": completion["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": completion.get("usage") or {},
    }


def stream_chunks(completion: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A finished chat completion as the chunks of a streamed one (``chat.completion.chunk``).

    The completion is made whole first (a tool call is constrained by a grammar and parsed at the end, so it
    cannot be sent as it is generated), then sent as two chunks: the message (role, text or tool calls, each
    call with its index) and the end (finish reason and usage). The server frames them as server-sent events
    and ends the stream with ``[DONE]``.
    """
    choice = completion["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(message["tool_calls"])]
    head = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    yield {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}]}
    yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}],
           "usage": completion.get("usage") or {}}


def _handler(chat_format: ChatFormat) -> Callable[..., Any]:
    def handler(*, llama: Any, messages: Sequence[dict[str, Any]], stream: bool = False, **kwargs: Any) -> Any:
        completion = complete_chat(llama, chat_format, messages, **kwargs)
        return stream_chunks(completion) if stream else completion

    return handler


def register_handlers() -> list[str]:
    """Register one llama-cpp-python chat handler per chat format (``commitbench-chatml``, ...)."""
    from llama_cpp import llama_chat_format

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    names = []
    for fmt in CHAT_FORMATS.values():
        name = HANDLER_PREFIX + fmt.name
        registry.register_chat_completion_handler(name, _handler(fmt), overwrite=True)
        names.append(name)
    return names
