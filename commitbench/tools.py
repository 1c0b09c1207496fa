"""Tools declared once: the schema comes from the handler, and calls are validated and dispatched by table.

A tool is a function (or method) whose single parameter is a :class:`ToolArgs` model::

    class SendDmArgs(ToolArgs):
        to: str = Field(description="The person's name.")
        text: str = Field(description="The message.")

    class Workspace:
        @tool(write=True)
        def send_dm(self, args: SendDmArgs) -> str:
            \"\"\"Send a direct message to one person.\"\"\"
            ...
            return f"Sent to {args.to}."

The decorator derives everything the model is shown from the code: the name from the function, the
description from the docstring's first paragraph, the JSON schema from the arguments model (every
field must have a description; a missing one is an error when the class is defined, not when a model
first sees the tool). :func:`bound_tools` collects the decorated methods of an object; a tool whose
schema is data (an episode file declares the promised action's parameters) is made with
:func:`schema_tool`, which builds the same kind of arguments model from the schema, so every call is
validated one way.

A handler returns the result text. It raises :class:`ToolError` when the call cannot be carried out as
asked (the agent's error) and :class:`ToolRefused` when a well-formed call is refused by the world (the
promised action turns out to be impossible). :meth:`Toolbox.dispatch` never raises: an unparseable
action, an unknown tool, bad arguments, a refusal and even an unexpected exception in a handler all
become a :class:`~commitbench.protocol.ToolCallRecord` with ``ok=False`` and an ``error_kind``.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from commitbench.protocol import ActionKind, AgentAction, ToolCallRecord, ToolSpec

__all__ = [
    "MAX_RESULT_CHARS",
    "Tool",
    "ToolArgs",
    "ToolError",
    "ToolErrorKind",
    "ToolRefused",
    "Toolbox",
    "bound_tools",
    "declared_tools",
    "is_agent_error",
    "json_type",
    "parameters_schema",
    "schema_tool",
    "tool",
]

# A result longer than this is cut (a tool must never flood the agent's context).
MAX_RESULT_CHARS = 8_000
_MARK = "__commitbench_tool__"


class ToolErrorKind(str, Enum):
    """Why a tool call did not execute."""

    INVALID_ACTION = "invalid_action"  # the action could not be parsed at all
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"  # the arguments do not fit the schema, or the tool rejected them
    FAILED = "failed"  # well formed and attempted, but the world refused it (the action failed)
    HANDLER_ERROR = "handler_error"  # the handler raised something unexpected; recorded, never raised
    TURN_LIMIT = "turn_limit"


class ToolError(Exception):
    """The call cannot be carried out as asked; the message is shown to the agent."""


class ToolRefused(Exception):
    """A well-formed call that the world refuses; the message is shown to the agent."""


class ToolArgs(BaseModel):
    """Base of every tool's arguments: no unknown keys, no silent type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# ----------------------------------------------------------------------------------------- schemas
