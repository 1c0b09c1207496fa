"""Model comparisons on the mock server: two scripted models of known behaviour give the hand-computed
differences, the thinking pair is found without being asked, and a thinking side that returns no
reasoning is flagged; the confound warning fires on a config whose pair differs in more than the switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _runner_fixtures import standing_responder

from commitbench.cli import main
from commitbench.config import ExperimentConfig
from commitbench.envs import STANDING_ENV_ID
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.mock import MockServer
from commitbench.modelentry import thinking_pairs

EPISODES = [e for e in load_episodes() if e.split.value == "test" and e.variant == 0 and e.gap == 1
            and e.cell in ("BASE", "CRED-DIRECT", "CRED-IMPLICIT", "DELEG-DIRECT", "DELEG-IMPLICIT")]
TYPES = sorted({e.commitment_type for e in EPISODES})
HALF = {e.action_tool.name for e in EPISODES if e.commitment_type in TYPES[:3]}


def _thinking(request: dict[str, Any]) -> bool:
    return bool((request.get("chat_template_kwargs") or {}).get("enable_thinking"))


def _entry(name: str, base_url: str, thinking: bool, **settings: Any) -> dict[str, Any]:
    return {"name": name, "base_url": base_url, "api_key_env": None,
            "settings": {"model": "qwen", "seed": 0, "max_tokens": 512 if thinking else 128,
                         "extra_body": {"chat_template_kwargs": {"enable_thinking": thinking}}, **settings}}


def _run(tmp_path: Path, server: MockServer, reasoning_on: bool) -> Path:
    # Thinking on: acts at the trigger in every episode (overrides every CRED/DELEG release).
    # Thinking off: acts only in the first three commitment types (overrides half of them).
    server.set_responder(standing_responder(
        EPISODES,
        executes=lambda request, tool: _thinking(request) or tool in HALF,
        reasoning=lambda request: "Thinking it through." if _thinking(request) and reasoning_on else None,
    ))
    config = {"name": "pair", "env": "commitbench/Standing-v0",
                              "agents": ["chat"], "episodes": {"ids": [e.id for e in EPISODES]}, "concurrency": 4,
              "models": [_entry("on", server.base_url, True), _entry("off", server.base_url, False)]}
    path = tmp_path / "pair.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--no-progress", "--no-report"]) == 0
    return out


def _report(out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", str(out), "--json", "--n-boot", "200", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_thinking_pair_is_compared_unasked_and_matches_hand_computation(tmp_path, mock_server, capsys):
    out = _run(tmp_path, mock_server, reasoning_on=True)
    report = _report(out, capsys)
    thinking = {(c["metric"], c["group"]["policy"]): c for c in report["comparisons"] if c["kind"] == "thinking"}
    for policy in ("explicit", "silent"):
        override = thinking["override", policy]
        assert (override["a"], override["b"]) == ("chat:on@none", "chat:off@none")
        # on: 24/24 CRED/DELEG runs executed; off: 12/24 -> +0.5 on the same 24 runs (+ 6 BASE runs)
        assert override["a_value"] == 1.0 and override["b_value"] == 0.5
        assert override["estimate"] == pytest.approx(0.5) and override["n_pairs"] == 30
        assert override["low"] <= 0.5 <= override["high"]
        assert override["flag"] is None and override["token_ratio"] is not None
    # Strict accuracy per cell: in BASE acting is right (on 6/6, off 3/6: +0.5); in CRED acting is wrong
    # (on 0/6, off 3/6: -0.5); in DELEG both are wrong (dropping there also needs telling the creditor).
    by_cell = {(c["group"]["policy"], c["group"]["cell"]): c["estimate"] for c in report["comparisons_by_cell"]}
    assert by_cell["explicit", "BASE"] == pytest.approx(0.5)
    assert by_cell["explicit", "CRED-DIRECT"] == pytest.approx(-0.5) == by_cell["silent", "CRED-IMPLICIT"]
    assert by_cell["explicit", "DELEG-DIRECT"] == 0.0
    # Cost per model: reasoning only on the thinking side.
    cost = {c["group"]["agent"]: c for c in report["cost"]}
    assert cost["chat:on"]["reasoning_calls"] > 0 and cost["chat:off"]["reasoning_calls"] == 0
    assert cost["chat:on"]["runs"] == cost["chat:off"]["runs"] == len(EPISODES)
    assert (out / "report" / "comparisons.png").read_bytes().startswith(b"\x89PNG")

    # Asked for explicitly, the other way round: kind explicit, the sign flips.
    explicit = _report(out, capsys, "--compare", "off", "on@none")
    asked = [c for c in explicit["comparisons"] if c["kind"] == "explicit" and c["metric"] == "override"]
    assert len(asked) == 2 and all(c["estimate"] == pytest.approx(-0.5) for c in asked)
    assert not [c for c in explicit["comparisons"] if c["kind"] == "thinking"]  # the pair is not shown twice
    assert main(["report", str(out), "--compare", "nobody", "on"]) == 2


def test_a_thinking_side_that_returns_no_reasoning_is_flagged(tmp_path, mock_server, capsys):
    out = _run(tmp_path, mock_server, reasoning_on=False)
    report = _report(out, capsys)
    flagged = [c for c in report["comparisons"] if c["kind"] == "thinking"]
    assert flagged and all("returned no reasoning text" in c["flag"] for c in flagged)
    capsys.readouterr()
    assert main(["report", str(out), "--n-boot", "50", "--no-figure"]) == 0
    assert "returned no reasoning text" in capsys.readouterr().out


def test_the_confound_warning_names_the_fields_and_the_shipped_configs_have_none(tmp_path, capsys):
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["chat"], models=[
        _entry("on", "http://127.0.0.1:1/v1", True, temperature=0.6, top_p=0.95),
        _entry("off", "http://127.0.0.1:1/v1", False, temperature=0.0),
    ])
    (pair,) = thinking_pairs(config.models)
    assert (pair.on, pair.off, pair.confounds) == ("on", "off", ["temperature", "top_p"])
    assert config.warnings() and "temperature, top_p" in config.warnings()[0]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(config.model_dump(mode="json")), encoding="utf-8")
    assert main(["run", str(path), "--dry-run"]) == 0
    assert "warning: models 'on' (thinking on) and 'off' (off) also differ in temperature, top_p" in (
        capsys.readouterr().out)
    # max_tokens may differ: that is what thinking needs.
    clean = ExperimentConfig(env=STANDING_ENV_ID, agents=["chat"], models=[_entry("on", "http://127.0.0.1:1/v1", True),
                                                      _entry("off", "http://127.0.0.1:1/v1", False)])
    assert clean.warnings() == [] and thinking_pairs(clean.models)[0].confounds == []
    for shipped in sorted((Path(__file__).parents[1] / "configs").glob("*.yaml")):
        from commitbench.config import load_config

        assert load_config(shipped).warnings() == [], shipped.name


FALSE_CLAIM = "Done! I have set the reminder for you."
DEFERRAL = "I can't set reminders from here; please set one on your phone."


def test_followup_comparisons_match_hand_computation(tmp_path, mock_server, capsys):
    from commitbench.episodes.followup.requests import load_requests

    reminders = [r for r in load_requests() if r.category.value == "reminder"][:10]
    fails_off = {r.user_message for r in reminders[:5]}

    def respond(request: dict[str, Any]) -> str:
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        return FALSE_CLAIM if _thinking(request) or user in fails_off else DEFERRAL

    mock_server.set_responder(respond)
    config = {"name": "fu-pair", "env": "commitbench/FollowUp-v0", "agents": ["chat"], "concurrency": 4,
              "episodes": {"setups": ["C0"], "variants": ["inferred"], "personas": ["generic"],
                           "requests": [r.id for r in reminders]},
              "models": [_entry("on", mock_server.base_url, True), _entry("off", mock_server.base_url, False)]}
    path = tmp_path / "fu.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out), "--no-progress", "--no-report"]) == 0
    report = _report(out, capsys)
    # The offline checker labels the two replies as designed (a failure, and not one).
    shares = {row["model"]: row for row in report["outcomes"]}
    assert (shares["on"]["false_claim"], shares["off"]["false_claim"], shares["off"]["deferral"]) == (1.0, 0.5, 0.5)
    failure = {c["metric"]: c for c in report["comparisons"] if c["kind"] == "thinking"}["failure_rate"]
    assert (failure["a"], failure["b"], failure["group"]) == ("on@none", "off@none", {"setup": "C0",
                                                                                    "variant": "inferred"})
    # on fails 10/10, off 5/10, on the same 10 requests.
    assert failure["a_value"] == 1.0 and failure["b_value"] == 0.5
    assert failure["estimate"] == pytest.approx(0.5) and failure["n_pairs"] == 10
    assert failure["low"] <= 0.5 <= failure["high"]
    assert failure["flag"] is not None  # the mock returned no reasoning on the thinking side
    by_setup = {c["metric"]: c for c in report["comparisons_by_setup"]}
    assert by_setup["failure_rate"]["group"] == {"setup": "C0"}
    assert {c["group"]["model"] for c in report["cost"]} == {"on", "off"}
