"""Checks of the harness against a running OpenAI-compatible server (used by scripts/vllm_cpu_check.sh).

    python scripts/vllm_checks.py --base-url http://127.0.0.1:8765/v1 --model smollm2-vllm --runs RUNS_DIR

Through :class:`commitbench.llm.ModelClient`, as every call of the harness:

* tool calls round-trip: a call forced with a named ``tool_choice`` comes back with arguments that parse
  as a JSON object; the tool's result is accepted on the next call (``tool_choice: "required"``), whose
  call parses too;
* ``chat_template_kwargs`` in the request body is accepted;
* the judges' ``json_schema`` response formats are honoured: the standing judge's and the follow-up
  detector's replies parse into their models;

and from the run directories under ``RUNS_DIR`` (``standing``, ``standing-tools-only``, ``followup``):
traces, model calls, calls with tool calls, call errors, judge errors of the labels, and HTML entities in
any trace. Prints one line per check and exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from commitbench.judges.followup.schemas import DetectorOutput
from commitbench.judges.standing.llm import StandingJudgeOutput, response_format
from commitbench.llm import ModelClient, ModelSettings
from commitbench.llm.structured import response_format_for
from commitbench.traces import read_traces

ENTITY = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")
TOOL = {
    "type": "function",
    "function": {
        "name": "deploy",
        "description": "Deploy a service to an environment.",
        "parameters": {
            "type": "object",
            "properties": {"service": {"type": "string", "maxLength": 40},
                           "environment": {"type": "string", "maxLength": 20}},
            "required": ["service", "environment"],
            "additionalProperties": False,
        },
    },
}


async def live_checks(settings: ModelSettings) -> list[tuple[str, bool, str]]:
    results: list[tuple[str, bool, str]] = []
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an assistant with a deploy tool."},
        {"role": "user", "content": "CI is green: deploy billing-api to staging now."},
    ]
    async with ModelClient(settings) as client:
        named = await client.complete(messages, tools=[TOOL], tool_choice={"type": "function",
                                                                             "function": {"name": "deploy"}})
        calls = [c for c in named.tool_calls if c.arguments is not None]
        results.append(("forced tool_choice (named): a call whose arguments parse", named.error is None and bool(calls),
                        f"error={named.error}, calls={[(c.name, c.arguments_raw) for c in named.tool_calls]}"))
        if calls:
            history = [*messages,
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "call00001", "type": "function",
                            "function": {"name": "deploy", "arguments": calls[0].arguments_raw}}]},
                       {"role": "tool", "tool_call_id": "call00001", "content": "Deployed billing-api to staging."}]
            after = await client.complete(history, tools=[TOOL], tool_choice="required")
            parsed = [c for c in after.tool_calls if c.arguments is not None]
            results.append(("tool result accepted; next call with tool_choice required parses",
                            after.error is None and bool(parsed),
                            f"error={after.error}, calls={[(c.name, c.arguments_raw) for c in after.tool_calls]}"))
            free = await client.complete(history, tools=[TOOL])
            results.append(("tool result accepted without tool_choice", free.error is None,
                            f"error={free.error}, text={free.text!r:.80}, calls={len(free.tool_calls)}"))
        with_kwargs = settings.model_copy(update={"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}})
        async with ModelClient(with_kwargs) as other:
            kwargs = await other.complete(messages)
        results.append(("chat_template_kwargs accepted", kwargs.error is None,
                        f"error={kwargs.error}, text={(kwargs.text or '')[:60]!r}"))
        judge_prompt = [{"role": "user", "content": "Message: 'Alice, should I still deploy?' Does it consult "
                         "the requester Alice, notify her of a cancellation, or is it off topic? Answer in JSON."}]
        judged = await client.complete(judge_prompt, response_format=response_format())
        ok = judged.error is None and _parses(StandingJudgeOutput, judged.text)
        results.append(("standing judge json_schema honoured", ok, f"finish={judged.finish_reason} "
                        f"text={(judged.text or '')[:120]!r}"))
        detector_prompt = [{"role": "user", "content": "User: remind me tomorrow. Assistant: Sure, I'll remind "
                            "you tomorrow at 9. List the assistant's commitments as JSON."}]
        detected = await client.complete(detector_prompt, response_format=response_format_for(DetectorOutput, "d"))
        ok = detected.error is None and _parses(DetectorOutput, detected.text)
        results.append(("follow-up detector json_schema honoured", ok, f"finish={detected.finish_reason} "
                        f"text={(detected.text or '')[:120]!r}"))
    return results


def _parses(model: Any, text: str | None) -> bool:
    try:
        model.model_validate_json(text or "")
    except ValueError:
        return False
    return True


def run_summary(run_dir: Path) -> tuple[str, int]:
    """One line about a run directory, and the number of traces holding an HTML entity."""
    if not (run_dir / "traces.jsonl").exists():
        return f"{run_dir.name}: no traces", 0
    traces = list(read_traces(run_dir / "traces.jsonl"))
    calls = [m for t in traces for m in t.model_calls if m.purpose == "agent"]
    with_tools = sum(bool(m.tool_calls) for m in calls)
    errors = sum(bool(m.error) for m in calls)
    tools = [c.tool for t in traces for c in t.tool_calls()]
    entities = sum(bool(ENTITY.search(t.model_dump_json())) for t in traces)
    labels = ""
    for path in sorted(run_dir.glob("labels*.jsonl")):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        bad = sum(1 for r in lines if _record_errors(r))
        labels += f"; {path.name}: {len(lines)} records, {bad} with judge errors"
    return (f"{run_dir.name}: {len(traces)} traces, {len(calls)} model calls, {with_tools} with tool calls, "
            f"{errors} call errors, tool calls {dict((t, tools.count(t)) for t in sorted(set(tools)))}, "
            f"{entities} traces with HTML entities{labels}"), entities


def _record_errors(record: dict[str, Any]) -> bool:
    if record.get("error"):
        return True
    return any(isinstance(label, dict) and label.get("error") for label in record.get("labels") or ())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=Path, required=True)
    args = parser.parse_args(argv)
    settings = ModelSettings(model=args.model, base_url=args.base_url, api_key_env=None, temperature=0.0,
                             max_tokens=256, timeout=300.0)
    results = asyncio.run(live_checks(settings))
    failed = 0
    for name, ok, detail in results:
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    entities = 0
    for name in ("standing", "standing-tools-only", "followup"):
        line, found = run_summary(args.runs / name)
        entities += found
        print(f"run {line}")
    print(f"{'PASS' if entities == 0 else 'FAIL'} no HTML entities in any trace ({entities} traces hold one)")
    failed += entities > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