_JSON_TYPES: dict[str, str] = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """A property schema without pydantic's titles, defaults and ``anyOf [T, null]`` wrapping."""
    out = {k: v for k, v in schema.items() if k not in ("title", "default")}
    options = out.pop("anyOf", None)
    if options is not None:
        kept = [o for o in options if o.get("type") != "null"]
        if len(kept) != 1:
            raise TypeError(f"tool arguments support one type per field, got {options}")
        out = {**_clean(kept[0]), **out}
    if "items" in out and isinstance(out["items"], dict):
        out["items"] = _clean(out["items"])
    if "enum" in out and "type" not in out:
        kinds = {type(v) for v in out["enum"]}
        if kinds == {str}:
            out["type"] = "string"
    return out


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The flat JSON schema (type object) the model is shown for an arguments model.

    Raises TypeError when a field has no description or a type the schema cannot express flatly.
    """
    raw = model.model_json_schema()
    if raw.get("$defs"):
        raise TypeError(f"{model.__name__}: tool arguments must be flat (no nested models)")
    properties: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if not info.description:
            raise TypeError(f"{model.__name__}.{name} has no description; the model would be shown none")
        properties[name] = _clean(raw["properties"][name])
        properties[name]["description"] = info.description
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name, info in model.model_fields.items() if info.is_required()]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


# Arguments models built from data, kept by (name, schema): an environment binds an episode's tools at
# every reset, and building a pydantic model costs about a millisecond. A bound on the models kept.
SCHEMA_MODELS_KEPT = 1024


def args_model_from_schema(name: str, schema: Mapping[str, Any]) -> type[ToolArgs]:
    """An arguments model equivalent to a flat JSON schema (type object) declared as data.

    The same name and schema give the same model class (a model is immutable, so it is shared)."""
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not plain JSON: built every time, and the checks below say why
        return _args_model_from_schema(name, schema)
    return _schema_model(name, text)


@functools.lru_cache(maxsize=SCHEMA_MODELS_KEPT)
def _schema_model(name: str, schema_text: str) -> type[ToolArgs]:
    return _args_model_from_schema(name, json.loads(schema_text))


def _args_model_from_schema(name: str, schema: Mapping[str, Any]) -> type[ToolArgs]:
    if schema.get("type") != "object":
        raise TypeError(f"tool {name!r}: parameters must be a JSON schema of type 'object'")
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, spec in (schema.get("properties") or {}).items():
        if not isinstance(spec, Mapping):
            raise TypeError(f"tool {name!r}: parameter {prop!r} must be a schema object")
        kind = spec.get("type", "string")
        if kind not in _PY_TYPES:
            raise TypeError(f"tool {name!r}: parameter {prop!r} has unsupported type {kind!r}")
        annotation: Any = _PY_TYPES[kind]
        if "enum" in spec:
            annotation = Literal.__getitem__(tuple(spec["enum"]))
        description = str(spec.get("description") or prop)
        if prop in required:
            fields[prop] = (annotation, Field(description=description))
        else:
            fields[prop] = (annotation | None, Field(default=None, description=description))
    model = create_model(f"{name}_args", __base__=ToolArgs, **fields)
    return model


# ----------------------------------------------------------------------------------------- tools
@dataclass(frozen=True)
class Tool:
    """A callable tool: what the model is shown (``spec``), how its arguments are checked, what runs."""

    spec: ToolSpec
    args_model: type[ToolArgs]
    handler: Callable[[Any], str]
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    def run(self, arguments: Mapping[str, Any] | None) -> tuple[bool, str, str]:
        """Validate and run one call: ``(ok, result text, error kind)``; never raises."""
        if arguments is None:
            return False, "arguments are not a JSON object", ToolErrorKind.BAD_ARGUMENTS.value
        try:
            args = self.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            return False, describe_validation_error(exc), ToolErrorKind.BAD_ARGUMENTS.value
        except (RecursionError, TypeError, ValueError) as exc:
            return False, f"arguments could not be read: {type(exc).__name__}", ToolErrorKind.BAD_ARGUMENTS.value
        try:
            text = self.handler(args)
        except ToolError as exc:
            return False, str(exc), ToolErrorKind.BAD_ARGUMENTS.value
        except ToolRefused as exc:
            return False, _bounded(str(exc)), ToolErrorKind.FAILED.value
        except Exception as exc:  # a handler bug must not end the episode: the call is recorded as failed
            return False, f"the tool failed: {type(exc).__name__}: {str(exc)[:200]}", ToolErrorKind.HANDLER_ERROR.value
        return True, _bounded(text), ""


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + " [cut]"


_TYPE_WORDS: dict[str, str] = {
    "string": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}


def describe_validation_error(exc: ValidationError) -> str:
    """One sentence for the agent about what is wrong with its arguments."""
    errors = exc.errors()
    extra = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and e["loc"])
    for error in errors:
        loc = ".".join(str(p) for p in error["loc"])
        kind = error["type"]
        if kind == "missing":
            return f"missing required argument '{loc}'"
        if kind == "literal_error":
            expected = error.get("ctx", {}).get("expected", "")
            return f"argument '{loc}' must be one of {expected}"
        head = kind.split("_", 1)[0]
        if kind.endswith("_type") or kind in ("int_from_float", "bool_parsing", "int_parsing"):
            word = _TYPE_WORDS.get(head, head)
            return f"argument '{loc}' must be {word}, got {json_type(error.get('input'))}"
    if extra:
        return f"unknown argument(s): {', '.join(extra)}"
    first = errors[0]
    return f"argument '{'.'.join(str(p) for p in first['loc'])}': {first['msg']}"


def json_type(value: Any) -> str:
    """The JSON Schema type name of a parsed JSON value (``integer``, ``array``, ``null``, ...)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else type(value).__name__


# ------------------------------------------------------------------------------------- declaring
@dataclass(frozen=True)
class _Declaration:
    name: str
    description: str
    args_model: type[ToolArgs]
    write: bool
    meta: Mapping[str, Any]
    function: Callable[..., str]
    # The schema, derived once when the tool is declared; every spec reads a copy of its own from this text.
    parameters_json: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters_json", json.dumps(parameters_schema(self.args_model)))

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, parameters=json.loads(self.parameters_json),
            is_write=self.write,
        )


def _args_model_of(function: Callable[..., Any]) -> type[ToolArgs]:
    hints = typing.get_type_hints(function)
    params = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    if len(params) != 1 or params[0].name not in hints:
        raise TypeError(f"tool {function.__name__}: the handler takes exactly one annotated ToolArgs parameter")
    model = hints[params[0].name]
    if not (isinstance(model, type) and issubclass(model, ToolArgs)):
        raise TypeError(f"tool {function.__name__}: its parameter must be a ToolArgs model, got {model!r}")
    return model


