"""One mechanism per job: names that once had twins are defined exactly once in the package.

Read from the source with :mod:`ast`, so a copy cannot hide behind an import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest
from test_layers import MODULES

ROOT = Path(__file__).resolve().parent.parent


def _definitions() -> dict[str, list[str]]:
    """Name -> the modules that define it at their top level (class, function or assignment)."""
    found: dict[str, list[str]] = defaultdict(list)
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names: list[str] = []
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                found[name].append(module)
    return found


DEFINITIONS = _definitions()

ONCE = [
    "latest_traces",
    "repair_torn_tail",
    "cohen_kappa",
    "HumanLabel",
    "make_checker",
    "Cell",
    "Ledger",
    "EventKind",
    "STANDING_ENV_ID",
    "FOLLOWUP_ENV_ID",
    "INFRASTRUCTURE_ERRORS",
    "ClaimGuard",
    "LabelRecord",
    "select_episodes",
    "label_run",
    "judge_name",
    # structured output (commitbench.llm.structured): one schema builder, one parse-and-retry loop
    "ResponseFormatStyle",
    "judge_style",
    "strict_json_schema",
    "response_format_for",
    "parse_model_json",
    "ParsedModelOutput",
    "ask_structured",
    "Attempts",
    "DEFAULT_MAX_ATTEMPTS",
    "GRAMMAR_MAX_STRING",
    "GRAMMAR_MAX_ITEMS",
    "digest",
    "SESSION_HEADER",
    "END_TURN_TOOL",
    # The request set's folder: the package names it once; the build (scripts/mine_followup.py) is given it.
    "FOLLOWUP_DATA_DIR",
    # One name, one meaning: the ledger's close outcome, an episode's expected outcome, the gateway's outcome
    # of one request; the trace's turn and the gateway's logged turn; the gateway's verdict and the viewer's
    # card of a judge's labels; a workspace's person and the viewer's card of one.
    "Outcome",
    "ExpectedOutcome",
    "RequestOutcome",
    "TurnRecord",
    "LoggedTurn",
    "Verdict",
    "VerdictView",
    "Person",
    "PersonView",
    # run directories that describe their cells, plug-ins, own agents on the harness's model
    "CellTable",
    "write_cell_table",
    "read_cell_table",
    "directory_cells",
    "run_suite",
    "config_of_manifest",
    "upgrade_run_dir",
    "AgentEntry",
    "find_agent",
    "HarnessModel",
    "call_record",
    "plays_on_models",
    "offline_records",
    "generic_view",
    "calls_unrecorded",
    "InspectKit",
    "SuiteDataset",
]


@pytest.mark.parametrize("name", ONCE)
def test_defined_exactly_once(name: str) -> None:
    assert len(DEFINITIONS[name]) == 1, f"{name} is defined in {DEFINITIONS[name]}"


def test_the_followup_run_loop_and_the_test_play_loop_are_gone() -> None:
    assert not (ROOT / "commitbench" / "followup_run.py").exists()
    assert not (ROOT / "commitbench" / "play.py").exists()
    assert "commitbench.followup_run" not in MODULES and "commitbench.play" not in MODULES


def test_environment_ids_are_written_once_in_the_code() -> None:
    for env_id in ("commitbench/Standing-v0", "commitbench/FollowUp-v0"):
        holders = [m for m, path in MODULES.items() if f'"{env_id}"' in path.read_text(encoding="utf-8")]
        assert holders == ["commitbench.envs"], (env_id, holders)


def test_one_claim_guard_wrapper_decides() -> None:
    # The guard engine decides; one wrapper applies it to episodes, one command to text you give it, and the
    # commitment gateway's checks to a deployment's replies.
    callers = sorted(
        m for m, path in MODULES.items()
        if "should_guard(" in path.read_text(encoding="utf-8") and not m.startswith("commitbench.claimguard")
    )
    assert callers == [
        "commitbench.commands.guard_cmd", "commitbench.gateway.checks", "commitbench.oracles.claim_guard"
    ]


# A report's output: one writer of RUN_DIR/report/, one Markdown renderer (TableView.markdown), one text of
# a number with its interval, one percentile interval. Both suites' reports are clients of these.
REPORT_OUTPUT = {
    "write_report_files": "commitbench.analysis.tables",
    "ReportTable": "commitbench.analysis.tables",
    "ReportFigure": "commitbench.analysis.tables",
    "TableView": "commitbench.analysis.tables",
    "interval_text": "commitbench.analysis.tables",
    "percent": "commitbench.analysis.tables",
    "percentile_interval": "commitbench.analysis.bootstrap",
    "interval_note": "commitbench.analysis.bootstrap",
}
# Names of the twins they replaced: defined nowhere, at any depth.
RETIRED = ("markdown_table", "compact", "_interval", "_pct", "_percent", "_points")


TREES = {module: ast.parse(path.read_text(encoding="utf-8")) for module, path in MODULES.items()}


def _functions(module: str) -> list[str]:
    """Every function a module defines, at any depth (methods and nested helpers included)."""
    return [n.name for n in ast.walk(TREES[module]) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _callers(name: str) -> list[str]:
    """The modules that call ``name`` (as ``name(...)`` or ``x.name(...)``)."""
    found = []
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called == name:
                    found.append(module)
                    break
    return sorted(found)


@pytest.mark.parametrize(("name", "module"), REPORT_OUTPUT.items())
def test_report_output_is_defined_once_in_a_shared_analysis_module(name: str, module: str) -> None:
    assert DEFINITIONS[name] == [module], f"{name} is defined in {DEFINITIONS[name]}"


def test_no_second_markdown_renderer_or_interval_format_appears() -> None:
    for module in MODULES:
        functions = _functions(module)
        assert not set(RETIRED) & set(functions), (module, set(RETIRED) & set(functions))
        if module != "commitbench.analysis.tables":
            assert not [f for f in functions if "markdown" in f], module
    # Only the shared renderer draws a pipe table's rule, and only the shared writer writes a CSV.
    rules = sorted(m for m, path in MODULES.items()
                   if m.startswith("commitbench.analysis") and '"---"' in path.read_text(encoding="utf-8"))
    assert rules == ["commitbench.analysis.tables"]
    assert [m for m in _callers("to_csv") if m.startswith("commitbench.analysis")] == ["commitbench.analysis.tables"]


def test_both_suites_reports_are_clients_of_the_shared_writer_and_formats() -> None:
    reports = ["commitbench.analysis.followup.report", "commitbench.analysis.standing.report"]
    # The papers' tables are written through it too.
    assert _callers("write_report_files") == sorted([*reports, "commitbench.analysis.paper_tables"])
    assert set(reports) | {"commitbench.analysis.comparisons"} <= set(_callers("interval_text"))
    assert set(reports) <= set(_callers("percent"))
    # The percentile interval: every bootstrap's, and the prevalence estimate's strata combined.
    assert _callers("percentile_interval") == [
        "commitbench.analysis.bootstrap", "commitbench.analysis.followup.prevalence"
    ]
    # np.percentile itself: there, and the 95th percentile of model time (a statistic, not an interval).
    assert _callers("percentile") == ["commitbench.analysis.bootstrap", "commitbench.analysis.cost"]


# The judges are left out: their prompt hashes and labeller versions are theirs to make.
HASHING_EXEMPT = ("commitbench.judges",)
# Rendezvous hashing of a session onto a replica: a placement weight (blake2b), no content key.
PLACEMENT = "commitbench.llm.replicas"


def _hashlib_uses(tree: ast.Module) -> set[str]:
    """The hashlib functions a module names: ``hashlib.sha256(...)`` or ``from hashlib import sha256``."""
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "hashlib":
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "hashlib":
            used.update(alias.name for alias in node.names)
    return used


def test_content_is_hashed_only_through_digest() -> None:
    found = {m: _hashlib_uses(tree) for m, tree in TREES.items() if not m.startswith(HASHING_EXEMPT)}
    users = {m: used for m, used in found.items() if used}
    assert set(users) == {"commitbench.digests", PLACEMENT}, users
    assert users["commitbench.digests"] == {"sha256"}
    assert users[PLACEMENT] == {"blake2b"}
    # Nothing outside the judges writes sha256 or md5 of its own, by any name.
    for module, used in users.items():
        if module != "commitbench.digests":
            assert not used & {"sha256", "md5", "sha1", "new"}, (module, used)
    assert {"commitbench.cache", "commitbench.identity", "commitbench.gateway.turn"} <= set(_callers("digest"))


def test_the_request_mining_command_is_no_part_of_the_package() -> None:
    # A build-time command over source data outside the project: it lives in scripts/, and nothing shipped
    # imports or names it.
    assert (ROOT / "scripts" / "mine_followup.py").is_file()
    assert not (ROOT / "episodes" / "followup" / "mine.py").exists()
    assert not [m for m in MODULES if m.endswith(".mine") or "mine_followup" in m]
    naming = [m for m, path in MODULES.items()
              if "mine_followup" in path.read_text(encoding="utf-8") and m != "commitbench.episodes.followup.requests"]
    assert naming == []
