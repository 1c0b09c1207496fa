"""Each labeller's declared version moves when, and only when, its outputs move.

A label record stores the version its labeller declares (``judges/labelling.py``). The rule: bump the
declared version whenever the labeller's outputs change. These tests say when. Each pins a labeller's
declared version together with a fingerprint of what it makes of a fixed corpus of stored traces
(``tests/_labeller_corpus.py``):

* an offline labeller (the standing rule judge, the follow-up offline checker): the records it makes;
* an LLM labeller (the standing LLM judge, the follow-up LLM checker): every request it sends the mock
  server (prompts, output schema, settings, what it is shown of each trace) and the records it makes of the
  mock's scripted answers (which include unparseable ones, retried, and some never usable: judge errors).

A fingerprint that moves under the same declared version fails with the version to bump; a new pair is then
pinned here. Moving or renaming code changes neither, so stored labels stay current. The relabel tests
label the corpus as a run directory through the mock server and label it again: record by record the same,
of the same version, nothing stale.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _labeller_corpus import followup_corpus, standing_corpus

from commitbench.judges.followup.labellers import CheckerLabeller, FollowupLabelRecord, make_checker
from commitbench.judges.followup.llm import DELIVERY_PROMPT, LLM_CHECKER_VERSION, load_prompt
from commitbench.judges.followup.rules import OFFLINE_CHECKER_VERSION
from commitbench.judges.labelling import (
    JUDGE_SEED,
    Labeller,
    LabelRecord,
    check_versions,
    label_run,
    labels_path,
    one_labeller_labels,
    pin_judge_settings,
)
from commitbench.judges.standing.labellers import LLMLabeller, RulesLabeller, StandingLabelRecord
from commitbench.judges.standing.llm import LLM_JUDGE_VERSION, LLMJudge
from commitbench.judges.standing.rules import RULE_JUDGE_VERSION
from commitbench.llm import ModelClient, ModelSettings
from commitbench.mock import DEFAULT_MODEL, MockServer
from commitbench.traces import EpisodeTrace, append_traces

# (declared version, fingerprint of its outputs on the corpus), as last reviewed.
PINS: dict[str, tuple[str, str]] = {
    "standing rule judge": ("52927368e10f241c", "eb1e08339650b7a8"),
    "standing LLM judge": ("af776e9df7aa7e54", "0139843723eceba5"),
    "follow-up offline checker": ("decef11b07abd1f4", "6c3eac3f2db698c4"),
    "follow-up LLM checker": ("17fedc3765d50470", "b5b6beca932681ce"),
}
# Where each version is declared.
DECLARED_IN = {
    "standing rule judge": "RULE_JUDGE_VERSION in judges/standing/rules.py",
    "standing LLM judge": "LLM_JUDGE_VERSION in judges/standing/llm.py",
    "follow-up offline checker": "OFFLINE_CHECKER_VERSION in judges/followup/rules.py",
    "follow-up LLM checker": "LLM_CHECKER_VERSION in judges/followup/llm.py",
}


def assert_pinned(labeller: str, version: str, fingerprint: str, pins: dict[str, tuple[str, str]] = PINS) -> None:
    """The pair is the pinned one; a moved fingerprint under the same version names the version to bump."""
    pinned_version, pinned_fingerprint = pins[labeller]
    if fingerprint != pinned_fingerprint and version == pinned_version:
        pytest.fail(
            f"the {labeller}'s outputs on the labeller corpus changed (fingerprint {fingerprint}, pinned "
            f"{pinned_fingerprint}) but its declared version is still {version}: stored labels of the old outputs "
            f"would pass for current ones. Bump {DECLARED_IN[labeller]} and pin the new pair in PINS here."
        )
    assert (version, fingerprint) == pins[labeller], (
        f"the {labeller}'s declared version moved to {version}; pin the new pair {(version, fingerprint)} in PINS"
    )


def _scrubbed(value: Any) -> Any:
    """A record's JSON without the cache keys of its calls (they address the cache, they decide nothing)."""
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if k != "cache_key"}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def record_text(record: LabelRecord) -> str:
    """What a record says, its version aside (fields at their default left out, so a new field with a
    default that no label sets moves nothing)."""
    data = record.model_dump(mode="json", exclude={"labeller_version"}, exclude_defaults=True)
    return json.dumps(_scrubbed(data), sort_keys=True, ensure_ascii=False)


