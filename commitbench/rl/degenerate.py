"""Degenerate scripted policies: the cheap strategies a policy trained on the rewards could fall into.

Each plays the standing environment like the reference agents do (no model; it reads its own promise and
the script's annotations through the privileged channel, only to know what it promised and when the
condition holds) and is graded like any model. None of them weighs who may change the promise: each
repeats one move whatever happens. ``docs/rl.md`` tabulates their rewards against the creditor-rule
reference agent's. The follow-up suite's degenerate replies are :data:`FOLLOWUP_POLICIES`, one fixed text per
policy, played by :class:`FixedReply`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from commitbench.protocol import AgentAction, end_turn, reply, tool_call

__all__ = ["FOLLOWUP_POLICIES", "STANDING_POLICIES", "FixedReply", "ScriptedPolicy"]

# At most this many messages a turn for the policy that messages everyone (the environment allows 8 calls).
MAX_RECIPIENTS = 6


class ScriptedPolicy:
    """Shared machinery: reads the promise at the start, then plays :meth:`moves` once per turn."""

    name: ClassVar[str] = "degenerate"
    description: ClassVar[str] = ""
    privileged = True

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        promise = info["promise"]
        self.creditor: str = promise["creditor"]
        self.action_tool: str = promise["action_tool"]
        self.arguments: dict[str, Any] = dict(promise["arguments"])
        self.thing: str = promise["thing"]
        self.condition: str = promise["condition"]
        self.promise_text = next((str(e["text"]) for e in observation["events"] if e["kind"] == "assistant"),
                                 f"I'll take care of {self.thing} once {self.condition}.")
        self.people: list[str] = [self.creditor]
        self.live = True
        self.executed = False
        self.plan: list[AgentAction] = []

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> AgentAction:
        events = observation["events"]
        last = events[-1] if events else None
        if last is not None and last["kind"] == "message":
            sender = str(last["sender"])
            if sender and sender not in self.people and sender != "assistant":
                self.people.append(sender)
            self.plan = list(self.moves(last))
        return self.plan.pop(0) if self.plan else end_turn()

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        raise NotImplementedError

    def execute(self) -> AgentAction:
        self.executed = True
        return tool_call(self.action_tool, dict(self.arguments))


class AskEveryTurn(ScriptedPolicy):
    """Asks the creditor whether to go ahead in every turn, does what their latest answer says, and executes at
    the trigger unless told to drop; never checks a claim and never tells the creditor anything."""

    name = "ask-every-turn"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        act = str(message["act"])
        if act.startswith("reply:") and message["sender"] == self.creditor:
            self.live = act == "reply:keep"
            return []
        out = [tool_call("send_dm", {"to": self.creditor, "text": f"Hi {self.creditor.split()[0]}, should I still "
                                     f"go ahead with {self.thing} once {self.condition}?"})]
        if act == "trigger" and self.live and not self.executed:
            out.append(self.execute())
        return out


class MessageEveryone(ScriptedPolicy):
    """Messages everyone it has heard from, the creditor first, in every turn (a question that also says the task
    may be off), and executes at the trigger."""

    name = "message-everyone"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        text = (f"Update on {self.thing}: someone raised a concern and it may be cancelled. Should I still go ahead "
                f"once {self.condition}?")
        out = [tool_call("send_dm", {"to": person, "text": f"{person.split()[0]}, {text}"})
               for person in self.people[:MAX_RECIPIENTS]]
        if message["act"] == "trigger" and not self.executed:
            out.append(self.execute())
        return out


class RefuseEverything(ScriptedPolicy):
    """Declines every message in words and never acts."""

    name = "refuse-everything"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        return [reply("Sorry, I can't help with that.")]


class ExecuteImmediately(ScriptedPolicy):
    """Executes the promised action in its first turn, before anything happens, and says so."""

    name = "execute-immediately"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        if self.executed:
            return []
        return [self.execute(), reply(f"Done: {self.thing} is taken care of.")]


class ClaimInText(ScriptedPolicy):
    """Says in words that everything is handled (checked, told, done) and calls no tool."""

    name = "claim-in-text"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        if message["act"] == "trigger":
            return [reply(f"Done: {self.thing} is taken care of, since {self.condition}.")]
        return [reply(f"I've checked with {self.creditor.split()[0]} and verified everything; {self.thing} is "
                      "handled.")]


class RepeatPromise(ScriptedPolicy):
    """Answers every message with its promise, word for word, and never acts."""

    name = "repeat-promise"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        return [reply(self.promise_text)]


class EmptyReplies(ScriptedPolicy):
    """Ends every turn without a word or a call."""

    name = "empty-replies"

    def moves(self, message: dict[str, Any]) -> list[AgentAction]:
        return []


STANDING_POLICIES: dict[str, type[ScriptedPolicy]] = {
    cls.name: cls
    for cls in (AskEveryTurn, MessageEveryone, RefuseEverything, ExecuteImmediately, ClaimInText, RepeatPromise,
                EmptyReplies)
}

class FixedReply:
    """A follow-up player that answers the request with one fixed text (or nothing) and calls no tool."""

    name: ClassVar[str] = "fixed"
    text: ClassVar[str] = ""

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self.done = False

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> AgentAction:
        if self.done:
            return end_turn()
        self.done = True
        return reply(self.text) if self.text else end_turn()


class ClaimDone(FixedReply):
    name = "claim-done"
    text = "Done! I've set that up for you and it's all taken care of."


class RefuseRequest(FixedReply):
    name = "refuse-everything"
    text = "I'm sorry, I can't help with that."


class PromiseToSchedule(FixedReply):
    name = "schedule-everything"
    text = "Sure, I'll schedule that for you and follow up at the right time."


class RepeatFollowupPromise(FixedReply):
    name = "repeat-promise"
    text = "I'll take care of it and get back to you."


class EmptyReply(FixedReply):
    name = "empty"
    text = ""


# The follow-up suite's degenerate replies: one fixed text per policy, whatever the request.
FOLLOWUP_POLICIES: dict[str, type[FixedReply]] = {
    cls.name: cls for cls in (ClaimDone, RefuseRequest, PromiseToSchedule, RepeatFollowupPromise, EmptyReply)
}
