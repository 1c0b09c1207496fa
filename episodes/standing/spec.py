"""Declarative specification of the standing episodes, loaded from YAML.

The spec is the single source the compiler expands into concrete episodes. Every model is
strict (``extra="forbid"``) so a typo in an episode file is an error, not a silent default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from commitbench.protocol import END_TURN_TOOL
from commitbench.tools import json_type

N_VARIANTS = 3
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "standing"
LANGUAGES_DIR = "languages"  # a data directory's other languages: <root>/languages/<code>/ (all files but cells.yaml)
SPLITS_DIR = "splits"  # a data directory's split overlays: <root>/splits/<split>/ (own people, chat and types)


class Language(str, Enum):
    """The language an episode is written in. English is the data directory itself; every other language is an
    overlay under ``languages/<code>/`` whose episodes are twins of the English ones."""

    EN = "en"
    TR = "tr"

_CONDITIONAL_DELEGATION = re.compile(r"\b(?:if|when|while|whenever)\s+I(?:'m|\s+am)\b", re.IGNORECASE)

def word_pattern(words: list[str]) -> re.Pattern[str]:
    """Whole-word, case-insensitive match of any of ``words`` (a word is bounded by non-word, non-hyphen
    characters, so 'billing-api' and '4.2' are words). Linear time: an alternation of literals."""
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


Variants = Annotated[list[str], Field(min_length=N_VARIANTS, max_length=N_VARIANTS)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoleKey(str, Enum):
    """The parts people play in an episode."""

    CREDITOR = "creditor"
    DELEGATE = "delegate"
    PEER = "peer"
    MANAGER = "manager"
    BYSTANDER = "bystander"
    COLLEAGUE = "colleague"


class Act(str, Enum):
    """What a scripted cancellation-type event does."""

    CANCEL = "cancel"
    RELAY = "relay"
    CLAIM = "claim"
    REINSTATE = "reinstate"


class ExpectedOutcome(str, Enum):
    """What a correct assistant does with the episode's promise: execute it, or drop it."""

    EXECUTE = "execute"
    DROP = "drop"


class ReplyKind(str, Enum):
    """The creditor's scripted answer when consulted."""

    STILL_NEEDED = "still_needed"
    DROP_IT = "drop_it"
    CONFIRM_CANCEL = "confirm_cancel"
    DENY_CANCEL = "deny_cancel"
    KEEP_CANCELLED = "keep_cancelled"
    GO_AHEAD = "go_ahead"


class ReplyRule(str, Enum):
    """When the creditor gives a scripted answer (an episode-set option, part of a run's identity).

    ``per_event``: the first message to the creditor after each scripted event that changes or
    challenges the promise gets the answer that is true at that point; every other message gets a
    neutral acknowledgement. ``paper``: one answer (the cell's ``paper_reply``) and a thumbs-up to
    everything else, the original study's rule. The paper does not say when its single answer comes;
    here it goes to the first message after the *last* event that changes or challenges the promise,
    so it never contradicts what the creditor has said so far (in both reinstatement cells the answer
    comes after the reinstatement; before it, a thumbs-up).
    """

    PER_EVENT = "per_event"
    PAPER = "paper"


class PolicyWording(str, Enum):
    """Which wording of the explicit release policy an episode shows (``policies.yaml``)."""

    COMMITBENCH = "commitbench"  # the project's: the paper's rules, plus claims and reinstatements
    PAPER = "paper"  # the paper's one paragraph, its rules and nothing more


class TypeTexts(str, Enum):
    """Whether a commitment type's texts are the project's, or the ``paper:`` ones where a type has them."""

    COMMITBENCH = "commitbench"
    PAPER = "paper"  # as the paper ran it (post_announcement without the text to post)


class NotifyDeadline(str, Enum):
    """By when telling the creditor counts as the notification a cell requires."""

    BEFORE_TRIGGER = "before_trigger"
    ANY_TIME = "any_time"


class Split(str, Enum):
    """Which part of the benchmark an episode belongs to (by its commitment type). dev and test are the types of the
    data directory itself; train is an overlay, ``splits/train/``, with its own types, people, chat and replies, so a
    model trained on it meets none of the test split's types, names or texts."""

    DEV = "dev"
    TEST = "test"
    TRAIN = "train"

    @property
    def in_overlay(self) -> bool:
        """Whether the split's texts live in an overlay of their own (``splits/<split>/``), compiled only when the
        split is asked for."""
        return self is Split.TRAIN


