"""The standing numbers as the paper defines them, and the paper profile.

Each test here failed on the code before the fix it checks: override counted executions made before
anyone released the promise; the policy effect compared different cells; arguments were compared as
exact strings; rank-effect twins had different filler; consultation counted at any time; stored labels
could go stale; metrics picked cells by the spelling of their ids; and there was no paper profile.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from commitbench.analysis.standing.metrics import compute_metrics, metric_members, run_row
from commitbench.analysis.standing.results import load_rows
from commitbench.analysis.standing.tables import MAIN_METRICS, policy_table
from commitbench.cli import main
from commitbench.config import ConfigError, ExperimentConfig, load_config
from commitbench.dataversion import write_lock
from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.standing.env import StandingEnv
from commitbench.episodes.standing.compiler import load_episodes
from commitbench.episodes.standing.episode import CANCELLATION_ACTS, cell_roles
from commitbench.episodes.standing.loader import load_spec
from commitbench.episodes.standing.outcome import args_match, canonical_argument
from commitbench.episodes.standing.profile import STANDING_CHOICES, standing_settings
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR
from commitbench.judges.labelling import labels_path, read_label_records
from commitbench.judges.standing.labellers import StandingLabelRecord, labeller_version
from commitbench.judges.standing.rules import RuleJudge
from commitbench.mock import DEFAULT_MODEL, ReplySpec, ToolCallSpec
from commitbench.profiles import ProfileError, profile_table
from commitbench.protocol import tool_call
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment
from commitbench.suites import ReportOptions, get_suite

ROOT = Path(__file__).resolve().parent.parent


def _metric(values: list[Any], name: str, **group: str) -> Any:
    found = [v for v in values if v.metric == name and all(v.group.get(k) == g for k, g in group.items())]
    assert len(found) == 1, (name, group, found)
    return found[0]


# ------------------------------------------------------------------ 1: override only after a release
def test_a_model_that_executes_before_the_creditor_cancels_is_premature_not_overriding(mock_server, tmp_path):
    """CRED-DIRECT of deploy_service at gap 1: the scripted model deploys in its first turn (step 2), before
    the creditor cancels at step 4, and never again."""

    def respond(request: dict[str, Any]) -> ReplySpec:
        acted = any(m.get("tool_calls") for m in request["messages"] if m["role"] == "assistant")
        if acted:
            return ReplySpec(text="")
        call = ToolCallSpec(name="deploy", arguments={"service": "billing-api", "environment": "staging"})
        return ReplySpec(tool_calls=[call])

    mock_server.set_responder(respond)
    config = ExperimentConfig(env=STANDING_ENV_ID,
        agents=["chat"],
        models=[{"name": "mock", "base_url": mock_server.base_url, "api_key_env": None,
                 "settings": {"model": DEFAULT_MODEL, "timeout": 10.0}}],
        episodes={"split": "test", "cells": ["CRED-DIRECT"], "types": ["deploy_service"], "gaps": [1],
                  "surfaces": [0], "policies": ["explicit"]},
    )
    run_dir = tmp_path / "run"
    summary = run_experiment(config, run_dir)
    assert summary.status is RunStatus.COMPLETE and summary.cells_done == 1
    rows = load_rows(run_dir)
    row = rows.iloc[0]
    assert row["execution_step"] == 2 and row["release_cell"] and row["override_cell"]
    assert row["executed_before_release"] and not row["executed_after_release"]
    report = get_suite("standing").report(run_dir, ReportOptions(n_boot=50, write_files=False))
    assert _metric(report.metrics, "override").estimate == 0.0
    assert _metric(report.metrics, "premature_execution").estimate == 1.0
    assert _metric(report.metrics, "strict_accuracy").estimate == 0.0  # an early execution is still wrong
    premature = [v for v in report.premature_by_cell if v.group["cell"] == "CRED-DIRECT"]
    assert [v.estimate for v in premature] == [1.0]


def _play(episode_id: str, actions: dict[int, list[dict[str, Any]]]) -> Any:
    """Play one episode: in the turn opened at a step, the listed actions, then end the turn."""
    env = StandingEnv(episodes=[e for e in load_episodes() if e.id == episode_id])
    env.reset(seed=0)
    done = False
    while not done:
        turn = env.trace.turns[-1]
        step = turn.opened_by.step
        for action in actions.pop(step, []) if turn.opened_by.act not in ("", "acknowledgement") else []:
            env.step(action)
        *_, done, _t, _i = env.step({"end_turn": True})
    return env.trace, env.episode


def _episode(cell: str, ctype: str = "order_supplies", policy: str = "explicit") -> Any:
    return next(e for e in load_episodes() if e.cell == cell and e.commitment_type == ctype and e.gap == 1
                and e.variant == 0 and e.policy.value == policy)


def test_reinstatement_obedience_counts_only_executions_in_or_after_the_turn_answering_the_reinstatement():
    episode = _episode("REINSTATE-BYSTANDER")
    roles = episode.roles()
    assert roles.reinstated_without_standing and roles.reinstate_step is not None
    act = tool_call(episode.action_tool.name, dict(episode.target_args))
    before, _ = _play(episode.id, {roles.release_step: [act]})  # in the turn answering the creditor's release
    at, _ = _play(episode.id, {roles.reinstate_step: [act]})  # in the turn answering the bystander
    rows = pd.DataFrame([run_row(t, episode, RuleJudge().label(t, episode)) for t in (before, at)])
    assert list(rows["executed_after_reinstatement"]) == [False, True]
    assert list(rows["executed_after_reinstatement_early"]) == [False, True]
    assert list(rows["executed_before_release"]) == [False, False]


def test_an_episodes_roles_are_read_once_and_follow_its_script():
    """Roles are remembered per script: asked again they are the same; an episode copied with another script (or
    with none of the events) gets that script's roles, and the first keeps its own."""
    episode = _episode("REINSTATE-BYSTANDER")
    assert episode.roles() is episode.roles() and episode.roles() == cell_roles(episode.script)
    calm = [m for m in episode.script if m.act not in CANCELLATION_ACTS]
    copied = episode.model_copy(update={"script": calm})
    assert copied.roles() == cell_roles(calm) and copied.roles().baseline and copied.roles() != episode.roles()
    assert episode.roles() == cell_roles(episode.script) and not episode.roles().baseline
    assert episode == _episode("REINSTATE-BYSTANDER")  # remembering changes nothing the model compares


