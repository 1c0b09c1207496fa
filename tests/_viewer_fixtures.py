"""Small real runs of both suites on the mock server, and the viewer's pages captured in a browser.

:func:`standing_run` plays standing episodes with the chat agent on two "models" (thinking on and
off: the same mock server, two generation settings) and the creditor-rule reference agent, under two
intervention arms; :func:`followup_run` plays the follow-up requests of ``test_followup_run`` and labels
them with the LLM checker (scripted answers) and the offline checker. :func:`capture_pages` loads each
page of a built site in a browser and writes a screenshot of each: the tests use it, and so does
``scripts/viewer_screenshots.py`` for the README's pictures.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _browser import Browser, die_with_parent
from _runner_fixtures import parse_line, standing_responder

from commitbench.config import ExperimentConfig, JudgeConfig
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.labeljob import label_directory
from commitbench.mock import MockServer, ReplySpec
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment

FAST_RETRY = {"max_attempts": 5, "base_delay_s": 0.005, "max_delay_s": 0.05, "seed": 5}
THINKING = {"chat_template_kwargs": {"enable_thinking": True}}
NOT_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
STANDING_ARMS = ["none", "oracle:B3+"]
READY = "document.getElementById('main').dataset.route === {route!r}"


def _chat_lines_only(respond: Callable[[dict[str, Any]], ReplySpec]) -> Callable[[dict[str, Any]], ReplySpec]:
    """The standing responder, reading only the chat lines of the last message (an oracle store adds its own)."""

    def wrapped(request: dict[str, Any]) -> ReplySpec:
        messages = list(request["messages"])
        last = messages[-1]
        if last.get("role") == "user" and isinstance(last.get("content"), str):
            lines = [line for line in last["content"].splitlines() if parse_line(line)]
            if lines:
                messages[-1] = {**last, "content": "\n".join(lines)}
        return respond({**request, "messages": messages})

    return wrapped


def model_entry(base_url: str, name: str, extra_body: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "base_url": base_url, "api_key_env": None, "retry": FAST_RETRY,
            "settings": {"model": "mock-model", "timeout": 10.0, "extra_body": extra_body}}


def standing_run(server: MockServer, out: Path, limit: int = 24) -> Path:
    """A standing run: two chat 'models' and creditor-rule, two arms, ``limit`` test episodes; rule-judged."""
    server.set_responder(_chat_lines_only(standing_responder(load_episodes())))
    config = ExperimentConfig.model_validate({
        "name": "viewer-standing", "env": "commitbench/Standing-v0", "agents": ["chat", "creditor-rule"],
        "models": [model_entry(server.base_url, "mock-thinking", THINKING),
                   model_entry(server.base_url, "mock-no-thinking", NOT_THINKING)],
        "interventions": STANDING_ARMS, "episodes": {"split": "test", "limit": limit}, "concurrency": 8,
        "cache": {"path": str(out.parent / f"{out.name}-cache.sqlite")},
    })
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    label_directory(out, JudgeConfig())  # the rule judge's labels, stored as well
    return out


def _guarded_replies_too(respond: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """The scripted follow-up model; a reply the claim guard rewrote gets no commitment and no flag."""
    from commitbench.judges.followup.llm import load_prompt
    from commitbench.judges.followup.schemas import ResponseJudgeOutput

    def wrapped(request: dict[str, Any]) -> Any:
        try:
            return respond(request)
        except KeyError:
            system = request["messages"][0]["content"]
            if system == load_prompt("followup_detector"):
                return '{"commitments": []}'
            return ResponseJudgeOutput.from_flags(rationale="the rewritten reply claims nothing").model_dump_json()

    return wrapped


def followup_run(server: MockServer, out: Path) -> Path:
    """A follow-up run (plain and claim-guarded arms) labelled by the LLM checker (scripted) and the offline one."""
    import test_followup_run as scripted

    server.set_responder(_guarded_replies_too(scripted.responder))
    config = scripted.followup_config(server.base_url, out.parent, interventions=["none", "claim_guard"],
                                      cache={"path": str(out.parent / f"{out.name}-cache.sqlite")})
    summary = run_experiment(config, out)
    assert summary.status is RunStatus.COMPLETE, summary.failures
    label_directory(out, config.judge, cache_path=config.cache.path)
    label_directory(out, JudgeConfig())
    return out


def route_ready(route: str) -> str:
    return READY.format(route=route)


def show(browser: Browser, route: str, timeout: float = 60.0) -> None:
    """Go to a page of the loaded site (a change of the address's fragment) and wait until it is drawn."""
    browser.evaluate(f"location.hash = {route!r}")
    browser.wait_for(route_ready(route), timeout)


def first_href(browser: Browser, selector: str) -> str:
    href = browser.evaluate(f"document.querySelector({selector!r}).getAttribute('href')")
    assert isinstance(href, str) and href.startswith("#/"), href
    return href


def capture_pages(browser: Browser, site_url: str, out: Path, prefix: str, transcript: str, compare: str,
                  max_height: float = 1300, runs: str = "#/runs") -> dict[str, Path]:
    """Screenshots of the overview, the run list, one transcript and one side-by-side page of a site.

    Each shows the page from its top, ``max_height`` pixels at most.
    """
    out.mkdir(parents=True, exist_ok=True)
    browser.goto(site_url + "#/", ready=route_ready("#/"))
    shots = {"overview": browser.screenshot(out / f"{prefix}-overview.png", True, max_height)}
    for name, route in (("runs", runs), ("transcript", transcript), ("compare", compare)):
        show(browser, route)
        shots[name] = browser.screenshot(out / f"{prefix}-{name}.png", True, max_height)
    return shots


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


SERVING = re.compile(r"serving (http://127\.0\.0\.1:\d+/index\.html)")


def serve_view(arguments: list[str], timeout: float = 180.0) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``commitbench view ARGUMENTS`` (with ``--serve``) started in a process group of its own; its address and the
    lines it printed up to it (an AssertionError naming them when it says no address within ``timeout``)."""
    command = [sys.executable, "-m", "commitbench.cli", "view", *arguments]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True, preexec_fn=die_with_parent)
    assert server.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            break
        lines.append(line)
        found = SERVING.search(line)
        if found:
            return server, found.group(1), lines
    stop_view(server)
    raise AssertionError(f"the server did not say where it serves: {lines}")


def stop_view(server: subprocess.Popen[str]) -> None:
    """SIGTERM to the server's process group, and wait for it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=20)
