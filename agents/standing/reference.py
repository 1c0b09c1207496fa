"""Reference agents: deterministic release rules, no model.

Each agent reads its observations with the script's annotations (what a message does, whom it is
about, the sender's rank: they stand in for perfect understanding of what a message means) and the
structured form of its own promise from ``info["promise"]``. A participant does not see those, so
the agents declare ``privileged = True`` and the runner plays them through the explicit privileged
channel, :class:`commitbench.envs.privileged.RevealScriptAnnotations`; a plain environment does
not give them what they need. They share one machinery (ask the creditor, verify claims,
notify the creditor, answer wiki questions, execute at the trigger) and differ only in *who
they let change the promise*:

=====================  =====================================================================
agent                  rule
=====================  =====================================================================
creditor-rule          the creditor or a delegate they named may cancel or reinstate; anyone
                       else (and any second-hand report) makes it ask the creditor; claims of
                       impossibility are checked with the check tool
last-speaker-wins      whoever spoke last about the promise decides; relays count as
                       cancellations; claims are checked
rank-wins              a cancellation or reinstatement holds if the speaker ranks at least as
                       high as whoever last set the promise's state; claims are checked
always-execute         executes at the trigger whatever anybody says
drop-on-any-cancel     drops on any cancellation, relay or claim (unchecked); never reinstates
=====================  =====================================================================

All of them notify the creditor when they drop on a named delegate's word or because the
action turned out to be impossible.
"""

from __future__ import annotations

from collections import deque
from enum import Enum
from typing import Any

from commitbench.agents.registry import AgentEntry
from commitbench.agents.standing.phrases import phrase_book
from commitbench.envs.standing.voices import ANSWER_ACT
from commitbench.protocol import AgentAction, end_turn, reply, tool_call
from commitbench.traces import AgentIdentity


class Decision(str, Enum):
    OBEY = "obey"
    ASK = "ask"
    IGNORE = "ignore"


class RuleAgent:
    """Shared machinery; subclasses set ``name`` and override :meth:`decide` / the class flags."""

    name = "rule"
    privileged = True  # reads the script's annotations (see the module docstring)
    verifies_claims = True
    accepts_claims_unchecked = False
    description = ""

    def __init__(self) -> None:
        self._plan: deque[AgentAction] = deque()
        self._pending_after_check: str | None = None

    def identity(self) -> AgentIdentity:
        return AgentIdentity(name=self.name, kind="reference")

    # --------------------------------------------------------------- the rule
    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        raise NotImplementedError

    # ------------------------------------------------------------ machinery
    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        promise = info["promise"]
        self.creditor: str = promise["creditor"]
        self.creditor_first = self.creditor.split()[0]
        self.action_tool: str = promise["action_tool"]
        self.check_tool: str = promise["check_tool"]
        self.arguments: dict[str, Any] = dict(promise["arguments"])
        self.thing: str = promise["thing"]
        self.condition: str = promise["condition"]
        self.phrases = phrase_book(promise.get("language", "en"))
        self.impossible_verdict: str = promise.get("impossible_verdict", "Not possible.")
        self.live = True
        self.executed = False
        self.delegate: str | None = None
        self.holder_rank = 0
        self.asked_about: str | None = None
        self._plan.clear()
        self._pending_after_check = None
        self._claimant = ""
        for event in observation["events"]:
            if event["kind"] == "message" and event["act"] == "request":
                self.holder_rank = int(event["rank"])

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> AgentAction:
        # A live party's answer inside the turn opens nothing: the rule reacts to what opened the turn, or to its
        # own tool's result (the creditor's answer that decides opens a turn of its own, live or scripted).
        events = [e for e in observation["events"] if e.get("act") != ANSWER_ACT]
        last = events[-1] if events else None
        if last is not None and last["kind"] == "tool_result":
            self._after_tool(last)
        elif last is not None and last["kind"] == "message":
            self._plan.clear()
            for event in events:
                if event["kind"] == "message" and event["act"] == "delegation":
                    self.delegate = event["subject"] or None
            self._on_message(last)
        if self._plan:
            return self._plan.popleft()
        return end_turn()

    def _after_tool(self, result: dict[str, Any]) -> None:
        if result["tool"] == self.check_tool and self._pending_after_check is not None:
            claimant = self._pending_after_check
            self._pending_after_check = None
            if result["text"].startswith(self.impossible_verdict):
                self._release_as_impossible(claimant, checked=True)

    def _on_message(self, msg: dict[str, Any]) -> None:
        act, speaker, rank = msg["act"], msg["sender"], int(msg["rank"])
        if act == "lookup":
            self._plan.append(tool_call("lookup", {"query": msg["text"]}))
            self._answer_lookup = True
            return
        if act == "trigger":
            if self.live and not self.executed:
                self.executed = True
                self._plan.append(tool_call(self.action_tool, dict(self.arguments)))
                self._plan.append(reply(self._say("done")))
            return
        if act.startswith("reply:") and speaker == self.creditor and self.asked_about is not None:
            self.live = act == "reply:keep"
            self.holder_rank = rank
            self.asked_about = None
            return
        if act == "claim":
            self._on_claim(speaker)
            return
        if act not in ("cancel", "relay", "reinstate"):
            return
        wants_live = act == "reinstate"
        if wants_live == self.live:
            return  # nothing would change
        decision = self.decide(act, speaker, rank)
        if decision is Decision.OBEY:
            self.live = wants_live
            self.holder_rank = rank
            if not wants_live and speaker == self.delegate:
                self._notify(self._say("delegate_cancelled", first=speaker.split()[0]))
        elif decision is Decision.ASK:
            self._consult(act, speaker, str(msg.get("subject") or ""))

    def _on_claim(self, speaker: str) -> None:
        if not self.live:
            return
        if self.accepts_claims_unchecked:
            self._release_as_impossible(speaker, checked=False)
        elif self.verifies_claims:
            self._pending_after_check = speaker
            self._plan.append(tool_call(self.check_tool, self._check_arguments()))

    def _check_arguments(self) -> dict[str, Any]:
        # The check tool takes a subset of the action's arguments.
        return {k: v for k, v in self.arguments.items() if k in self._check_params} if self._check_params else {}

    def _release_as_impossible(self, claimant: str, checked: bool) -> None:
        self.live = False
        key = "impossible_checked" if checked else "impossible_unchecked"
        self._notify(self._say(key, first=claimant.split()[0]))

    def _say(self, key: str, first: str = "", who: str = "") -> str:
        template: str = getattr(self.phrases, key)
        return template.format(thing=self.thing, condition=self.condition, first=first, who=who)

    def _notify(self, text: str) -> None:
        greeting = self.phrases.greeting.format(greeting=self.creditor_first)
        self._plan.append(tool_call("send_dm", {"to": self.creditor, "text": greeting + text}))

    def _consult(self, act: str, speaker: str, subject: str = "") -> None:
        self.asked_about = act
        first = speaker.split()[0]
        if act == "cancel":
            question = self._say("ask_cancel", first=first)
        elif act == "relay":
            about_creditor = subject in ("", self.creditor)
            question = self._say("ask_relay_you" if about_creditor else "ask_relay_other", first=first,
                                 who=subject.split()[0] if subject else "")
        else:
            question = self._say("ask_reinstate", first=first)
        self._notify(question)

    # The lookup answer needs the tool result, so it is produced after the result arrives.
    _answer_lookup = False
    _check_params: tuple[str, ...] = ()

    def bind_tools(self, tools: list[dict[str, Any]]) -> None:
        for tool in tools:
            fn = tool["function"]
            if fn["name"] == self.check_tool:
                self._check_params = tuple(fn["parameters"].get("properties", {}))


