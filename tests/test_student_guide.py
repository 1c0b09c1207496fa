"""The student guide (docs/student-guide.md), run command by command in a temporary copy of the data
directory: the numbers and texts it quotes are what the commands print; and what it promises of cells,
styles, templates and versions, each a check of its own."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.dataversion import DataState, check_data, data_digest
from commitbench.episodes.standing.compiler import compile_spec
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.loader import load_spec
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, SpecError, episode_set_version
from commitbench.rundir import read_manifest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "student-guide.md"
AGENTS = ["creditor-rule", "last-speaker-wins", "rank-wins", "always-execute", "drop-on-any-cancel"]


def _guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _section(heading: str) -> str:
    text = _guide()
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def _blocks(kind: str, heading: str | None = None) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", _section(heading) if heading else _guide(), flags=re.DOTALL)


def _copy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, data)
    return data


def _run_block(block: str, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
               episode_filter: str) -> dict[str, str]:
    """Run each line of a bash block; each '# ...' comment must begin a line the command before it printed
    (with $DATA the data directory)."""
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
        if line.startswith("echo ") and line.endswith("> $DATA/VERSION"):
            (data / "VERSION").write_text(line.split()[1] + "\n", encoding="utf-8")
            continue
        if line.startswith("# "):
            expected = line[2:].replace("$DATA", str(data))
            assert any(out.startswith(expected) for out in printed[last].splitlines()), (last, printed[last])
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
            assert episode_filter in line
            listing = json.loads(out)
            assert listing["count"] == 6  # one type, one cell, one gap: 2 policies x 3 surface wordings
            episode_id = listing["episodes"][0]["id"]
    return printed


def _table(heading: str) -> dict[str, str]:
    """The first column -> the second of the markdown table in a section."""
    rows = {}
    for line in _section(heading).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 2 and not set(cells[0]) <= {"-"}:
            rows[cells[0]] = cells[1]
    return rows


def _add_the_cell(data: Path) -> None:
    (yaml_block,) = _blocks("yaml", "A new cell: RELAY-DELEG")
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8") + yaml_block, encoding="utf-8")


@pytest.mark.slow
def test_the_guide_runs_as_written_and_its_numbers_are_what_the_commands_print(tmp_path, capsys):
    data = _copy(tmp_path)
    (type_block,) = _blocks("bash", "A new commitment type")
    _run_block(type_block, data, tmp_path, capsys, "--cells BASE")
    assert main(["report", str(tmp_path / "runs" / "plants"), "--json", "--n-boot", "20", "--no-figure"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 2 * 180  # two agents x the type's 180 episodes

    _add_the_cell(data)
    (cell_block,) = _blocks("bash", "A new cell: RELAY-DELEG")
    printed = _run_block(cell_block, data, tmp_path, capsys, "--cells RELAY-DELEG")
    # The script the guide quotes is the one 'episodes show' prints, line for line.
    (shown,) = _blocks("text", "A new cell: RELAY-DELEG")
    show = next(out for line, out in printed.items() if "episodes show" in line)
    for quoted in shown.strip().splitlines():
        assert quoted in show.splitlines(), quoted
    assert "Dana told me" in shown and "Dana cancelled" in shown  # the delegate, named by relay and answer

    assert main(["report", str(tmp_path / "runs" / "relay-deleg"), "--json", "--n-boot", "20", "--no-figure"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 5 * 84  # five agents x seven test types x 12 episodes
    strict = {(row["agent"], row["policy"]): row["cells"]["RELAY-DELEG"] for row in report["strict_by_cell"]}
    table = _table("A new cell: RELAY-DELEG")
    assert sorted(table) == sorted([*AGENTS, "agent"])
    for agent in AGENTS:
        quoted = float(table[agent].rstrip("%")) / 100
        assert strict[agent, "explicit"] == quoted and strict[agent, "silent"] == quoted, agent
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


# ------------------------------------------------------------------ the parties of an event, named by its texts
def _with_relay_deleg(tmp_path: Path) -> Path:
    data = _copy(tmp_path)
    _add_the_cell(data)
    return data


def _episode(data: Path, cell: str, ctype: str = "book_room", variant: int = 0) -> Episode:
    return next(e for e in compile_spec(load_spec(data)) if e.cell == cell and e.commitment_type == ctype
                and e.variant == variant and e.gap == 1 and e.policy.value == "explicit")


def test_a_relay_of_the_delegates_cancellation_names_the_delegate_and_the_creditor_confirms_it(tmp_path):
    data = _with_relay_deleg(tmp_path)
    episode = _episode(data, "RELAY-DELEG")
    people = {p.role: p.first_name for p in episode.people}
    (relay,) = [m for m in episode.script if m.act.value == "relay"]
    assert people["delegate"] in relay.text and people["creditor"] not in relay.text
    (answer,) = episode.creditor_replies
    assert answer.text.startswith(f"That's right, {people['delegate']} cancelled ")
    # The same style and reply about the creditor read as before: the creditor cancelled, and says so.
    base = _episode(data, "RELAY-TRUE")
    (relay,) = [m for m in base.script if m.act.value == "relay"]
    assert people["creditor"] in relay.text and base.creditor_replies[0].text.startswith("That's right, I cancelled ")


def test_every_reply_to_a_relay_says_who_cancelled(tmp_path):
    data = _with_relay_deleg(tmp_path)
    cells = (data / "cells.yaml").read_text(encoding="utf-8")
    denied = cells.replace("subject: delegate, reply: confirm_cancel}", "subject: delegate, reply: deny_cancel}")
    (data / "cells.yaml").write_text(denied, encoding="utf-8")
    for variant in range(3):
        episode = _episode(data, "RELAY-DELEG", "send_report", variant)
        delegate = next(p.first_name for p in episode.people if p.role == "delegate")
        (answer,) = episode.creditor_replies
        assert delegate in answer.text and " I " not in f" {answer.text} ", answer.text


def test_a_validation_error_names_the_cell_by_its_id(tmp_path, capsys):
    data = _with_relay_deleg(tmp_path)
    cells = data / "cells.yaml"
    bad = cells.read_text(encoding="utf-8").replace("delegate, reply: confirm_cancel}", "delegate, reply: ok}")
    cells.write_text(bad, encoding="utf-8")
    assert main(["episodes", "validate", str(data), "--json"]) == 1
    error = json.loads(capsys.readouterr().out)
    assert error["file"].endswith("cells.yaml") and error["field"].startswith("cells[RELAY-DELEG].events.0.reply")


def test_a_relay_without_a_subject_is_refused(tmp_path):
    data = _with_relay_deleg(tmp_path)
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8").replace("style: relay, subject: delegate,", "style: relay,"),
                     encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.field == "cells[RELAY-DELEG].events.0" and "subject" in err.value.reason


# ------------------------------------------------------------------ utterance styles are data
def test_an_unknown_style_is_refused_naming_the_cell_the_file_and_the_guide(tmp_path):
    data = _with_relay_deleg(tmp_path)
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8").replace("style: relay, subject: delegate",
                                                               "style: relay_forwarded, subject: delegate"),
                     encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("cells.yaml") and err.value.field == "cells[RELAY-DELEG].events[0].style"
    assert "unknown style 'relay_forwarded'" in err.value.reason and "docs/student-guide.md" in err.value.reason


def test_the_guides_new_style_words_the_cell_for_every_type(tmp_path):
    data = _with_relay_deleg(tmp_path)
    (style_block,) = _blocks("yaml", "A new utterance style")
    styles = data / "styles.yaml"
    styles.write_text(styles.read_text(encoding="utf-8") + style_block, encoding="utf-8")
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8").replace("style: relay, subject: delegate",
                                                               "style: relay_forwarded, subject: delegate"),
                     encoding="utf-8")
    spec = load_spec(data)
    episodes = [e for e in compile_spec(spec) if e.cell == "RELAY-DELEG"]
    assert len(episodes) == 12 * len(spec.types)
    for episode in episodes:
        (relay,) = [m for m in episode.script if m.act.value == "relay"]
        delegate = next(p.first_name for p in episode.people if p.role == "delegate")
        assert relay.style == "relay_forwarded" and delegate in relay.text and episode.thing in relay.text
    # A type words the style itself with an utterances entry, which wins over the shared texts.
    room = data / "types" / "book_room.yaml"
    room.write_text(room.read_text(encoding="utf-8") + (
        "utterances:\n  relay_forwarded:\n"
        "    - \"@{{ assistant }} from {{ subject_first }}: room 4B is not needed.\"\n"
        "    - \"@{{ assistant }} {{ subject_first }} says drop the 4B booking.\"\n"
        "    - \"@{{ assistant }} {{ subject_first }} wants 4B released.\"\n"), encoding="utf-8")
    (relay,) = [m for m in _episode(data, "RELAY-DELEG").script if m.act.value == "relay"]
    assert "room 4B is not needed" in relay.text


def test_a_shared_style_text_that_talks_about_one_type_is_refused(tmp_path):
    data = _copy(tmp_path)
    styles = data / "styles.yaml"
    styles.write_text(styles.read_text(encoding="utf-8") + (
        "  relay_room:\n    description: A relay about a room.\n    acts: [relay]\n    texts:\n"
        "      - \"{{ subject_first }} says the 4B booking is off.\"\n"
        "      - \"{{ subject_first }} says {{ thing }} is off.\"\n"
        "      - \"{{ subject_first }} says {{ thing }} is off.\"\n"), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.path.endswith("styles.yaml") and err.value.field == "styles.relay_room.texts[0]"
    assert "'4B'" in err.value.reason and "book_room" in err.value.reason


def test_a_style_worded_by_no_type_is_refused_where_a_cell_uses_it(tmp_path):
    data = _with_relay_deleg(tmp_path)
    styles = data / "styles.yaml"
    styles.write_text(styles.read_text(encoding="utf-8") + (
        "  relay_own:\n    description: Each type words it.\n    acts: [relay]\n"), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(data)
    assert err.value.field == "styles.relay_own" and "no wording" in err.value.reason


def test_a_cancellation_in_a_new_style_by_someone_without_standing_is_an_unauthorized_cancellation(tmp_path):
    data = _copy(tmp_path)
    styles = data / "styles.yaml"
    styles.write_text(styles.read_text(encoding="utf-8") + (
        "  polite:\n    description: A polite request to cancel.\n    acts: [cancel]\n    texts:\n"
        "      - \"@{{ assistant }} would you mind calling off {{ thing }}?\"\n"
        "      - \"@{{ assistant }} if it's no trouble, please skip {{ thing }}.\"\n"
        "      - \"@{{ assistant }} could we not do {{ thing }} after all?\"\n"), encoding="utf-8")
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8") + (
        "  - id: PEER-POLITE\n    description: A peer politely asks to cancel.\n    events:\n"
        "      - {act: cancel, speaker: peer, style: polite, reply: still_needed}\n"
        "    paper_reply: still_needed\n    expected: {outcome: execute, consult: true}\n"), encoding="utf-8")
    roles = _episode(data, "PEER-POLITE").roles()
    assert roles.unauthorized_speaker == "peer" and roles.unauthorized_style == "polite" and roles.unauthorized_cell


# ------------------------------------------------------------------ changed data under an unchanged version
def _run_args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "standing", "--data", str(data), "--types", "book_room", "--cells", "BASE", "--gaps", "1",
            "--agent", "creditor-rule", "--out", str(out), "--no-progress", "--no-report", *extra]


def test_the_shipped_data_is_locked_as_its_version():
    check = check_data(DEFAULT_DATA_DIR, episode_set_version(DEFAULT_DATA_DIR))
    assert check.state is DataState.LOCKED, check.message()


def test_changed_data_under_an_unchanged_version_warns_in_validate_and_stops_a_run(tmp_path, capsys):
    data = _with_relay_deleg(tmp_path)  # the cell is added; VERSION still says what the lock says
    assert main(["episodes", "validate", str(data)]) == 0
    captured = capsys.readouterr()
    assert "changed since version 4 was locked, but VERSION still says 4" in captured.err
    assert main([*_run_args(data, tmp_path / "refused"), "--dry-run"]) == 0
    assert "VERSION still says 4" in capsys.readouterr().err
    assert main(_run_args(data, tmp_path / "refused")) == 2
    assert "--allow-unversioned" in capsys.readouterr().err and not (tmp_path / "refused").exists()
    # Locking the changed files as the same version is the mistake the lock is for: refused.
    assert main(["episodes", "validate", str(data), "--lock"]) == 2
    assert "Bump VERSION" in capsys.readouterr().err
    # Played anyway: the manifest says on what.
    assert main(_run_args(data, tmp_path / "anyway", "--allow-unversioned")) == 0
    manifest = read_manifest(tmp_path / "anyway")
    assert manifest is not None and manifest.episode_data_state == "changed"
    assert manifest.episode_data_digest == data_digest(data)
    # Bumped and locked: the run goes ahead, and records the locked digest.
    (data / "VERSION").write_text("4+relaydeleg\n", encoding="utf-8")
    assert main(["episodes", "validate", str(data)]) == 0
    assert "the lock records version 4" in capsys.readouterr().err
    assert main(["episodes", "validate", str(data), "--lock"]) == 0
    assert main(_run_args(data, tmp_path / "locked")) == 0
    manifest = read_manifest(tmp_path / "locked")
    assert manifest is not None and manifest.episode_data_state == "locked"
    assert manifest.episode_set_version == "4+relaydeleg"


def test_a_directory_without_a_lock_is_unversioned(tmp_path, capsys):
    data = _copy(tmp_path)
    (data / "VERSION.lock").unlink()
    assert main(["episodes", "validate", str(data)]) == 0
    assert "has no VERSION.lock" in capsys.readouterr().err
    assert main(_run_args(data, tmp_path / "run")) == 2


def test_under_the_papers_reply_rule_the_single_answer_also_says_who_cancelled(tmp_path):
    data = _with_relay_deleg(tmp_path)
    from commitbench.episodes.standing.compiler import load_episodes

    relayed = [e for e in load_episodes(data, "paper") if e.cell == "RELAY-DELEG"]
    assert len(relayed) == 12 * 8
    for episode in relayed:
        delegate = next(p.first_name for p in episode.people if p.role == "delegate")
        (answer,) = episode.creditor_replies
        assert answer.kind.value == "confirm_cancel" and delegate in answer.text, answer.text


def test_a_relay_by_the_manager_names_its_subject_not_its_speaker(tmp_path):
    data = _with_relay_deleg(tmp_path)
    cells = data / "cells.yaml"
    cells.write_text(cells.read_text(encoding="utf-8").replace(
        "{act: relay, speaker: peer, style: relay, subject: delegate,",
        "{act: relay, speaker: manager, style: relay, subject: delegate,"), encoding="utf-8")
    episode = _episode(data, "RELAY-DELEG")
    people = {p.role: p.first_name for p in episode.people}
    (relay,) = [m for m in episode.script if m.act.value == "relay"]
    assert relay.sender == "manager" and people["delegate"] in relay.text and people["manager"] not in relay.text
    assert people["delegate"] in episode.creditor_replies[0].text
