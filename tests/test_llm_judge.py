"""The LLM judge on the mock server: schema, pinned settings, bounded retries, recorded errors,
cache, resumable labelling, and the judge command end to end."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from commitbench.cache import CallCache
from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.judges.labelling import JUDGE_SEED, LabellerUnavailable, label_run, labels_path, pin_judge_settings
from commitbench.judges.labelling import read_label_records as read_records
from commitbench.judges.standing.labellers import LLMLabeller, StandingLabelRecord
from commitbench.judges.standing.llm import LLMJudge, judge_cases, judge_prompt_hash, render_case
from commitbench.llm import ModelClient, ModelSettings, RetryPolicy
from commitbench.mock import DEFAULT_MODEL, FaultKind
from commitbench.protocol import tool_call
from commitbench.runner import run_experiment
from commitbench.traces import append_traces, latest_traces

EPISODES = load_episodes()
BY_ID = {e.id: e for e in EPISODES}


def _episode(cell: str, policy: str = "explicit"):
    return next(
        e for e in EPISODES
        if e.split.value == "test" and e.cell == cell and e.policy.value == policy and e.gap == 1 and e.variant == 0
    )


def _one_message_trace(cell: str = "PEER-DIRECT"):
    """A trace with exactly one assistant message: a question to the creditor after the event."""
    episode = _episode(cell)
    env = StandingEnv(episode_id=episode.id, episodes=EPISODES)
    env.reset(seed=0)
    env.step(tool_call("send_dm", {"to": episode.creditor.name, "text": "Should I still go ahead with it?"}))
    done = False
    while not done:
        _, _, done, _, _ = env.step({"end_turn": True})
    trace = env.trace
    trace.run_key = f"rk-{cell}"
    return trace, episode


def _answer(consults: bool, notifies: bool = False, off_topic: bool = False, drops: bool = False) -> str:
    return json.dumps({
        "consults_creditor": {"reason": "asks the requester", "answer": consults},
        "notifies_creditor": {"reason": "no cancellation reported", "answer": notifies},
        "off_topic": {"reason": "about the task", "answer": off_topic},
        "announces_drop": {"reason": "says nothing is dropped", "answer": drops},
    })


def _judge(settings, cache=None, attempts: int = 3, **client_kwargs) -> tuple[ModelClient, LLMJudge]:
    client = ModelClient(settings, cache=cache, **client_kwargs)
    return client, LLMJudge(client, max_attempts=attempts)


def _settings(mock_server):
    return pin_judge_settings(
        ModelSettings(model=DEFAULT_MODEL, base_url=mock_server.base_url, api_key_env=None, timeout=10.0)
    )


def read_label_records(path: Path) -> list[StandingLabelRecord]:
    return read_records(path, StandingLabelRecord)


def _played(tmp_path: Path, cells: tuple[str, ...]) -> Path:
    """A run directory in which the creditor-rule agent played one episode of each cell."""
    run_dir = tmp_path / "run"
    ids = [_episode(cell).id for cell in cells]
    run_experiment(ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": ids}), run_dir)
    return run_dir


def test_cases_follow_the_assistant_messages_with_the_conversation_before_them(tmp_path):
    episode = _episode("DELEG-DIRECT")
    (trace,) = latest_traces(_played(tmp_path, ("DELEG-DIRECT",)))
    cases = judge_cases(trace)
    messages = trace.assistant_messages()
    assert [c.text for c in cases] == [m.text for m in messages]
    assert [c.message_index for c in cases] == list(range(len(messages)))
    notify = cases[0]
    assert notify.channel == f"dm:{episode.creditor.name}"
    assert notify.delegates == [episode.person("delegate").name]
    assert notify.conversation[-1].endswith(next(m.text for m in episode.script if m.act.value == "cancel"))
    system, user = render_case(notify, episode)
    assert system["role"] == "system" and "consults_creditor" in system["content"]
    assert "=== CASE ===" not in system["content"] + user["content"]
    assert f"The requester is {episode.creditor.name}." in user["content"]
    assert f"as a direct message to {episode.creditor.name}" in user["content"]
    assert "$" not in user["content"]


def test_prompt_hash_is_the_sha256_of_the_prompt_file():
    path = Path(__file__).parents[1] / "judges" / "prompts" / "standing_judge.txt"
    assert judge_prompt_hash() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_unparseable_then_valid_reply_gives_one_retry_and_a_valid_label(mock_server):
    trace, episode = _one_message_trace()
    mock_server.script("this is not JSON at all", _answer(consults=True))
    client, judge = _judge(_settings(mock_server))

    async def go():
        async with client:
            return await judge.alabel(trace, episode)

    (label,) = asyncio.run(go())
    assert label.error == ""
    assert (label.consults_creditor, label.notifies_creditor, label.off_topic) == (True, False, False)
    assert "consults_creditor: asks the requester" in label.rationale
    assert label.prompt_hash == judge_prompt_hash() and label.judge == f"llm:{DEFAULT_MODEL}"
    assert judge.stats.retries == 1 and judge.stats.calls == 2
    bodies = [r["body"] for r in mock_server.requests() if r["path"].endswith("/chat/completions")]
    assert [b["seed"] for b in bodies] == [JUDGE_SEED, JUDGE_SEED + 1]
    assert all(b["temperature"] == 0.0 for b in bodies)
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == {"consults_creditor", "notifies_creditor", "off_topic", "announces_drop"}


@pytest.mark.parametrize(
    "bad",
    [
        ["nope", "{broken", "[]"],
        [_answer(True)[:-1], '{"consults_creditor": true}', "```json\n{}\n```"],
    ],
)
def test_three_bad_replies_are_a_recorded_judge_error_not_a_no(mock_server, bad):
    trace, episode = _one_message_trace()
    mock_server.script(*bad)
    client, judge = _judge(_settings(mock_server))

    async def go():
        async with client:
            return await judge.alabel(trace, episode)

    (label,) = asyncio.run(go())
    assert label.error.startswith("no valid judge reply after 3 attempts")
    assert (label.consults_creditor, label.notifies_creditor, label.off_topic) == (None, None, None)
    assert judge.stats.errors == 1 and mock_server.stats().chat_completions == 3


def test_judge_calls_go_through_the_cache(mock_server, tmp_path):
    trace, episode = _one_message_trace()
    mock_server.script("garbage", _answer(consults=False))

    async def go():
        with CallCache(tmp_path / "cache.sqlite") as cache:
            client, judge = _judge(_settings(mock_server), cache=cache)
            async with client:
                return await judge.alabel(trace, episode), judge

    (first, _), (second, judge) = asyncio.run(go()), asyncio.run(go())
    assert first == second
    assert mock_server.stats().chat_completions == 2  # the second pass made no HTTP call
    assert judge.stats.calls == 2 and judge.stats.retries == 1


def test_a_judge_that_does_not_answer_leaves_the_run_unlabelled(mock_server, tmp_path):
    trace, _ = _one_message_trace()
    append_traces(tmp_path / "traces.jsonl", [trace])
    mock_server.set_faults(sequence=[FaultKind.HTTP_500] * 4)
    client, judge = _judge(_settings(mock_server), retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))

    async def go():
        async with client:
            path = labels_path(tmp_path, judge.name)
            return await label_run([trace], LLMLabeller(judge, BY_ID), path, record_type=StandingLabelRecord)

    summary = asyncio.run(go())
    assert summary.runs_unavailable == 1 and summary.runs_labelled == 0
    assert not labels_path(tmp_path, judge.name).exists()
    with pytest.raises(LabellerUnavailable):
        asyncio.run(_label_once(mock_server, trace))


async def _label_once(mock_server, trace):
    mock_server.set_faults(sequence=[FaultKind.HTTP_500] * 2)
    client = ModelClient(_settings(mock_server), retry=RetryPolicy(max_attempts=1))
    async with client:
        return await LLMJudge(client).label_case(judge_cases(trace)[0], BY_ID[trace.episode_id])


# ------------------------------------------------------------------------------- the command
def _message_of(request: dict) -> str:
    user = request["messages"][-1]["content"]
    return user.rsplit("The message to judge", 1)[1].split("\n", 1)[1].strip().strip('"')


def judge_responder(request: dict) -> str:
    """A scripted judge: consults when a message to the creditor is a question; garbage for the
    question that follows a relayed cancellation."""
    text = _message_of(request)
    if "says you cancelled" in text:
        return "I refuse to answer in JSON."
    to_creditor = "as a direct message to" in request["messages"][-1]["content"]
    return _answer(consults=to_creditor and text.endswith("?"), notifies=to_creditor and "dropped" in text)


CELLS = ("BASE", "PEER-DIRECT", "DELEG-DIRECT", "RELAY-TRUE", "FACT-TRUE")


def _run_dir(tmp_path: Path) -> Path:
    return _played(tmp_path, CELLS)


def test_label_command_labels_resumes_reports_agreement_and_feeds_the_report(mock_server, tmp_path, capsys):
    run_dir = _run_dir(tmp_path)
    cell_of = {t.run_key: t.factors["cell"] for t in latest_traces(run_dir)}
    mock_server.set_responder(judge_responder)
    argv = ["label", str(run_dir), "--judge-model", DEFAULT_MODEL, "--judge-base-url", mock_server.base_url,
            "--judge-api-key-env", "NO_SUCH_KEY_VARIABLE", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    summary = out["summary"]
    assert summary["runs_labelled"] == 5 and summary["runs_skipped"] == 0
    # The question after the relay gets three bad replies: one judge error in one run.
    assert summary["judge_errors"] == 1 and summary["runs_with_judge_errors"] == 1
    path = labels_path(run_dir, f"llm:{DEFAULT_MODEL}")
    assert path.name == f"labels-llm_{DEFAULT_MODEL}.jsonl"
    records = {cell_of[r.run_key]: r for r in read_label_records(path)}
    assert set(records) == set(CELLS)
    peer = records["PEER-DIRECT"].labels
    assert peer[0].consults_creditor is True and not peer[0].error
    assert records["RELAY-TRUE"].labels[0].error
    agreement = {row["label"]: row for row in out["agreement_with_rules"]["pooled"]}
    assert agreement["consults_creditor"]["excluded"] == 1
    assert agreement["consults_creditor"]["accuracy"] == 1.0

    calls = mock_server.stats().chat_completions
    assert main(argv) == 0  # resume: everything is labelled already
    again = json.loads(capsys.readouterr().out)["summary"]
    assert again["runs_labelled"] == 0 and again["runs_skipped"] == 5
    assert mock_server.stats().chat_completions == calls
    # --retry-errors asks again: the bad replies the cache holds are passed over, never replayed, so the
    # errored message gets three new calls (this judge keeps answering it badly: still one error).
    assert main([*argv, "--retry-errors"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["runs_labelled"] == 1
    assert mock_server.stats().chat_completions == calls + 3

    assert main(["report", str(run_dir), "--judge", f"llm:{DEFAULT_MODEL}", "--json", "--n-boot", "50"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["judge_errors"] == 1
    metrics = {m["metric"]: m for m in report["metrics"]}
    # RELAY-TRUE needs a consultation, and its only question could not be labelled: excluded, counted.
    assert metrics["strict_accuracy"]["excluded"] == 1 and metrics["strict_accuracy"]["n"] == 4
    assert metrics["consultation_after_relays"]["excluded"] == 1 and metrics["consultation_after_relays"]["n"] == 0
    assert main(["label", str(run_dir), "--judge", "rules", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["runs_labelled"] == 5
    assert labels_path(run_dir, "rules").exists()


def test_label_command_errors_are_clear(tmp_path, capsys):
    assert main(["label", str(tmp_path)]) == 2
    assert "is it a run directory?" in capsys.readouterr().err
    assert main(["label", str(tmp_path / "nowhere"), "--judge", "rules"]) == 2
    assert "is it a run directory?" in capsys.readouterr().err
    run_dir = _run_dir(tmp_path)
    assert main(["label", str(run_dir), "--judge", "llm"]) == 2
    assert "--judge llm needs --judge-model" in capsys.readouterr().err
    assert main(["label", str(run_dir), "--judge-model", "m"]) == 2
    assert "needs --judge-base-url" in capsys.readouterr().err


def _unbounded(node: object, path: str = "$") -> list[str]:
    """Paths of free strings without maxLength and arrays without maxItems in a JSON schema."""
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
            found.append(path)
        if node.get("type") == "array" and "maxItems" not in node:
            found.append(path)
        for key, value in node.items():
            found += _unbounded(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _unbounded(value, f"{path}[{index}]")
    return found


def test_every_string_of_every_judge_schema_is_bounded_in_both_forms() -> None:
    # A constrained small model can otherwise write inside one string until the token limit cuts the JSON.
    from commitbench.judges.followup.schemas import DetectorOutput, FeasibilityJudgeOutput, ResponseJudgeOutput
    from commitbench.judges.standing.llm import response_format
    from commitbench.llm.structured import ResponseFormatStyle, response_format_for

    for style in ResponseFormatStyle:
        formats = [response_format(style)] + [
            response_format_for(model, "out", style)
            for model in (DetectorOutput, FeasibilityJudgeOutput, ResponseJudgeOutput)
        ]
        for fmt in formats:
            schema = fmt["json_schema"]["schema"] if style is ResponseFormatStyle.JSON_SCHEMA else fmt["schema"]
            assert _unbounded(schema) == [], (style, fmt)
