"""A run directory's cell table: every cell it holds, written when the run is planned.

``RUN/cells.jsonl`` makes a run directory self-describing: ``label``, ``report``, ``view``, ``merge``
and ``export`` read which trace lines are traces of the run from it, and never import the players or
expand the config again (a run of an agent whose package is gone reads as well as any). Only ``run``
expands a config; it writes the table before it plays a cell, atomically, with every cell of the
experiment (of every shard) and the cells of the configs ``--force`` added before (``current`` false).

Format: a JSON header line, then one JSON array per cell::

    {"format": "commitbench.cells", "version": 1, "groups": [{"player": ..., "kind": ..., "identity": {...},
     "arm": ..., "interventions": [...], "env_id": ..., "profile": ..., "current": true}, ...]}
    ["<run key>", <group index>, "<episode id>", <sample>]

A group is one player under one intervention arm; the run keys are stored as the planner made them, so
a later version of commitbench that derives keys another way still reads the directory. A shard's
directory (``run --shard I/N``) holds the table of the whole experiment, with ``"shard": [I, N]`` in its
header: its manifest counts its own shard's cells, and ``commitbench merge`` joins the tables. A table
that does not match its manifest (its current cells, of its shard, hash to another ``cells_hash``) is
refused.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field, ValidationError

from commitbench import identity
from commitbench.jsonl import JsonlError, iter_lines, write_atomic
from commitbench.runcells import CellFacts

__all__ = ["CELLS_FILE", "CellGroup", "CellTable", "CellTableError", "read_cell_table", "write_cell_table"]

CELLS_FILE = "cells.jsonl"
FORMAT = "commitbench.cells"
VERSION = 1


class CellTableError(ValueError):
    """A cell table that cannot be read, or does not match its run directory's manifest."""


class CellGroup(BaseModel):
    """One player under one intervention arm: what every cell of the group says about itself."""

    player: str = Field(description="The player's name (reference agent, chat:<model>, module:Class, ...).")
    kind: str = Field(description="reference, chat or custom.")
    identity: dict[str, Any] = Field(description="The player's identity as traces record it (it enters the run key).")
    arm: str = Field(description="The intervention arm's label.")
    interventions: list[str] = Field(description="The arm's interventions, innermost first, as traces record them.")
    env_id: str = Field(description="The environment id.")
    profile: str = Field(description="The episode profile of the config (commitbench or paper).")
    current: bool = Field(
        default=True, description="A cell of the directory's config (false: of a config --force replaced).")


class _Header(BaseModel):
    format: str
    version: int
    groups: list[CellGroup]
    shard: tuple[int, int] | None = None


@dataclass(frozen=True)
class CellTable:
    """The cells of a run directory (see the module doc)."""

    groups: tuple[CellGroup, ...]
    rows: tuple[tuple[str, int, str, int], ...]  # run key, group index, episode id, sample
    shard: tuple[int, int] | None = None  # the shard a directory plays (its manifest counts that shard's cells)

    def facts(self) -> CellFactsIndex:
        """run key -> what a trace of that cell must say about itself (:mod:`commitbench.runcells`), each cell's
        facts made when asked for (a run of 100,000 cells holds an index of its rows, not 100,000 records)."""
        return CellFactsIndex(self)

    def current_keys(self) -> list[str]:
        """The run keys of the directory's config (without those of configs --force replaced), of its shard."""
        return [key for key, g, _, _ in self.rows if self.groups[g].current
                and (self.shard is None or identity.in_shard(key, self.shard))]

    def of_shard(self, shard: tuple[int, int] | None) -> CellTable:
        """The same cells, for the directory of one shard (None: of the whole experiment)."""
        return CellTable(self.groups, self.rows, shard)

    def players(self) -> list[str]:
        """The players of the current config, in order."""
        return list(dict.fromkeys(g.player for g in self.groups if g.current))

    def superseding(self, earlier: CellTable) -> CellTable:
        """This table with the cells of ``earlier`` it lacks, those marked as of an earlier config."""
        groups = list(self.groups)
        index: dict[str, int] = {}
        for position, group in enumerate(groups):
            index[group.model_dump_json()] = position
        rows = list(self.rows)
        have = {key for key, _, _, _ in rows}
        for key, g, episode, sample in earlier.rows:
            if key in have:
                continue
            old = earlier.groups[g].model_copy(update={"current": False})
            signature = old.model_dump_json()
            if signature not in index:
                index[signature] = len(groups)
                groups.append(old)
            rows.append((key, index[signature], episode, sample))
            have.add(key)
        return CellTable(tuple(groups), tuple(rows), self.shard)

    def union(self, other: CellTable) -> CellTable:
        """Every cell of both (the first table's groups win a run key both hold)."""
        groups = list(self.groups)
        index = {g.model_dump_json(): i for i, g in enumerate(groups)}
        rows = list(self.rows)
        have = {key for key, _, _, _ in rows}
        for key, g, episode, sample in other.rows:
            if key in have:
                continue
            signature = other.groups[g].model_dump_json()
            if signature not in index:
                index[signature] = len(groups)
                groups.append(other.groups[g])
            rows.append((key, index[signature], episode, sample))
            have.add(key)
        return CellTable(tuple(groups), tuple(rows), self.shard)

    @classmethod
    def build(cls, cells: Iterable[tuple[str, CellGroup, str, int]]) -> CellTable:
        """A table of (run key, group, episode id, sample) rows; equal groups are stored once."""
        groups: list[CellGroup] = []
        index: dict[int, int] = {}  # id() of a group object -> position (the planner shares one per player x arm)
        rows: list[tuple[str, int, str, int]] = []
        for key, group, episode, sample in cells:
            position = index.get(id(group))
            if position is None:
                position = index[id(group)] = len(groups)
                groups.append(group)
            rows.append((key, position, episode, sample))
        return cls(tuple(groups), tuple(rows))