class _LookupAware(RuleAgent):
    """Adds answering wiki questions with the lookup result."""

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        super().begin(observation, info)
        self.bind_tools(info.get("tools", []))

    def _after_tool(self, result: dict[str, Any]) -> None:
        super()._after_tool(result)
        if result["tool"] == "lookup" and self._answer_lookup:
            self._answer_lookup = False
            self._plan.append(reply(result["text"]))


class CreditorRuleAgent(_LookupAware):
    name = "creditor-rule"
    description = "Only the creditor or a named delegate may cancel or reinstate; others prompt a question."

    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        if act == "relay":
            return Decision.ASK
        if speaker == self.creditor or speaker == self.delegate:
            return Decision.OBEY
        return Decision.ASK


class LastSpeakerWinsAgent(_LookupAware):
    name = "last-speaker-wins"
    description = "Whoever spoke last about the promise decides."

    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        return Decision.OBEY


class RankWinsAgent(_LookupAware):
    name = "rank-wins"
    description = "A change holds if the speaker ranks at least as high as whoever last set the state."

    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        return Decision.OBEY if rank >= self.holder_rank else Decision.IGNORE


class AlwaysExecuteAgent(_LookupAware):
    name = "always-execute"
    description = "Executes at the trigger, whatever anybody says."
    verifies_claims = False

    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        return Decision.IGNORE


class DropOnAnyCancelAgent(_LookupAware):
    name = "drop-on-any-cancel"
    description = "Drops on any cancellation, relay or claim; never reinstates."
    verifies_claims = False
    accepts_claims_unchecked = True

    def decide(self, act: str, speaker: str, rank: int) -> Decision:
        return Decision.IGNORE if act == "reinstate" else Decision.OBEY


REFERENCE_AGENTS: dict[str, type[RuleAgent]] = {
    cls.name: cls
    for cls in (CreditorRuleAgent, LastSpeakerWinsAgent, RankWinsAgent, AlwaysExecuteAgent, DropOnAnyCancelAgent)
}


# The standing suite's reference agents, registered through the commitbench.agents entry point.
AGENT_ENTRIES: tuple[AgentEntry, ...] = tuple(
    AgentEntry(name=name, make=cls, suites=("standing",), reference=True, description=cls.description)
    for name, cls in REFERENCE_AGENTS.items()
)


def make_reference_agent(name: str) -> RuleAgent:
    try:
        return REFERENCE_AGENTS[name]()
    except KeyError:
        raise ValueError(f"unknown reference agent {name!r}; known: {', '.join(REFERENCE_AGENTS)}") from None
