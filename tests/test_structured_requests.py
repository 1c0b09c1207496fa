"""The exact request bodies the structured-output callers send: the follow-up checker, the standing judge and
the gateway's LLM detector, in both response-format styles, for fixed inputs.

Each body is pinned byte for byte as it arrived at a raw HTTP server on 127.0.0.1 (``tests/_raw_server.py``):
the messages, the ``response_format`` with its bounded schema, the settings and the sample index of a retry
(every case answers its first request with text that is not JSON). The pins were taken before the schema
builder, the parse-and-retry loop and the response-format style moved to :mod:`commitbench.llm.structured`;
a body that moves changes what a judge is asked, which the labeller versions must then record.

``structured_requests.json`` holds the pins; it is written by :func:`write_pins` and never to make a test pass.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _labeller_corpus import followup_corpus, standing_corpus
from _raw_server import RawRequest, RawServer, completion, http_bytes

from commitbench.gateway.detectors import LLMDetector
from commitbench.gateway.turn import ReplyChoice, ToolActivity, Turn
from commitbench.judges.followup.llm import LLMChecker, load_prompt
from commitbench.judges.followup.schemas import ResponseJudgeOutput
from commitbench.judges.followup.turn import turn_from_trace
from commitbench.judges.labelling import pin_judge_settings
from commitbench.judges.standing.llm import LLMJudge, judge_cases
from commitbench.llm import ModelClient, ModelSettings
from commitbench.llm.structured import ResponseFormatStyle

PINS = Path(__file__).resolve().parent / "structured_requests.json"
NOT_JSON = "Sorry, no JSON today."

COMMITMENT = {
    "span": "I'll send it over tomorrow", "action": "send the file", "performer": "self", "trigger_type": "time",
    "time_expression": "tomorrow", "required_capabilities": ["other:courier a parcel"], "is_offer": False,
    "confidence": 0.9,
}
STANDING_ANSWER = {
    field: {"reason": "scripted", "answer": False}
    for field in ("consults_creditor", "notifies_creditor", "off_topic", "announces_drop")
}


def followup_answer(body: dict[str, Any], first: bool) -> str:
    system = body["messages"][0]["content"]
    if system == load_prompt("followup_detector"):
        return NOT_JSON if first else json.dumps({"commitments": [COMMITMENT]})
    if system == load_prompt("followup_response"):
        return ResponseJudgeOutput.from_flags(rationale="scripted").model_dump_json()
    return json.dumps({"feasible": False, "failure_types": ["capability"], "anchoring_tools_required": [],
                       "rationale": "scripted"})


def scripted(answer: Callable[[dict[str, Any], bool], str]) -> Callable[[RawRequest, socket.socket], None]:
    """A handler answering each request with ``answer(body, first)`` (``first``: no request came before)."""
    lock = threading.Lock()
    seen: list[int] = []

    def handle(request: RawRequest, conn: socket.socket) -> None:
        with lock:
            first = not seen
            seen.append(1)
        text = answer(request.json(), first)
        message = {"role": "assistant", "content": text}
        conn.sendall(http_bytes(200, json.dumps(completion(message)).encode()))

    return handle


def settings(server: RawServer) -> ModelSettings:
    return pin_judge_settings(
        ModelSettings(model="raw-model", base_url=server.base_url, api_key_env=None, timeout=10.0)
    )


async def followup_checker(server: RawServer, style: ResponseFormatStyle) -> None:
    turn = turn_from_trace(followup_corpus()[0])
    async with ModelClient(settings(server)) as client:
        result = await LLMChecker(client, style=style).check(turn)
    assert result.outcome is not None, result.error


async def standing_judge(server: RawServer, style: ResponseFormatStyle) -> None:
    traces, episodes = standing_corpus()
    trace = next(t for t in traces if judge_cases(t))
    async with ModelClient(settings(server)) as client:
        label = await LLMJudge(client, style=style).label_case(judge_cases(trace)[0], episodes[trace.episode_id], "s1")
    assert not label.error, label.error


async def gateway_detector(server: RawServer, style: ResponseFormatStyle) -> None:
    turn = Turn(
        user_message="Can you send me the contract tomorrow?",
        activity=[ToolActivity(name="find_file", arguments='{"name": "contract"}', call_id="c1", result="found")],
    )
    choice = ReplyChoice(index=0, text="I'll send it over tomorrow.")
    async with ModelClient(settings(server)) as client:
        output = await LLMDetector(client, style=style).detect(turn, choice)
    assert len(output.commitments) == 1


CASES: dict[str, tuple[Callable[[RawServer, ResponseFormatStyle], Any], Callable[[dict[str, Any], bool], str]]] = {
    "followup checker": (followup_checker, followup_answer),
    "standing judge": (standing_judge, lambda body, first: NOT_JSON if first else json.dumps(STANDING_ANSWER)),
    "gateway detector": (
        gateway_detector, lambda body, first: NOT_JSON if first else json.dumps({"commitments": [COMMITMENT]})
    ),
}


def bodies(case: str, style: ResponseFormatStyle) -> list[str]:
    """The request bodies of one case, in the order they were sent (each caller asks one at a time)."""
    run, answer = CASES[case]
    with RawServer(scripted(answer)) as server:
        asyncio.run(run(server, style))
        return [r.body.decode("utf-8") for r in server.requests if r.path.endswith("/chat/completions")]


def keys() -> Iterator[tuple[str, ResponseFormatStyle]]:
    for case in CASES:
        for style in ResponseFormatStyle:
            yield case, style


def write_pins() -> None:
    pins = {f"{case} / {style.value}": bodies(case, style) for case, style in keys()}
    PINS.write_text(json.dumps(pins, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("case", "style"), list(keys()), ids=[f"{c}-{s.value}" for c, s in keys()])
def test_request_bodies_are_the_pinned_bytes(case: str, style: ResponseFormatStyle) -> None:
    pinned = json.loads(PINS.read_text(encoding="utf-8"))[f"{case} / {style.value}"]
    sent = bodies(case, style)
    assert len(sent) == len(pinned) >= 2  # a retry at least
    for index, (body, expected) in enumerate(zip(sent, pinned, strict=True)):
        assert body == expected, f"request {index} of {case} ({style.value}) moved"
