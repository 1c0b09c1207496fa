"""Runs of the empty-commitment suite: play FollowUpEnv cells with the chat agent, label them, report.

A *cell* is (model, fix stack, episode, sample); its run key is computed with the experiment runner's
:func:`commitbench.runner.compute_run_key` recipe (agent identity, fixes, environment, episode,
sample), so it is stable across processes. Output directory::

    OUT/traces.jsonl   one EpisodeTrace per finished cell (appended, fsynced; resumable)
    OUT/labels.jsonl   one LabelRecord per labelled trace (checker name, outcome or judge error)
    OUT/cache.sqlite   the model-call cache (agent, rewrite and checker calls)

Resume uses the runner's trace-file helpers: a torn last line is cut off, finished cells are
skipped, cells that ended in an infrastructure error are played again, and readers keep the last
trace per run key.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from commitbench.agents.chat import ChatAgent, format_line
from commitbench.analysis.followup.metrics import LabelledResponse, commitment_counts
from commitbench.cache import CacheMiss, canonical_json
from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.envs.followup.env import USER_CHANNEL, FollowUpEnv
from commitbench.episodes.followup.requests import FollowupRequest
from commitbench.episodes.followup.vocabulary import Doability, SetupId
from commitbench.judges.followup.llm import CheckResult, FollowUpTurn, turn_from_trace
from commitbench.llm import ModelClient, ModelEndpointError
from commitbench.traces import EpisodeTrace, append_traces

TRACES_FILE = "traces.jsonl"
LABELS_FILE = "labels.jsonl"
DEFAULT_MAX_TOOL_ROUNDS = 5


class FollowUpChatAgent(ChatAgent):
    """The chat agent with the user's message shown as plain text (no channel prefix).

    The suite is a one-to-one chat, so the ``[channel] Name:`` prefix the workspace rendering adds
    would only be noise; everything else is the chat agent unchanged.
    """

    def _ingest(self, events: Any) -> None:
        plain = []
        for event in events:
            if event.get("kind") == "message" and event.get("channel") == USER_CHANNEL:
                if plain:
                    super()._ingest(plain)
                    plain = []
                self._close_open_calls()
                self._user_line(str(event.get("text", "")))
            else:
                plain.append(event)
        if plain:
            super()._ingest(plain)


_ = format_line  # the workspace rendering this agent replaces for user messages


class RunSpec(BaseModel):
    """What to play."""

    setups: list[str] = Field(default_factory=lambda: ["C0", "C2"], description="Setups to play.")
    variants: list[str] = Field(default_factory=lambda: ["inferred"], description="inferred and/or stated.")
    personas: list[str] | None = Field(default=None, description="Personas; None keeps each request's own.")
    categories: list[str] | None = Field(default=None, description="Request categories to keep (None: all).")
    fixes: list[str] = Field(default_factory=list, description="Fix wrappers, innermost first.")
    limit: int | None = Field(default=None, ge=1, description="Use only the first N requests.")
    samples: int = Field(default=1, ge=1, description="Samples per cell.")
    seed: int = Field(default=0, description="Seed of env resets.")
    concurrency: int = Field(default=8, ge=1, description="Episodes in flight.")
    max_tool_rounds: int = Field(default=DEFAULT_MAX_TOOL_ROUNDS, ge=1, description="Tool rounds per episode.")


class Cell(BaseModel):
    run_key: str = Field(description="Identity of the cell.")
    episode_id: str = Field(description="Episode id.")
    sample: int = Field(description="Sample index.")


def run_key(agent_identity: dict[str, Any], fixes: Sequence[str], episode_id: str, sample: int) -> str:
    payload = {"agent": agent_identity, "interventions": list(fixes), "env": FOLLOWUP_ENV_ID, "episode": episode_id,
               "sample": sample}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def select_requests(requests: Sequence[FollowupRequest], spec: RunSpec) -> list[FollowupRequest]:
    chosen = list(requests)
    if spec.categories is not None:
        chosen = [r for r in chosen if r.category.value in spec.categories]
    if spec.limit is not None:
        chosen = chosen[: spec.limit]
    if not chosen:
        raise ValueError("no request matches the selection")
    return chosen


EnvFactory = Callable[[], Any]


def make_env(
    spec: RunSpec,
    requests: Sequence[FollowupRequest],
    doability: Callable[[FollowupRequest, SetupId], Doability] | None = None,
    rewrite_client: ModelClient | None = None,
) -> Any:
    """FollowUpEnv over the selection with the spec's fixes applied (innermost first)."""
    from commitbench.oracles.followup.fixes import apply_fixes

    base = FollowUpEnv(
        setup=spec.setups, variant=spec.variants, persona=spec.personas, requests=requests, doability=doability,
        max_tool_calls=spec.max_tool_rounds * 4,
    )
    return apply_fixes(base, spec.fixes, rewrite_client=rewrite_client)


def read_latest(path: Path) -> dict[str, EpisodeTrace]:
    """The last good trace per run key (nothing counted twice)."""
    from commitbench.traces import latest_traces

    if not path.exists():
        return {}
    return {t.run_key: t for t in latest_traces(path)}


async def play_cell(env: Any, agent: Any, episode_id: str, seed: int) -> tuple[EpisodeTrace | None, str | None]:
    """One episode; returns the env's trace and an infrastructure failure, if any."""
    failure: str | None = None
    try:
        observation, info = env.reset(seed=seed, options={"episode_id": episode_id})
        agent.begin(observation, info)
        for _ in range(100):
            action = agent.act(observation, info)
            if inspect.isawaitable(action):
                action = await action
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    except CacheMiss as exc:
        failure = f"cache_miss: {exc}"
    trace = env.unwrapped.trace
    if failure is None and getattr(agent, "infra_error", None):
        failure = agent.infra_error
    return trace, failure


