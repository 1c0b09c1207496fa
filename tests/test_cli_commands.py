"""The command line imports only the module of the command it is given, and the table of modules is complete."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

from commitbench.cli import COMMAND_MODULES, build_parser, modules_for


def _registered(module: str) -> tuple[str, ...]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub)
    return tuple(sub.choices)


def test_each_module_adds_exactly_the_commands_the_table_names() -> None:
    for module, names in COMMAND_MODULES.items():
        assert _registered(module) == names, module


def test_a_named_command_imports_its_module_only_and_help_imports_all() -> None:
    assert modules_for("report") == ["commitbench.commands.report_cmd"]
    assert modules_for("validate") == ["commitbench.commands.annotate_cmd"]
    assert modules_for(None) == list(COMMAND_MODULES)
    assert modules_for("no-such-command") == list(COMMAND_MODULES)
    every = {name for names in COMMAND_MODULES.values() for name in names}
    assert set(build_parser()._subparsers._group_actions[0].choices) == every  # type: ignore[union-attr]


def test_a_guard_command_starts_without_the_model_client() -> None:
    """``guard`` needs no model: its start must not import the openai client that ``serve-local`` needs."""
    code = ("import sys; from commitbench.cli import build_parser; build_parser(['guard', '--help']); "
            "print('openai' in sys.modules, 'commitbench.commands.serve_cmd' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_the_readers_of_a_run_start_without_the_model_client() -> None:
    """``report`` and ``view`` make no model call: neither their parsers nor the suites, the run reader and the
    labelling job they load import the openai SDK, which only a client that calls a model needs."""
    code = ("import sys; from commitbench.cli import build_parser; build_parser(['report', '--help']); "
            "build_parser(['view', '--help']); import commitbench.suites, commitbench.rundir.reader, "
            "commitbench.labeljob, commitbench.analysis.view.site; print('openai' in sys.modules); "
            "from commitbench.llm import ModelClient; print('openai' in sys.modules, ModelClient.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "ModelClient"]


def test_an_unknown_command_is_refused_with_the_full_list() -> None:
    result = subprocess.run([sys.executable, "-m", "commitbench.cli", "no-such-command"], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr and "report" in result.stderr and "gateway" in result.stderr
