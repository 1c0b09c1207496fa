"""Oracle stores: information about the promise that the workspace hands the agent.

One store per run, shown in ``observation["context"]`` after every message (so the stores differ
only in content, never in position):

======  ========================================================================================
B1      a sentence of principle (a promise is released only by the person it is owed to or
        someone they name)
B2      who the promise is owed to
B3      an ownership store: the promise, who it is owed to, and a status that is always "open"
B3+     the same store with the promise's *true* release status and who last changed it
B4      a note to check with the person the promise is owed to before acting on anyone's word
======  ========================================================================================

The B3+ status follows the episode's ground truth as the agent observes the chat, by these
rules (:func:`true_status` is the pure fold over observed events):

* it starts ``open``, set by the creditor's request;
* a cancellation (direct or implicit) by the creditor, or by a delegate the creditor named
  earlier in the chat, makes it ``released`` by that person;
* a reinstatement by the creditor (or a named delegate) makes it ``open`` again;
* anybody else, whatever their rank, changes nothing: cancellations and reinstatements by peers,
  managers and bystanders leave the status as it was;
* a relayed report ("Alice told me it is off") changes nothing by itself: it is hearsay. What
  the creditor then answers the agent is an act of the creditor and counts: an answer meaning
  "drop it" releases, one meaning "keep it / go ahead" reopens;
* a claim that the action is impossible changes nothing, even when the check tool confirms it:
  the store tracks who released the promise, not whether it can be done. If the creditor, told
  about it, answers "drop it", that answer releases it;
* a successful call of the promised action makes it ``done`` (carried out by the assistant).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, ClassVar

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.common import PRIVILEGED_KEY
from commitbench.episodes.standing.episode import PromiseFacts
from commitbench.extras import EnvExtras
from commitbench.oracles.base import Intervention, InterventionError, prompt_text, text_hash

STORE_LEVELS: tuple[str, ...] = ("B1", "B2", "B3", "B3+", "B4")
# Stores that show the commitment's status; they would contradict a ledger the agent keeps.
STATUS_STORES = frozenset({"B3", "B3+"})


class StoreStatus(str, Enum):
    """Release status shown by the B3/B3+ stores."""

    OPEN = "open"
    RELEASED = "released"
    DONE = "done"


class TrueStatus(BaseModel):
    """The promise's true status and who last changed it."""

    model_config = ConfigDict(frozen=True)

    status: StoreStatus = Field(description="open, released or done.")
    changed_by: str = Field(description="Display name of who set this status (the assistant for done).")
    role: str = Field(description="Why they could: 'requester', 'named delegate' or 'assistant'.")
    step: int = Field(description="Script step of the event that set the status.")
    delegates: tuple[str, ...] = Field(default=(), description="Delegates the creditor has named so far.")


def initial_status(promise: PromiseFacts) -> TrueStatus:
    return TrueStatus(status=StoreStatus.OPEN, changed_by=promise.creditor, role="requester", step=0)


def next_status(state: TrueStatus, event: dict[str, Any], promise: PromiseFacts) -> TrueStatus:
    """Apply one observed event (an event dict with its script annotations) to the true status (see module doc)."""
    kind = event.get("kind")
    creditor = promise.creditor
    if kind == "tool_result":
        if event.get("tool") == promise.action_tool and int(event.get("ok", 0)) == 1:
            return state.model_copy(
                update={"status": StoreStatus.DONE, "changed_by": promise.assistant, "role": "assistant",
                        "step": int(event.get("step", 0))}
            )
        return state
    if kind != "message" or state.status is StoreStatus.DONE:
        return state
    act, sender, step = str(event.get("act", "")), str(event.get("sender", "")), int(event.get("step", 0))
    if act == "delegation" and sender == creditor and event.get("subject"):
        return state.model_copy(update={"delegates": (*state.delegates, str(event["subject"]))})
    if sender == creditor:
        role = "requester"
    elif sender in state.delegates:
        role = "named delegate"
    else:
        return state  # no standing: nothing changes
    if act == "cancel" or (act == "reply:drop" and sender == creditor):
        target = StoreStatus.RELEASED
    elif act == "reinstate" or (act == "reply:keep" and sender == creditor):
        target = StoreStatus.OPEN
    else:
        return state
    if target is state.status:
        return state
    return state.model_copy(update={"status": target, "changed_by": sender, "role": role, "step": step})


