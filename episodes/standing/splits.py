"""What a split overlay (``splits/train/``) takes from the data directory, and what it may not share with it.

The train split is written apart from dev and test: its own people, filler, replies and commitment types, so a
model trained on it has seen no type, no person and no sentence of the test split. It takes from the data
directory only the design (``cells.yaml``) and the instructions to the assistant (:data:`SHARED_FILES`: the release
policies and the system prompt; the workspace tools' words are English's built-in ones), which are the same
everywhere so that what is learnt is the behaviour the test split asks for, not a wording of it.

The checks here name the overlay's file and field, as every loader error does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from commitbench.episodes.standing.spec import CommitmentTypeSpec, SpecError, Split, WorldSpec, word_pattern

__all__ = ["SHARED_FILES", "check_apart", "check_split_fields", "check_takes_instructions"]

# The files a split overlay takes from the data directory itself (the instructions to the assistant, not chat).
SHARED_FILES = ("policies.yaml", "system_prompt.jinja", "workspace.yaml")

TypeFiles = list[tuple[Path, CommitmentTypeSpec]]


def check_takes_instructions(overlay: Path) -> None:
    """An overlay holds none of :data:`SHARED_FILES`: it would be ignored, since the loader reads them from the
    data directory."""
    for name in SHARED_FILES:
        if (overlay / name).exists():
            raise SpecError(overlay / name, "<file>", "a split overlay takes the release policies, the system prompt "
                            "and the workspace words from the data directory (docs/rl.md, 'Splits for training'); "
                            "remove this file or change the data directory's own")


def check_split_fields(types: TypeFiles, overlay: Split | None) -> None:
    """Every type says the split of the place it is in: dev or test in the data directory's ``types/``, the
    overlay's split in ``splits/<split>/types/``."""
    for path, ctype in types:
        if overlay is not None and ctype.split is not overlay:
            raise SpecError(path, "split", f"'{ctype.split.value}': a type in {overlay.value} split's folder "
                            f"(splits/{overlay.value}/types/) must say split: {overlay.value}")
        if overlay is None and ctype.split.in_overlay:
            raise SpecError(path, "split", f"'{ctype.split.value}': the {ctype.split.value} split's types live in "
                            f"splits/{ctype.split.value}/types/, with its own people and chat; a type here is dev "
                            "or test")


def _names(world: WorldSpec) -> set[str]:
    return {part.lower() for v in world.variants for p in v.people.values() for part in p.name.split()}


def check_apart(world: WorldSpec, world_path: Path, types: TypeFiles, worlds: Iterable[tuple[Path, WorldSpec]],
                main_types: TypeFiles) -> None:
    """The overlay shares no commitment type (id, tool name or distinctive word) and no person's first or last
    name, team or channel with the data directory (``worlds``: its world file in every language)."""
    taken = {ctype.id: path for path, ctype in main_types}
    tools = {name: path for path, ctype in main_types for name in (ctype.action_tool.name, ctype.check_tool.name)}
    for path, ctype in types:
        if ctype.id in taken:
            raise SpecError(path, "id", f"type id '{ctype.id}' is also a type of {taken[ctype.id]}: a split "
                            "overlay shares no commitment type with dev and test")
        for field, name in (("action_tool.name", ctype.action_tool.name), ("check_tool.name", ctype.check_tool.name)):
            if name in tools:
                raise SpecError(path, field, f"the tool '{name}' is also a tool of {tools[name]}: give the split's "
                                "types tools of their own")
    for ours, theirs in ((types, main_types), (main_types, types)):
        for path, ctype in ours:
            pattern = word_pattern(ctype.words)
            for other_path, other in theirs:
                for field, text in other.texts():
                    found = pattern.search(text)
                    if found:
                        raise SpecError(other_path, field, f"uses '{found.group(0)}', a distinctive word of type "
                                        f"'{ctype.id}' ({path}): the train split and dev/test share no type's words")
    for other_path, other_world in worlds:
        names = _names(other_world)
        places = {v.team.lower() for v in other_world.variants} | {v.channel for v in other_world.variants}
        for i, variant in enumerate(world.variants):
            if variant.team.lower() in places or variant.channel in places:
                raise SpecError(world_path, f"variants.{i}.team", f"team '{variant.team}' or channel "
                                f"'{variant.channel}' is also one of {other_path}")
            for role, person in variant.people.items():
                shared = sorted(part for part in re.split(r"\s+", person.name) if part.lower() in names)
                if shared:
                    raise SpecError(world_path, f"variants.{i}.people.{role.value}.name", f"'{shared[0]}' is also a "
                                    f"name in {other_path}: the split's people share no first or last name with "
                                    "dev and test")
