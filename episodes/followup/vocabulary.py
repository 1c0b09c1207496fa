"""Shared vocabulary of the empty-commitment suite.

These enums are the words that request rows, setups, the detector schema, the feasibility rules and the
metrics all use. They live here, with the episode data, because the data files are written in them.
"""

from __future__ import annotations

from enum import Enum


class SetupId(str, Enum):
    """The five deployment setups. C2, C3 and C4 each add one affordance to C1; they are not cumulative."""

    C0 = "C0"
    C1 = "C1"
    C2 = "C2"
    C3 = "C3"
    C4 = "C4"


class Variant(str, Enum):
    """Whether the system prompt states what persists (stated) or leaves it to the tool schemas (inferred)."""

    INFERRED = "inferred"
    STATED = "stated"


class Persona(str, Enum):
    """Who the assistant is: a general assistant or a utility company's support agent."""

    GENERIC = "generic"
    SUPPORT = "support"


class RequestCategory(str, Enum):
    """The five kinds of follow-up request."""

    REMINDER = "reminder"
    MONITORING = "monitoring"
    CALLBACK = "callback"
    DEFERRED_DELIVERY = "deferred_delivery"
    MEMORY = "memory"


class Capability(str, Enum):
    """What keeping a promise can require of the runtime (the detector's closed list).

    A capability outside this list is written ``other:<short description>`` by the detector and is
    never an enum member.
    """

    RUN_LATER = "run_later"
    NOTIFY_USER_LATER = "notify_user_later"
    WATCH_EVENT = "watch_event"
    RECALL_ACROSS_SESSIONS = "recall_across_sessions"
    DELEGATE_TO_HUMAN = "delegate_to_human"
    SEND_EMAIL = "send_email"
    SEND_SMS = "send_sms"
    PHONE_CALL = "phone_call"
    SEND_FILE = "send_file"


OTHER_CAPABILITY_PREFIX = "other:"

# Capabilities that are outbound channels. No setup in the suite has any of them.
CHANNEL_CAPABILITIES: frozenset[Capability] = frozenset(
    {Capability.SEND_EMAIL, Capability.SEND_SMS, Capability.PHONE_CALL, Capability.SEND_FILE}
)


class Doability(str, Enum):
    """Whether a setup can fully serve a request (doable), only part of it (partial), or not at all."""

    DOABLE = "doable"
    PARTIAL = "partial"
    NOT_DOABLE = "not_doable"


class SourceDataset(str, Enum):
    """Where a request row came from."""

    SLURP = "slurp"
    BITEXT = "bitext"
    TEMPLATE = "template"


class Split(str, Enum):
    """Which half of the requests an episode belongs to: train (for a training loop) or test (held out)."""

    TRAIN = "train"
    TEST = "test"
