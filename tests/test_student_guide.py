"""The README's guide to adding a commitment type and a cell, run command by command in a temporary
copy of the data directory: the numbers it quotes are the numbers the commands print."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, SpecError, load_spec

ROOT = Path(__file__).resolve().parents[1]
GUIDE_HEADING = "## Guide: adding a commitment type and a cell"


def _guide() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(GUIDE_HEADING)
    return text[start : text.index("\n## ", start + 1)]


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", _guide(), flags=re.DOTALL)


def _copy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    return data


def _run_block(block: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Run each line of a bash block; check each '# ok: ...' comment against what the line before printed."""
    printed: dict[str, str] = {}
    last = ""
    episode_id = ""
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("DATA="):
            assert line == "DATA=episodes/data/standing"
            continue
        if line.startswith("cp docs/examples/water_plants.yaml"):
            shutil.copy(ROOT / "docs" / "examples" / "water_plants.yaml", data / "types")
            continue
        if line.startswith("# ok:"):
            assert printed[last].strip() == line[2:], (last, printed[last])
            continue
        assert line.startswith("commitbench "), f"the guide runs only commitbench commands: {line!r}"
        command = line.replace("$DATA", str(data)).replace("runs/", f"{tmp_path}/runs/")
        command = command.replace("EPISODE_ID", episode_id)
        args = shlex.split(command)[1:]
        if args[:2] == ["episodes", "list"]:
            args.append("--json")
        if args[0] == "run":
            args += ["--no-progress", "--no-report"]
        assert main(args) == 0, line
        out = capsys.readouterr().out
        printed[line] = out
        last = line
        if args[:2] == ["episodes", "list"]:
            listing = json.loads(out)
            assert listing["count"] == 6  # one type, one cell, one gap: 2 policies x 3 surface wordings
            episode_id = listing["episodes"][0]["id"]
    return printed


@pytest.mark.slow
def test_the_guide_runs_as_written_and_its_numbers_are_what_the_commands_print(tmp_path, capsys):
    data = _copy(tmp_path)
    type_block, cell_block = _blocks("bash")
    _run_block(type_block, data, tmp_path, capsys)
    assert main(["report", str(tmp_path / "runs" / "plants"), "--json", "--n-boot", "20", "--no-figure"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 2 * 180  # two agents x the type's 180 episodes

    (yaml_block,) = _blocks("yaml")
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8") + yaml_block, encoding="utf-8")
    _run_block(cell_block, data, tmp_path, capsys)
    assert main(["report", str(tmp_path / "runs" / "relay-mgr"), "--json", "--n-boot", "20", "--no-figure"]) == 0
    strict = {(row["agent"], row["policy"]): row["cells"]["RELAY-MGR"]
              for row in json.loads(capsys.readouterr().out)["strict_by_cell"]}
    assert strict["creditor-rule", "explicit"] == 1.0 and strict["last-speaker-wins", "explicit"] == 0.0
    # The guide's counts: 12 episodes per type and cell; 96 per cell with the shipped types, 72 test.
    assert "1,728" in _guide() and "96 with the eight shipped types (72 of them test)" in _guide()
    shipped = load_spec(DEFAULT_DATA_DIR)
    assert 12 * len(shipped.types) == 96 and 12 * sum(t.split.value == "test" for t in shipped.types) == 72


def test_validating_one_type_file_inside_the_data_directory_works(tmp_path, capsys):
    data = _copy(tmp_path)
    shutil.copy(ROOT / "docs" / "examples" / "water_plants.yaml", data / "types")
    assert main(["episodes", "validate", str(data / "types" / "water_plants.yaml")]) == 0
    assert "9 commitment types" in capsys.readouterr().out
    assert main(["episodes", "validate", str(DEFAULT_DATA_DIR / "types" / "order_supplies.yaml")]) == 0
    assert "ok: 1440 episodes from 8 commitment types" in capsys.readouterr().out


def test_a_copied_type_that_still_talks_about_its_original_fails(tmp_path, capsys):
    data = _copy(tmp_path)
    source = (data / "types" / "order_supplies.yaml").read_text(encoding="utf-8")
    # Renamed, given its own words, but the texts still speak of keyboards.
    copied = source.replace("id: order_supplies", "id: water_plants").replace(
        "words: [keyboard, keyboards, ergonomic, budget, equipment, supplies]", "words: [ferns, rooftop]"
    )
    (data / "types" / "water_plants.yaml").write_text(copied, encoding="utf-8")
    assert main(["episodes", "validate", str(data / "types" / "water_plants.yaml"), "--json"]) == 1
    error = json.loads(capsys.readouterr().out)
    assert error["file"].endswith("water_plants.yaml") and error["field"] == "request[0]"
    assert "none of the type's own words" in error["reason"]
    # With a request that uses its own words, the leftover promise names another type's word.
    mended = copied.replace("order 8 ergonomic keyboards?", "water the rooftop ferns?")
    (data / "types" / "water_plants.yaml").write_text(
        mended.replace("words: [ferns, rooftop]", "words: [ferns, rooftop, keyboards]"), encoding="utf-8"
    )
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("water_plants.yaml") or err.value.path.endswith("order_supplies.yaml")


def test_a_type_whose_words_collide_with_the_filler_fails_naming_the_word(tmp_path):
    data = _copy(tmp_path)
    example = (ROOT / "docs" / "examples" / "water_plants.yaml").read_text(encoding="utf-8")
    (data / "types" / "water_plants.yaml").write_text(
        example.replace("words: [fern,", "words: [plants, fern,"), encoding="utf-8"
    )
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("water_plants.yaml") and err.value.field == "words"
    assert "'plants' also occurs in the shared filler" in err.value.reason


def test_another_types_distinctive_word_in_a_new_type_is_named(tmp_path):
    data = _copy(tmp_path)
    example = (ROOT / "docs" / "examples" / "water_plants.yaml").read_text(encoding="utf-8")
    leftover = example.replace(
        '"The building replaced the rooftop ferns with artificial ones this morning."',
        '"Facilities found spare ergonomic keyboards, so the rooftop ferns can go."',
    )
    (data / "types" / "water_plants.yaml").write_text(leftover, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("water_plants.yaml") and err.value.field == "cancel_implicit[2]"
    assert "distinctive word of type 'order_supplies'" in err.value.reason
