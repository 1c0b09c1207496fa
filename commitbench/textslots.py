"""Text slots: the texts the papers print word for word, each a named slot with the project's wording as default.

The project writes its own prompts and ships no text copied from the papers, so under ``profile: paper`` the
persona prompts, the current-time sentence, the stated paragraphs, fix A's cards, fix C's rewrite prompt and the
release policy with its paraphrases are the project's wording of what the papers prescribe. A user who holds the
papers' appendix texts supplies them in a YAML file (``--texts FILE``, or ``texts: FILE`` in a config)::

    followup.persona.generic: |
      You are ...
    followup.time_sentence: "The current time is $weekday, $day $month $year, $time."
    followup.rewrite_prompt: |
      ... $card ... $user_message ... $tool_activity ... $draft ...

Every slot named is checked (:func:`read_texts`): an unknown slot is refused, naming it; a text may use only
its slot's placeholders (``$name``; ``$$`` for a dollar sign) and must use the ones the slot requires. A run
with a file records the file's digest in its config and in every run key (so its cells are other cells than
those of the project's wording); a run without one keeps the ids it always had.
"""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.digests import digest
from commitbench.yamlfile import YamlError, parse_yaml

__all__ = ["SLOTS", "SuppliedTexts", "TextSlot", "TextsError", "checked_texts", "read_texts", "slot_table"]

MAX_TEXT = 20_000
SETUPS = ("C0", "C1", "C2", "C3", "C4")


class TextsError(ValueError):
    """A texts file that cannot be used; the message names the file and the slot."""


class TextSlot(BaseModel):
    """One text a paper prints, which a run may take from a texts file instead of the project's wording."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="The slot's name in a texts file, e.g. followup.persona.generic.")
    suite: str = Field(description="The suite that shows it (standing or followup).")
    what: str = Field(description="What the text is and where it goes.")
    variables: tuple[str, ...] = Field(default=(), description="The placeholders ($name) the text may use.")
    required: tuple[str, ...] = Field(default=(), description="The placeholders the text must use.")
    profiles: tuple[str, ...] = Field(
        default=("paper", "commitbench"), description="The profiles whose runs show it (elsewhere it is refused)."
    )


_TIME = ("weekday", "day", "month", "year", "time")
_REWRITE = ("card", "user_message", "tool_activity", "draft")

SLOTS: tuple[TextSlot, ...] = (
    TextSlot(name="standing.release_policy", suite="standing", profiles=("paper",),
             what="the explicit release policy appended to the system prompt (the paper's one paragraph)"),
    TextSlot(name="standing.policy_paraphrase_1", suite="standing", profiles=("paper",),
             what="the first paraphrase of the release policy (arm policy:paraphrase-1)"),
    TextSlot(name="standing.policy_paraphrase_2", suite="standing", profiles=("paper",),
             what="the second paraphrase of the release policy (arm policy:paraphrase-2)"),
    TextSlot(name="followup.persona.generic", suite="followup",
             what="the generic assistant's persona prompt, first in the system prompt"),
    TextSlot(name="followup.persona.support", suite="followup",
             what="the utility-support agent's persona prompt, first in the system prompt"),
    TextSlot(name="followup.time_sentence", suite="followup", variables=_TIME, required=_TIME,
             what="the current-time sentence that ends the system prompt"),
    *(TextSlot(name=f"followup.stated.{setup}", suite="followup",
               what=f"the stated variant's paragraph of facts in {setup}") for setup in SETUPS),
    *(TextSlot(name=f"followup.card.{setup}", suite="followup",
               what=f"fix A's capability card in {setup}") for setup in SETUPS),
    TextSlot(name="followup.rewrite_prompt", suite="followup", variables=_REWRITE, required=_REWRITE,
             what="fix C's prompt asking the model to rewrite a flagged reply"),
)
_BY_NAME = {slot.name: slot for slot in SLOTS}


class SuppliedTexts(BaseModel):
    """The texts a run takes from a file, checked against their slots."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(description="The file they were read from.")
    sha256: str = Field(description="sha256 of the file's bytes: part of the run's identity.")
    texts: dict[str, str] = Field(description="Slot name -> the text supplied for it.")

    def get(self, slot: str) -> str | None:
        """The text supplied for ``slot`` (None: the project's wording)."""
        if slot not in _BY_NAME:
            raise KeyError(f"no text slot {slot!r}")
        return self.texts.get(slot)

    def render(self, slot: str, **values: Any) -> str | None:
        """The supplied text of ``slot`` with its placeholders filled in (None: the project's wording)."""
        text = self.get(slot)
        return None if text is None else Template(text).substitute({k: str(v) for k, v in values.items()})

    def check_profile(self, suite: str, profile: str) -> None:
        """Refuse a slot that the suite does not show, or that the profile's runs never show."""
        for name in self.texts:
            slot = _BY_NAME[name]
            if slot.suite != suite:
                raise TextsError(f"{self.source}: {name} is a text of the {slot.suite} suite, not of {suite}")
            if profile not in slot.profiles:
                raise TextsError(f"{self.source}: {name} is shown only under profile {', '.join(slot.profiles)}, "
                                 f"not {profile}")


