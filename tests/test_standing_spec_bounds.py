"""Episode files are data, read with bounds: plain YAML only, templates that cannot compute, tools that can run.

A type file is written by a person (or a model) and compiled into 1,440+ episodes. Whatever it holds, the
result is a clear error that names the file passed in, the field and the reason, quickly: never a
traceback, a hang or a 5 GB allocation.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mine_followup import load_curation, template_rows

from commitbench.cli import main
from commitbench.config import ConfigError, load_config
from commitbench.envs.standing.tools import workspace_tool_names
from commitbench.episodes.followup.doability import DoabilityFileError, load_doability_file
from commitbench.episodes.followup.setups import SetupFileError, load_setups_file
from commitbench.episodes.standing.compiler import compile_spec
from commitbench.episodes.standing.loader import load_spec, load_type
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, RESERVED_TOOL_NAMES, SpecError
from commitbench.yamlfile import YamlError

GENEROUS_SECONDS = 5.0
BOOK_ROOM = DEFAULT_DATA_DIR / "types" / "book_room.yaml"


def _copy_data(tmp_path: Path) -> Path:
    target = tmp_path / "standing"
    shutil.copytree(DEFAULT_DATA_DIR, target)
    return target


def _edited_type(tmp_path: Path, old: str, new: str, name: str = "book_hall.yaml") -> Path:
    """The room-booking type as a new type (its own id), with one edit."""
    text = BOOK_ROOM.read_text(encoding="utf-8").replace("id: book_room", "id: book_hall", 1)
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _compile_with(path: Path) -> None:
    """What ``commitbench episodes validate FILE`` does with one extra type file, in a copy of the data
    without the room-booking type the file was made from (whose distinctive words it still uses)."""
    data = _copy_data(path.parent / "without-book-room")
    (data / "types" / "book_room.yaml").unlink()
    spec = load_spec(data, extra_types=[path])
    compile_spec(spec)


# ------------------------------------------------------------------------------------------- YAML
ALIAS_BOMB = """\
  target_args:
    room: &a0 [x, x, x, x, x, x, x, x, x, x]
    day: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]
    slot: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]
"""


def test_an_alias_bomb_is_refused_before_anything_is_expanded(tmp_path: Path) -> None:
    path = _edited_type(tmp_path, '  target_args: {room: 4B, day: Thursday, slot: "10:00-12:00"}\n', ALIAS_BOMB)
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        _compile_with(path)
    assert time.perf_counter() - started < GENEROUS_SECONDS
    assert err.value.path == str(path) and "line 14" in err.value.reason and "anchor" in err.value.reason


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = _edited_type(tmp_path, "split: dev\n", "split: dev\nsplit: test\n")
    with pytest.raises(SpecError) as err:
        load_type(path)
    assert err.value.path == str(path) and "duplicate key 'split'" in err.value.reason and "line 3" in err.value.reason


def test_a_type_file_that_is_not_utf8_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BOOK_ROOM.read_text(encoding="utf-8").replace("Book a", "R\u00e9server a").encode("latin-1"))
    with pytest.raises(SpecError) as err:
        load_type(path)
    assert err.value.path == str(path) and "UTF-8" in err.value.reason and "line 8" in err.value.reason
    assert main(["episodes", "validate", str(path)]) == 1
    assert str(path) in capsys.readouterr().err


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("id: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_type(path)
    assert "nested" in err.value.reason


BAD_YAML = {
    "alias": "a: &x 1\nb: *x\n",
    "duplicate key": "a: 1\na: 2\n",
    "not UTF-8": b"a: caf\xe9\n",
    "a 5,000-digit integer": "a: 1\nb: " + "9" * 5000 + "\n",
    "a NUL byte": "a: 1\nb: x\x00y\n",
    "a date out of range": "a: 2024-13-45\n",
}


def _write(tmp_path: Path, content: str | bytes, name: str) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


READERS: dict[str, tuple[Callable[[Path], Any], type[Exception]]] = {
    "experiment config": (load_config, ConfigError),
    "standing type file": (load_type, SpecError),
    "follow-up setups": (load_setups_file, SetupFileError),
    "follow-up doability": (load_doability_file, DoabilityFileError),
    "curation": (load_curation, YamlError),
    "request templates": (lambda path: template_rows(path, 0), YamlError),
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("problem", list(BAD_YAML))
def test_every_yaml_reader_refuses_aliases_duplicates_and_bad_bytes(tmp_path: Path, reader: str, problem: str) -> None:
    read, error = READERS[reader]
    path = _write(tmp_path, BAD_YAML[problem], "input.yaml")
    with pytest.raises(error) as err:
        read(path)
    assert str(path) in str(err.value) and "line" in str(err.value), str(err.value)


# -------------------------------------------------------------------------------------- templates
@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("{{ 9**(9**9) }}", "Pow"),
        ("{{ 1/0 }}", "Div"),
        ("{{ 'ab' * 100000000 }}", "Mul"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "Call"),
        ("{{ thing.__class__ }}", "__class__"),
        ("{% set x = 1 %}{{ x }}", "Assign"),
    ],
)
def test_templates_that_compute_are_refused_quickly(tmp_path: Path, template: str, reason: str) -> None:
    path = _edited_type(tmp_path, 'promise: "Will do.', f'promise: "{template} Will do.')
    started = time.perf_counter()
    with pytest.raises(SpecError) as err:
        _compile_with(path)
    assert time.perf_counter() - started < GENEROUS_SECONDS
    assert err.value.path == str(path) and err.value.field == "promise" and reason in err.value.reason, err.value


@pytest.mark.parametrize("name", ["lipsum", "range", "dict", "cycler", "joiner", "namespace", "self", "loop"])
def test_names_that_are_no_template_variable_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Jinja's globals and ``self`` render as objects with a memory address: every process would compile
    other texts, hence other episode ids, and a run on them could never resume."""
    path = _edited_type(tmp_path, 'promise: "Will do.', f'promise: "{{{{ {name} }}}} Will do.')
    with pytest.raises(SpecError) as err:
        _compile_with(path)
    assert err.value.path == str(path) and err.value.field == "promise"
    assert f"uses {name!r}, which is not one of its variables" in err.value.reason
    assert "creditor_first" in err.value.reason
    example = tmp_path / "water_plants.yaml"  # a new type, validated with the shipped data
    text = (Path(__file__).resolve().parent.parent / "docs" / "examples" / "water_plants.yaml").read_text("utf-8")
    example.write_text(text.replace('promise: "Sure.', f'promise: "{{{{ {name} }}}} Sure.', 1), encoding="utf-8")
    assert main(["episodes", "validate", str(example)]) == 1
    assert f"{example}: promise: the template uses {name!r}" in capsys.readouterr().err