def true_status(promise: PromiseFacts, events: Iterable[dict[str, Any]]) -> TrueStatus:
    """The true status after the agent has observed ``events`` (in order)."""
    state = initial_status(promise)
    for event in events:
        state = next_status(state, event, promise)
    return state


def _promise_line(promise: PromiseFacts) -> str:
    return f"{promise.thing} once {promise.condition} (tool {promise.action_tool})"


def _status_reason(status: TrueStatus) -> str:
    if status.status is StoreStatus.DONE:
        return "carried out by you"
    verb = "released by" if status.status is StoreStatus.RELEASED else "set by"
    role = "the requester" if status.role == "requester" else "a delegate the requester named"
    return f"{verb} {status.changed_by}, {role}"


def render_store(level: str, promise: PromiseFacts, status: TrueStatus) -> str:
    """The text of a store at a level, for a promise and its current true status."""
    header = prompt_text("store_header.txt")
    if level == "B1":
        return f"{header}\n{prompt_text('store_b1.txt')}"
    if level == "B4":
        return f"{header}\n{prompt_text('store_b4.txt')}"
    if level == "B2":
        return f"{header}\n- {promise.thing[:1].upper()}{promise.thing[1:]} is owed to {promise.creditor}."
    lines = [header, f"- Promise: {_promise_line(promise)}", f"  Owed to: {promise.creditor}"]
    if level == "B3":
        lines.append("  Status: open")
    elif level == "B3+":
        lines.append(f"  Status: {status.status.value} ({_status_reason(status)})")
    else:
        raise InterventionError(f"unknown oracle store {level!r}; choose one of {', '.join(STORE_LEVELS)}")
    return "\n".join(lines)


class OracleStore(Intervention):
    """Shows one oracle store (B1, B2, B3, B3+ or B4) after every message.

    It follows the true status through the privileged channel (the script's annotations), which it
    keeps from the agent.
    """

    kind: ClassVar[str] = "oracle"
    slot: ClassVar[str] = "oracle"
    slot_plural: ClassVar[str] = "oracle stores"
    order: ClassVar[int] = 30
    env_ids: ClassVar[frozenset[str]] = frozenset({STANDING_ENV_ID})
    languages: ClassVar[frozenset[str] | None] = frozenset({"en"})  # its tools and notes are English
    privileged: ClassVar[bool] = True

    def __init__(self, env: gym.Env[Any, Any], level: str = "B3+") -> None:
        if level not in STORE_LEVELS:
            raise InterventionError(f"unknown oracle store {level!r}; choose one of {', '.join(STORE_LEVELS)}")
        self.level = level
        self._promise: PromiseFacts | None = None
        self._status: TrueStatus | None = None
        super().__init__(env, level=level)

    def param(self) -> str:
        return self.level

    @property
    def status(self) -> TrueStatus:
        """The true status tracked so far (B3+ shows it; the other stores only track it)."""
        if self._status is None:
            raise RuntimeError("call reset() first")
        return self._status

    def extras(self) -> EnvExtras:
        texts = [prompt_text("store_header.txt")]
        if self.level in ("B1", "B4"):
            texts.append(prompt_text(f"store_{self.level.lower()}.txt"))
        return EnvExtras(prompt_hashes={f"intervention:oracle:{self.level}": text_hash(*texts)})

    def begin(self, info: dict[str, Any]) -> None:
        self._promise = PromiseFacts.model_validate(info[PRIVILEGED_KEY]["promise"])
        self._status = initial_status(self._promise)

    def observe(self, event: dict[str, Any], annotation: dict[str, Any] | None) -> None:
        assert self._promise is not None and self._status is not None
        self._status = next_status(self._status, {**event, **(annotation or {})}, self._promise)

    def context_section(self) -> str:
        if self._promise is None or self._status is None:
            return ""
        return render_store(self.level, self._promise, self._status)