class PersonSpec(Strict):
    name: str = Field(description="Full display name.", min_length=1)
    title: str = Field(description="Job title shown in the roster.", min_length=1)
    rank: int = Field(description="Seniority; higher outranks lower.", ge=0, le=10)


class VariantSpec(Strict):
    team: str = Field(description="Team name used in the system prompt.")
    channel: str = Field(description="Team channel, starting with '#'.", pattern=r"^#[a-z0-9-]+$")
    people: dict[RoleKey, PersonSpec] = Field(description="Who plays each role in this variant.")

    @field_validator("people")
    @classmethod
    def _all_roles(cls, value: dict[RoleKey, PersonSpec]) -> dict[RoleKey, PersonSpec]:
        missing = [r.value for r in RoleKey if r not in value]
        if missing:
            raise ValueError(f"missing roles: {', '.join(missing)}")
        names = [p.name for p in value.values()]
        firsts = [n.split()[0] for n in names]
        if len(set(names)) != len(names) or len(set(firsts)) != len(firsts):
            raise ValueError("people in a variant need distinct full and first names")
        return value


class WorldSpec(Strict):
    assistant: str = Field(description="The assistant's display name.")
    variants: list[VariantSpec] = Field(description="Surface variants.", min_length=N_VARIANTS, max_length=N_VARIANTS)


STYLE_NAME = r"^[a-z][a-z0-9_]{0,39}$"


class EventSpec(Strict):
    act: Act = Field(description="What the event does to the commitment.")
    speaker: RoleKey = Field(description="Who says it.")
    style: str = Field(description="How it is worded: a style of styles.yaml.", pattern=STYLE_NAME)
    subject: RoleKey | None = Field(
        default=None,
        description="The person the event is about, when that is not the speaker: whose cancellation a relay "
        "reports (required for a relay). Templates name them as {{ subject }} / {{ subject_first }}; without it "
        "the subject is the speaker.",
    )
    reply: ReplyKind = Field(
        description="The creditor's answer to the first message addressed to them after this event: what is "
        "true for the promise at that point."
    )

    @model_validator(mode="after")
    def _relay_names_its_subject(self) -> EventSpec:
        if self.act is Act.RELAY and self.subject is None:
            raise ValueError("a relay reports someone else's cancellation: name them in 'subject' (creditor, "
                             "delegate, ...)")
        return self

    def subject_role(self) -> RoleKey:
        """Whom the event is about: its subject, else its speaker."""
        return self.subject or self.speaker


class Expected(Strict):
    outcome: ExpectedOutcome = Field(description="Whether a correct assistant executes or drops the promise.")
    consult: bool = Field(default=False, description="Correct behaviour includes asking the creditor.")
    notify: bool = Field(default=False, description="Correct behaviour includes telling the creditor what happened.")
    verify: bool = Field(default=False, description="Correct behaviour includes using the check tool.")


class CellSpec(Strict):
    id: str = Field(description="Cell id, e.g. PEER-DIRECT.", pattern=r"^[A-Z]+(-[A-Z]+)?$")
    description: str = Field(description="One line saying what happens.")
    events: list[EventSpec] = Field(description="Cancellation-type events in order.")
    delegation: bool = Field(default=False, description="The creditor names a delegate right after the promise.")
    manager: bool = Field(default=False, description="A manager cell (left out of silent-policy metrics).")
    check_possible: bool = Field(default=True, description="Whether the check tool shows the action is possible.")
    paper_reply: ReplyKind = Field(
        description="The creditor's single answer under the paper's reply rule (to the first message after the "
        "first event); the default rule answers per event (see each event's reply)."
    )
    expected: Expected = Field(description="Correct behaviour under the explicit policy.")


class ToolParam(Strict):
    type: str = Field(description="JSON schema type.", pattern=r"^(string|integer|number|boolean)$")
    description: str = Field(description="What the argument is.")


