"""A compiled, concrete standing episode: everything the environment replays."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.standing.spec import (
    ENGLISH_WORKSPACE,
    Expected,
    ExpectedOutcome,
    Language,
    PolicyWording,
    ReplyKind,
    ReplyRule,
    Split,
    WikiEntry,
    WorkspaceTexts,
)
from commitbench.protocol import ToolSpec


class Policy(str, Enum):
    EXPLICIT = "explicit"
    SILENT = "silent"


class ScriptAct(str, Enum):
    """What a scripted message is, for signals and for reference agents."""

    REQUEST = "request"
    PROMISE = "promise"
    DELEGATION = "delegation"
    CANCEL = "cancel"
    RELAY = "relay"
    CLAIM = "claim"
    REINSTATE = "reinstate"
    FILLER = "filler"
    LOOKUP = "lookup"
    TRIGGER = "trigger"
    CLOSING = "closing"


# The step of the pre-seeded promise (the request is step 0): the creditor's answer in a cell without events
# follows it, and the environment reads answers as due from there.
PROMISE_STEP = 1
CANCELLATION_ACTS = frozenset({ScriptAct.CANCEL, ScriptAct.RELAY, ScriptAct.CLAIM, ScriptAct.REINSTATE})
# Roles with standing over the promise: its creditor always; the delegate when the creditor named them.
CREDITOR_ROLE = "creditor"
DELEGATE_ROLE = "delegate"


class CellRoles(BaseModel):
    """What a cell's scripted events do to the promise, read from the script (never from the cell's id).

    Metrics pick their runs by these facts, so a cell a student adds under any id enters every metric
    its events qualify it for.
    """

    model_config = ConfigDict(frozen=True)

    baseline: bool = Field(description="No scripted event changes or challenges the promise.")
    release_step: int | None = Field(
        description="Step of the first cancellation by someone with standing (the creditor, or a delegate the "
        "creditor named); None when nobody with standing releases the promise."
    )
    reinstate_step: int | None = Field(description="Step of the first reinstatement after that release, if any.")
    reinstated_with_standing: bool = Field(
        description="That reinstatement came from someone with standing (the promise is owed again)."
    )
    unauthorized_speaker: str | None = Field(
        description="Role of a speaker without standing who cancels directly or implicitly while the promise is "
        "still owed (peer, manager, ...); None when no such cancellation happens."
    )
    unauthorized_style: str | None = Field(
        description="How that speaker cancels: the event's style (direct, implicit, or a style a cell adds)."
    )
    relay: bool = Field(description="Someone reports second-hand that the creditor cancelled.")
    claim: bool = Field(description="Someone claims the promised action is impossible.")

    @property
    def override_cell(self) -> bool:
        """Released by someone with standing and never reinstated: executing is overriding the release."""
        return self.release_step is not None and self.reinstate_step is None

    @property
    def reinstated_without_standing(self) -> bool:
        """Released with standing, then 'go ahead after all' from someone without it: the release still holds."""
        return self.reinstate_step is not None and not self.reinstated_with_standing

    @property
    def unauthorized_cell(self) -> bool:
        """Only someone without standing cancels (directly or implicitly): the promise is still owed."""
        return self.unauthorized_speaker is not None and self.release_step is None and not self.relay


def cell_roles(script: list[ScriptMessage]) -> CellRoles:
    """The :class:`CellRoles` of a script: who speaks with standing, and what each event does."""
    delegated = any(m.act is ScriptAct.DELEGATION and m.subject == DELEGATE_ROLE for m in script)

    def has_standing(role: str) -> bool:
        return role == CREDITOR_ROLE or (delegated and role == DELEGATE_ROLE)

    events = [m for m in script if m.act in CANCELLATION_ACTS]
    release = next((m for m in events if m.act is ScriptAct.CANCEL and has_standing(m.sender)), None)
    reinstate = next(
        (m for m in events if release is not None and m.step > release.step and m.act is ScriptAct.REINSTATE), None
    )
    # Any cancellation by someone without standing, however it is worded (a style of styles.yaml).
    unauthorized = next((m for m in events if m.act is ScriptAct.CANCEL and not has_standing(m.sender)), None)
    return CellRoles(
        baseline=not events,
        release_step=release.step if release is not None else None,
        reinstate_step=reinstate.step if reinstate is not None else None,
        reinstated_with_standing=reinstate is not None and has_standing(reinstate.sender),
        unauthorized_speaker=unauthorized.sender if unauthorized is not None else None,
        unauthorized_style=unauthorized.style if unauthorized is not None else None,
        relay=any(m.act is ScriptAct.RELAY for m in events),
        claim=any(m.act is ScriptAct.CLAIM for m in events),
    )


class Person(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str = Field(description="Role key (creditor, delegate, peer, manager, bystander, colleague).")
    name: str = Field(description="Full display name.")
    title: str = Field(description="Job title.")
    rank: int = Field(description="Seniority; higher outranks lower.")

    @property
    def first_name(self) -> str:
        return self.name.split()[0]


class ScriptMessage(BaseModel):
    model_config = ConfigDict(frozen=True)

    step: int = Field(description="Position in the script (0-based).")
    sender: str = Field(description="Role key of the speaker, or 'assistant' for the pre-seeded promise.")
    channel: str = Field(description="Channel the message appears in.")
    text: str = Field(description="Rendered message text.")
    act: ScriptAct = Field(description="What the message does.")
    style: str = Field(default="", description="Utterance style for cancellation-type acts.")
    subject: str = Field(default="", description="Role key of the person the act is about, if any.")
    lookup_entry: str = Field(default="", description="Wiki key that answers a lookup question.")


ROLES_KEPT = 8_192  # scripts whose roles are remembered (a test split has 1,080 episodes)
# id(script) -> (the script, its roles): the script is held, so its id is not reused while it is remembered.
_ROLES: dict[int, tuple[list[ScriptMessage], CellRoles]] = {}
KEEP_REPLIES = frozenset({ReplyKind.STILL_NEEDED, ReplyKind.DENY_CANCEL, ReplyKind.GO_AHEAD})


class CreditorReply(BaseModel):
    """One scripted answer of the creditor, due to the first message addressed to them after an event."""

    model_config = ConfigDict(frozen=True)

    after_step: int = Field(
        description="Step of the scripted event this answer follows (the promise's, PROMISE_STEP, in a cell without "
        "events)."
    )
    kind: ReplyKind = Field(description="What the answer says about the promise.")
    text: str = Field(description="Rendered answer text.")

    @property
    def keeps_promise(self) -> bool:
        """Whether the answer tells the assistant to keep (rather than drop) the promise."""
        return self.kind in KEEP_REPLIES


class PromiseFacts(BaseModel):
    """The structured form of the assistant's promise, as the privileged channel hands it on."""

    model_config = ConfigDict(frozen=True)

    assistant: str = Field(description="The assistant's display name.")
    creditor: str = Field(description="Full name of the person the promise is owed to.")
    action_tool: str = Field(description="Name of the promised action tool.")
    check_tool: str = Field(description="Name of the tool that shows whether the action is possible.")
    arguments: dict[str, Any] = Field(description="Arguments the promise commits to.")
    thing: str = Field(description="Noun phrase for the promised task.")
    condition: str = Field(description="The trigger condition.")
    language: Language = Field(default=Language.EN, description="The language the episode is written in.")
    impossible_verdict: str = Field(
        default=ENGLISH_WORKSPACE.results["not_possible"],
        description="How the check tool's result begins when the action is impossible, in the episode's language.",
    )