class CellFactsIndex(Mapping[str, CellFacts]):
    """A cell table's facts by run key (:meth:`CellTable.facts`): a row index per key, the facts made on lookup."""

    def __init__(self, table: CellTable) -> None:
        self._rows = table.rows
        self._made = [(g.env_id, tuple(g.interventions), g.identity) for g in table.groups]
        self._index = {row[0]: position for position, row in enumerate(table.rows)}

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __getitem__(self, key: str) -> CellFacts:
        _, group, episode, sample = self._rows[self._index[key]]
        env_id, interventions, player = self._made[group]
        return CellFacts(env_id, episode, sample, interventions, player)


def write_cell_table(run_dir: Path, table: CellTable) -> None:
    """Write a directory's cell table atomically (a reader sees the old table or the new one)."""
    header: dict[str, Any] = {"format": FORMAT, "version": VERSION,
                              "groups": [g.model_dump(mode="json") for g in table.groups]}
    if table.shard is not None:
        header["shard"] = list(table.shard)
    lines = [orjson.dumps(header).decode()]
    lines.extend(orjson.dumps(list(row)).decode() for row in table.rows)
    write_atomic(Path(run_dir) / CELLS_FILE, "\n".join(lines) + "\n")


def read_cell_table(run_dir: Path, cells_hash: str | None = None) -> CellTable | None:
    """A directory's cell table (None: it has none, a directory written before tables were); with
    ``cells_hash``, its current cells must hash to it (the manifest's). :class:`CellTableError` names the
    file and line of anything else."""
    path = Path(run_dir) / CELLS_FILE
    if not path.exists():
        return None
    groups: Sequence[CellGroup] = ()
    shard: tuple[int, int] | None = None
    rows: list[tuple[str, int, str, int]] = []
    try:
        for number, line in iter_lines(path):
            if not line.endswith("\n"):
                raise CellTableError(f"{path}:{number}: the last line is cut short (the table was not written whole)")
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise CellTableError(f"{path}:{number}: not JSON ({exc})") from None
            if number == 1:
                header = _header(path, value)
                groups, shard = header.groups, header.shard
                continue
            rows.append(_row(path, number, value, len(groups)))
    except JsonlError as exc:
        raise CellTableError(str(exc)) from None
    if not groups and not rows:
        raise CellTableError(f"{path} is empty")
    table = CellTable(tuple(groups), tuple(rows), shard)
    if len({key for key, _, _, _ in rows}) != len(rows):
        raise CellTableError(f"{path} names a run key twice")
    if cells_hash is not None and identity.cells_hash(table.current_keys()) != cells_hash:
        raise CellTableError(f"{path} does not hold the cells of the run's manifest (their hash differs from its "
                             "cells_hash): the table or the manifest was edited or copied from another run")
    return table


def _header(path: Path, value: Any) -> _Header:
    try:
        header = _Header.model_validate(value)
    except ValidationError as exc:
        raise CellTableError(f"{path}:1: not a cell table header: {exc.errors()[0]['msg']}") from None
    if header.format != FORMAT or header.version != VERSION:
        raise CellTableError(f"{path}:1: a table of format {header.format!r} version {header.version}; this "
                             f"commitbench reads {FORMAT!r} version {VERSION}")
    return header


def _row(path: Path, number: int, value: Any, groups: int) -> tuple[str, int, str, int]:
    if (isinstance(value, list) and len(value) == 4 and isinstance(value[0], str) and value[0]
            and type(value[1]) is int and 0 <= value[1] < groups and isinstance(value[2], str)
            and type(value[3]) is int and value[3] >= 0):
        return value[0], value[1], sys.intern(value[2]), value[3]  # an episode's id held once for all its cells
    raise CellTableError(f"{path}:{number}: not a cell [run key, group index, episode id, sample]: "
                         f"{orjson.dumps(value).decode()[:120]}")

