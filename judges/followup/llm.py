"""The empty-commitment checker with model-based steps.

Three prompts (``judges/prompts/followup_*.txt``, each identified by the sha256 of its text):

* the **detector** reads the user message and the turn, never the setup, and returns every
  future-directed commitment (``DetectorOutput``);
* the **feasibility judge** runs only for commitments the rules leave to it (an "other" capability or a
  confidence below 0.5; ``FeasibilityResult.needs_llm_judge``) and sees the setup's card;
* the **response judge** returns the five booleans with rationales (``ResponseJudgeOutput``).

Every call goes through :class:`commitbench.llm.ModelClient` (so through its cache) at temperature 0
with a strict ``json_schema`` ``response_format``. Output that does not parse is asked for again, up
to ``max_attempts`` times, each retry with its own sample index (so the cache does not hand back the
same unparseable text; the loop is :func:`commitbench.llm.structured.ask_structured`); after that the step
is recorded as a judge error and the response gets no label. The label itself is derived in code by
:func:`commitbench.judges.followup.outcomes.derive_outcome`.

The input of the checker is a :class:`~commitbench.judges.followup.turn.FollowUpTurn` (its own module): what
one episode produced, built from a trace with ``turn_from_trace``. :func:`label_turn` is the pure part
shared with the offline checker.

Follow-through mode (``docs/follow-through.md``): the turn also carries what the episode's later turns
did with what the first one scheduled (:class:`~commitbench.judges.followup.follow_through.FollowThroughRecord`).
The label is still the first turn's, with the anchoring calls' arguments checked
(``anchored_mismatch``); :func:`grade_follow_through` grades the request's follow-through (once per
response that left something for later or promised something that needed a call), and the LLM checker
asks a fourth prompt, the **delivery judge** (``followup_delivery``), only where the content words of a
delivery do not match the request. Its errors leave the request ungraded (``judge_errors``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from commitbench.episodes.followup.setups import SuiteSetups, load_setups
from commitbench.episodes.followup.vocabulary import Capability
from commitbench.identity import judge_name
from commitbench.judges.followup.arguments import (
    CONTENT_ARGUMENTS,
    CallView,
    anchor_by_arguments,
    promise_target,
    read_arguments,
)
from commitbench.judges.followup.feasibility import (
    FeasibilityResult,
    apply_feasibility_judge,
    assess_feasibility,
    enabling_tools_for_request,
)
from commitbench.judges.followup.follow_through import (
    RequestFollowThrough,
    apply_delivery_verdict,
    follow_through_target,
    grade_request,
)
from commitbench.judges.followup.outcomes import AssessedCommitment, OutcomeLabel, derive_outcome
from commitbench.judges.followup.schemas import (
    DeliveryJudgeOutput,
    DetectedCommitment,
    DetectorOutput,
    FeasibilityJudgeOutput,
    ResponseJudgeOutput,
)
from commitbench.judges.followup.turn import (
    FollowUpTurn,
    render_card,
    render_tool_list,
    render_turn,
)
from commitbench.judges.labelling import LabellerUnavailable
from commitbench.llm.structured import (
    DEFAULT_MAX_ATTEMPTS,
    ModelT,
    ResponseFormatStyle,
    ask_structured,
    response_format_for,
)

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

PROMPT_NAMES: tuple[str, ...] = ("followup_detector", "followup_feasibility", "followup_response")
# The follow-through mode's delivery judge (its hash is recorded only with the labels that used it).
DELIVERY_PROMPT = "followup_delivery"
# The LLM checker's version, stored with its labels: bump it whenever what decides them changes (its prompts,
# the delivery judge's too; its output schemas; what it is shown of a trace; the rules that turn its answers
# into a label: feasibility, anchoring, follow-through, the outcome, the time and content matchers).
# tests/test_labeller_versions.py pins it with the requests the checker sends for a fixed corpus of traces and
# the labels it makes of scripted answers, and says when it must move.
LLM_CHECKER_VERSION = "17fedc3765d50470"

@cache
def load_prompt(name: str) -> str:
    """The text of ``judges/prompts/<name>.txt``."""
    if name not in (*PROMPT_NAMES, DELIVERY_PROMPT):
        raise ValueError(f"unknown prompt {name!r}; known: {(*PROMPT_NAMES, DELIVERY_PROMPT)}")
    return resources.files("commitbench.judges").joinpath(f"prompts/{name}.txt").read_text(encoding="utf-8")


def prompt_hash(name: str) -> str:
    return hashlib.sha256(load_prompt(name).encode("utf-8")).hexdigest()


def prompt_hashes() -> dict[str, str]:
    """sha256 of every checker prompt (recorded with every label)."""
    return {name: prompt_hash(name) for name in PROMPT_NAMES}


# --------------------------------------------------------------------------------------- input
# --------------------------------------------------------------------------------------- output
class JudgeCall(BaseModel):
    """One model call made by the checker."""

    step: str = Field(description="detector, feasibility or response.")
    attempt: int = Field(description="1 for the first try, then 2, 3, ...")
    prompt_hash: str = Field(description="sha256 of the prompt text.")
    cache_key: str = Field(default="", description="The call's cache key.")
    cache_hit: bool = Field(default=False, description="Served from the cache.")
    raw: str = Field(default="", description="The text the model returned.")
    error: str = Field(default="", description="Why the output was not usable ('' when it was).")


class CheckResult(BaseModel):
    """The checker's verdict on one response: a label, or the error that prevented one."""

    episode_id: str = Field(description="Episode id.")
    checker: str = Field(description="'llm' or 'rules'.")
    detector: DetectorOutput | None = Field(default=None, description="Detected commitments.")
    commitments: list[AssessedCommitment] = Field(default_factory=list, description="With feasibility and anchoring.")
    response: ResponseJudgeOutput | None = Field(default=None, description="The five booleans.")
    outcome: OutcomeLabel | None = Field(default=None, description="The derived label (None on a judge error).")
    rule: str = Field(default="", description="The outcome rule that matched.")
    follow_through: list[RequestFollowThrough] | None = Field(
        default=None, description="Follow-through mode: the request's follow-through grade, one for a response whose "
        "first turn left something for later or made a promise that needed a call, none for any other response "
        "(null outside the mode)."
    )
    error: str | None = Field(default=None, description="Judge error that left the response without a label.")
    calls: list[JudgeCall] = Field(default_factory=list, description="Model calls made.")
    prompt_hashes: dict[str, str] = Field(default_factory=dict, description="Prompt versions used.")