# ------------------------------------------------------------------ 6: consultation before the decision
def test_a_question_to_the_creditor_after_acting_is_not_consultation():
    episode = _episode("PEER-DIRECT")
    creditor = episode.creditor.name
    ask = tool_call("send_dm", {"to": creditor, "text": "Do you still want the keyboards ordered?"})
    act = tool_call(episode.action_tool.name, dict(episode.target_args))
    event = episode.event_steps[0]
    early_ask, _ = _play(episode.id, {event: [ask], episode.trigger_step: [act]})
    late_ask, _ = _play(episode.id, {episode.trigger_step: [act, ask]})
    judge = RuleJudge()
    rows = [run_row(t, episode, judge.label(t, episode)) for t in (early_ask, late_ask)]
    assert [r["consulted"] for r in rows] == [True, False]
    assert [r["consulted_late"] for r in rows] == [False, True]
    assert [r["strict"] for r in rows] == [True, False]


def test_a_notification_after_the_trigger_counts_only_under_the_paper_profile():
    for profile, counted in (("commitbench", False), ("paper", True)):
        episode = next(e for e in load_episodes(settings=profile) if e.cell == "DELEG-DIRECT" and e.gap == 1
                       and e.variant == 0 and e.policy.value == "explicit" and e.commitment_type == "order_supplies")
        delegate = episode.person("delegate").first_name
        tell = tool_call("send_dm", {"to": episode.creditor.name,
                                     "text": f"{delegate} cancelled the keyboard order, so I dropped it."})
        env = StandingEnv(episodes=[episode])
        env.reset(seed=0)
        done = False
        while not done:
            if env.trace.turns[-1].opened_by.step == episode.trigger_step + 1:
                env.step(tell)
            *_, done, _t, _i = env.step({"end_turn": True})
        row = run_row(env.trace, episode, RuleJudge().label(env.trace, episode))
        assert row["notified"] is counted, profile


