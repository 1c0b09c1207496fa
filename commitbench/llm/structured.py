"""Structured output: a pydantic model asked of a model as JSON, and the reply read back, or the reason there is none.

One of each, for every judge, checker and detector that asks a model for JSON:

* :class:`ResponseFormatStyle` and :func:`judge_style`: how a schema is sent (OpenAI/vLLM ``json_schema``, or
  llama.cpp's ``json_object`` with a schema), and which of the two a judge gets when its config names none;
* :func:`strict_json_schema`: a model's JSON schema in the form strict structured output accepts, with every
  free string and every array bounded; :func:`response_format_for` wraps it in either style;
* :func:`parse_model_json`: raw model text to a model instance or a recorded error, never an exception;
* :func:`ask_structured`: the parse-and-retry loop. Attempt k is sent as sample index k (its own seed and cache
  key, so a retry is a new sample and every attempt is replayable); a reply that is an error, not JSON, or not
  the schema is asked for again, up to ``max_attempts`` (:data:`DEFAULT_MAX_ATTEMPTS`) counted attempts
  (:class:`Attempts`); after the last the answer holds no value and the error of each attempt, for the caller
  to record as a judge error, never as a label. A call that fails for infrastructure reasons after the
  client's own retries (:data:`~commitbench.callerrors.INFRASTRUCTURE_ERRORS`) ends the loop at once with
  ``unavailable`` set, so the caller can leave the item for a later pass instead of recording a judge error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError

from commitbench.callerrors import INFRASTRUCTURE_ERRORS
from commitbench.protocol import MAX_JSON_DEPTH, json_value_problem

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

ModelT = TypeVar("ModelT", bound=BaseModel)

# Attempts per item before a judge error is recorded (a config's judge.max_attempts, --max-attempts).
DEFAULT_MAX_ATTEMPTS = 3
# How many sample indices a loop walks past, at most, for one item when it passes over cached bad replies.
MAX_SAMPLE_INDEX = 64


# ------------------------------------------------------------------------------- the request
class ResponseFormatStyle(str, Enum):
    """How a JSON schema is sent: OpenAI/vLLM ``json_schema``, or llama.cpp's ``json_object`` + schema."""

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"


def judge_style(response_format: str | None, local: bool) -> ResponseFormatStyle:
    """The style a judge's requests take: the one its config names, else ``json_object`` for the embedded local
    model (llama.cpp) and ``json_schema`` for a served one."""
    if response_format:
        return ResponseFormatStyle(response_format)
    return ResponseFormatStyle.JSON_OBJECT if local else ResponseFormatStyle.JSON_SCHEMA


# Constrained decoding (vLLM, llama.cpp) lets a small model ramble inside a string, or add list items,
# until the token limit cuts the JSON off; a bound in the schema ends each string and list. Both forms
# of the response format carry it (the parsed models stay unbounded).
GRAMMAR_MAX_STRING = 200
GRAMMAR_MAX_ITEMS = 8


def _strictify(node: Any) -> Any:
    """Make a pydantic JSON schema acceptable to strict structured output.

    Strict mode wants every object closed (``additionalProperties: false``) with every property listed
    as required; optional fields stay optional through their ``null`` type. ``default`` and ``title``
    keys, and keywords beside a ``$ref``, are dropped because strict mode rejects or ignores them.
    """
    if isinstance(node, dict):
        if "$ref" in node:
            return {"$ref": node["$ref"]}  # strict mode allows no keywords beside a reference
        out = {k: _strictify(v) for k, v in node.items() if k not in {"default", "title"}}
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
            out["required"] = list(out["properties"].keys())
        return out
    if isinstance(node, list):
        return [_strictify(v) for v in node]
    return node


def _bounded(node: Any, max_string: int, max_items: int) -> Any:
    if isinstance(node, dict):
        out = {k: _bounded(v, max_string, max_items) for k, v in node.items()}
        if out.get("type") == "string" and "enum" not in out and "maxLength" not in out:
            out["maxLength"] = max_string
        if out.get("type") == "array" and "maxItems" not in out:
            out["maxItems"] = max_items
        return out
    if isinstance(node, list):
        return [_bounded(v, max_string, max_items) for v in node]
    return node