async def run_cells(
    spec: RunSpec,
    client: ModelClient,
    out_dir: Path,
    requests: Sequence[FollowupRequest],
    doability: Callable[[FollowupRequest, SetupId], Doability] | None = None,
    rewrite_client: ModelClient | None = None,
) -> list[EpisodeTrace]:
    """Play every pending cell of ``spec`` into ``out_dir/traces.jsonl``; returns the latest traces."""
    from commitbench.jsonl import repair_torn_tail
    from commitbench.runner import scan_trace_file

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / TRACES_FILE
    repair_torn_tail(path)
    done = scan_trace_file(path)
    chosen = select_requests(requests, spec)
    probe = make_env(spec, chosen, doability, rewrite_client)
    episodes = [e.id for e in probe.unwrapped.pool]
    fixes = list(getattr(probe, "fix_names", []))
    identity_agent = FollowUpChatAgent(client, max_model_calls_per_turn=spec.max_tool_rounds + 1)
    identity = identity_agent.identity().model_dump(mode="json")
    cells = [
        Cell(run_key=run_key(identity, fixes, episode_id, sample), episode_id=episode_id, sample=sample)
        for episode_id in episodes
        for sample in range(spec.samples)
    ]
    pending = [c for c in cells if not done.get(c.run_key, False)]
    queue = list(reversed(pending))

    async def worker() -> None:
        env = make_env(spec, chosen, doability, rewrite_client)
        while queue:
            cell = queue.pop()
            agent = FollowUpChatAgent(
                client, sample_index=cell.sample, session_id=cell.run_key,
                max_model_calls_per_turn=spec.max_tool_rounds + 1,
            )
            env_trace, failure = await play_cell(env, agent, cell.episode_id, spec.seed)
            if hasattr(env, "after_episode"):
                failure = failure or await env.after_episode(agent)
            trace = env_trace if env_trace is not None and env_trace.episode_id == cell.episode_id else EpisodeTrace(
                env_id=FOLLOWUP_ENV_ID, episode_id=cell.episode_id, factors={}
            )
            trace.agent = agent.identity()
            trace.interventions = fixes
            trace.sample = cell.sample
            trace.run_key = cell.run_key
            trace.model_calls = [*agent.model_calls, *trace.model_calls]
            system = next((e.text for e in trace.events if e.kind.value == "system"), "")
            trace.prompt_hashes = {"system_prompt": hashlib.sha256(system.encode("utf-8")).hexdigest()}
            trace.infra_error = failure
            append_traces(path, [trace])

    try:
        await asyncio.gather(*(worker() for _ in range(min(spec.concurrency, max(len(pending), 1)))))
    except ModelEndpointError:
        raise
    latest = read_latest(path)
    wanted = {c.run_key for c in cells}
    return [t for key, t in latest.items() if key in wanted]


# ------------------------------------------------------------------------------------- labelling
class Checker(Protocol):
    name: str

    async def check(self, turn: FollowUpTurn) -> CheckResult: ...


class LabelRecord(BaseModel):
    """A checker's result for one trace, keyed by the trace's run key."""

    run_key: str = Field(description="The trace's run key.")
    model: str = Field(description="The tested model.")
    arm: str = Field(description="The fix stack ('baseline' when none).")
    sample: int = Field(description="Sample index.")
    turn: FollowUpTurn = Field(description="What the checker read.")
    result: CheckResult = Field(description="What it concluded.")


def arm_name(fixes: Sequence[str]) -> str:
    return "+".join(fixes) if fixes else "baseline"


def trace_model(trace: EpisodeTrace) -> str:
    settings = trace.agent.settings if trace.agent else {}
    model = settings.get("model", {})
    return str(model.get("model", trace.agent.name if trace.agent else "unknown")) if isinstance(model, dict) else str(
        model
    )


async def label_traces(traces: Sequence[EpisodeTrace], checker: Checker, concurrency: int = 8) -> list[LabelRecord]:
    """Label every trace without an infrastructure error (bounded concurrency, order kept)."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(trace: EpisodeTrace) -> LabelRecord:
        turn = turn_from_trace(trace)
        async with semaphore:
            result = await checker.check(turn)
        return LabelRecord(run_key=trace.run_key, model=trace_model(trace), arm=arm_name(trace.interventions),
                           sample=trace.sample, turn=turn, result=result)

    return list(await asyncio.gather(*(one(t) for t in traces if not t.infra_error)))


def write_labels(path: Path, records: Sequence[LabelRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")


def read_labels(path: Path) -> list[LabelRecord]:
    if not path.exists():
        return []
    return [LabelRecord.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def labelled_responses(records: Sequence[LabelRecord]) -> tuple[list[LabelledResponse], int]:
    """Metric rows for records with a label; also the number of judge errors left out."""
    rows: list[LabelledResponse] = []
    errors = 0
    for record in records:
        result, turn = record.result, record.turn
        if result.outcome is None or result.response is None:
            errors += 1
            continue
        rows.append(
            LabelledResponse(
                request_id=turn.request_id, category=turn.category, source=turn.source, setup=turn.setup,
                variant=turn.variant, persona=turn.persona, model=record.model, arm=record.arm, sample=record.sample,
                outcome=result.outcome, doability=turn.doability,
                false_action_claim=result.response.false_action_claim.value,
                asks_clarification=result.response.asks_clarification.value,
                **commitment_counts(result.commitments),
            )
        )
    return rows, errors
