"""The tool catalogue: what a tool offered in a request lets the deployment do after the reply.

The feasibility rules of the follow-up checker read affordances (can the deployment run later, notify the
user, watch an event, remember across sessions, hand work to people, use an outbound channel) and which
tools provide each. A deployment states none of that; its requests carry only tool names and descriptions.
The catalogue maps those to affordances, and says which tools write (change state that outlives the turn).

A catalogue is a YAML file (``tools:``, a list of entries; ``docs/gateway.md`` shows one). An entry matches a
tool by ``name`` (a name, or a pattern in which ``*`` stands for any run of characters) or by
``description_words`` (words or phrases found as whole words in the tool's description, case ignored); the
first entry that matches decides. The built-in catalogue is the follow-up suite's own tools (from their
declarations in code) followed by ``default_catalog.yaml``; a file given with ``--catalog`` is read before
them (``include_default: false`` drops them).

Matching runs in time linear in the name and the description: a pattern is checked with string searches, and
the words of all description entries are one alternation of escaped literals.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from commitbench.episodes.followup.setups import Affordances, PersistenceProperties, declared_tool_definitions
from commitbench.episodes.followup.vocabulary import Capability
from commitbench.gateway.turn import OfferedTool
from commitbench.yamlfile import YamlError, parse_yaml, read_yaml

DEFAULT_CATALOG = "default_catalog.yaml"
MAX_ENTRIES = 1000
MAX_PATTERN_CHARS = 200
# Resolved tools remembered between requests (a deployment sends the same tools again and again).
CACHE_SIZE = 4096


class CatalogError(ValueError):
    """A catalogue file that cannot be used; the message names the file and the problem."""


class CatalogEntry(BaseModel):
    """One rule of the catalogue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(
        default=None, description="A tool name, or a pattern where * stands for any characters (schedule_*)."
    )
    description_words: list[str] = Field(
        default_factory=list, description="Words or phrases; the entry matches a tool whose description holds one."
    )
    affordances: list[Capability] = Field(
        default_factory=list, description="What a successful call lets the deployment do after the reply."
    )
    write: bool = Field(default=False, description="A call changes state that outlives the turn.")

    @field_validator("name")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or len(value) > MAX_PATTERN_CHARS):
            raise ValueError(f"a name must be 1 to {MAX_PATTERN_CHARS} characters")
        return value

    @field_validator("description_words")
    @classmethod
    def _words(cls, values: list[str]) -> list[str]:
        cleaned = [" ".join(v.lower().split()) for v in values]
        if any(not v or len(v) > MAX_PATTERN_CHARS for v in cleaned):
            raise ValueError(f"every description word must be 1 to {MAX_PATTERN_CHARS} characters")
        return cleaned

    @model_validator(mode="after")
    def _matches_something(self) -> CatalogEntry:
        if self.name is None and not self.description_words:
            raise ValueError("an entry needs a name or description_words")
        if self.affordances and not self.write:
            raise ValueError("a tool that gives an affordance is a write tool (write: true)")
        return self

    def matches_name(self, name: str) -> bool:
        return self.name is not None and pattern_matches(self.name, name)


class CatalogFile(BaseModel):
    """A catalogue file."""

    model_config = ConfigDict(extra="forbid")

    tools: list[CatalogEntry] = Field(description="Entries, read in order; the first that matches a tool decides.")
    include_default: bool = Field(default=True, description="Read the built-in catalogue after these entries.")

    @field_validator("tools")
    @classmethod
    def _bounded(cls, values: list[CatalogEntry]) -> list[CatalogEntry]:
        if len(values) > MAX_ENTRIES:
            raise ValueError(f"at most {MAX_ENTRIES} entries")
        return values


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern``, where ``*`` stands for any run of characters (case ignored).

    Leftmost matching of each literal piece is exact for patterns whose only wildcard is ``*``, so the check
    is a few string searches: linear time, no backtracking.
    """
    pieces = pattern.lower().split("*")
    name = name.lower()
    if len(pieces) == 1:
        return name == pieces[0]
    first, last = pieces[0], pieces[-1]
    if not name.startswith(first) or not name.endswith(last) or len(first) + len(last) > len(name):
        return False
    position, end = len(first), len(name) - len(last)
    for piece in pieces[1:-1]:
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


class ToolProfile(BaseModel):
    """What the catalogue says about one offered tool."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The tool's name.")
    affordances: list[Capability] = Field(description="What a successful call provides after the reply.")
    write: bool = Field(description="A call changes state that outlives the turn.")
    matched_by: str = Field(description="The entry that decided ('suite:NAME', a pattern, 'words:...', or 'none').")


