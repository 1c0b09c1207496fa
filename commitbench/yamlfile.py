"""YAML read one way everywhere: plain data, bounded, with errors that name the file and the line.

Every YAML file of the project (experiment configs, episode data, setups, curation) is data a person
writes, so the reader refuses what plain data never needs and what turns a small file into a large
or ambiguous one:

* anchors and aliases (``&name`` / ``*name``): a few lines of aliases expand to billions of values
  (the "billion laughs"), and a shared node edited in one place changes another;
* merge keys (``<<``), which exist to be used with aliases;
* a key given twice in one mapping (plain YAML keeps the last one silently);
* nesting deeper than ``MAX_DEPTH`` and files larger than ``MAX_BYTES``;
* bytes that are not UTF-8, and characters YAML does not allow (a NUL byte, other control characters);
* an integer with more digits than Python converts (4,300 by default).

:func:`parse_yaml` reads text, :func:`read_yaml` a file; both raise :class:`YamlError`, whose message
is ``source: reason (line N)``. Callers turn it into their own error type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node

__all__ = ["MAX_BYTES", "MAX_DEPTH", "YamlError", "parse_yaml", "read_yaml"]

MAX_BYTES = 5_000_000
MAX_DEPTH = 64


class YamlError(ValueError):
    """A YAML file that cannot be read as plain data; the message names the source and, where known, the line."""

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        super().__init__(f"{source}: {self.detail}")

    @property
    def detail(self) -> str:
        """The reason with the line, without the source."""
        return f"{self.reason} (line {self.line})" if self.line is not None else self.reason


class _Refused(Exception):
    def __init__(self, reason: str, mark: Any) -> None:
        self.reason = reason
        self.line = mark.line + 1 if mark is not None else None


class _PlainLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases, merge keys or repeated keys, and with a nesting bound."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # (untyped in the PyYAML stubs)
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"an alias (*{event.anchor}) is not allowed: write the value out", event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise _Refused(f"an anchor (&{anchor}) is not allowed: write each value out", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"values are nested more than {MAX_DEPTH} levels deep", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:  # an integer too long to convert, a date out of range: say where
            raise _Refused(f"a value cannot be read: {str(exc).split(';')[0]}", node.start_mark) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Refused("merge keys (<<) are not allowed", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key; SafeLoader reports it below
                continue
            if duplicate:
                raise _Refused(f"duplicate key {key!r} (each key may appear once in a mapping)", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str) -> Any:
    """The plain data in ``text``; YamlError naming ``source`` and the line for anything else."""
    if len(text) > MAX_BYTES:
        raise YamlError(source, f"longer than {MAX_BYTES:,} characters")
    loader: _PlainLoader | None = None
    try:
        loader = _PlainLoader(text)  # reading starts here: a character YAML refuses fails at once
        return loader.get_single_data()
    except _Refused as exc:
        raise YamlError(source, exc.reason, exc.line) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: say which and where
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        where = text.count("\n", 0, max(0, exc.position)) + 1
        raise YamlError(source, f"the character U+{code:04X} is not allowed in YAML", where) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        reason = " ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        raise YamlError(source, f"not valid YAML: {reason}", line) from None
    except yaml.YAMLError as exc:
        raise YamlError(source, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise YamlError(source, "values are nested too deeply") from None
    except ValueError as exc:  # an integer too long to convert, a date out of range
        raise YamlError(source, f"a value cannot be read: {str(exc).split(';')[0]}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: Path | str, source: str | None = None) -> Any:
    """The plain data in a UTF-8 YAML file; YamlError naming the file (or ``source``) and the line."""
    path = Path(path)
    name = source or str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise YamlError(name, "file not found") from None
    except OSError as exc:
        raise YamlError(name, f"cannot read the file: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise YamlError(name, f"larger than {MAX_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlError(name, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded", line) from None
    return parse_yaml(text, name)