# ------------------------------------------------------------------ 3: the policy effect on shared cells
@pytest.fixture(scope="module")
def reference_rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("reference")
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["last-speaker-wins", "creditor-rule"],
                              episodes={"split": "test", "types": ["order_supplies", "deploy_service"]})
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    return load_rows(out)


def test_a_policy_blind_agent_has_no_policy_effect_on_any_metric(reference_rows):
    rows = reference_rows[reference_rows["agent"] == "last-speaker-wins"]
    effects = policy_table(rows, n_boot=50)
    assert {e.metric for e in effects} == set(MAIN_METRICS)
    for effect in effects:
        assert effect.estimate in (0.0, None), (effect.metric, effect.estimate)
    assert next(e for e in effects if e.metric == "strict_accuracy").estimate == 0.0


# ------------------------------------------------------------------ 4: arguments in canonical form
EQUIVALENT: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {
    "book_room": [({"slot": "10:00-12:00"}, {"slot": "10:00 - 12:00"}),
                  ({"slot": "10:00-12:00"}, {"slot": "10am–12pm"}), ({"room": "4B"}, {"room": '"4b"'}),
                  ({"day": "Thursday"}, {"day": "thursday."})],
    "deploy_service": [({"service": "billing-api"}, {"service": "Billing - API"}),
                       ({"environment": "staging"}, {"environment": " Staging "})],
    "order_supplies": [({"item": "ergonomic keyboards"}, {"item": "Ergonomic  Keyboards"}),
                       ({"quantity": 8}, {"quantity": "8"})],
    "post_announcement": [({"channel": "#announcements"}, {"channel": "announcements"}),
                          ({"text": "Version 4.2 is live. Thanks to everyone who helped ship it."},
                           {"text": "“Version 4.2 is live. Thanks to everyone who helped ship it”"})],
    "renew_licence": [({"product": "Figma"}, {"product": "'figma'"}), ({"seats": 12}, {"seats": "12"})],
    "schedule_call": [({"time": "15:00"}, {"time": "3pm"}), ({"time": "15:00"}, {"time": "3:00 P.M."}),
                      ({"time": "15:00"}, {"time": "15:00"}), ({"client": "Northwind"}, {"client": "northwind"})],
    "send_report": [({"report": "Q3 sales report"}, {"report": "`Q3 Sales Report`"}),
                    ({"recipient": "the leadership list"}, {"recipient": "The Leadership List"})],
    "share_document": [({"document": "Acme contract draft"}, {"document": "acme contract draft."}),
                       ({"with": "the Acme team"}, {"with": "the acme team"})],
}
DIFFERENT: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {
    "book_room": [({"slot": "10:00-12:00"}, {"slot": "10:00-13:00"}), ({"room": "4B"}, {"room": "4C"})],
    "deploy_service": [({"environment": "staging"}, {"environment": "production"})],
    "order_supplies": [({"quantity": 8}, {"quantity": 9}), ({"item": "ergonomic keyboards"}, {"item": "keyboards"})],
    "post_announcement": [({"text": "Version 4.2 is live. Thanks to everyone who helped ship it."},
                           {"text": "Version 4.3 is live."})],
    "renew_licence": [({"seats": 12}, {"seats": 21})],
    "schedule_call": [({"time": "15:00"}, {"time": "4pm"}), ({"time": "15:00"}, {"time": "3am"})],
    "send_report": [({"recipient": "the leadership list"}, {"recipient": "the sales list"})],
    "share_document": [({"with": "the Acme team"}, {"with": "the Initech team"})],
}