def strict_json_schema(
    model: type[BaseModel], *, max_string: int = GRAMMAR_MAX_STRING, max_items: int = GRAMMAR_MAX_ITEMS
) -> dict[str, Any]:
    """The model's JSON schema in the form strict structured output accepts, with every free string (not an
    enum, not already bounded) given a ``maxLength`` of ``max_string`` and every array a ``maxItems``."""
    schema: dict[str, Any] = _bounded(_strictify(copy.deepcopy(model.model_json_schema())), max_string, max_items)
    return schema


def response_format_for(
    model: type[BaseModel],
    name: str,
    style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    *,
    max_string: int = GRAMMAR_MAX_STRING,
    max_items: int = GRAMMAR_MAX_ITEMS,
) -> dict[str, Any]:
    """The ``response_format`` for ``model`` in the form the server understands: OpenAI's strict ``json_schema``
    object (also honoured by vLLM) named ``name``, or llama.cpp's ``json_object`` with the schema."""
    schema = strict_json_schema(model, max_string=max_string, max_items=max_items)
    if style is ResponseFormatStyle.JSON_OBJECT:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


# ------------------------------------------------------------------------------- the reply
class ParsedModelOutput(BaseModel, Generic[ModelT]):
    """The result of parsing one model reply: a value, or the reason there is none."""

    value: ModelT | None = Field(default=None, description="The parsed output, when parsing succeeded.")
    error: str | None = Field(default=None, description="Why the text could not be parsed, when it failed.")
    raw: str = Field(description="The text as the model returned it.")

    @property
    def ok(self) -> bool:
        return self.value is not None


_FENCE = "```"


def _unfenced(body: str) -> str | None:
    """The inside of a reply wrapped in one Markdown code fence (```json ... ```), or None.

    Read with string operations: a lazy pattern for the inside retried its whitespace runs at every
    character (quadratic time on a fence followed by many spaces).
    """
    if len(body) < 2 * len(_FENCE) or not (body.startswith(_FENCE) and body.endswith(_FENCE)):
        return None
    return body[len(_FENCE) : -len(_FENCE)].removeprefix("json").strip()


def parse_model_json(text: str | None, model: type[ModelT]) -> ParsedModelOutput[ModelT]:
    """Parse a model's JSON reply into ``model``; malformed output becomes a recorded error.

    A reply wrapped in a Markdown code fence is unwrapped first; nothing else is repaired.
    """
    raw = text or ""
    body = raw.strip()
    inside = _unfenced(body)
    if inside is not None:
        body = inside
    if not body:
        return ParsedModelOutput[model](raw=raw, error="empty reply")  # type: ignore[valid-type]
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return ParsedModelOutput[model](raw=raw, error=f"not JSON: {exc.msg} at position {exc.pos}")  # type: ignore[valid-type]
    except RecursionError:
        return ParsedModelOutput[model](raw=raw, error=f"reply is nested deeper than {MAX_JSON_DEPTH} levels")  # type: ignore[valid-type]
    except ValueError as exc:  # an integer too long to convert
        return ParsedModelOutput[model](raw=raw, error=f"not JSON we can read: {exc}")  # type: ignore[valid-type]
    problem = json_value_problem(data)
    if problem is not None:  # what could not be written to a labels file is not a label
        return ParsedModelOutput[model](raw=raw, error=f"unusable reply: its values {problem}")  # type: ignore[valid-type]
    try:
        value = model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in exc.errors()
        )
        return ParsedModelOutput[model](raw=raw, error=f"schema mismatch: {problems}")  # type: ignore[valid-type]
    return ParsedModelOutput[model](raw=raw, value=value)  # type: ignore[valid-type]