def _placeholders(text: str) -> set[str]:
    return {m.group("named") or m.group("braced") for m in Template.pattern.finditer(text)
            if m.group("named") or m.group("braced")}


def _check(name: str, text: Any, source: str) -> str:
    slot = _BY_NAME.get(name)
    if slot is None:
        known = ", ".join(_BY_NAME)
        raise TextsError(f"{source}: {name!r} is no text slot (slots: {known})")
    if not isinstance(text, str) or not text.strip():
        raise TextsError(f"{source}: {name}: the text must be a non-empty string")
    if len(text) > MAX_TEXT:
        raise TextsError(f"{source}: {name}: longer than {MAX_TEXT:,} characters")
    invalid = [m.group(0) for m in Template.pattern.finditer(text) if m.group("invalid") is not None]
    if invalid:
        raise TextsError(f"{source}: {name}: a lone '$' (write $$ for a dollar sign)")
    used = _placeholders(text)
    unknown = sorted(used - set(slot.variables))
    if unknown:
        allowed = ", ".join(f"${v}" for v in slot.variables) or "none"
        raise TextsError(f"{source}: {name}: unknown placeholder {', '.join('$' + u for u in unknown)} "
                         f"(this slot's: {allowed})")
    missing = [v for v in slot.required if v not in used]
    if missing:
        raise TextsError(f"{source}: {name}: the placeholder {', '.join('$' + m for m in missing)} is missing")
    return text.strip()


def checked_texts(data: Any, source: str = "texts") -> dict[str, str]:
    """A mapping of slot names to texts, each checked against its slot (TextsError names what is wrong)."""
    if not isinstance(data, dict) or not data:
        raise TextsError(f"{source}: a texts file maps slot names to texts (see the slots in docs/validity.md)")
    return {str(name): _check(str(name), text, source) for name, text in data.items()}


def read_texts(path: Path | str) -> SuppliedTexts:
    """The texts of a YAML file (slot name -> text), each checked against its slot (TextsError names it)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TextsError(f"cannot read texts file {path}: {exc.strerror or exc}") from None
    try:
        data = parse_yaml(raw.decode("utf-8"), str(path))
    except (YamlError, UnicodeDecodeError) as exc:
        raise TextsError(str(exc)) from None
    texts = checked_texts(data, str(path))
    return SuppliedTexts(source=str(path), sha256=digest(raw), texts=texts)


def slot_table() -> str:
    """The slots as a Markdown table (docs/validity.md holds it; a test keeps the two equal)."""
    lines = ["| slot | suite | profiles | placeholders | text | under the paper profile |", "|---|---|---|---|---|---|"]
    for slot in SLOTS:
        placeholders = ", ".join(f"`${v}`" for v in slot.variables) or "-"
        lines.append(f"| `{slot.name}` | {slot.suite} | {', '.join(slot.profiles)} | {placeholders} | {slot.what} | "
                     "project wording unless supplied |")
    return "\n".join(lines)