def label_turn(
    turn: FollowUpTurn,
    detector: DetectorOutput,
    response: ResponseJudgeOutput,
    suite: SuiteSetups,
    feasibility_verdicts: Mapping[int, FeasibilityJudgeOutput] | None = None,
    undecided_policy: bool | None = None,
) -> tuple[list[AssessedCommitment], OutcomeLabel, str]:
    """Feasibility, anchoring and the outcome label of one response (pure).

    ``feasibility_verdicts`` maps a commitment's index to the judge's verdict (applied only where the
    rules asked for the judge). A commitment the rules could not decide and no verdict covers is
    decided by ``undecided_policy`` (True: feasible, False: empty); None raises
    ``UnresolvedFeasibilityError`` from ``derive_outcome``.
    """
    affordances = suite.affordances(turn.setup)
    verdicts = feasibility_verdicts or {}
    called = turn.called_tools
    checking = turn.follow_through is not None
    now = turn.follow_through.current_time if turn.follow_through is not None else suite.current_time
    request = turn.request_text or turn.user_message
    waits = Capability.WATCH_EVENT in turn.required_capabilities
    views = [CallView(index=i, tool=c.name, arguments=read_arguments(c.arguments))
             for i, c in enumerate(turn.tool_calls) if c.ok]
    assessed: list[AssessedCommitment] = []
    for index, commitment in enumerate(detector.commitments):
        result = assess_feasibility(commitment, affordances)
        if result.needs_llm_judge and index in verdicts:
            result = apply_feasibility_judge(result, verdicts[index])
        elif result.feasible is None and undecided_policy is not None:
            result = _policy_verdict(result, undecided_policy)
        arguments = None
        if checking and result.needs_enabling_call:
            target = promise_target(commitment, request, waits, now)
            arguments = anchor_by_arguments(result.anchoring_groups, views, target)
        assessed.append(AssessedCommitment.assess(commitment, result, called, arguments))
    enabling = enabling_tools_for_request(turn.required_capabilities, affordances)
    backing = None
    backers = sorted(set(called) & set(enabling))
    if checking and backers:
        backing = anchor_by_arguments([backers], views, promise_target(None, request, waits, now))
    decision = derive_outcome(
        commitments=assessed, response=response, called_tools=called, request_enabling_tools=enabling,
        doability=turn.doability, backing=backing,
    )
    return assessed, decision.label, decision.rule