# ------------------------------------------------------------------------------- the loop
class Attempts:
    """The sample indices of the attempts at one item (attempt k is sample index k: its own seed and cache key,
    so every attempt is replayable and a retry is a new sample).

    ``fresh`` (``label --retry-errors``): a reply the cache already holds that turned out unusable is passed
    over without counting (:meth:`pass_over`), so the ``max_attempts`` attempts are new calls and never replay
    a failed reply. Without it the attempts replay what the cache holds, as a rebuild must. Iterate::

        attempts = Attempts(3, fresh=True)
        for index in attempts:
            response = await client.complete(..., sample_index=index)
            if unusable(response) and attempts.pass_over(response.cache_hit):
                continue
    """

    def __init__(self, max_attempts: int, fresh: bool = False) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts = max_attempts
        self.fresh = fresh
        self.counted = 0
        self.passed_over = 0
        self._index = -1
        self._skip = False

    def __iter__(self) -> Iterator[int]:
        while self._index + 1 < MAX_SAMPLE_INDEX:
            if self._index >= 0 and not self._skip:
                self.counted += 1
            self._skip = False
            if self.counted >= self.max_attempts:
                return
            self._index += 1
            yield self._index

    def pass_over(self, cache_hit: bool) -> bool:
        """Whether the current attempt's unusable reply is passed over uncounted: a cached one, when fresh."""
        self._skip = self.fresh and cache_hit
        self.passed_over += self._skip
        return self._skip

    @property
    def attempt(self) -> int:
        """The number of the current attempt among the counted ones (1 for the first)."""
        return self.counted + 1


class StructuredCall(BaseModel):
    """One model call of the loop."""

    sample_index: int = Field(description="The call's sample index: 0 for the first, then 1, 2, ...")
    cache_key: str = Field(default="", description="The call's cache key.")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    raw: str = Field(default="", description="The text the model returned.")
    error: str = Field(default="", description="Why the reply was not usable ('' when it was).")
    passed_over: bool = Field(
        default=False, description="An unusable reply the cache held, passed over uncounted (fresh attempts)."
    )


class StructuredAnswer(BaseModel, Generic[ModelT]):
    """What the loop made of one item: a value, or no value and why."""

    value: ModelT | None = Field(default=None, description="The parsed reply, when an attempt gave a usable one.")
    calls: list[StructuredCall] = Field(default_factory=list, description="Every call made, in order.")
    last_error: str | None = Field(
        default=None, description="The error of the last counted attempt that failed (None when none did)."
    )
    unavailable: str | None = Field(
        default=None, description="The infrastructure error ('kind: message') that ended the loop, if one did."
    )


async def ask_structured(
    client: ModelClient,
    messages: Sequence[Mapping[str, Any]],
    response_format: Mapping[str, Any],
    model: type[ModelT],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    fresh: bool = False,
    session_id: str | None = None,
) -> StructuredAnswer[ModelT]:
    """Ask ``client`` for JSON in ``model`` until a reply parses, up to ``max_attempts`` counted attempts.

    Never raises for what the model says: an answer without a value carries each attempt's error, for the
    caller to record as a judge error; ``unavailable`` says the model could not be reached (the loop stops
    there). With ``fresh`` unusable replies the cache already holds are passed over uncounted (:class:`Attempts`).
    """
    attempts = Attempts(max_attempts, fresh=fresh)
    answer: StructuredAnswer[ModelT] = StructuredAnswer[model]()  # type: ignore[valid-type]
    for index in attempts:
        response = await client.complete(
            messages, response_format=response_format, sample_index=index, session_id=session_id
        )
        call = StructuredCall(
            sample_index=index, cache_key=response.cache_key, cache_hit=response.cache_hit, raw=response.text or ""
        )
        answer.calls.append(call)
        if response.error is not None:
            call.error = f"{response.error.kind.value}: {response.error.message}"
            if response.error.kind in INFRASTRUCTURE_ERRORS:
                answer.unavailable = call.error
                return answer
        else:
            parsed = parse_model_json(response.text, model)
            if parsed.value is not None:
                answer.value = parsed.value
                return answer
            call.error = parsed.error or "unusable output"
        call.passed_over = attempts.pass_over(response.cache_hit)
        if not call.passed_over:
            answer.last_error = call.error
    return answer
