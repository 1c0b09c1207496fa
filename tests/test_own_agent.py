"""Agents of the user's own (``--agent module:Class``): played through run, report and view like any player."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from commitbench.cli import main
from commitbench.config import ConfigError, load_config
from commitbench.traces import latest_traces

# Ten lines: an agent that calls the promised action at its first chance, then answers every message.
AGENT_SOURCE = '''
class Eager:
    def begin(self, observation, info):
        self.actions = [n for n in info["write_tools"] if n not in ("post_message", "send_dm")]

    async def act(self, observation, info):
        if self.actions:
            return {"tool": self.actions.pop(0), "arguments": {}}
        return {"reply": "Noted."}
'''


@pytest.fixture
def agent_package(tmp_path: Path) -> Iterator[Path]:
    package = tmp_path / "pkg" / "myagents"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "eager.py").write_text(AGENT_SOURCE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path / "pkg"))
    yield package
    sys.path.remove(str(tmp_path / "pkg"))
    for name in [m for m in sys.modules if m == "myagents" or m.startswith("myagents.")]:
        del sys.modules[name]


def test_a_ten_line_agent_plays_through_run_report_and_view(
    agent_package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["run", "standing", "--agent", "myagents.eager:Eager", "--cells", "BASE", "CRED-DIRECT", "--types",
            "deploy_service", "--gaps", "1", "--surfaces", "0", "--policies", "explicit", "--out", str(out),
            "--no-progress", "--no-report"]
    assert main(args) == 0
    traces = latest_traces(out)
    assert len(traces) == 2  # BASE and CRED-DIRECT (deploy_service is a type of the test split)
    assert {t.agent.name for t in traces} == {"myagents.eager:Eager"}
    assert {t.agent.kind for t in traces} == {"custom"}
    assert all(t.agent.settings["source_sha256"] for t in traces)
    assert all('"tool":"deploy"' in t.model_dump_json() for t in traces)  # it acted through env.step
    capsys.readouterr()

    assert main(["report", str(out), "--json", "--n-boot", "50"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "myagents.eager:Eager" in json.dumps(report)

    site = tmp_path / "site"
    assert main(["view", str(out), "--out", str(site), "--n-boot", "50"]) == 0
    pages = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*") if p.suffix in {".html", ".js", ".json"})
    assert "myagents.eager:Eager" in pages

    # Running it again resumes (nothing to play); editing the agent's source is another experiment: refused.
    assert main(args) == 0
    (agent_package / "eager.py").write_text(AGENT_SOURCE.replace("Noted.", "Noted!"), encoding="utf-8")
    del sys.modules["myagents.eager"]
    capsys.readouterr()
    assert main(args) != 0
    assert "myagents.eager:Eager" in capsys.readouterr().err


def test_a_config_names_an_agent_of_its_own_and_bad_ones_are_refused_clearly(
    agent_package: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("env: commitbench/Standing-v0\nagents: [myagents.eager:Eager, creditor-rule]\n", encoding="utf-8")
    assert load_config(path).agents == ["myagents.eager:Eager", "creditor-rule"]
    for agent, message in [("myagents.missing:Eager", "cannot import 'myagents.missing'"),
                           ("myagents.eager:Nope", "has no 'Nope'"),
                           ("json:dumps", "is not a class")]:
        path.write_text(f"env: commitbench/Standing-v0\nagents: ['{agent}']\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=message):
            load_config(path)


def test_the_documented_example_is_the_agent_played_here() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "agents.md").read_text(encoding="utf-8")
    block = doc.split("## A complete example", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block.strip() == AGENT_SOURCE.strip()