# The tools every standing episode has (the environment's workspace tools). An episode's own action and
# check tools may not take these names: the promised action would never be the one that runs. Kept here,
# below the environments, and held equal to the environment's list by a test.
RESERVED_TOOL_NAMES = ("post_message", "send_dm", "lookup", END_TURN_TOOL)
MAX_TARGET_TEXT = 1_000


def _own_tool_name(value: str) -> str:
    if value in RESERVED_TOOL_NAMES:
        raise ValueError(
            f"'{value}' is the name of a tool every episode already has ({', '.join(RESERVED_TOOL_NAMES)}); "
            "give this tool its own name"
        )
    return value


_KIND_PHRASES = {"boolean": "a boolean", "integer": "an integer", "number": "a number", "string": "a string",
                 "array": "a list", "object": "a mapping", "null": "nothing"}


def _json_kind(value: Any) -> str:
    """A value's JSON type in words, as a YAML author would put it (``a list``, ``a mapping``)."""
    kind = json_type(value)
    return _KIND_PHRASES.get(kind, kind)


def _fits(value: Any, json_type: str) -> bool:
    if json_type == "string":
        return isinstance(value, str) and len(value) <= MAX_TARGET_TEXT
    if json_type == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if json_type == "integer":
        return isinstance(value, int) and abs(value) < 2**53
    return isinstance(value, (int, float)) and math.isfinite(value) and abs(value) < 2**53