class Deployment(BaseModel):
    """What the request's tools let the deployment do: the feasibility rules' affordances and the write tools."""

    model_config = ConfigDict(frozen=True)

    tools: list[ToolProfile] = Field(description="Every offered tool with its profile.")
    affordances: Affordances = Field(description="What the feasibility rules read.")

    @property
    def write_tools(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools if t.write)


class ToolCatalog:
    """Entries, in the order they decide: the user's, then the follow-up suite's declared tools, then the
    built-in ones; with the matching of offered tools against them (and a bounded cache)."""

    def __init__(
        self, entries: Sequence[CatalogEntry], defaults: Sequence[CatalogEntry] = (), suite_tools: bool = True
    ) -> None:
        self.entries = list(entries)
        self.defaults = list(defaults)
        self._suite = {t.name: t for t in declared_tool_definitions()} if suite_tools else {}
        every = [*self.entries, *self.defaults]
        words = sorted({w for e in every for w in e.description_words}, key=len, reverse=True)
        self._words = (
            re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in words) + r")(?!\w)")
            if words else None
        )
        self._cache: OrderedDict[tuple[str, str], ToolProfile] = OrderedDict()

    def profile(self, tool: OfferedTool) -> ToolProfile:
        """The profile of one tool (first matching entry; a tool nothing matches affords nothing, reads only)."""
        key = (tool.name, tool.description)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        found = self._match(tool)
        self._cache[key] = found
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    def _described(self, description: str) -> set[str]:
        if self._words is None:
            return set()
        return {" ".join(m.group(0).split()) for m in self._words.finditer(description.lower())}

    def _first(self, entries: Sequence[CatalogEntry], tool: OfferedTool, described: set[str]) -> ToolProfile | None:
        for entry in entries:
            if entry.matches_name(tool.name):
                return ToolProfile(name=tool.name, affordances=entry.affordances, write=entry.write,
                                   matched_by=entry.name or "")
            hit = next((w for w in entry.description_words if w in described), None)
            if hit is not None:
                return ToolProfile(name=tool.name, affordances=entry.affordances, write=entry.write,
                                   matched_by=f"words:{hit}")
        return None

    def _match(self, tool: OfferedTool) -> ToolProfile:
        described = self._described(tool.description)
        own = self._first(self.entries, tool, described)
        if own is not None:
            return own
        suite = self._suite.get(tool.name)
        if suite is not None:
            return ToolProfile(name=tool.name, affordances=list(suite.enables), write=suite.is_write,
                               matched_by=f"suite:{suite.name}")
        found = self._first(self.defaults, tool, described)
        return found or ToolProfile(name=tool.name, affordances=[], write=False, matched_by="none")

    def deployment(self, offered: Iterable[OfferedTool]) -> Deployment:
        """The deployment the offered tools describe."""
        profiles = [self.profile(tool) for tool in offered]
        enabling: dict[Capability, list[str]] = {}
        for profile in profiles:
            for capability in profile.affordances:
                names = enabling.setdefault(capability, [])
                if profile.name not in names:
                    names.append(profile.name)
        properties = PersistenceProperties.from_capabilities(
            enabling, acts_after_turn=Capability.RUN_LATER in enabling or Capability.WATCH_EVENT in enabling
        )
        return Deployment(
            tools=profiles, affordances=Affordances(setup=None, properties=properties, enabling_tools=enabling)
        )


def _entries(data: Any, source: str) -> CatalogFile:
    try:
        return CatalogFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise CatalogError(f"{source}: {where}: {first['msg']}") from None


def default_entries() -> list[CatalogEntry]:
    """The built-in entries of ``default_catalog.yaml``."""
    text = resources.files("commitbench.gateway").joinpath(DEFAULT_CATALOG).read_text(encoding="utf-8")
    try:
        data = parse_yaml(text, DEFAULT_CATALOG)
    except YamlError as exc:
        raise CatalogError(str(exc)) from None
    return _entries(data, DEFAULT_CATALOG).tools


def load_catalog(path: Path | str | None = None) -> ToolCatalog:
    """The catalogue of ``path`` (before the built-in one unless it says ``include_default: false``), or the
    built-in one; :class:`CatalogError` names the file and the problem."""
    if path is None:
        return ToolCatalog([], default_entries())
    try:
        data = read_yaml(path)
    except YamlError as exc:
        raise CatalogError(str(exc)) from None
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read ({exc.strerror or exc})") from None
    own = _entries(data, str(path))
    if not own.include_default:
        return ToolCatalog(own.tools, suite_tools=False)
    return ToolCatalog(own.tools, default_entries())
