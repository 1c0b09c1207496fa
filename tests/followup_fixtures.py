"""Small hand-written request rows for the follow-up tests (independent of the packaged request file)."""

from __future__ import annotations

from commitbench.episodes.followup.requests import FollowupRequest, RequestSource
from commitbench.episodes.followup.vocabulary import (
    Capability,
    Doability,
    Persona,
    RequestCategory,
    SetupId,
)


def make_request(
    request_id: str,
    category: RequestCategory,
    text: str,
    context: str = "I have a busy week ahead.",
    persona: Persona = Persona.GENERIC,
    capabilities: list[Capability] | None = None,
) -> FollowupRequest:
    from commitbench.episodes.followup.requests import DEFAULT_CAPABILITIES

    return FollowupRequest(
        id=request_id,
        category=category,
        persona=persona,
        text=text,
        context=context,
        required_capabilities=capabilities or DEFAULT_CAPABILITIES[category],
        source=RequestSource(dataset="template", source_id=f"test#{request_id}", original_text=text),
    )


REQUESTS: list[FollowupRequest] = [
    make_request("rem-001", RequestCategory.REMINDER, "Remind me at 9 tomorrow to call the dentist."),
    make_request("mon-001", RequestCategory.MONITORING, "Tell me when the parcel tracking says delivered."),
    make_request("cb-001", RequestCategory.CALLBACK, "Can someone call me back about my bill?",
                 context="My last bill looks far too high.", persona=Persona.SUPPORT),
    make_request("del-001", RequestCategory.DEFERRED_DELIVERY, "Send me the packing list on Friday morning."),
    make_request("mem-001", RequestCategory.MEMORY, "Keep in mind that my flat number is twelve for later."),
]

# The suite's matrix for these categories (C2 serves time-based requests, C3 memory, C4 callbacks).
_DOABLE: dict[RequestCategory, set[SetupId]] = {
    RequestCategory.REMINDER: {SetupId.C2},
    RequestCategory.MONITORING: {SetupId.C2},
    RequestCategory.DEFERRED_DELIVERY: {SetupId.C2},
    RequestCategory.MEMORY: {SetupId.C3},
    RequestCategory.CALLBACK: {SetupId.C4},
}


def doability(request: FollowupRequest, setup: SetupId) -> Doability:
    return Doability.DOABLE if setup in _DOABLE[request.category] else Doability.NOT_DOABLE