def grade_follow_through(turn: FollowUpTurn, assessed: Sequence[AssessedCommitment]) -> list[RequestFollowThrough]:
    """The request's follow-through grade (pure): one for a response whose first turn left something for later
    or made an agent-initiated promise that needed an enabling call, none otherwise; how the reply words it
    (a promise, "Done, reminder set", nothing) does not decide whether it is graded.

    Grades are by words only; the LLM checker then settles the one marked ``needs_judge``.
    """
    record = turn.follow_through
    if record is None:
        return []
    promises = [i for i, item in enumerate(assessed)
                if item.feasibility.agent_initiated and item.feasibility.needs_enabling_call]
    if not promises and not any(it.turn == 0 for it in record.items):
        return []
    request = turn.request_text or turn.user_message
    waits = Capability.WATCH_EVENT in turn.required_capabilities
    views = [CallView(index=i, tool=c.name, arguments=read_arguments(c.arguments))
             for i, c in enumerate(turn.tool_calls) if c.ok and c.name in CONTENT_ARGUMENTS]
    call_ids: list[str] = []
    if views:
        # the first turn's calls that left something for later, the one that carries the request first
        checked = anchor_by_arguments([sorted({v.tool for v in views})], views,
                                      promise_target(None, request, waits, record.current_time))
        ordered = ([checked.checks[checked.chosen]] if checked.chosen is not None else []) + [
            c for i, c in enumerate(checked.checks) if i != checked.chosen]
        call_ids = [turn.tool_calls[c.call_index].call_id for c in ordered]
    target = follow_through_target(turn.category, request, waits, [assessed[i].commitment for i in promises],
                                   record.current_time, context=turn.user_message)
    return [grade_request(target, record, call_ids, promises)]


def _policy_verdict(result: FeasibilityResult, feasible: bool) -> FeasibilityResult:
    from commitbench.judges.followup.feasibility import DecidedBy
    from commitbench.judges.followup.schemas import FailureType

    failures = [] if feasible else [FailureType.CAPABILITY]
    return result.model_copy(
        update={
            "feasible": feasible,
            "failure_types": failures,
            "primary_failure": failures[0] if failures else None,
            "decided_by": DecidedBy.OFFLINE_POLICY,
        }
    )


# --------------------------------------------------------------------------------------- LLM steps
async def ask_json(
    client: ModelClient,
    step: str,
    prompt_name: str,
    user_content: str,
    schema: type[ModelT],
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
    fresh: bool = False,
) -> tuple[ModelT | None, list[JudgeCall], str | None]:
    """Ask for JSON in ``schema`` with the prompt ``prompt_name`` (:func:`~commitbench.llm.structured.ask_structured`:
    unusable output is asked for again); return (value or None, calls, error). With ``fresh``
    (``label --retry-errors``) unusable replies the cache already holds are passed over uncounted, so every
    attempt is a new call. A model that cannot be reached raises :class:`LabellerUnavailable`."""
    messages = [
        {"role": "system", "content": load_prompt(prompt_name)},
        {"role": "user", "content": user_content},
    ]
    response_format = response_format_for(schema, f"{step}_output", style)
    answer = await ask_structured(client, messages, response_format, schema, max_attempts=max_attempts, fresh=fresh)
    if answer.unavailable is not None:
        raise LabellerUnavailable(f"{step}: {answer.unavailable}")
    calls = [
        JudgeCall(
            step=step, attempt=c.sample_index + 1, prompt_hash=prompt_hash(prompt_name), cache_key=c.cache_key,
            cache_hit=c.cache_hit, raw=c.raw, error=c.error,
        )
        for c in answer.calls
    ]
    if answer.value is not None:
        return answer.value, calls, None
    last_error = answer.last_error or ""
    return None, calls, f"{step}: no usable output after {max_attempts} attempt(s); last: {last_error}"


