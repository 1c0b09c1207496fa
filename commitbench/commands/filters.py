"""Command-line flags made from the suites' models: their episode filters and their report options.

``commitbench run SUITE`` takes each registered suite's episode filter (its ``selection`` model) as flags
(``commitbench report`` its report options, ``Suite.report_options``, the same way):
a field ``creditor_replies`` becomes ``--creditor-replies``, a list becomes ``nargs='+'``, an enum or a
``Literal`` gives the choices, a bool becomes a switch, and the field's description is the help. A
suite that adds a field to its filter gets the flag with no change here. Fields that every suite shares
with the command's own flags (``profile``, ``limit``) stay the command's.
"""

from __future__ import annotations

import argparse
import enum
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["FilterFlag", "add_filter_flags", "filter_flags", "given_filters"]


@dataclass(frozen=True)
class FilterFlag:
    """One episode-filter field as a flag, and the suites whose filters have it."""

    field: str
    suites: tuple[str, ...]
    many: bool
    kind: type[Any]  # str, int or bool
    choices: tuple[str, ...] | None
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The field's value type without ``None``, and whether it is a list of that type."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kept) != 1:
            raise TypeError(f"a filter field must have one type (or None), not {annotation!r}")
        return _unwrap(kept[0])
    if origin in (list, tuple, Sequence):
        inner, _ = _unwrap(typing.get_args(annotation)[0])
        return inner, True
    return annotation, False


def _flag_of(name: str, suite: str, info: FieldInfo) -> FilterFlag:
    value_type, many = _unwrap(info.annotation)
    choices: tuple[str, ...] | None = None
    kind: type[Any]
    if typing.get_origin(value_type) is typing.Literal:
        choices = tuple(str(v) for v in typing.get_args(value_type))
        kind = str
    elif isinstance(value_type, type) and issubclass(value_type, enum.Enum):
        choices = tuple(str(member.value) for member in value_type)
        kind = str
    elif value_type in (bool, int, str):
        kind = value_type
    else:
        kind = str  # paths and other text the model validates itself
    if kind is bool and many:
        raise TypeError(f"filter field {name!r}: a list of booleans has no flag")
    return FilterFlag(field=name, suites=(suite,), many=many, kind=kind, choices=choices,
                      help=(info.description or name).rstrip("."))


def filter_flags(selections: Sequence[tuple[str, type[BaseModel]]], skip: Sequence[str] = ()) -> list[FilterFlag]:
    """The flags of every suite's filter, one per field name (a field two suites share is one flag, which
    must then take the same kind of value in both), in the order the suites and their fields come."""
    flags: dict[str, FilterFlag] = {}
    for suite, model in selections:
        for name, info in model.model_fields.items():
            if name in skip:
                continue
            flag = _flag_of(name, suite, info)
            seen = flags.get(name)
            if seen is None:
                flags[name] = flag
                continue
            if (seen.many, seen.kind) != (flag.many, flag.kind):
                raise TypeError(f"filter field {name!r} takes different values in suites {seen.suites} and {suite!r}")
            choices = None if seen.choices is None or flag.choices is None else (
                tuple(dict.fromkeys((*seen.choices, *flag.choices))))
            flags[name] = FilterFlag(field=name, suites=(*seen.suites, suite), many=seen.many, kind=seen.kind,
                                     choices=choices, help=seen.help if seen.help == flag.help else
                                     f"{seen.help} ({seen.suites[0]}); {flag.help} ({suite})")
    return list(flags.values())


def add_filter_flags(parser: argparse.ArgumentParser, flags: Sequence[FilterFlag], what: str = "filters") -> None:
    """Add the flags to ``parser``, grouped by the suites that take them (``what`` they are, in the group's
    title); every flag defaults to None (not given), so the suite's own defaults apply."""
    groups: dict[tuple[str, ...], Any] = {}
    for flag in flags:
        group = groups.get(flag.suites)
        if group is None:
            group = groups[flag.suites] = parser.add_argument_group(f"{' and '.join(flag.suites)} {what}")
        if flag.kind is bool:
            group.add_argument(flag.flag, dest=flag.field, action="store_const", const=True, default=None,
                               help=flag.help)
        else:
            group.add_argument(flag.flag, dest=flag.field, nargs="+" if flag.many else None, type=flag.kind,
                               choices=flag.choices, default=None, help=flag.help)


def given_filters(
    args: argparse.Namespace, flags: Sequence[FilterFlag], suite: str
) -> tuple[dict[str, Any], list[str]]:
    """The filter values given on the command line for ``suite``, and the flags given that only other
    suites take."""
    given: dict[str, Any] = {}
    foreign: list[str] = []
    for flag in flags:
        value = getattr(args, flag.field, None)
        if value is None:
            continue
        if suite in flag.suites:
            given[flag.field] = value
        else:
            foreign.append(flag.flag)
    return given, foreign
