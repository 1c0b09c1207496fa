"""The harness's model, handed to a player of the user's own: its calls cached, retried, bounded, traced, costed.

A class that declares ``uses_model = True`` is played once per model of the config (``module:Class@model``)
and is made, per cell, as ``Class(model)`` with a :class:`HarnessModel` on that model. Every call it makes
through ``await model.complete(messages, tools=...)`` goes through the run's
:class:`~commitbench.llm.ModelClient` (the run's cache, retries, concurrency bound, replicas) with the
cell's sample index (so samples differ and a rerun is answered from the cache) and its run key as the
session, and is recorded in the cell's trace exactly as the chat agent's calls are
(:func:`commitbench.agents.chat.call_record`): the report counts its calls, tokens, cache hits and model time.

A failure of the model infrastructure that persists after retries (the server unreachable, a replay-only
cache miss is raised instead) is recorded; the model then answers every later call of the episode with
that error without calling again, and the cell's trace is marked, so a resumed run plays it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from commitbench.agents.chat import call_record
from commitbench.llm import INFRASTRUCTURE_ERRORS, ModelResponse
from commitbench.traces import ModelCallRecord

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

__all__ = ["HarnessModel"]


class HarnessModel:
    """The run's model for one cell of a player of the user's own (see the module doc)."""

    def __init__(self, client: ModelClient, *, sample_index: int = 0, session_id: str | None = None) -> None:
        self._client = client
        self._sample_index = sample_index
        self._session_id = session_id
        self.calls: list[ModelCallRecord] = []  # what the cell's trace records
        self.infra_error: str | None = None
        self.turn = 0  # the turn the calls belong to (the cell player sets it from the environment's info)
        self._failed: ModelResponse | None = None

    @property
    def name(self) -> str:
        """The served model's name."""
        return self._client.settings.model

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        response_format: Mapping[str, Any] | None = None,
        temperature: float | None = None,
    ) -> ModelResponse:
        """One chat completion (OpenAI-format messages and tools); the response's ``text``, ``tool_calls``
        (each with ``name`` and parsed ``arguments``) and ``error`` say what came back. Never raises for a bad
        answer: an error is in ``response.error`` and in the trace."""
        if self._failed is not None:
            return self._failed
        response = await self._client.complete(
            messages, tools=tools, tool_choice=tool_choice, response_format=response_format,
            sample_index=self._sample_index, session_id=self._session_id, temperature=temperature,
        )
        self.calls.append(call_record(response, self.turn, self._client.settings.max_argument_bytes))
        if response.error is not None and response.error.kind in INFRASTRUCTURE_ERRORS:
            self.infra_error = f"{response.error.kind.value}: {response.error.message}"
            self._failed = response
        return response
