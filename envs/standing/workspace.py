"""People and channels of a scripted workspace: name resolution (whom a message is addressed to is decided by
:mod:`commitbench.episodes.standing.addressee`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from commitbench.episodes.standing.addressee import dm_channel
from commitbench.episodes.standing.episode import Person

__all__ = ["Workspace", "dm_channel"]


@dataclass
class Workspace:
    """Resolves the names an agent writes to the people of an episode."""

    people: list[Person]
    channel: str
    _by_key: dict[str, Person] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {}
        for p in self.people:
            self._by_key[p.name.lower()] = p
            self._by_key[p.first_name.lower()] = p

    def resolve(self, written: str) -> Person | None:
        """The person an agent meant by a name ('Alice', '@alice moreno', 'dm:Alice Moreno')."""
        key = written.strip()
        if key.lower().startswith("dm:"):
            key = key[3:]
        key = key.lstrip("@").strip().lower()
        return self._by_key.get(key)

    def is_team_channel(self, written: str) -> bool:
        name = written.strip().lower()
        return name in (self.channel.lower(), self.channel.lstrip("#").lower())
