"""The request set of the empty-commitment suite: row model, invariants and loader.

``episodes/data/followup/requests.jsonl`` is built by ``scripts/mine_followup.py`` (a build-time
command of the project, not of the package) from public data and hand-written templates; this module
only reads it. Each row is a single-turn request with one or two sentences of context that the user
could have written just before it. The context never mentions a tool or what
persists; ``context_problems`` states that rule as code. Two more rules hold for every shipped row
(the build stops on a row that breaks one):

* ``procedural_problems``: a callback request asks that a person act for the user (get back to them,
  take the case over). A request that asks *how* to reach someone, what to do, where, whether it is
  possible, or for help or assistance to make the contact, or that has the user place the call, is a
  procedural question: the reply can answer it in the turn, so it invites no promise about later;
* ``referent_problems``: a request that points at something ("this song", "my preferences") needs a
  context that names it (a quoted title, or the preferences themselves).

``followup_data_version()`` is the version of the data files (``VERSION``); it changes whenever a
request's text, context or selection changes, so that runs of two versions are never pooled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from commitbench.episodes.followup.vocabulary import Capability, Persona, RequestCategory, SourceDataset

# The follow-up suite's data: requests, setups, facts, curation (inside the installed package).
FOLLOWUP_DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "followup"
REQUESTS_RESOURCE = "data/followup/requests.jsonl"
VERSION_RESOURCE = "data/followup/VERSION"

ID_PREFIX: dict[RequestCategory, str] = {
    RequestCategory.REMINDER: "rem",
    RequestCategory.MONITORING: "mon",
    RequestCategory.CALLBACK: "cb",
    RequestCategory.DEFERRED_DELIVERY: "del",
    RequestCategory.MEMORY: "mem",
}

DEFAULT_CAPABILITIES: dict[RequestCategory, list[Capability]] = {
    RequestCategory.REMINDER: [Capability.RUN_LATER, Capability.NOTIFY_USER_LATER],
    RequestCategory.MONITORING: [Capability.WATCH_EVENT, Capability.NOTIFY_USER_LATER],
    RequestCategory.CALLBACK: [Capability.DELEGATE_TO_HUMAN],
    RequestCategory.DEFERRED_DELIVERY: [Capability.RUN_LATER, Capability.NOTIFY_USER_LATER],
    RequestCategory.MEMORY: [Capability.RECALL_ACROSS_SESSIONS],
}

# Words that would tell the model about tools or persistence. A context must contain none of them.
_TOOL_WORDS = re.compile(
    r"\b(remind\w*|alarms?|calendars?|schedul\w*|memor(y|ies)|remember\w*|notif\w*|tickets?|escalat\w*|"
    r"tools?|apps?|assistant|chatbot|bot|AI|sav(e|ed|es|ing)|persist\w*|sessions?|conversations?|chats?|"
    r"keep (me )?posted|let me know|next time)\b",
    re.IGNORECASE,
)

# Personal data that must never appear in a request or its context. Each pattern is searched for, never
# matched whole, so a run starts where the run itself starts (an e-mail's name part) and a run of spoken
# digits is six words long: both say the same as an open-ended form and keep the search linear.
PII_PATTERNS: dict[str, re.Pattern[str]] = {
    "email address": re.compile(
        r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.]+|\b\w+ at \w+ dot (com|org|net|co)\b", re.IGNORECASE
    ),
    "url": re.compile(r"https?://|www\.|\b\w+\.(com|org|net|io)\b|\bdot com\b", re.IGNORECASE),
    "long number": re.compile(r"\d[\d\s().-]{5,}\d"),
    "spoken phone number": re.compile(
        r"\b((zero|oh|one|two|three|four|five|six|seven|eight|nine|double)\s+){6}"
        r"(zero|oh|one|two|three|four|five|six|seven|eight|nine)\b",
        re.IGNORECASE,
    ),
    "street address": re.compile(
        r"\b\d+\s+\w+(\s\w+)?\s+(street|st|avenue|ave|road|rd|lane|ln|boulevard|blvd|drive|dr|court|ct|way)\b",
        re.IGNORECASE,
    ),
    "postcode": re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}\b"),
    "placeholder": re.compile(r"\{\{|\}\}|<[A-Z_ ]+>|\[[A-Z_ ]+\]"),
    "account or order number": re.compile(
        r"#\s*\d+|\b(order|account|invoice|ticket|purchase)\s+(no\.?|number)?\s*\d+", re.IGNORECASE
    ),
}


def pii_problems(text: str) -> list[str]:
    """Names of the personal-data patterns ``text`` matches (empty when clean)."""
    return [name for name, pattern in PII_PATTERNS.items() if pattern.search(text)]


# A callback request that asks for the procedure rather than for a person (see the module docstring).
# "customer assistance" names a department, not a request for help; "call me", "ring me back" and the
# like ask a person to call the user, which is what a callback is.
PROCEDURAL_PATTERNS: dict[str, re.Pattern[str]] = {
    "asks how": re.compile(r"\bhow\b", re.IGNORECASE),
    "asks what to do": re.compile(r"\bwhat\b[^.?!]*\bdo\b", re.IGNORECASE),
    "asks where": re.compile(r"\bwhere\b", re.IGNORECASE),
    "asks whether it is possible": re.compile(r"\b(is it possible|(can|could|may) I)\b", re.IGNORECASE),
    "asks for help to make the contact": re.compile(r"(?<!customer )\b(help|assistance)\b", re.IGNORECASE),
    "has the user place the call": re.compile(
        r"\b(call|calling|phone|phoning|ring|ringing)\b(?! (me|us|back)\b)", re.IGNORECASE
    ),
}

# Requests that point at something the words do not name, and what their context must then contain.
_DEICTIC_MEDIA = re.compile(r"\b(this|that|these) (song|songs|music|track|tracks|tune|album|record|band)\b|"
                            r"\bthis is my favou?rite\b", re.IGNORECASE)
_QUOTED_TITLE = re.compile(r"[\"\u201c][^\"\u201d]{2,80}[\"\u201d]")
_UNNAMED_PICKS = re.compile(r"\bmy (\w+ )?(selections|choices|picks|playlist)\b", re.IGNORECASE)
_UNNAMED_TASTES = re.compile(r"\bmy (\w+ )?(preferences|tastes)\b", re.IGNORECASE)
_STATED_TASTE = re.compile(r"\b(love|like|enjoy|prefer|hate|can't stand|dislike)\b", re.IGNORECASE)


def procedural_problems(text: str) -> list[str]:
    """Why a callback request is a procedural question the turn can answer (empty when it asks for a person)."""
    return [name for name, pattern in PROCEDURAL_PATTERNS.items() if pattern.search(text)]


def referent_problems(text: str, context: str) -> list[str]:
    """What a request points at that its context leaves unnamed (empty when every referent is named)."""
    problems = []
    if _DEICTIC_MEDIA.search(text) and not _QUOTED_TITLE.search(context):
        problems.append("points at a song or music that the context does not name by a quoted title")
    if _UNNAMED_PICKS.search(text) and not _QUOTED_TITLE.search(context):
        problems.append("refers to the user's selections without the context naming them by quoted titles")
    if _UNNAMED_TASTES.search(text) and not _STATED_TASTE.search(context):
        problems.append("refers to the user's preferences without the context stating them")
    return problems


def context_problems(context: str) -> list[str]:
    """Why a context is unacceptable: tool or persistence words, length, or personal data."""
    problems = [f"mentions {m.group(0)!r}" for m in _TOOL_WORDS.finditer(context)]
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", context.strip()) if s]
    if not 1 <= len(sentences) <= 2:
        problems.append(f"has {len(sentences)} sentences (one or two allowed)")
    problems.extend(f"contains a {p}" for p in pii_problems(context))
    return problems


class RequestSource(BaseModel):
    """Where a request came from, with the text before any rewriting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: SourceDataset = Field(description="slurp, bitext or template.")
    source_id: str = Field(description="Row id in the source (SLURP id, Bitext line number, template id#slot).")
    original_text: str = Field(description="The text as the source has it (for templates: the pattern).")