def test_a_loop_variable_is_a_variable_inside_its_loop_only() -> None:
    from commitbench.episodes.standing.compiler import template_problem

    names = frozenset({"people"})
    assert template_problem("{% for p in people %}{{ p.name }} {{ loop.index }}{% endfor %}", names) is None
    assert template_problem("{% for a, b in people %}{{ a }}{{ b }}{% endfor %}", names) is None
    problem = template_problem("{% for p in people %}{% endfor %}{{ p }}", names)
    assert problem is not None and "'p'" in problem


def test_a_template_error_names_the_file_that_was_passed_in(tmp_path: Path) -> None:
    path = _edited_type(tmp_path, "split: dev", "split: dev", name="my_new_type.yaml")
    path.write_text(path.read_text().replace("{{ subject_first }} told me", "{{ creditr }} told me"))
    with pytest.raises(SpecError) as err:
        _compile_with(path)
    assert err.value.path == str(path) and err.value.field == "relay[0]"


def test_long_output_is_refused(tmp_path: Path) -> None:
    data = _copy_data(tmp_path)
    world = data / "world.yaml"
    world.write_text(world.read_text().replace("team: ", "team: " + "x" * 30_000, 1))
    with pytest.raises(SpecError) as err:
        compile_spec(load_spec(data))
    assert "characters" in err.value.reason


# ------------------------------------------------------------------------------------------ tools
def test_reserved_tool_names_are_the_workspace_tools() -> None:
    assert set(RESERVED_TOOL_NAMES) == set(workspace_tool_names())


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  name: book_room\n", "  name: lookup\n", "action_tool.name"),
        ("  name: book_room\n", "  name: end_turn\n", "action_tool.name"),
        ("  name: check_room\n", "  name: send_dm\n", "check_tool.name"),
        ("  name: check_room\n", "  name: book_room\n", "check_tool"),
    ],
)
def test_tool_names_that_clash_are_refused(tmp_path: Path, old: str, new: str, field: str) -> None:
    path = _edited_type(tmp_path, old, new)
    with pytest.raises(SpecError) as err:
        load_type(path)
    assert err.value.field == field and "name" in err.value.reason


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('target_args: {room: 4B, day: Thursday, slot: "10:00-12:00"}', "target_args: {room: 4, day: Thursday, "
         'slot: "10:00-12:00"}', "action_tool.target_args"),
        ('target_args: {room: 4B, day: Thursday, slot: "10:00-12:00"}', "target_args: {room: [4B], day: Thursday, "
         'slot: "10:00-12:00"}', "action_tool.target_args"),
        ("    room: {type: string, description: \"Room name, for example 4B.\"}",
         "    room: {type: integer, description: \"Room number.\"}", "action_tool.target_args"),
    ],
)
def test_target_args_must_fit_the_parameters(tmp_path: Path, old: str, new: str, field: str) -> None:
    path = _edited_type(tmp_path, old, new)
    with pytest.raises(SpecError) as err:
        load_type(path)
    assert err.value.field == field and err.value.reason.startswith("Value error, room: the parameter takes"), err.value
