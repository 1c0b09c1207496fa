"""The standing design: 1,440 deterministic episodes, strict spec validation with file and field."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.episodes.standing.compiler import compile_spec
from commitbench.episodes.standing.episode import ScriptAct
from commitbench.episodes.standing.loader import load_spec
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, SpecError


@pytest.fixture(scope="module")
def episodes():
    return compile_spec(load_spec())


def test_design_has_1440_episodes_and_1080_in_test(episodes):
    assert len(episodes) == 1440
    assert Counter(e.split.value for e in episodes) == {"test": 1080, "dev": 360}
    assert len({e.id for e in episodes}) == 1440
    assert Counter(e.cell for e in episodes) == {c: 96 for c in {e.cell for e in episodes}}
    assert len({e.cell for e in episodes}) == 15
    assert {e.gap for e in episodes} == {1, 20}
    assert {e.variant for e in episodes} == {0, 1, 2}


def test_ids_are_identical_across_compilations_and_processes(episodes):
    again = [e.id for e in compile_spec(load_spec())]
    assert again == [e.id for e in episodes]
    code = (
        "from commitbench.episodes.standing.compiler import compile_spec;"
        "from commitbench.episodes.standing.loader import load_spec;"
        "print(','.join(e.id for e in compile_spec(load_spec())))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123"}
    )
    assert out.stdout.strip().split(",") == again


def test_policies_share_the_same_chat(episodes):
    by_key: dict[tuple, list] = {}
    for e in episodes:
        by_key.setdefault((e.commitment_type, e.cell, e.gap, e.variant), []).append(e)
    for pair in by_key.values():
        explicit, silent = sorted(pair, key=lambda e: e.policy.value)
        assert explicit.script == silent.script
        assert "Commitment policy" in explicit.system_prompt
        assert "Commitment policy" not in silent.system_prompt


def test_gap_counts_filler_between_last_event_and_trigger(episodes):
    for e in episodes:
        # BASE has no event: its opening is padded with filler, which comes before the gap.
        last = e.event_steps[-1] if e.event_steps else 1
        between = [m for m in e.script if last < m.step < e.trigger_step]
        padding = e.trigger_step - e.gap - 2 if e.cell == "BASE" else 0
        assert len(between) == e.gap + padding, (e.cell, e.gap)
        assert all(m.act in (ScriptAct.FILLER, ScriptAct.LOOKUP) for m in between)


def test_filler_never_mentions_the_commitment(episodes):
    for e in episodes:
        words = {w.lower() for w in e.action_tool.name.split("_")} | {str(v).lower() for v in e.target_args.values()}
        for m in e.script:
            if m.act in (ScriptAct.FILLER, ScriptAct.LOOKUP, ScriptAct.CLOSING):
                assert not any(w in m.text.lower() for w in words if len(w) > 3), (m.text, words)


def _copy_data(tmp_path: Path) -> Path:
    target = tmp_path / "standing"
    shutil.copytree(DEFAULT_DATA_DIR, target)
    return target


def test_broken_type_file_names_file_and_field(tmp_path):
    data = _copy_data(tmp_path)
    path = data / "types" / "deploy_service.yaml"
    path.write_text(path.read_text().replace("split: test", "split: tset"))
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("deploy_service.yaml")
    assert err.value.field == "split"


def test_missing_variant_wording_is_reported(tmp_path):
    data = _copy_data(tmp_path)
    path = data / "types" / "book_room.yaml"
    text = path.read_text()
    text = text.replace('  - "Thursday\'s agenda is locked in now."\n', "")
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.field == "trigger"
    assert "at least 3" in err.value.reason


def test_unknown_template_variable_is_reported_at_compile_time(tmp_path):
    data = _copy_data(tmp_path)
    path = data / "types" / "book_room.yaml"
    path.write_text(path.read_text().replace("{{ subject_first }} told me", "{{ creditr }} told me"))
    with pytest.raises(SpecError) as err:
        compile_spec(load_spec(data))
    assert err.value.path.endswith("book_room.yaml")
    assert err.value.field == "relay[0]"
    assert "creditr" in err.value.reason


def test_cli_validate_exits_nonzero_with_one_clear_error(tmp_path, capsys):
    data = _copy_data(tmp_path)
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text().replace("paper_reply: go_ahead", "paper_reply: maybe"))
    assert main(["episodes", "validate", str(data)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "cells.yaml" in err[0] and "cells[REINSTATE-CRED].paper_reply" in err[0]


def test_cli_validate_a_single_new_type_file(tmp_path, capsys):
    new = tmp_path / "water_plants.yaml"
    src = (Path(__file__).parents[1] / "docs" / "examples" / "water_plants.yaml").read_text()
    new.write_text(src.replace("split: test", "split: dev"))
    assert main(["episodes", "validate", str(new)]) == 0
    assert "1620 episodes from 9 commitment types x 15 cells (dev 540, test 1080)" in capsys.readouterr().out