def _without_pii(value: str, what: str) -> str:
    """``value`` unchanged, or a ValueError naming the personal data found in it."""
    problems = pii_problems(value)
    if problems:
        raise ValueError(f"{what} contains a {', '.join(problems)}")
    return value

class ScriptedEvent(BaseModel):
    """What happens in the world at a set moment of a follow-through episode (the event a request waits for).

    A task the assistant scheduled to start on an event starts when this event happens, if its event
    description matches this one (``envs/followup/runtime.py``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: datetime = Field(description="When it happens, in the user's local time (after the episode's current time).")
    text: str = Field(description="What happened, as the runtime reports it to a task waiting for it.", min_length=8)

    @field_validator("text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _without_pii(value, "event text")


class SecondSession(BaseModel):
    """The user's message when they come back in a later conversation (memory requests, follow-through mode)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: datetime = Field(description="When the later conversation starts, in the user's local time.")
    text: str = Field(description="The user's message in it.", min_length=8)
    source: RequestSource = Field(description="The template the message was written from (family#item).")

    @field_validator("text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _without_pii(value, "second-session message")


class DeliveryFacts(BaseModel):
    """What the follow-through mode's data source holds when a deferred delivery that reports facts comes due.

    A request such as "tomorrow morning, look up the weather for the coastal path and send me what you find"
    can only be delivered with facts that exist at delivery time. The runtime's data tool (``look_up``,
    offered in the turns the episode opens after the first) answers a query about ``topic`` with ``text``
    (``envs/followup/runtime.py``), and the grade keeps a delivery only when it carries them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str = Field(description="What the facts are about, in words a query shares (the data tool's index).",
                       min_length=3)
    text: str = Field(description="The facts, as the data tool returns them.", min_length=8, max_length=400)

    @field_validator("topic", "text")
    @classmethod
    def _clean(cls, value: str) -> str:
        return _without_pii(value, "delivery facts")


class FollowupRequest(BaseModel):
    """One single-turn follow-up request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Stable id: category prefix and a number, e.g. 'rem-007'.", pattern=r"^[a-z]+-\d{3}$")
    category: RequestCategory = Field(description="Reminder, monitoring, callback, deferred delivery or memory.")
    persona: Persona = Field(
        description="The persona the request's text is written for; every selection plays it under both personas "
        "unless it names one."
    )
    text: str = Field(description="The request as the user types it.", min_length=8)
    context: str = Field(description="One or two sentences sent before the request; no tools, nothing on persistence.")
    required_capabilities: list[Capability] = Field(description="What serving the request after the turn needs.")
    source: RequestSource = Field(description="Provenance of the request text.")
    event: ScriptedEvent | None = Field(
        default=None,
        description="The event the request waits for (every request whose serving needs an event watched), "
        "played in the follow-through mode; null otherwise.",
    )
    second_session: SecondSession | None = Field(
        default=None,
        description="The user's message in a later conversation (every memory request), played in the "
        "follow-through mode; null otherwise.",
    )
    facts: DeliveryFacts | None = Field(
        default=None,
        description="What the data tool holds when the delivery comes due (deferred deliveries that report facts "
        "from outside the conversation), played in the follow-through mode; null otherwise.",
    )

    @field_validator("context")
    @classmethod
    def _clean_context(cls, value: str) -> str:
        problems = context_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("text")
    @classmethod
    def _clean_text(cls, value: str) -> str:
        return _without_pii(value, "request")

    @field_validator("required_capabilities")
    @classmethod
    def _some_capability(cls, value: list[Capability]) -> list[Capability]:
        if not value:
            raise ValueError("a follow-up request needs at least one capability")
        return value

    @property
    def user_message(self) -> str:
        """Context and request as one user message (context first)."""
        return f"{self.context} {self.text}"


def request_line(row: FollowupRequest) -> str:
    """The row as one line of a request file (fields without a value are left out)."""
    return json.dumps(row.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


def row_problems(row: FollowupRequest) -> list[str]:
    """Every curation rule a row breaks beyond its field validators (empty for a good row)."""
    problems = [f"referent: {p}" for p in referent_problems(row.text, row.context)]
    if row.category is RequestCategory.CALLBACK:
        problems.extend(f"procedural callback: {p}" for p in procedural_problems(row.text))
    return problems


def follow_through_problems(row: FollowupRequest, now: datetime) -> list[str]:
    """What the follow-through mode lacks for a row: an event for a request that waits for one, a later
    session for a memory request, and moments after ``now``; and delivery facts on anything but a deferred
    delivery (empty when nothing is wrong)."""
    problems = []
    if row.facts is not None and row.category is not RequestCategory.DEFERRED_DELIVERY:
        problems.append("has delivery facts but is not a deferred delivery")
    if Capability.WATCH_EVENT in row.required_capabilities and row.event is None:
        problems.append("waits for an event but has no scripted event")
    if row.category is RequestCategory.MEMORY and row.second_session is None:
        problems.append("is a memory request without a second-session message")
    for name, part in (("event", row.event), ("second session", row.second_session)):
        if part is not None and part.at <= now:
            problems.append(f"its {name} at {part.at.isoformat()} is not after {now.isoformat()}")
    return problems


class RequestFileError(ValueError):
    """A row of the request file is malformed; the message names the file and the line."""


def parse_requests(lines: Iterable[str], source: str) -> list[FollowupRequest]:
    rows: list[FollowupRequest] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = FollowupRequest.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise RequestFileError(f"{source}: line {number}: not JSON: {exc.msg}") from exc
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise RequestFileError(f"{source}: line {number}: {problems}") from exc
        if row.id in seen:
            raise RequestFileError(f"{source}: line {number}: duplicate id {row.id!r}")
        seen.add(row.id)
        rows.append(row)
    return rows


def load_requests_file(path: Path) -> list[FollowupRequest]:
    return parse_requests(path.read_text(encoding="utf-8").splitlines(), str(path))


@lru_cache(maxsize=1)
def _packaged() -> tuple[FollowupRequest, ...]:
    text = resources.files("commitbench.episodes").joinpath(REQUESTS_RESOURCE).read_text(encoding="utf-8")
    return tuple(parse_requests(text.splitlines(), REQUESTS_RESOURCE))


def load_requests() -> list[FollowupRequest]:
    """The packaged request set, in id order."""
    return list(_packaged())


def parse_version(text: str, source: str) -> int:
    """The integer a VERSION file holds; ValueError naming the file otherwise."""
    value = text.strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{source}: expected a positive integer, got {value[:40]!r}")
    return int(value)


@lru_cache(maxsize=1)
def followup_data_version() -> int:
    """The version of the packaged follow-up data (requests, contexts, setups); bumped on every change."""
    text = resources.files("commitbench.episodes").joinpath(VERSION_RESOURCE).read_text(encoding="utf-8")
    return parse_version(text, VERSION_RESOURCE)
