"""People and channels of a scripted workspace: name resolution and mention detection."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commitbench.episodes.standing.episode import Person


def dm_channel(name: str) -> str:
    return f"dm:{name}"


@dataclass
class Workspace:
    """Resolves the names an agent writes to the people of an episode."""

    people: list[Person]
    channel: str
    _by_key: dict[str, Person] = field(init=False, repr=False)
    _mention: dict[str, re.Pattern[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {}
        self._mention = {}
        for p in self.people:
            self._by_key[p.name.lower()] = p
            self._by_key[p.first_name.lower()] = p
            names = "|".join(re.escape(n) for n in (p.name, p.first_name))
            self._mention[p.role] = re.compile(rf"(?<![\w@])@?(?:{names})(?!\w)", re.IGNORECASE)

    def resolve(self, written: str) -> Person | None:
        """The person an agent meant by a name ('Alice', '@alice moreno', 'dm:Alice Moreno')."""
        key = written.strip()
        if key.lower().startswith("dm:"):
            key = key[3:]
        key = key.lstrip("@").strip().lower()
        return self._by_key.get(key)

    def mentions(self, text: str, role: str) -> bool:
        """Whether a text names the person playing a role."""
        pattern = self._mention.get(role)
        return bool(pattern and pattern.search(text))

    def is_team_channel(self, written: str) -> bool:
        name = written.strip().lower()
        return name in (self.channel.lower(), self.channel.lstrip("#").lower())
