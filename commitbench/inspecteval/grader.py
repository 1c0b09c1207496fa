"""inspect's model role ``grader``: the model the scorer labels with, and the probe that checks it can be reached.

When an eval names a model for the role (``--model-role grader=...``, or the task parameter ``grader``), the
scorer labels every sample with the suite's LLM labeller on it (:mod:`commitbench.inspecteval.scoring`).
Before any sample plays, :func:`probe_grader` asks that model for a few tokens, once per eval
(:meth:`commitbench.inspecteval.evalrun.EvalRun.once`), with a short timeout and no retries: a grader that
cannot be reached (a wrong or missing base URL, a server that is down) stops the eval at once with
:class:`~commitbench.inspecteval.evalrun.EvalCheckError`, naming the model, its endpoint and the forms that
give a grader its own base URL, instead of leaving inspect to retry every judge call after the samples played.
"""

from __future__ import annotations

from inspect_ai.model import GenerateConfig, Model, model_roles

from commitbench.inspecteval.evalrun import EvalCheckError

__all__ = ["GRADER_ROLE", "PROBE_MAX_TOKENS", "PROBE_TIMEOUT_S", "grader_model", "probe_grader"]

# The inspect model role whose model, when an eval names one, labels the runs with the suite's LLM labeller.
GRADER_ROLE = "grader"
# The probe's bound on the reply: the least OpenAI's Responses API accepts, so every provider takes it.
PROBE_MAX_TOKENS = 16
# Seconds the probe may take in all (connection, reply); it is not retried.
PROBE_TIMEOUT_S = 30

RECIPE = (
    "A grader on a local OpenAI-compatible server (vLLM, llama.cpp, the mock server) needs its own base URL: "
    "--model-role grader=openai-api/<service>/<model> with <SERVICE>_BASE_URL=http://HOST:PORT/v1 and "
    "<SERVICE>_API_KEY set, or --model-role 'grader={model: openai/<model>, model_args: {base_url: "
    "\"http://HOST:PORT/v1\"}}' (docs/inspect.md, \"The LLM judge as inspect's grader\")"
)


def grader_model() -> Model | None:
    """The model of the eval's ``grader`` role (the first one when several are given), or None."""
    grader = model_roles().get(GRADER_ROLE)
    if grader is None:
        return None
    return grader[0] if isinstance(grader, list) else grader


def _cause(exc: BaseException) -> str:
    """The error the probe met: the last attempt's error when inspect wrapped it in its retry error."""
    last_attempt = getattr(exc, "last_attempt", None)  # tenacity's RetryError, which inspect's retries raise
    inner = last_attempt.exception() if last_attempt is not None else None
    found = inner if isinstance(inner, BaseException) else exc
    return f"{type(found).__name__}: {str(found).rstrip('.')}"


async def probe_grader() -> None:
    """Ask the grader for a few tokens (no retries, no cache); :class:`EvalCheckError` when it does not answer.
    Nothing happens when the eval names no grader."""
    model = grader_model()
    if model is None:
        return
    config = GenerateConfig(max_tokens=PROBE_MAX_TOKENS, max_retries=0, timeout=PROBE_TIMEOUT_S)
    try:
        await model.generate("Reply with the word ready.", config=config, cache=False)
    except Exception as exc:  # whatever the provider raises: the eval stops with it, named
        endpoint = model.api.base_url or "its provider's default endpoint"
        raise EvalCheckError(
            f"the grader model {model} (inspect's model role '{GRADER_ROLE}') at {endpoint} did not answer a "
            f"{PROBE_MAX_TOKENS}-token probe (no retries, {PROBE_TIMEOUT_S} s at most), so no sample was played: "
            f"{_cause(exc)}. {RECIPE}"
        ) from None
