"""The gateway's checks as a LiteLLM proxy guardrail, for a team that already runs a LiteLLM proxy.

One entry in the proxy's ``config.yaml`` (``docs/gateway.md`` shows it whole)::

    guardrails:
      - guardrail_name: commitbench
        litellm_params:
          guardrail: commitbench.gateway.litellm.CommitmentGuardrail
          mode: [pre_call, post_call]
          default_on: true
          gateway_mode: enforce        # observe (default) or enforce
          ledger: /var/lib/commitbench/ledger.db
          log: /var/log/commitbench/gateway.jsonl

LiteLLM hands the guardrail the request as the proxy received it (``data``: ``messages`` with the assistant
tool calls and tool results, ``tools``, ``user``, ``model``) and, after the call, the response. The checks
are the gateway's own (:meth:`commitbench.gateway.app.Gateway.process`, with the same catalogue, detector,
ledger recording and log); what changes is only where they run:

* ``post_call`` (:meth:`CommitmentGuardrail.async_post_call_success_hook`): the choices are checked; in
  enforce mode a false claim's content is replaced in the response; the verdicts go into the response's
  ``commitbench`` field and, through :meth:`async_post_call_response_headers_hook`, the
  ``x-commitbench-verdict`` header;
* ``pre_call`` (:meth:`async_pre_call_hook`): in enforce mode, the nudge left by a false claim is added at
  the end of the session's next prompt (the session is the request's ``user`` field);
* streamed replies (:meth:`async_post_call_streaming_iterator_hook`): in observe mode they pass through as
  they come and are checked and logged when they end; in enforce mode the guardrail holds the stream until
  it ends, checks it, and sends the chunks on with a false claim's content replaced (the client sees the
  corrected reply, later; what the log says was replaced is what the client received);
* ``rewrite`` mode is not offered here: it needs a second call to the model, which is the proxy's to make.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from litellm.integrations.custom_guardrail import CustomGuardrail

from commitbench.gateway.actions import NudgeBook, with_nudge
from commitbench.gateway.app import Gateway, GatewayConfig, Services
from commitbench.gateway.catalog import load_catalog
from commitbench.gateway.logbook import GatewayLog
from commitbench.gateway.outcome import RequestOutcome
from commitbench.gateway.recording import LedgerRecorder
from commitbench.gateway.streams import Assembler
from commitbench.gateway.turn import turn_digest
from commitbench.gateway.verdicts import CountMode, Mode

VERDICT_KEY = "commitbench_verdict"
# What the guardrail saw of the request (its top-level keys), kept on the request for the headers hook.
SEEN_KEY = "commitbench_seen"


def replace_streamed(chunks: list[Any], replaced: dict[int, str]) -> list[Any]:
    """The held chunks with each replaced choice's content said once, in its first content delta (its later
    content deltas emptied); chunks are LiteLLM's stream objects or plain dicts, changed in place."""
    first: set[int] = set()
    for chunk in chunks:
        choices = chunk.get("choices") if isinstance(chunk, dict) else getattr(chunk, "choices", None)
        for position, choice in enumerate(choices or []):
            index = (choice.get("index") if isinstance(choice, dict) else getattr(choice, "index", None))
            index = position if not isinstance(index, int) else index
            delta = choice.get("delta") if isinstance(choice, dict) else getattr(choice, "delta", None)
            if index not in replaced or delta is None:
                continue
            content = delta.get("content") if isinstance(delta, dict) else getattr(delta, "content", None)
            if not content:
                continue
            text = replaced[index] if index not in first else ""
            first.add(index)
            if isinstance(delta, dict):
                delta["content"] = text
            else:
                delta.content = text
    return chunks


def _as_dict(response: Any) -> dict[str, Any]:
    if isinstance(response, dict):
        return response
    dump = getattr(response, "model_dump", None)
    return dict(dump()) if callable(dump) else {}


