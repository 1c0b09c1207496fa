"""What the inspect tasks' tests share: a scripted follow-up model, and one run each way against the mock server."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog

from commitbench.config import ExperimentConfig
from commitbench.mock import MockServer, ReplySpec, ToolCallSpec
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.traces import EpisodeTrace, latest_traces


def followup_responder(request: dict[str, Any]) -> ReplySpec:
    """A scripted model for the follow-up suite: the reply depends only on what the request says."""
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return ReplySpec(text="Done: the reminder is set and you will be notified then.")
    user = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    choice = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 3
    tools = {t["function"]["name"] for t in request.get("tools") or []}
    if "create_reminder" in tools and choice != 2:
        return ReplySpec(tool_calls=[ToolCallSpec(name="create_reminder", arguments={
            "remind_at": "2031-03-04T09:00:00", "message": user[:60]})])
    if choice == 0:
        return ReplySpec(text="I'll remind you about this tomorrow morning and follow up then.")
    return ReplySpec(text="I can't set reminders here, so please add one to your calendar.")


def inspect_run(server: MockServer, task: str, task_args: dict[str, Any], log_dir: Path, limit: int | None = 6,
                **options: Any) -> EvalLog:
    """``inspect eval TASK`` on the mock server's model ``mock-model``, ``limit`` samples (``options``: more of
    eval's arguments)."""
    (log,) = inspect_eval(
        task, model="openai/mock-model", model_base_url=server.base_url, model_args={"responses_api": False},
        task_args=task_args, limit=limit, log_dir=str(log_dir), display="none", max_retries=2, **options,
    )
    return log


def commitbench_run(server: MockServer, env: str, episodes: dict[str, Any], out: Path,
                    name: str = "mock") -> list[EpisodeTrace]:
    """``commitbench run`` of the chat agent on the mock server's ``mock-model`` (config label ``name``)."""
    config = ExperimentConfig.model_validate({
        "name": "inspect-equivalence", "env": env, "agents": ["chat"], "episodes": episodes,
        "models": [{"name": name, "base_url": server.base_url, "api_key_env": None,
                    "settings": {"model": "mock-model", "timeout": 10.0}}],
    })
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.message
    return latest_traces(out)