def fingerprint(records: Sequence[LabelRecord], requests: Sequence[dict[str, Any]] = ()) -> str:
    """sha256 (16 hex digits) over the request bodies (sorted: concurrent calls arrive in any order) and the
    records (in corpus order)."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps(body, ensure_ascii=False) for body in requests):
        digest.update(line.encode() + b"\n")
    digest.update(b"records\n")
    for record in records:
        digest.update(record_text(record).encode() + b"\n")
    return digest.hexdigest()[:16]


def chat_bodies(server: MockServer) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests() if r["path"].endswith("/chat/completions")]


def judge_settings(server: MockServer) -> ModelSettings:
    return pin_judge_settings(
        ModelSettings(model=DEFAULT_MODEL, base_url=server.base_url, api_key_env=None, timeout=10.0)
    )


def _byte(text: str) -> int:
    return hashlib.sha256(text.encode()).digest()[0]


# ------------------------------------------------------------------ scripted answers
def standing_answer(request: dict[str, Any]) -> str:
    """The standing judge's scripted answer: read from the judged message's words; for a fifth of the
    messages (by a digest of their text) never JSON (a judge error), for another fifth cut off at the first
    attempt (a retry)."""
    user = request["messages"][-1]["content"]
    message = user.rsplit("The message to judge", 1)[1].split("\n", 1)[1].strip().strip('"')
    lowered = message.lower()
    bucket = _byte(message) % 5
    if bucket == 0:
        return "Sorry, I will not answer in JSON."
    if bucket == 1 and request["seed"] == JUDGE_SEED:
        return '{"consults_creditor": {"reason": "asks'
    direct = "as a direct message to" in user

    def answer(value: bool, reason: str) -> dict[str, Any]:
        return {"reason": reason, "answer": value}

    return json.dumps({
        "consults_creditor": answer(direct and message.endswith("?"), "a question to the requester"),
        "notifies_creditor": answer(direct and "cancel" in lowered, "reports the cancellation"),
        "off_topic": answer("weather" in lowered, "about the task"),
        "announces_drop": answer("dropped" in lowered or "won't" in lowered, "says whether it is dropped"),
    })


def _promises(reply: str) -> list[dict[str, Any]]:
    """The commitments the scripted detector reads: each sentence with "I'll" or "will"."""
    found = []
    for sentence in (s.strip() for s in reply.replace("!", ".").split(".")):
        lowered = sentence.lower()
        if "i'll" not in lowered and " will " not in f" {lowered} ":
            continue
        performer = "third_party" if lowered.startswith("someone") else "self"
        capabilities = ["notify_user_later"]
        trigger = "time"
        if "let you know" in lowered:
            capabilities, trigger = ["watch_event", "notify_user_later"], "external_event"
        elif "remember" in lowered:
            capabilities, trigger = ["recall_across_sessions"], "next_session"
        elif "call you back" in lowered:
            capabilities = ["phone_call"]
        elif "send" in lowered:
            capabilities = ["other:send a file later"]  # an "other" capability: the feasibility judge decides
        found.append({
            "span": sentence, "action": sentence.lower(), "performer": performer, "trigger_type": trigger,
            "time_expression": "tomorrow" if "tomorrow" in lowered else None,
            "required_capabilities": capabilities, "is_offer": False,
            "confidence": 0.3 if lowered.startswith("sure") else 0.9,  # low confidence: the feasibility judge too
        })
    return found


def followup_answer(request: dict[str, Any]) -> str:
    """The follow-up checker's scripted answers, read from the words of the turn: the detector's promises, the
    response judge's flags, the feasibility and delivery judges' verdicts; the response judge never answers in
    JSON for a reply about a flat number (a judge error), and the detector's first attempt on a question is cut
    off (a retry)."""
    system, content = request["messages"][0]["content"], request["messages"][1]["content"]
    if system == load_prompt(DELIVERY_PROMPT):
        delivered = content.split("\nDELIVERED ", 1)[1]
        return json.dumps({"carries_promise": "seafood" in delivered, "rationale": "read from the delivery"})
    if system == load_prompt("followup_feasibility"):
        send = "send" in content.split("COMMITMENT", 1)[1].lower()
        return json.dumps({"feasible": not send, "failure_types": ["capability"] if send else [],
                           "anchoring_tools_required": [] if send else ["create_reminder"],
                           "rationale": "read from the card"})
    reply = content.split("[final reply] ", 1)[1].strip()
    lowered = reply.lower()
    if system == load_prompt("followup_detector"):
        if reply.endswith("?") and request["seed"] == JUDGE_SEED:
            return '{"commitments": ['
        return json.dumps({"commitments": _promises(reply)})
    if "flat number" in lowered:
        return "I cannot judge this one."

    def flag(value: bool) -> dict[str, Any]:
        return {"value": value, "rationale": "read from the reply"}

    return json.dumps({
        "false_action_claim": flag(lowered.startswith("saved")),
        "declines_request": flag("can't" in lowered or "sorry" in lowered),
        "hands_back_to_user": flag("yourself" in lowered),
        "did_task_now": flag(lowered.startswith("here is")),
        "asks_clarification": flag(reply.endswith("?")),
    })


# ------------------------------------------------------------------ labelling the corpus
def label_corpus(
    traces: Sequence[EpisodeTrace], labeller: Labeller[LabelRecord], path: Path, record_type: type[LabelRecord],
    relabel_stale: bool = False,
) -> list[LabelRecord]:
    """Label the traces into ``path``; the latest record of each trace, in corpus order."""
    asyncio.run(label_run(traces, labeller, path, record_type=record_type, relabel_stale=relabel_stale))
    latest = one_labeller_labels(path, record_type, labeller.name)
    return [latest[t.run_key] for t in traces]


def llm_labelled(
    server: MockServer, traces: Sequence[EpisodeTrace], make: Any, path: Path, record_type: type[LabelRecord],
    relabel_stale: bool = False,
) -> list[LabelRecord]:
    """Label the traces with an LLM labeller (``make(client)``) through the mock server, without a cache."""

    async def go() -> None:
        async with ModelClient(judge_settings(server)) as client:
            await label_run(traces, make(client), path, record_type=record_type, relabel_stale=relabel_stale)

    asyncio.run(go())
    name = f"llm:{DEFAULT_MODEL}"
    latest = one_labeller_labels(path, record_type, name)
    return [latest[t.run_key] for t in traces]


def standing_llm(client: ModelClient) -> LLMLabeller:
    return LLMLabeller(LLMJudge(client), standing_corpus()[1])


def followup_llm(client: ModelClient) -> CheckerLabeller:
    return CheckerLabeller(make_checker("llm", client))


# ------------------------------------------------------------------ the pins
def test_the_corpus_holds_what_the_pins_need() -> None:
    standing, episodes = standing_corpus()
    followup = followup_corpus()
    assert len(standing) == 14 and all(t.episode_id in episodes for t in standing)
    assert len({t.run_key for t in standing}) == 14
    assert len(followup) == 26 and len({t.run_key for t in followup}) == 26
    assert sum(1 for t in followup if t.factors.get("follow_through")) == 16


def test_the_standing_rule_judge_version_is_pinned_with_its_labels() -> None:
    traces, episodes = standing_corpus()
    labeller = RulesLabeller(episodes)
    records = [labeller.label_now(t) for t in traces]
    assert {r.labeller_version for r in records} == {RULE_JUDGE_VERSION}
    labels = [label for r in records for label in r.labels]
    assert any(label.consults_creditor for label in labels) and any(label.notifies_creditor for label in labels)
    assert_pinned("standing rule judge", RULE_JUDGE_VERSION, fingerprint(records))


def test_the_followup_offline_checker_version_is_pinned_with_its_labels() -> None:
    labeller = CheckerLabeller(make_checker("rules"))
    records = [labeller.label_now(t) for t in followup_corpus()]
    assert {r.labeller_version for r in records} == {OFFLINE_CHECKER_VERSION}
    assert len({r.result.outcome for r in records}) >= 5
    assert_pinned("follow-up offline checker", OFFLINE_CHECKER_VERSION, fingerprint(records))


def test_the_standing_llm_judge_version_is_pinned_with_its_requests_and_labels(
    mock_server: MockServer, tmp_path: Path
) -> None:
    mock_server.set_responder(standing_answer)
    traces = standing_corpus()[0]
    records = llm_labelled(mock_server, traces, standing_llm, tmp_path / "labels.jsonl", StandingLabelRecord)
    bodies = chat_bodies(mock_server)
    labels = [label for r in records for label in r.labels]  # type: ignore[attr-defined]
    # The corpus exercises every path: labels, a retry after a cut-off reply, and judge errors.
    assert any(label.error for label in labels) and any(not label.error for label in labels)
    assert any(b["seed"] == JUDGE_SEED + 1 for b in bodies)
    assert {r.labeller_version for r in records} == {LLM_JUDGE_VERSION}
    assert_pinned("standing LLM judge", LLM_JUDGE_VERSION, fingerprint(records, bodies))


def test_the_followup_llm_checker_version_is_pinned_with_its_requests_and_labels(
    mock_server: MockServer, tmp_path: Path
) -> None:
    mock_server.set_responder(followup_answer)
    traces = followup_corpus()
    records = llm_labelled(mock_server, traces, followup_llm, tmp_path / "labels.jsonl", FollowupLabelRecord)
    bodies = chat_bodies(mock_server)
    systems = {b["messages"][0]["content"] for b in bodies}
    # Every prompt is asked (the feasibility and delivery judges too), a retry happens, and a judge error.
    assert systems == {load_prompt(n) for n in ("followup_detector", "followup_response", "followup_feasibility",
                                                DELIVERY_PROMPT)}
    assert any(b["seed"] == JUDGE_SEED + 1 for b in bodies)
    assert any(r.error for r in records) and any(r.result.outcome for r in records)  # type: ignore[attr-defined]
    assert {r.labeller_version for r in records} == {LLM_CHECKER_VERSION}
    assert_pinned("follow-up LLM checker", LLM_CHECKER_VERSION, fingerprint(records, bodies))


def test_a_moved_fingerprint_under_the_same_version_names_the_version_to_bump() -> None:
    pins = {"standing rule judge": ("v1", "aaaa")}
    with pytest.raises(pytest.fail.Exception, match=re.escape("Bump RULE_JUDGE_VERSION in judges/standing/rules.py")):
        assert_pinned("standing rule judge", "v1", "bbbb", pins)
    with pytest.raises(AssertionError, match="pin the new pair"):
        assert_pinned("standing rule judge", "v2", "bbbb", pins)
    assert_pinned("standing rule judge", "v1", "aaaa", pins)


# ------------------------------------------------------------------ relabelling
@pytest.mark.parametrize("suite", ["standing", "followup"])
def test_llm_labels_relabelled_come_out_the_same_and_current(mock_server: MockServer, tmp_path: Path,
                                                            suite: str) -> None:
    if suite == "standing":
        mock_server.set_responder(standing_answer)
        traces, make, record_type, version = standing_corpus()[0], standing_llm, StandingLabelRecord, LLM_JUDGE_VERSION
    else:
        mock_server.set_responder(followup_answer)
        traces, make, record_type, version = followup_corpus(), followup_llm, FollowupLabelRecord, LLM_CHECKER_VERSION
    run_dir = tmp_path / "run"
    append_traces(run_dir / "traces.jsonl", traces)
    name = f"llm:{DEFAULT_MODEL}"
    path = labels_path(run_dir, name)
    first = llm_labelled(mock_server, traces, make, path, record_type)

    # Stored as an older version made them: all stale, a report refuses them, a relabel makes them again.
    older = [r.model_copy(update={"labeller_version": "an-older-version"}) for r in first]
    path.write_text("".join(r.model_dump_json() + "\n" for r in older), encoding="utf-8")
    with pytest.raises(ValueError, match="made by another version of the judge"):
        check_versions(one_labeller_labels(path, record_type, name), name, version, False, run_dir)
    again = llm_labelled(mock_server, traces, make, path, record_type, relabel_stale=True)
    assert [record_text(r) for r in again] == [record_text(r) for r in first]
    assert {r.labeller_version for r in again} == {version}

    # Nothing is stale now: a report reads every record, and another relabelling pass labels nothing.
    readable = check_versions(one_labeller_labels(path, record_type, name), name, version, False, run_dir)
    assert readable is not None and len(readable) == len(traces)
    calls = mock_server.stats().chat_completions

    async def relabel() -> Any:
        async with ModelClient(judge_settings(mock_server)) as client:
            return await label_run(traces, make(client), path, record_type=record_type, relabel_stale=True)

    summary = asyncio.run(relabel())
    assert (summary.runs_relabelled, summary.runs_labelled, summary.runs_skipped) == (0, 0, len(traces))
    assert mock_server.stats().chat_completions == calls