def tool(
    name: str | None = None, *, write: bool = False, **meta: Any
) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Declare a function or method as a tool (see the module docstring); ``meta`` is kept on the tool."""

    def decorate(function: Callable[..., str]) -> Callable[..., str]:
        doc = inspect.getdoc(function) or ""
        description = " ".join(doc.split("\n\n", 1)[0].split())
        if not description:
            raise TypeError(f"tool {function.__name__} has no docstring; the model would be shown no description")
        # Fails at definition time on a bad arguments model (the schema is derived here).
        declaration = _Declaration(
            name=name or function.__name__, description=description, args_model=_args_model_of(function),
            write=write, meta=dict(meta), function=function,
        )
        setattr(function, _MARK, declaration)
        return function

    return decorate


def _declarations(owner: Any) -> Iterator[tuple[str, _Declaration]]:
    cls = owner if isinstance(owner, type) else type(owner)
    seen: set[str] = set()
    for klass in cls.__mro__:
        for attribute, value in vars(klass).items():
            declaration = getattr(value, _MARK, None)
            if isinstance(declaration, _Declaration) and attribute not in seen:
                seen.add(attribute)
                yield attribute, declaration


def declared_tools(owner: Any) -> list[tuple[ToolSpec, Mapping[str, Any]]]:
    """The specs and metadata of the tools a class (or object) declares, in definition order."""
    return [(d.spec(), d.meta) for _, d in _declarations(owner)]


def bound_tools(obj: Any) -> list[Tool]:
    """The tools an object declares, bound to it (its state is what the handlers act on)."""
    out = []
    for attribute, declaration in _declarations(obj):
        out.append(Tool(declaration.spec(), declaration.args_model, getattr(obj, attribute), declaration.meta))
    return out


def schema_tool(spec: ToolSpec, handler: Callable[[dict[str, Any]], str], **meta: Any) -> Tool:
    """A tool whose parameters are declared as data; the handler receives the validated arguments as a dict."""
    model = args_model_from_schema(spec.name, spec.parameters)
    return Tool(spec, model, lambda args: handler(args.model_dump(exclude_none=True)), dict(meta))


# --------------------------------------------------------------------------------------- dispatch
def is_agent_error(call: ToolCallRecord) -> bool:
    """A call the agent got wrong (as opposed to one that worked or that the world refused)."""
    return not call.ok and call.error_kind != ToolErrorKind.FAILED.value


def was_attempted(call: ToolCallRecord) -> bool:
    """A call that reached the world: it worked, or the world refused it (a call with bad arguments did nothing)."""
    return call.ok or call.error_kind == ToolErrorKind.FAILED.value


class Toolbox(Mapping[str, Tool]):
    """The tools of one episode by name; :meth:`dispatch` checks and runs a call and records it."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            if item.name in self._tools:
                raise ValueError(f"two tools are named {item.name!r}")
            self._tools[item.name] = item

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def write_tools(self) -> list[str]:
        return [t.name for t in self._tools.values() if t.spec.is_write]

    def dispatch(self, act: AgentAction, step: int, turn: int) -> ToolCallRecord:
        """Check ``act`` against the tools, run it, and record what happened; never raises."""

        def record(ok: bool, result: str, kind: str = "", tool_name: str | None = None) -> ToolCallRecord:
            spec = self._tools[tool_name].spec if tool_name in self._tools else None
            acted = ok or kind == ToolErrorKind.FAILED.value
            shown = result if acted else f"Error: {result}"
            return ToolCallRecord(
                step=step, turn=turn, tool=tool_name or act.tool or "<invalid>", arguments=act.arguments,
                raw_arguments=act.raw_arguments, call_id=act.call_id or "", ok=ok, result=shown,
                is_write=bool(spec is not None and spec.is_write and acted), error_kind=kind,
            )

        if act.kind is not ActionKind.TOOL_CALL:
            return record(False, act.error or "unparseable action", ToolErrorKind.INVALID_ACTION.value)
        name = act.tool or ""
        item = self._tools.get(name)
        if item is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return record(False, f"there is no tool named {name[:80]!r}; tools are: {known}",
                          ToolErrorKind.UNKNOWN_TOOL.value)
        if act.arguments is None and act.arguments_error:
            return record(False, f"{name}: {act.arguments_error}", ToolErrorKind.BAD_ARGUMENTS.value, name)
        ok, text, kind = item.run(act.arguments)
        if not ok and kind != ToolErrorKind.FAILED.value:
            text = f"{name}: {text}"
        return record(ok, text, kind, name)
