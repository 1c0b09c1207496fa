"""The layer contract, read from the source: every import points down (or sideways where allowed).

Bottom to top (``docs/architecture.md`` draws it):

0. the shared vocabulary and the infrastructure that knows nothing of the suites;
1. episodes; 2. environments; 3. agents | oracles (independent of each other); 4. judges;
5. analysis; 6. orchestration (config, suites, runner, labelling jobs); 7. the test tools (the mock
server); 8. the command line and the verifiers environment modules (``commitbench_standing``,
``commitbench_followup``: entry points another program loads, like the command line).

Imports are read with :mod:`ast` from every module of the package, wherever they stand (module
level or inside a function), so a lazy import cannot slip past the contract. Within a layer, imports
between its entries may go either way but never round in a loop; no module imports another's private
names; no module of the package is longer than :data:`MAX_MODULE_LINES`.
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
    "commitbench.jsoncodec",
    "commitbench.digests",
    "commitbench.dataversion",
    "commitbench.llm",
    "commitbench.cache",
    "commitbench.ledger",
    "commitbench.processes",
    "commitbench.stopping",
    "commitbench.sourcelines",
    "commitbench.memory",
    "commitbench.linechunks",
    "commitbench.forkpool",
    "commitbench.readindex",
    "commitbench.aside",
    "commitbench.filethread",
    "commitbench.jointread",
    "commitbench.profiles",
    "commitbench.claimguard",
    "commitbench.yamlfile",
    "commitbench.textscan",
    "commitbench.bounds",
    "commitbench.calendar_words",
    "commitbench.textslots",
    "commitbench.httpread",
    "commitbench.sdkhttp",
    "commitbench.callerrors",
    "commitbench.secrets",
    "commitbench.identity",
    "commitbench.runcells",
    "commitbench.rundir",
    "commitbench.tracewriter",
    "commitbench.progress",
    "commitbench.plugins",
)
ORCHESTRATION = (
    "commitbench.config", "commitbench.suites", "commitbench.runner", "commitbench.cluster", "commitbench.merge",
    "commitbench.labeljob", "commitbench.gateway", "commitbench.planning", "commitbench.cellplayer",
    "commitbench.modelentry", "commitbench.inspecteval", "commitbench.rundir.reader", "commitbench.rl",
)
# The mock chat server of the tests and benchmarks: no part of a run, so nothing below the command line
# may import it.
TEST_TOOLS = ("commitbench.mock",)
COMMANDS = ("commitbench.cli", "commitbench.commands", "commitbench_standing", "commitbench_followup")
LAYERS: list[tuple[str, ...]] = [
    BOTTOM,
    ("commitbench.episodes",),
    ("commitbench.envs",),
    ("commitbench.agents", "commitbench.oracles"),
    ("commitbench.judges",),
    ("commitbench.analysis",),
    ORCHESTRATION,
    TEST_TOOLS,
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


# ------------------------------------------------------------------------ within a layer
MAX_MODULE_LINES = 700


def sideways_imports() -> dict[str, set[str]]:
    """Entry -> the other entries of its own layer it imports."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        source = _prefix(module)
        assert source is not None
        for _, target in _imports(path):
            entry = _prefix(target)
            if entry is not None and entry != source and _layer(entry) == _layer(source):
                graph.setdefault(source, set()).add(entry)
    return graph


def find_loop(graph: dict[str, set[str]]) -> list[str] | None:
    """A loop of the graph (its nodes, the first repeated at the end), or None when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, [*path, node])
                if found is not None:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [])
            if found is not None:
                return found
    return None


def test_the_loop_check_finds_a_loop() -> None:
    assert find_loop({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_loop({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_loop_within_a_layer() -> None:
    assert find_loop(sideways_imports()) is None


def private_imports(module: str, path: Path) -> list[str]:
    """The private names ``module`` imports from other modules of the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("commitbench"):
            found.extend(
                f"{module}:{node.lineno} imports {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != module
            )
    return found


def test_the_private_import_check_finds_one(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("from commitbench.runner import Runner, _hidden\n", encoding="utf-8")
    assert private_imports("commitbench.x", source) == ["commitbench.x:1 imports commitbench.runner._hidden"]


def test_no_module_imports_another_modules_private_names() -> None:
    problems = [p for module, path in MODULES.items() for p in private_imports(module, path)]
    assert problems == []


def test_no_module_is_longer_than_the_bound() -> None:
    lengths = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    long = {module: n for module, n in lengths.items() if n > MAX_MODULE_LINES}
    assert long == {}, f"split these by job (at most {MAX_MODULE_LINES} lines): {long}"