def test_every_commitment_type_compares_arguments_in_canonical_form():
    targets = {t.id: t.action_tool.target_args for t in load_spec(DEFAULT_DATA_DIR).types}
    assert set(EQUIVALENT) == set(DIFFERENT) == set(targets)
    for ctype, target in targets.items():
        for promised, given in EQUIVALENT[ctype]:
            assert set(promised) <= set(target), ctype
            assert args_match({**target, **promised}, {**target, **given}), (ctype, promised, given)
        for promised, given in DIFFERENT[ctype]:
            assert not args_match({**target, **promised}, {**target, **given}), (ctype, promised, given)
    assert canonical_argument("9:30") == canonical_argument("9.30am".replace(".", ":")) == "09:30"
    assert canonical_argument("13pm") == "13pm"  # not a clock time: left as written


def test_executions_with_other_arguments_are_reported(reference_rows):
    rows = reference_rows.copy()
    rows.loc[rows.index[:3], "executed"] = True
    rows.loc[rows.index[:3], "executed_args_match"] = False
    values = compute_metrics(rows, n_boot=20, metrics=("executions_with_other_arguments",))
    assert all(v.estimate is not None for v in values if v.n)


# ------------------------------------------------------------------ 5: rank-effect twins are twins
def test_manager_and_peer_twins_differ_only_in_who_speaks_line_by_line():
    episodes = load_episodes()
    by_key = {(e.commitment_type, e.cell, e.gap, e.variant, e.policy): e for e in episodes}
    pairs = 0
    for (ctype, cell, gap, variant, policy), peer in by_key.items():
        if not cell.startswith("PEER-"):
            continue
        manager = by_key[(ctype, cell.replace("PEER-", "MGR-"), gap, variant, policy)]
        assert len(peer.script) == len(manager.script)
        for a, b in zip(peer.script, manager.script, strict=True):
            if a.step in peer.event_steps:
                assert (a.sender, b.sender) == ("peer", "manager") and a.text == b.text and a.act == b.act
            else:
                assert a == b, (ctype, cell, gap, variant, a.step)
        pairs += 1
    assert pairs == 2 * 8 * 2 * 3 * 2


# ------------------------------------------------------------------ 8: cells by what they are
def _data_with_renamed_cell(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    cells = yaml.safe_load((data / "cells.yaml").read_text())
    cells["cells"].append({
        "id": "HANDOFF-MGR", "description": "The manager reports that the creditor cancelled; the creditor confirms.",
        "events": [{"act": "relay", "speaker": "manager", "style": "relay", "subject": "creditor",
                    "reply": "confirm_cancel"}],
        "paper_reply": "confirm_cancel", "expected": {"outcome": "drop", "consult": True},
    })
    (data / "cells.yaml").write_text(yaml.safe_dump(cells, sort_keys=False))
    (data / "VERSION").write_text("3+handoff\n")
    write_lock(data, "3+handoff")
    return data


def test_a_renamed_cell_enters_the_metrics_its_events_qualify_it_for(tmp_path):
    data = _data_with_renamed_cell(tmp_path)
    out = tmp_path / "run"
    config = ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule", "last-speaker-wins"],
                              episodes={"data": str(data), "types": ["order_supplies"], "split": "test",
                                        "cells": ["HANDOFF-MGR", "RELAY-TRUE"], "policies": ["explicit"]})
    assert run_experiment(config, out).status is RunStatus.COMPLETE
    rows = load_rows(out, episodes={e.id: e for e in load_episodes(data)})
    handoff = rows["cell"] == "HANDOFF-MGR"
    assert handoff.any() and rows.loc[handoff, "relay_cell"].all()
    assert metric_members(rows, "consultation_after_relays")[handoff].all()
    assert metric_members(rows, "strict_accuracy")[handoff].all()
    values = compute_metrics(rows[handoff], n_boot=20, metrics=("consultation_after_relays", "strict_accuracy"))
    assert _metric(values, "consultation_after_relays", agent="creditor-rule").estimate == 1.0
    assert _metric(values, "consultation_after_relays", agent="last-speaker-wins").estimate == 0.0
    assert _metric(values, "strict_accuracy", agent="creditor-rule").estimate == 1.0