class ActionToolSpec(Strict):
    name: str = Field(description="Tool name (not one of the workspace tools).", pattern=r"^[a-z_]+$")
    description: str = Field(description="Tool description for the model.")
    parameters: dict[str, ToolParam] = Field(description="Arguments, all required.")
    target_args: dict[str, Any] = Field(
        description="The arguments the promise commits to: one per parameter, of the parameter's JSON type "
        f"(a string of at most {MAX_TARGET_TEXT} characters, an integer, a number or a boolean)."
    )
    done_text: str = Field(description="Result text when the action succeeds.")
    failed_text: str = Field(description="Result text when the world makes it impossible.")

    _check_name = field_validator("name")(_own_tool_name)

    @field_validator("target_args")
    @classmethod
    def _targets_fit_parameters(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        parameters: dict[str, ToolParam] | None = info.data.get("parameters")
        if parameters is None:
            return value  # the parameters' own error is the one reported
        if set(value) != set(parameters):
            raise ValueError("target_args must give exactly one value per parameter")
        for name, arg in value.items():
            json_type = parameters[name].type
            if not _fits(arg, json_type):
                limit = f" of at most {MAX_TARGET_TEXT} characters" if json_type == "string" else ""
                article = "an" if json_type == "integer" else "a"
                raise ValueError(f"{name}: the parameter takes {article} {json_type}{limit}, got {_json_kind(arg)}")
        return value


class CheckToolSpec(Strict):
    name: str = Field(description="Tool name (not one of the workspace tools).", pattern=r"^[a-z_]+$")
    description: str = Field(description="Tool description for the model.")
    parameters: dict[str, ToolParam] = Field(description="Arguments, all required.")
    possible_text: str = Field(description="Result when the action is possible.")
    impossible_text: str = Field(description="Result when it is not.")

    _check_name = field_validator("name")(_own_tool_name)


class PaperTexts(Strict):
    """A commitment type's texts as the paper ran them, where they differ from the project's."""

    request: Variants | None = Field(default=None, description="The request, one wording per variant.")
    promise: str | None = Field(default=None, description="The assistant's fixed promise.")
    compared_args: list[str] | None = Field(
        default=None,
        description="The arguments compared with the promise when grading an execution (null: all); the paper's "
        "wording may leave an argument to the assistant.",
    )
    note: str = Field(description="How and why these texts differ (what the paper says of them).", min_length=1)


class CommitmentTypeSpec(Strict):
    id: str = Field(description="Type id.", pattern=r"^[a-z_]+$")
    split: Split = Field(
        description="dev or test for a type of the data directory's types/; train for one of splits/train/types/."
    )
    thing: str = Field(description="Noun phrase for the promised task, e.g. 'the room booking'.")
    condition: str = Field(description="The trigger condition as a clause, e.g. 'the agenda is final'.")
    words: list[Annotated[str, Field(pattern=r"^\w[\w.-]{0,39}$")]] = Field(
        description="The type's own distinctive words (whole words, any case): every request, the promise and "
        "every trigger must use one, no other type may use any, and none may occur in the shared filler or wiki. "
        "This catches a copied file whose strings still talk about the type it was copied from.",
        min_length=1,
        max_length=16,
    )
    action_tool: ActionToolSpec = Field(description="The promised action.")
    check_tool: CheckToolSpec = Field(description="The tool that reveals whether the action is possible.")
    request: Variants = Field(description="The creditor's request, one wording per variant.")
    promise: str = Field(description="The assistant's fixed promise.")
    delegation: Variants = Field(
        description="The creditor handing the decision to a named delegate ({{ delegate_first }}), unconditionally: "
        "not 'if I'm away' (nobody ever says the creditor is away, so a conditional delegation leaves the "
        "delegate's standing in doubt)."
    )
    cancel_direct: Variants = Field(description="Direct cancellations.")
    cancel_implicit: Variants = Field(
        description="Implicit cancellations: a remark, not addressed to the assistant and not asking to cancel, "
        "from which a careful reader concludes the promised action is no longer wanted (state the fact and its "
        "consequence: 'the review went remote, so nobody needs a meeting room'), not news that is merely related "
        "('billing-api is being retired next sprint' says nothing about today's staging deploy)."
    )
    relay: Variants = Field(description="Second-hand reports that the creditor cancelled.")
    claim: Variants = Field(description="Claims that the action is impossible.")
    reinstate: Variants = Field(description="'Go ahead after all' messages.")
    trigger: Variants = Field(description="Messages saying the condition now holds.")
    utterances: dict[Annotated[str, Field(pattern=STYLE_NAME)], Variants] = Field(
        default_factory=dict,
        description="The type's own wording of further styles of styles.yaml (style -> one text per variant); a "
        "style without one here uses its own field (the five built-in styles) or the style's shared texts.",
    )
    paper: PaperTexts | None = Field(
        default=None,
        description="Texts as the paper ran them, used under type_texts: paper (the paper profile); null when the "
        "paper's texts are the project's.",
    )

    @field_validator("delegation")
    @classmethod
    def _unconditional(cls, value: list[str]) -> list[str]:
        for i, text in enumerate(value):
            if "delegate_first" not in text and "delegate }}" not in text:
                raise ValueError(f"[{i}] must name the delegate ({{{{ delegate_first }}}})")
            if _CONDITIONAL_DELEGATION.search(text):
                raise ValueError(
                    f"[{i}] is conditional ({text!r}): hand the decision over outright, e.g. 'From now on "
                    "{{ delegate_first }} decides about ...'"
                )
        return value

    def missing_own_words(self) -> tuple[str, str] | None:
        """(field, reason) for the first request, promise or trigger that uses none of the type's words."""
        own = word_pattern(self.words)
        checked: list[tuple[str, list[str]]] = [
            ("request", self.request), ("promise", [self.promise]), ("trigger", self.trigger)
        ]
        if self.paper is not None:
            checked += [("paper.request", self.paper.request or []),
                        ("paper.promise", [self.paper.promise] if self.paper.promise else [])]
        for field, texts in checked:
            for i, text in enumerate(texts):
                if not own.search(text):
                    where = field if field.endswith("promise") else f"{field}[{i}]"
                    return where, f"uses none of the type's own words ({', '.join(self.words)}): {text[:80]!r}"
        return None

    def texts(self) -> list[tuple[str, str]]:
        """Every message text of the type as (field, template), for checks over all its wording."""
        fields = ("request", "delegation", "cancel_direct", "cancel_implicit", "relay", "claim", "reinstate",
                  "trigger")
        out = [("promise", self.promise)]
        for name in fields:
            out.extend((f"{name}[{i}]", text) for i, text in enumerate(getattr(self, name)))
        for style, texts in self.utterances.items():
            out.extend((f"utterances.{style}[{i}]", text) for i, text in enumerate(texts))
        if self.paper is not None:
            out.extend((f"paper.request[{i}]", text) for i, text in enumerate(self.paper.request or []))
            if self.paper.promise:
                out.append(("paper.promise", self.paper.promise))
        return out

    @model_validator(mode="after")
    def _paper_args_exist(self) -> CommitmentTypeSpec:
        compared = self.paper.compared_args if self.paper is not None else None
        unknown = sorted(set(compared or []) - set(self.action_tool.target_args))
        if unknown:
            raise ValueError(f"paper.compared_args names no argument of the action tool: {', '.join(unknown)}")
        return self

    @field_validator("check_tool")
    @classmethod
    def _two_tools(cls, value: CheckToolSpec, info: ValidationInfo) -> CheckToolSpec:
        action = info.data.get("action_tool")
        if action is not None and action.name == value.name:
            raise ValueError(f"the check tool and the action tool are both named '{value.name}'")
        return value

    def wording(self, name: str, style: StyleSpec) -> tuple[str, list[str]] | None:
        """(field, texts) of the type's wording of a style: its ``utterances`` entry, else the style's field of
        the type, else the style's shared texts (field ``styles.<name>.texts``); None when there is none."""
        if name in self.utterances:
            return f"utterances.{name}", self.utterances[name]
        if style.type_field is not None:
            return style.type_field, getattr(self, style.type_field)
        if style.texts is not None:
            return f"styles.{name}.texts", style.texts
        return None


# The fields of a commitment type that word a style (StyleSpec.type_field).
STYLE_FIELDS = ("cancel_direct", "cancel_implicit", "relay", "claim", "reinstate")


class StyleSpec(Strict):
    """One utterance style (styles.yaml): which acts it may word, and where its texts come from."""

    description: str = Field(description="What an utterance of this style does, in a line.", min_length=1)
    acts: list[Act] = Field(description="The acts an event of this style may perform.", min_length=1)
    type_field: str | None = Field(
        default=None,
        description=f"The field of every commitment type that words this style ({', '.join(STYLE_FIELDS)}); null "
        "for a style worded by its shared texts or by the types' utterances entries.",
    )
    texts: Variants | None = Field(
        default=None,
        description="Shared wording, one text per surface variant, for every type that does not word the style "
        "itself (its utterances entry). It must talk about {{ thing }} and the people, never a type's own words.",
    )

    @field_validator("type_field")
    @classmethod
    def _a_style_field(cls, value: str | None) -> str | None:
        if value is not None and value not in STYLE_FIELDS:
            raise ValueError(f"{value!r} is no style field of a commitment type ({', '.join(STYLE_FIELDS)})")
        return value


class StylesSpec(Strict):
    styles: dict[Annotated[str, Field(pattern=STYLE_NAME)], StyleSpec] = Field(
        description="The utterance styles an event may name, by name.", min_length=1
    )


class RepliesSpec(Strict):
    acknowledgement: str = Field(
        description="The creditor's answer to a message that is not the first after an event; it must not read "
        "as an answer to a question.",
        min_length=1,
    )
    paper_acknowledgement: str = Field(
        description="The acknowledgement under the paper's reply rule (a thumbs-up).", min_length=1
    )
    replies: dict[ReplyKind, Variants] = Field(description="Scripted answers per kind, one per variant.")

    @field_validator("replies")
    @classmethod
    def _all_kinds(cls, value: dict[ReplyKind, list[str]]) -> dict[ReplyKind, list[str]]:
        missing = [k.value for k in ReplyKind if k not in value]
        if missing:
            raise ValueError(f"missing reply kinds: {', '.join(missing)}")
        return value


class LookupSpec(Strict):
    question: str = Field(description="A question addressed to the assistant.")
    entry: str = Field(description="Key of the wiki entry that answers it.")


class WikiEntry(Strict):
    keywords: list[str] = Field(description="Words that find this entry.", min_length=1)
    text: str = Field(description="The entry text the lookup tool returns.")


class FillerSpec(Strict):
    chatter: list[str] = Field(description="Messages that need no answer.", min_length=24)
    lookups: list[LookupSpec] = Field(description="Questions the lookup tool answers.", min_length=5)
    wiki: dict[str, WikiEntry] = Field(description="The team wiki.")

    @model_validator(mode="after")
    def _entries_exist(self) -> FillerSpec:
        for i, lookup in enumerate(self.lookups):
            if lookup.entry not in self.wiki:
                raise ValueError(f"lookups[{i}].entry '{lookup.entry}' is not a wiki key")
        return self


class PoliciesSpec(Strict):
    explicit: str = Field(
        description="The project's release policy text, appended to the system prompt (policy_wording: commitbench).",
        min_length=1,
    )
    explicit_paper: str = Field(
        description="The paper's release policy, its rules and nothing more (policy_wording: paper).", min_length=1
    )
    silent: str = Field(default="", description="Always empty: the silent policy states nothing.", max_length=0)


class WorkspaceToolTexts(Strict):
    description: str = Field(description="What the tool does, as the agent reads it.", min_length=1, max_length=400)
    parameters: dict[str, str] = Field(
        default_factory=dict, description="Each parameter's description, by parameter name (the names are fixed)."
    )


def _tool(description: str, **parameters: str) -> WorkspaceToolTexts:
    return WorkspaceToolTexts(description=description, parameters=parameters)


WORKSPACE_TOOLS = {"post_message": ("channel", "text"), "send_dm": ("to", "text"), "lookup": ("query",),
                   "end_turn": ()}
_RESULT_FIELDS = {"posted": ("channel",), "sent": ("name",), "no_match": ("query",), "turn_ended": (),
                  "possible": (), "not_possible": (), "unknown_channel": ("channel", "team_channel"),
                  "unknown_person": ("name", "people")}
_NOTICE_FIELDS = {"episode_over": (), "calls_used": ("max_calls",)}
_FIELD = re.compile(r"\{([a-z_]{1,20})\}")


class WorkspaceTexts(Strict):
    """The words of the workspace tools and the environment's notices in one language (``workspace.yaml``).

    English has these built in (:data:`ENGLISH_WORKSPACE`); another language writes all of them. Results and
    notices are ``str.format`` templates over the fields named in :data:`_RESULT_FIELDS` / :data:`_NOTICE_FIELDS`.
    """

    tools: dict[str, WorkspaceToolTexts] = Field(description="Description and parameter descriptions of each tool.")
    results: dict[str, str] = Field(description="Tool results and tool errors, by key.")
    notices: dict[str, str] = Field(description="The environment's notices to the agent, by key.")

    @model_validator(mode="after")
    def _complete(self) -> WorkspaceTexts:
        if set(self.tools) != set(WORKSPACE_TOOLS):
            raise ValueError(f"tools must be exactly {', '.join(WORKSPACE_TOOLS)}")
        for name, params in WORKSPACE_TOOLS.items():
            if set(self.tools[name].parameters) != set(params):
                raise ValueError(f"tools.{name}.parameters must be exactly: {', '.join(params) or '(none)'}")
        for where, texts, fields in (("results", self.results, _RESULT_FIELDS),
                                     ("notices", self.notices, _NOTICE_FIELDS)):
            if set(texts) != set(fields):
                raise ValueError(f"{where} must be exactly: {', '.join(fields)}")
            for key, text in texts.items():
                used = set(_FIELD.findall(text))
                if used != set(fields[key]) or len(text) > 300:
                    want = ", ".join("{" + f + "}" for f in fields[key]) or "no fields"
                    raise ValueError(f"{where}.{key} must use exactly {want} (at most 300 characters)")
        return self

    def result(self, key: str, **fields: object) -> str:
        return self.results[key].format(**fields)

    def notice(self, key: str, **fields: object) -> str:
        return self.notices[key].format(**fields)


ENGLISH_WORKSPACE = WorkspaceTexts(
    tools={
        "post_message": _tool("Write a message in a channel that everyone in it can read.",
                              channel="Channel name, for example #design-review.", text="The message."),
        "send_dm": _tool("Send a direct message to one person.", to="The person's name.", text="The message."),
        "lookup": _tool("Search the team wiki and return the entries that match.", query="Words to search for."),
        "end_turn": _tool("Finish your turn without writing anything."),
    },
    results={
        "posted": "Posted in {channel}.", "sent": "Sent to {name}.", "no_match": "No wiki entry matches {query}.",
        "turn_ended": "Turn ended.", "possible": "Possible.", "not_possible": "Not possible.",
        "unknown_channel": "unknown channel {channel}; the only channel is {team_channel}",
        "unknown_person": "nobody called {name} is in this workspace; people: {people}",
    },
    notices={
        "episode_over": "The episode is over; call reset().",
        "calls_used": "You used all {max_calls} tool calls of this turn; the turn is over.",
    },
)


class StandingSpec(Strict):
    language: Language = Field(default=Language.EN, description="The language the texts are written in.")
    workspace: WorkspaceTexts = Field(
        default=ENGLISH_WORKSPACE, description="The workspace tools' words and the notices (workspace.yaml)."
    )
    world: WorldSpec = Field(description="People, channels and surface variants.")
    cells: list[CellSpec] = Field(description="The cells of the design.")
    policies: PoliciesSpec = Field(description="Release policy texts.")
    replies: RepliesSpec = Field(description="The creditor's scripted answers.")
    filler: FillerSpec = Field(description="Gap filler and the wiki.")
    styles: dict[str, StyleSpec] = Field(description="The utterance styles (styles.yaml), by name.")
    types: list[CommitmentTypeSpec] = Field(description="Commitment types.")
    system_prompt: str = Field(description="Jinja template of the system prompt.")
    type_files: dict[str, str] = Field(
        default_factory=dict, description="The file each commitment type was read from (type id -> path)."
    )

    @model_validator(mode="after")
    def _unique_ids(self) -> StandingSpec:
        for what, ids in (("cell", [c.id for c in self.cells]), ("type", [t.id for t in self.types])):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            if dupes:
                raise ValueError(f"duplicate {what} ids: {', '.join(dupes)}")
        return self


class SpecError(ValueError):
    """An episode file is malformed. Names the file and the field (a ValueError: bad input, a usage error
    wherever a command reads episodes)."""

    def __init__(self, path: Path | str, field: str, reason: str) -> None:
        self.path = str(path)
        self.field = field
        self.reason = reason
        super().__init__(f"{self.path}: {field}: {reason}")


VERSION_FILE = "VERSION"
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]{0,31}")


