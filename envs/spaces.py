"""Gymnasium spaces for free text.

``gymnasium.spaces.Text`` only accepts strings drawn from a fixed character set, which
rejects most real chat text. ``AnyText`` accepts any ``str`` up to a length and samples
from a fixed corpus, so environment checkers can still draw valid elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces import Space

from commitbench.protocol import MAX_TEXT, EventKind

_DEFAULT_CORPUS: tuple[str, ...] = (
    "",
    "ok",
    "Thanks, noted.",
    "Could you check on that for me?",
    "Not sure yet, I'll let you know.",
)


class AnyText(Space[str]):
    """A space of arbitrary strings of at most ``max_length`` characters."""

    def __init__(
        self,
        max_length: int = 100_000,
        corpus: Sequence[str] | None = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        self.max_length = max_length
        self.corpus: tuple[str, ...] = tuple(corpus) if corpus else _DEFAULT_CORPUS
        for item in self.corpus:
            if len(item) > max_length:
                raise ValueError(f"corpus entry longer than max_length={max_length}: {item[:40]!r}")
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("AnyText does not support masked sampling")
        return self.corpus[int(self.np_random.integers(len(self.corpus)))]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length and other.corpus == self.corpus

    def __hash__(self) -> int:
        return hash((AnyText, self.max_length, self.corpus))


MAX_STEPS = 100_000
MAX_RANK = 10


def event_space(annotated: bool = False) -> spaces.Dict:
    """One observed event; ``annotated`` adds the script annotations of the privileged channel."""
    text = AnyText(MAX_TEXT)
    fields: dict[str, spaces.Space[Any]] = {
        "kind": AnyText(32, corpus=[k.value for k in EventKind]),
        "step": spaces.Discrete(MAX_STEPS),
        "sender": text,
        "role": text,
        "channel": text,
        "text": text,
        "tool": text,
        "ok": spaces.Discrete(2),
        "call_id": text,
    }
    if annotated:
        fields.update({"act": text, "subject": text, "rank": spaces.Discrete(MAX_RANK + 1)})
    return spaces.Dict(fields)


def observation_space(annotated: bool = False) -> spaces.Dict:
    return spaces.Dict(
        {
            "events": spaces.Sequence(event_space(annotated), stack=False),
            "context": AnyText(MAX_TEXT * 5),
        }
    )


ACTION_EXAMPLES: tuple[str, ...] = (
    '{"end_turn": true}',
    '{"reply": "Noted, thanks."}',
    '{"tool": "lookup", "arguments": {"query": "all-hands"}}',
    '{"tool": "no_such_tool", "arguments": {}}',
    '{"tool": "send_dm", "arguments": "{not json"}',
    "garbage",
)


def action_space() -> AnyText:
    return AnyText(MAX_TEXT * 5, corpus=ACTION_EXAMPLES)
