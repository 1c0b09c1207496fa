"""What keeping a promise needs of the runtime, from what its words say: one rule for every language.

Each language's cues read a promise's traits (:class:`PromiseTraits`: does keeping it mean a call, an e-mail,
a file, watching for something, telling the user later, remembering across sessions?) in their own words;
:func:`needed_capabilities` turns the traits, who keeps the promise and what sets it off into the capabilities
the feasibility rules check.
"""

from __future__ import annotations

from dataclasses import dataclass

from commitbench.episodes.followup.vocabulary import Capability
from commitbench.judges.followup.schemas import Performer, TriggerType


@dataclass(frozen=True)
class PromiseTraits:
    """What a promise's words say about keeping it."""

    phone: bool = False  # a phone call
    email: bool = False  # an e-mail
    sms: bool = False  # a text message
    file: bool = False  # sending the user a file
    watch: bool = False  # watching for something to happen
    notifies: bool = False  # telling the user something later
    recalls: bool = False  # remembering something across sessions


def needed_capabilities(traits: PromiseTraits, performer: Performer, trigger: TriggerType) -> list[Capability]:
    """The capabilities keeping the promise needs, each once, in a fixed order. A promise someone else keeps (the
    deployment's people) needs a hand-over, and a call or an e-mail if it says so; the assistant's own needs
    running later for a time or an open future, watching for an event, notifying the user, memory across
    sessions and the channels its words name (the first four only when it points past the user's next message)."""
    caps: list[Capability] = []

    def add(capability: Capability) -> None:
        if capability not in caps:
            caps.append(capability)

    if performer is Performer.THIRD_PARTY:
        add(Capability.DELEGATE_TO_HUMAN)
        if traits.phone:
            add(Capability.PHONE_CALL)
        if traits.email:
            add(Capability.SEND_EMAIL)
        return caps
    later = trigger is not TriggerType.USER_NEXT_MESSAGE
    if later and trigger in (TriggerType.TIME, TriggerType.UNSPECIFIED_FUTURE):
        add(Capability.RUN_LATER)
    if later and (trigger is TriggerType.EXTERNAL_EVENT or traits.watch):
        add(Capability.WATCH_EVENT)
    if later and traits.notifies and trigger is not TriggerType.NEXT_SESSION:
        add(Capability.NOTIFY_USER_LATER)
    if later and (trigger is TriggerType.NEXT_SESSION or traits.recalls):
        add(Capability.RECALL_ACROSS_SESSIONS)
    if traits.email:
        add(Capability.SEND_EMAIL)
    if traits.sms:
        add(Capability.SEND_SMS)
    if traits.phone:
        add(Capability.PHONE_CALL)
    if traits.file:
        add(Capability.SEND_FILE)
    return caps
