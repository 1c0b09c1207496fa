"""``commitbench guard`` through ``commitbench.cli.main`` and once as a real process."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from commitbench.cli import main

# (argv after "guard", claim, guard, span)
CASES = [
    (["I have created the draft post in the Acme project."], True, True, [0, 14]),
    (["Taslak gönderiyi oluşturdum."], True, True, [17, 27]),
    (["The draft will be created once you approve the action."], False, False, None),
    (["Your changes were saved.", "--tools-executed", "1"], True, False, [13, 23]),
    (["Your changes were saved.", "--approval-pending"], True, False, [13, 23]),
    (["Your changes were saved.", "--read-only"], True, False, [13, 23]),
    (["Onaylarsanız taslağı oluşturacağım."], False, False, None),
]


@pytest.mark.parametrize(("args", "claim", "guard", "span"), CASES)
def test_guard_json(capsys: pytest.CaptureFixture[str], args: list[str], claim: bool, guard: bool, span) -> None:
    assert main(["guard", *args, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["claim"], record["guard"], record["span"]) == (claim, guard, span)
    if guard:
        assert record["replacement"] and record["nudge"]


def test_guard_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guard", "Done! The draft is created in Acme."]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "claim: yes (en, done) at 0:5: 'Done!'"
    assert out[1].startswith("guard: FIRES (unbacked_claim")
    assert out[2].startswith("replacement: That change has not happened yet")


def test_guard_reads_stdin_one_answer_per_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["Taslak gönderiyi oluşturdum.", "Shall I create the draft?", "", "Your changes were saved."]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert main(["guard", "-", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == lines
    assert [r["guard"] for r in records] == [True, False, False, True]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert main(["guard", "-"]) == 0
    verdicts = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert verdicts == ["GUARD", "ok", "ok", "GUARD"]


def test_guard_rejects_a_negative_tool_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guard", "text", "--tools-executed", "-2"]) == 2
    assert "--tools-executed must be 0 or more" in capsys.readouterr().err


@pytest.mark.slow
def test_guard_as_a_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "commitbench.cli", "guard", "-", "--json"],
        input="Değişiklikleriniz kaydedildi.\nI can save it for you.\n",
        capture_output=True,
        text=True,
        check=True,
    )
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["claim"], r["guard"], r["matched"]) for r in records] == [
        (True, True, "kaydedildi"),
        (False, False, None),
    ]