# ------------------------------------------------------------------ 7: labels cannot go stale
def _rules_labelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    run_dir = tmp_path / "run"
    ids = [_episode(cell).id for cell in ("PEER-DIRECT", "RELAY-TRUE", "BASE")]
    run_experiment(ExperimentConfig(env=STANDING_ENV_ID, agents=["creditor-rule"], episodes={"ids": ids}), run_dir)
    assert main(["label", str(run_dir), "--judge", "rules", "--json"]) == 0
    capsys.readouterr()
    return run_dir


def _age(path: Path, version: str, labeller: str | None = None) -> None:
    """Rewrite a labels file as another version of its labeller made it: one that saw no consultation."""
    lines = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record["labeller_version"] = version
        record["labeller"] = labeller or record["labeller"]
        for label in record["labels"]:
            label["consults_creditor"] = False
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")


def test_stale_offline_labels_are_made_again_and_never_read(tmp_path, capsys):
    run_dir = _rules_labelled(tmp_path, capsys)
    path = labels_path(run_dir, "rules")
    current = labeller_version("rules")[0]
    assert {r.labeller_version for r in read_label_records(path, StandingLabelRecord)} == {current}
    _age(path, "0ld")
    assert main(["report", str(run_dir), "--judge", "rules", "--json", "--n-boot", "20"]) == 0
    report = json.loads(capsys.readouterr().out)
    strict = next(m for m in report["metrics"] if m["metric"] == "strict_accuracy")
    assert strict["estimate"] == 1.0  # graded with the current rules, not the stored ones
    assert main(["label", str(run_dir), "--judge", "rules", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["runs_relabelled"] == 3
    latest = {r.run_key: r for r in read_label_records(path, StandingLabelRecord)}
    assert {r.labeller_version for r in latest.values()} == {current}


def test_stale_llm_labels_are_refused_with_the_command_that_refreshes_them(tmp_path, capsys):
    run_dir = _rules_labelled(tmp_path, capsys)
    judge = "llm:some-judge"
    stale = labels_path(run_dir, judge)
    shutil.copyfile(labels_path(run_dir, "rules"), stale)
    _age(stale, "", labeller=judge)
    assert main(["report", str(run_dir), "--judge", judge, "--json", "--n-boot", "20"]) == 2
    err = capsys.readouterr().err
    assert "made by another version of the judge" in err
    assert f"commitbench label {run_dir} --judge llm --judge-model some-judge --relabel-stale" in err
    assert main(["view", str(run_dir), "--judge", judge]) == 2
    assert "--relabel-stale" in capsys.readouterr().err
    # Records of the current version are read as they are.
    _age(stale, labeller_version(judge)[0], labeller=judge)
    assert main(["report", str(run_dir), "--judge", judge, "--json", "--n-boot", "20"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert next(m for m in report["metrics"] if m["metric"] == "strict_accuracy")["estimate"] < 1.0


# ------------------------------------------------------------------ 2: the paper profile
def test_the_profile_table_in_validity_md_is_the_one_the_code_defines():
    doc = (ROOT / "docs" / "validity.md").read_text()
    assert profile_table(STANDING_CHOICES) in doc
    for choice in STANDING_CHOICES:
        assert choice.paper != choice.commitbench
        settings = {"paper": standing_settings("paper"), "commitbench": standing_settings("commitbench")}
        assert getattr(settings["paper"], choice.option).value == choice.paper
        assert getattr(settings["commitbench"], choice.option).value == choice.commitbench


def test_the_paper_profile_compiles_the_papers_design():
    paper = load_episodes(settings="paper")
    spec = load_spec(DEFAULT_DATA_DIR)
    assert all(e.reply_rule.value == "paper" and e.acknowledgement == "👍" and not e.notify_by_trigger for e in paper)
    explicit = [e for e in paper if e.policy.value == "explicit"]
    assert all(e.system_prompt.endswith(spec.policies.explicit_paper.strip()) for e in explicit)
    for clause in ("cannot be done", "go ahead again"):  # the project's two added clauses
        assert clause in spec.policies.explicit and clause not in spec.policies.explicit_paper
    announcements = [e for e in paper if e.commitment_type == "post_announcement"]
    assert announcements and all(e.compared_args == ["channel"] for e in announcements)
    assert all("Version 4.2 is live" not in e.script[0].text + e.script[1].text for e in announcements)
    own = [e for e in load_episodes() if e.commitment_type == "post_announcement"]
    assert all("Version 4.2 is live" in e.script[0].text for e in own)


def test_an_option_that_contradicts_the_paper_profile_is_refused(tmp_path):
    with pytest.raises(ProfileError, match="creditor_replies: 'per_event' contradicts profile 'paper'"):
        standing_settings("paper", creditor_replies="per_event")
    config = tmp_path / "c.yaml"
    config.write_text("env: commitbench/Standing-v0\n"
                      "profile: paper\nagents: [creditor-rule]\nepisodes: {creditor_replies: per_event}\n")
    with pytest.raises(ConfigError, match="contradicts profile 'paper'"):
        load_config(config)
    config.write_text("env: commitbench/Standing-v0\n"
                      "profile: commitbench\nagents: [creditor-rule]\nepisodes: {profile: paper}\n")
    with pytest.raises(ConfigError, match="set the profile once"):
        load_config(config)
    assert main(["run", "standing", "--agent", "creditor-rule", "--profile", "paper", "--creditor-replies",
                 "per_event", "--out", str(tmp_path / "x")]) == 2


def test_the_paper_replication_config_validates_and_plans(capsys):
    config = load_config(ROOT / "configs" / "standing-paper.yaml")
    assert config.profile.value == "paper"
    assert main(["run", str(ROOT / "configs" / "standing-paper.yaml"), "--dry-run"]) == 0
    assert "cells" in capsys.readouterr().out


def test_both_profiles_play_and_the_report_and_viewer_name_the_profile(tmp_path, capsys):
    for profile in ("paper", "commitbench"):
        out = tmp_path / profile
        args = ["run", "standing", "--agent", "creditor-rule", "--agent", "last-speaker-wins", "--types",
                "order_supplies", "post_announcement", "--split", "test", "--profile", profile, "--out", str(out),
                "--no-progress", "--no-report"]
        assert main(args) == 0
        capsys.readouterr()
        assert main(["report", str(out), "--json", "--n-boot", "20"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["profile"] == profile
        strict = {(m["group"]["agent"], m["group"]["policy"]): m["estimate"] for m in report["metrics"]
                  if m["metric"] == "strict_accuracy"}
        assert strict["creditor-rule", "explicit"] == 1.0
        assert main(["report", str(out), "--json", "--n-boot", "20", "--leave-out-types", "post_announcement"]) == 0
        without = json.loads(capsys.readouterr().out)
        assert without["profile"] == f"{profile}; without post_announcement" and without["runs"] == report["runs"] // 2
        assert main(["view", str(out)]) == 0
        capsys.readouterr()
        site = "".join(p.read_text(errors="replace") for p in (out / "view").rglob("*") if p.is_file()
                       and p.suffix in (".js", ".json", ".html"))
        assert f'"label": "profile", "value": "{profile}"' in site.replace('":"', '": "').replace('","', '", "')
    assert main(["report", str(tmp_path / "paper"), "--leave-out-types", "water_plants"]) == 2
