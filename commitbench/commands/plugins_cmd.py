"""``commitbench plugins``: every suite, player and intervention installed, and the package it comes from.

    commitbench plugins            # a table per group
    commitbench plugins --json     # the same, as JSON

Suites, players and interventions are registered by entry points of installed packages (the groups
``commitbench.suites``, ``commitbench.agents`` and ``commitbench.interventions``; commitbench's own are
declared the same way). An entry point that cannot be loaded is listed with its error. Besides these, every
suite has its model-backed player ``chat``, and ``--agent module:Class`` plays a class of your own
(docs/agents.md). Exit codes: 0 all loaded, 1 some entry point is broken.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, Field

from commitbench.analysis.tables import TableView


class PluginRow(BaseModel):
    """One registered suite, player or intervention."""

    group: str = Field(description="suites, agents or interventions.")
    name: str = Field(description="The name it is used by (a config's env names a suite by its environment id).")
    detail: str = Field(description="Its environment id (a suite), the suites it plays (a player) or what it does.")
    package: str = Field(description="The installed package whose entry point registers it ('' for one registered "
                         "in-process).")
    version: str = Field(description="That package's version.")
    target: str = Field(description="The entry point's module:attribute.")


class BrokenRow(BaseModel):
    """An entry point that could not be loaded."""

    group: str = Field(description="The entry-point group.")
    name: str = Field(description="The entry point's name.")
    package: str = Field(description="The package that declares it.")
    version: str = Field(description="That package's version.")
    target: str = Field(description="module:attribute.")
    error: str = Field(description="Why it could not be loaded.")


class PluginsReport(BaseModel):
    """Everything registered, and every broken entry point."""

    plugins: list[PluginRow] = Field(description="Registered suites, players and interventions.")
    broken: list[BrokenRow] = Field(description="Entry points that could not be loaded.")

    def summary_lines(self) -> list[str]:
        return [f"{len(self.plugins)} registered, {len(self.broken)} broken entry points"]

    def views(self, detail: bool = False) -> list[TableView]:
        out = []
        for group in ("suites", "agents", "interventions"):
            rows = [[r.name, r.detail, f"{r.package} {r.version}".strip() or "(in-process)", r.target]
                    for r in self.plugins if r.group == group]
            out.append(TableView(title=group, columns=["name", "what", "package", "entry point"], rows=rows))
        if self.broken:
            rows = [[b.group, b.name, f"{b.package} {b.version}", b.target, b.error] for b in self.broken]
            out.append(TableView(title="broken entry points",
                                 columns=["group", "name", "package", "entry point", "error"], rows=rows))
        return out


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plugins",
        help="list the installed suites, players and interventions and the packages they come from",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.set_defaults(func=_handle)


def _row(group: str, name: str, detail: str, source: Any) -> PluginRow:
    return PluginRow(group=group, name=name, detail=detail, package=source.package if source else "",
                     version=source.version if source else "", target=source.target if source else "")


def plugins_report() -> PluginsReport:
    """What is registered now (loading every group)."""
    from commitbench.agents.registry import agent_entries, agent_source, broken_agent_plugins
    from commitbench.oracles.registry import broken_intervention_plugins, intervention_source, interventions
    from commitbench.suites import broken_suite_plugins, suite_source, suites

    rows = [_row("suites", s.name, s.env_id, suite_source(s.name)) for s in suites()]
    rows += [_row("agents", a.name, ", ".join(a.suites) or "every suite", agent_source(a.name))
             for a in sorted(agent_entries(), key=lambda a: a.name)]
    rows += [_row("interventions", name, f"{entry.summary} ({', '.join(sorted(entry.env_ids))})",
                  intervention_source(name)) for name, entry in sorted(interventions().items())]
    broken = [BrokenRow(group=b.plugin.group.value.rpartition(".")[2], name=b.plugin.name, package=b.plugin.package,
                        version=b.plugin.version, target=b.plugin.target, error=b.error)
              for b in [*broken_suite_plugins(), *broken_agent_plugins(), *broken_intervention_plugins()]]
    return PluginsReport(plugins=rows, broken=broken)


def _handle(args: argparse.Namespace) -> int:
    from commitbench.commands.common import print_json, render

    report = plugins_report()
    if args.json:
        print_json(report)
    else:
        render(report)
    return 1 if report.broken else 0