class Episode(BaseModel):
    """One concrete episode. ``id`` is a content hash of every other field."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Stable content-hash id, 'st-' + 12 hex digits.")
    split: Split = Field(description="dev, test or train (by commitment type).")
    commitment_type: str = Field(description="Commitment type id.")
    cell: str = Field(description="Cell id.")
    policy: Policy = Field(description="Release policy shown in the system prompt.")
    gap: int = Field(
        description="Filler messages between the last cancellation-type event and the trigger (BASE, which has "
        "no event, has its opening padding before them)."
    )
    variant: int = Field(description="Surface variant (0-2).")
    manager_cell: bool = Field(description="Whether the cell is a manager cell.")
    assistant: str = Field(description="The assistant's display name.")
    team: str = Field(description="Team name.")
    channel: str = Field(description="Team channel.")
    people: list[Person] = Field(description="Everyone in the workspace.")
    system_prompt: str = Field(description="Rendered system prompt (includes the policy when explicit).")
    thing: str = Field(description="Noun phrase for the promised task.")
    condition: str = Field(description="The trigger condition.")
    action_tool: ToolSpec = Field(description="The promised action tool.")
    target_args: dict[str, Any] = Field(description="Arguments the promise commits to.")
    compared_args: list[str] | None = Field(
        default=None,
        description="The arguments an execution is graded on (null: all of target_args); the paper's texts of a "
        "type may leave one to the assistant.",
    )
    action_done_text: str = Field(description="Result text when the action succeeds.")
    action_failed_text: str = Field(description="Result text when the action is impossible.")
    check_tool: ToolSpec = Field(description="The check tool.")
    check_possible: bool = Field(description="Whether the action is possible in this episode.")
    check_text: str = Field(description="What the check tool returns.")
    wiki: dict[str, WikiEntry] = Field(description="Team wiki for the lookup tool.")
    script: list[ScriptMessage] = Field(description="Every scripted message in order.")
    trigger_step: int = Field(description="Step of the trigger message.")
    event_steps: list[int] = Field(description="Steps of the cancellation-type events.")
    reply_rule: ReplyRule = Field(description="When the creditor answers (per_event, or the paper's single answer).")
    creditor_replies: list[CreditorReply] = Field(
        description="The creditor's scripted answers in script order; each is due to the first message addressed "
        "to them after its event, and only while no later event has happened."
    )
    acknowledgement: str = Field(description="The creditor's answer to every other message.")
    expected: Expected = Field(description="Correct behaviour under the explicit policy.")
    explicit_policy: str = Field(
        description="The explicit release policy in the wording of the episode's profile: the end of the system "
        "prompt when the policy factor is explicit, and what a policy intervention shows as 'explicit'."
    )
    policy_wording: PolicyWording = Field(
        default=PolicyWording.COMMITBENCH,
        description="Whose wording the explicit policy is in (the profile's): a paraphrase of it keeps its rules.",
    )
    notify_by_trigger: bool = Field(
        default=True,
        description="A required notification counts only before the trigger (the project's profile); false: at any "
        "time (the paper's, which does not say).",
    )
    language: Language = Field(default=Language.EN, description="The language the episode is written in.")
    workspace: WorkspaceTexts = Field(
        default=ENGLISH_WORKSPACE, description="The workspace tools' words and the environment's notices."
    )
    twins: dict[str, str] = Field(
        default_factory=dict,
        description="The ids of the same episode in the data directory's other languages, by language code (same "
        "cell, type, surface, gap, policy, step structure and seed): an English episode's Turkish twin, a Turkish "
        "episode's English one; empty where the directory has one language.",
    )

    def id_fields(self) -> dict[str, Any]:
        """What the content-hash id covers: every field but the id and the twins (pointers, not content), and
        the language and workspace words only where they differ from English's, so English ids stay as they
        were before episodes had a language."""
        exclude = {"id", "twins"}
        if self.language is Language.EN:
            exclude.add("language")
        if self.workspace == ENGLISH_WORKSPACE:
            exclude.add("workspace")
        return self.model_dump(mode="json", exclude=exclude)

    def person(self, role: str) -> Person:
        for p in self.people:
            if p.role == role:
                return p
        raise KeyError(role)

    @property
    def creditor(self) -> Person:
        return self.person("creditor")

    def reply_due(self, last_event_step: int) -> CreditorReply | None:
        """The answer true after the latest event delivered so far (None before any event)."""
        due = [r for r in self.creditor_replies if r.after_step <= last_event_step]
        return due[-1] if due else None

    def roles(self) -> CellRoles:
        """What the cell's events do to the promise (see :class:`CellRoles`), read once per script: every
        metric and page of a run asks, and a large run asks for each of its traces."""
        found = _ROLES.get(id(self.script))
        if found is None or found[0] is not self.script:
            if len(_ROLES) >= ROLES_KEPT:
                _ROLES.clear()
            found = _ROLES[id(self.script)] = (self.script, cell_roles(self.script))
        return found[1]

    @property
    def expects_execute(self) -> bool:
        return self.expected.outcome is ExpectedOutcome.EXECUTE

    def promise_facts(self) -> PromiseFacts:
        return PromiseFacts(
            assistant=self.assistant, creditor=self.creditor.name, action_tool=self.action_tool.name,
            check_tool=self.check_tool.name, arguments=dict(self.target_args), thing=self.thing,
            condition=self.condition, language=self.language,
            impossible_verdict=self.workspace.result("not_possible"),
        )

    def factors(self) -> dict[str, str | int]:
        return {
            "split": self.split.value,
            "commitment_type": self.commitment_type,
            "cell": self.cell,
            "policy": self.policy.value,
            "gap": self.gap,
            "variant": self.variant,
            # Another language than English is a factor of its episodes (English's factors stay as they were).
            **({"language": self.language.value} if self.language is not Language.EN else {}),
        }
