"""The layer contract, read from the source: every import points down (or sideways where allowed).

Bottom to top (``docs/architecture.md`` draws it):

0. the shared vocabulary and the infrastructure that knows nothing of the suites;
1. episodes; 2. environments; 3. agents | oracles (independent of each other); 4. judges;
5. analysis; 6. orchestration (config, suites, runner, labelling jobs); 7. the command line.

Imports are read with :mod:`ast` from every module of the package, wherever they stand (module
level or inside a function), so a lazy import cannot slip past the contract.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BOTTOM = (
    "commitbench",
    "commitbench.protocol",
    "commitbench.traces",
    "commitbench.tools",
    "commitbench.extras",
    "commitbench.jsonl",
    "commitbench.llm",
    "commitbench.cache",
    "commitbench.ledger",
    "commitbench.mockserver",
    "commitbench.processes",
    "commitbench.profiles",
    "commitbench.claimguard",
    "commitbench.yamlfile",
    "commitbench.textscan",
    "commitbench.bounds",
    "commitbench.httpread",
    "commitbench.callerrors",
    "commitbench.secrets",
    "commitbench.identity",
    "commitbench.runcells",
    "commitbench.rundir",
    "commitbench.tracewriter",
    "commitbench.progress",
)
ORCHESTRATION = (
    "commitbench.config", "commitbench.suites", "commitbench.runner", "commitbench.cluster", "commitbench.merge",
    "commitbench.labeljob", "commitbench.gateway", "commitbench.planning", "commitbench.cellplayer",
)
COMMANDS = ("commitbench.cli", "commitbench.commands")
LAYERS: list[tuple[str, ...]] = [
    BOTTOM,
    ("commitbench.episodes",),
    ("commitbench.envs",),
    ("commitbench.agents", "commitbench.oracles"),
    ("commitbench.judges",),
    ("commitbench.analysis",),
    ORCHESTRATION,
    COMMANDS,
]
INDEPENDENT = {("commitbench.agents", "commitbench.oracles"), ("commitbench.oracles", "commitbench.agents")}


def _prefix(module: str) -> str | None:
    """The layer entry a module belongs to (the longest matching prefix)."""
    best = None
    for layer in LAYERS:
        for entry in layer:
            # The package itself holds only its version: it matches exactly, never as a prefix.
            inside = module == entry or (entry != "commitbench" and module.startswith(entry + "."))
            if inside and (best is None or len(entry) > len(best)):
                best = entry
    return best


def _layer(entry: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if entry in layer)


def _modules() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found: dict[str, Path] = {}
    for package, folder in config["package-dir"].items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "commitbench" and parts and parts[0] in {"envs", "episodes", "agents", "oracles",
                                                                    "judges", "analysis"}:
                continue  # mapped from the root folders, not from commitbench/
            found[name] = path
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in out if name == "commitbench" or name.startswith("commitbench.")]


MODULES = _modules()


def test_every_module_belongs_to_a_layer() -> None:
    assert len(MODULES) > 100
    orphans = sorted(name for name in MODULES if _prefix(name) is None)
    assert orphans == []


def violations(module: str, imports: list[tuple[int, str]]) -> list[str]:
    """The imports of ``module`` that point up the layers or across independent siblings."""
    source = _prefix(module)
    assert source is not None, f"{module} belongs to no layer"
    problems = []
    for line, target in imports:
        entry = _prefix(target)
        if entry is None or entry == source:
            continue
        if (source, entry) in INDEPENDENT or _layer(entry) > _layer(source):
            problems.append(f"{module}:{line} imports {target} ({entry} is not below {source})")
    return problems


def test_the_check_catches_an_upward_and_a_sideways_import() -> None:
    assert violations("commitbench.envs.standing.env", [(3, "commitbench.judges.standing.signals")])
    assert violations("commitbench.agents.chat", [(4, "commitbench.oracles.base")])
    assert violations("commitbench.traces", [(5, "commitbench.runner")])
    assert not violations("commitbench.runner", [(6, "commitbench.traces"), (7, "commitbench.suites")])
    assert _prefix("commitbench.something_new") is None  # a new core module must be placed in a layer


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str) -> None:
    assert violations(module, _imports(MODULES[module])) == []