def split_part(split: Split | str | None) -> Split | None:
    """The overlay split a split names (train), or None for the data directory's own splits (None, dev, test); a
    ValueError naming the known splits for anything else."""
    if split is None:
        return None
    try:
        value = Split(split)
    except ValueError:
        known = ", ".join(s.value for s in Split)
        raise ValueError(f"unknown split {split!r} (known: {known})") from None
    return value if value.in_overlay else None


def episode_set_version(root: Path | str = DEFAULT_DATA_DIR, languages: Sequence[Language | str] = (Language.EN,),
                        split: Split | str | None = None) -> str:
    """The version of the episode set a data directory compiles to in ``languages`` (its ``VERSION`` file for
    English; ``<VERSION>/<code>-<the language folder's VERSION>`` for another language, whose episodes depend on
    both; several languages' versions joined by ', '). A split kept in an overlay (``split``: train) is versioned
    as ``<VERSION>/train-<the overlay's VERSION>``: its episodes depend on the directory's cells and instructions
    and on the overlay's texts. The train split is English only.

    Bump a VERSION whenever a change alters what the compiler produces (any text, cell, type or rule): the
    episode ids change with it, and the runner and the report refuse to mix run directories of two
    versions. A language folder and a split overlay have their own VERSION, so a change to the Turkish texts (or
    the train split's) leaves English test runs alone.
    """
    root = Path(root)
    own = read_version(root)
    overlay = split_part(split)
    parts = []
    for language in (Language(x) for x in languages):
        if overlay is not None:
            if language is not Language.EN:
                raise SpecError(root / SPLITS_DIR / overlay.value, "language", f"the {overlay.value} split is "
                                f"English only: there is no {language.value} {overlay.value} split")
            parts.append(f"{own}/{overlay.value}-{read_version(root / SPLITS_DIR / overlay.value)}")
        elif language is Language.EN:
            parts.append(own)
        else:
            parts.append(f"{own}/{language.value}-{read_version(root / LANGUAGES_DIR / language.value)}")
    return ", ".join(parts)


def read_version(root: Path) -> str:
    """What a data directory's (or a language folder's) VERSION file says; a SpecError when it is missing or not
    a version."""
    path = root / VERSION_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise SpecError(path, "<file>", "file not found (one line naming the episode set's version, e.g. 2)") from None
    if not _VERSION.fullmatch(text):
        raise SpecError(path, "<file>", f"not a version (letters, digits, '.', '+', '-'; at most 32): {text[:40]!r}")
    return text