class CommitmentGuardrail(CustomGuardrail):  # type: ignore[misc]
    """The commitment gateway's checks on a LiteLLM proxy (observe or enforce)."""

    def __init__(
        self, gateway_mode: str = "observe", count: str = "matching", catalog: str | None = None,
        ledger: str | None = None, log: str | None = None, log_text: bool = False, **kwargs: Any,
    ) -> None:
        mode = Mode(gateway_mode)
        if mode is Mode.REWRITE:
            raise ValueError("the LiteLLM guardrail offers observe and enforce; rewrite needs the gateway itself")
        config = GatewayConfig(upstream="litellm://proxy", mode=mode, count=CountMode(count))
        services = Services(
            catalog=load_catalog(catalog), recorder=LedgerRecorder(ledger) if ledger else None,
            log=GatewayLog(log, text=bool(log_text)) if log else None, nudges=NudgeBook(),
        )
        self.gateway = Gateway(config, services)
        super().__init__(**kwargs)

    @staticmethod
    def _session(data: dict[str, Any]) -> str | None:
        user = data.get("user")
        return user if isinstance(user, str) and user else None

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict[str, Any],
                                  call_type: Any) -> dict[str, Any]:
        session = self._session(data)
        if self.gateway.config.mode is Mode.ENFORCE and session:
            nudge = self.gateway.services.nudges.take(session)
            if nudge is not None:
                data["messages"] = with_nudge(data, nudge)["messages"]
        return data

    async def _check(self, data: dict[str, Any], completion: dict[str, Any], stream: bool,
                     started: float) -> tuple[RequestOutcome, dict[str, Any]]:
        session = self._session(data)
        digest = turn_digest(data, session or "")
        data[SEEN_KEY] = sorted(k for k in data if isinstance(k, str))
        outcome = await self.gateway.process(data, completion, {}, session, session, False, digest)
        elapsed = (time.perf_counter() - started) * 1000
        self.gateway.log(outcome, data, completion, digest=digest, session=session, creditor=session,
                         stream=stream, status=200, upstream_ms=0.0, total_ms=elapsed, nudged=False)
        report = outcome.report(self.gateway.config.mode, digest, self.gateway.services.detector.name)
        report["request_keys"] = data[SEEN_KEY]
        return outcome, report

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: Any,
                                           response: Any) -> Any:
        started = time.perf_counter()
        completion = _as_dict(response)
        if not isinstance(completion.get("choices"), list):
            return response
        outcome, report = await self._check(data, completion, False, started)
        data[VERDICT_KEY] = outcome.verdict()
        for position, choice in enumerate(getattr(response, "choices", []) or []):
            replaced = completion["choices"][position]["message"]["content"] if position < len(
                completion["choices"]) else None
            message = getattr(choice, "message", None)
            if message is not None and outcome.actions.get(getattr(choice, "index", position)) == "replaced":
                message.content = replaced
        with contextlib.suppress(AttributeError, TypeError, ValueError):
            setattr(response, "commitbench", report)  # noqa: B010 (a field LiteLLM's response model has not declared)
        return response

    async def async_post_call_response_headers_hook(self, data: dict[str, Any], user_api_key_dict: Any,
                                                    response: Any, request_headers: dict[str, str] | None = None,
                                                    **kwargs: Any) -> dict[str, str] | None:
        verdict = data.get(VERDICT_KEY)
        return {"x-commitbench-verdict": verdict} if isinstance(verdict, str) else None

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict: Any, response: AsyncIterator[Any],
                                                      request_data: dict[str, Any]) -> AsyncGenerator[Any, None]:
        started = time.perf_counter()
        assembler = Assembler(self.gateway.config.max_check_chars)
        if self.gateway.config.mode is not Mode.ENFORCE:  # observe: the chunks pass as they come
            async for item in response:
                assembler.feed(_as_dict(item))
                yield item
            if not assembler.overflow:
                await self._check(request_data, assembler.completion(), True, started)
            return
        # enforce: the stream is held until it ends and is checked, so a false claim never reaches the client
        held: list[Any] = []
        async for item in response:
            assembler.feed(_as_dict(item))
            held.append(item)
        replaced: dict[int, str] = {}
        if not assembler.overflow:  # a reply past the bound is passed on unchecked (and logged as check_error)
            completion = assembler.completion()
            outcome, _ = await self._check(request_data, completion, True, started)
            replaced = {index: str(choice["message"].get("content") or "")
                        for index, choice in enumerate(completion["choices"])
                        if outcome.actions.get(choice.get("index", index)) == "replaced"}
        for item in replace_streamed(held, replaced):
            yield item