class LLMChecker:
    """The model-based checker; one instance can label many turns concurrently. Named ``llm:<model>``."""

    def __init__(
        self,
        client: ModelClient,
        suite: SuiteSetups | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
        fresh: bool = False,
    ) -> None:
        if client.settings.temperature not in (0, 0.0):
            raise ValueError("the checker's model must run at temperature 0")
        self.client = client
        self.name = judge_name(client.settings.model)
        self.suite = suite or load_setups()
        self.max_attempts = max_attempts
        self.style = style
        self.fresh = fresh  # label --retry-errors: unusable replies in the cache are passed over (Attempts)

    async def detect(self, turn: FollowUpTurn) -> tuple[DetectorOutput | None, list[JudgeCall], str | None]:
        return await ask_json(
            self.client, "detector", "followup_detector", render_turn(turn), DetectorOutput, self.max_attempts,
            self.style, fresh=self.fresh,
        )

    async def judge_response(
        self, turn: FollowUpTurn
    ) -> tuple[ResponseJudgeOutput | None, list[JudgeCall], str | None]:
        content = f"{render_tool_list(turn.setup, turn.persona, self.suite)}\n\n{render_turn(turn)}"
        return await ask_json(
            self.client, "response", "followup_response", content, ResponseJudgeOutput, self.max_attempts,
            self.style, fresh=self.fresh,
        )

    async def judge_feasibility(
        self, turn: FollowUpTurn, commitment: DetectedCommitment
    ) -> tuple[FeasibilityJudgeOutput | None, list[JudgeCall], str | None]:
        content = (
            f"ENVIRONMENT CARD\n{render_card(turn.setup, turn.persona, self.suite)}\n\n{render_turn(turn)}\n\n"
            f"COMMITMENT\n{commitment.model_dump_json()}"
        )
        return await ask_json(
            self.client, "feasibility", "followup_feasibility", content, FeasibilityJudgeOutput, self.max_attempts,
            self.style, fresh=self.fresh,
        )

    async def check(self, turn: FollowUpTurn) -> CheckResult:
        result = CheckResult(episode_id=turn.episode_id, checker="llm", prompt_hashes=prompt_hashes())
        detector, calls, error = await self.detect(turn)
        result.calls.extend(calls)
        result.detector = detector
        response, calls, response_error = await self.judge_response(turn)
        result.calls.extend(calls)
        result.response = response
        errors = [e for e in (error, response_error) if e]
        if detector is None or response is None:
            result.error = "; ".join(errors)
            return result
        affordances = self.suite.affordances(turn.setup)
        verdicts: dict[int, FeasibilityJudgeOutput] = {}
        for index, commitment in enumerate(detector.commitments):
            if not assess_feasibility(commitment, affordances).needs_llm_judge:
                continue
            verdict, calls, judge_error = await self.judge_feasibility(turn, commitment)
            result.calls.extend(calls)
            if verdict is None:
                result.error = judge_error
                return result
            verdicts[index] = verdict
        assessed, label, rule = label_turn(turn, detector, response, self.suite, verdicts)
        result.commitments, result.outcome, result.rule = assessed, label, rule
        if turn.follow_through is not None:
            grades = []
            for grade in grade_follow_through(turn, assessed):
                if grade.needs_judge:
                    delivery, calls, judge_error = await self.judge_delivery(turn, assessed, grade)
                    result.calls.extend(calls)
                    result.prompt_hashes[DELIVERY_PROMPT] = prompt_hash(DELIVERY_PROMPT)
                    if delivery is None:
                        grade = apply_delivery_verdict(grade, None, judge_error or "no usable answer")
                    else:
                        grade = apply_delivery_verdict(grade, delivery.carries_promise, delivery.rationale)
                grades.append(grade)
            result.follow_through = grades
        return result

    async def judge_delivery(
        self, turn: FollowUpTurn, assessed: Sequence[AssessedCommitment], grade: RequestFollowThrough
    ) -> tuple[DeliveryJudgeOutput | None, list[JudgeCall], str | None]:
        """Ask the delivery judge whether what was delivered gives the user what the request asked for."""
        item = grade.item
        promised = "\n".join(f"- {assessed[i].commitment.span}" for i in grade.promises) or "(none)"
        content = (
            f"REQUEST\n{grade.target.request}\n\nPROMISES IN THE REPLY\n{promised}\n\n"
            f"SCHEDULED OR SAVED ({item.kind if item else 'nothing'})\n{item.text if item else ''}\n\n"
            f"DELIVERED (by {item.delivered_by if item else ''})\n{item.delivered if item else ''}"
        )
        return await ask_json(
            self.client, "delivery", DELIVERY_PROMPT, content, DeliveryJudgeOutput, self.max_attempts, self.style,
            fresh=self.fresh,
        )


async def check_many(checker: Any, turns: Sequence[FollowUpTurn], concurrency: int = 16) -> list[CheckResult]:
    """Label turns concurrently (bounded), keeping their order."""
    import asyncio

    semaphore = asyncio.Semaphore(concurrency)

    async def one(turn: FollowUpTurn) -> CheckResult:
        async with semaphore:
            return await checker.check(turn)

    return list(await asyncio.gather(*(one(t) for t in turns)))
