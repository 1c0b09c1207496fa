"""A trace as a chat: messages, each tool call with its arguments and result, reasoning and revisions, in order.

The environment logs every event (messages, the assistant's posts, tool results) in ``trace.events``
and every turn with its calls in ``trace.turns``; this module joins the two: a tool result event
becomes the call that produced it (found by call id), each turn's reasoning (from its model calls)
follows the message that opened it, and a reply an intervention replaced is kept beside the one
shown. Every call of a turn is shown even if its result event is missing. Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import orjson

from commitbench.analysis.view.model import ChatItem, ItemKind, ModelCallView, Part, VoiceView, page_part
from commitbench.protocol import Event, EventKind, ToolCallRecord
from commitbench.traces import EpisodeTrace, TurnRecord

_SYSTEM, _TOOL_RESULT = EventKind.SYSTEM, EventKind.TOOL_RESULT
_ASSISTANT, _MESSAGE = EventKind.ASSISTANT, EventKind.MESSAGE
# A call's arguments in the search text: ``json.dumps(arguments, ensure_ascii=False)``, with one encoder made once.
_ARGUMENTS = json.JSONEncoder(ensure_ascii=False)
# Transcripts are for reading: a single text beyond this is cut (the trace keeps all of it).
MAX_ITEM_TEXT = 20_000
PROMISE_ACT = "promise"
# The item kinds as the page's JSON holds them (every maker and reader of a page's items uses these).
MESSAGE, ASSISTANT, CALL = ItemKind.MESSAGE.value, ItemKind.ASSISTANT.value, ItemKind.CALL.value
REASONING, NOTICE, REVISION = ItemKind.REASONING.value, ItemKind.NOTICE.value, ItemKind.REVISION.value


def clip(text: str, limit: int = MAX_ITEM_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"


def _plain_json(value: Any) -> bool:
    """Whether ``value`` holds only texts, booleans, None and integers of 64 bits (no float, whose text orjson
    writes otherwise than :func:`json.dumps`), in containers; walked with a stack (no recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        elif not isinstance(item, int) or not -(1 << 63) <= item < (1 << 64):
            return False
    return True


def indented_json(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, written by orjson where the two write the same text (an
    indent puts :mod:`json` on its pure-Python encoder, the largest cost of a transcript page)."""
    if _plain_json(value):
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")
    return json.dumps(value, indent=2, ensure_ascii=False)


def arguments_text(call: ToolCallRecord) -> str:
    """A call's arguments as indented JSON, or exactly as sent when they did not parse."""
    if call.arguments is not None:
        return clip(indented_json(call.arguments))
    return clip(call.raw_arguments or "")


def system_prompt(trace: EpisodeTrace) -> str:
    return next((e.text for e in trace.events if e.kind is EventKind.SYSTEM), "")


def said_item(
    kind: str, step: int, turn: int | None, sender: str, title: str, party: str, channel: str, text: str, act: str,
    subject: str, message_index: int | None = None, verdicts: list[Part] | None = None, voice: Part | None = None,
) -> Part:
    """A message, notice or assistant :class:`ChatItem` part: what :func:`page_part` makes of these fields, made
    field by field, in the order ChatItem declares them (most items of a page are these, and a large run has a
    page per trace)."""
    item: Part = {"kind": kind}
    if step != 0:
        item["step"] = step
    if turn is not None:
        item["turn"] = turn
    if sender != "":
        item["sender"] = sender
    if title != "":
        item["title"] = title
    if party != "":
        item["party"] = party
    if channel != "":
        item["channel"] = channel
    if text != "":
        item["text"] = text
    if act != "":
        item["act"] = act
    if subject != "":
        item["subject"] = subject
    if message_index is not None:
        item["message_index"] = message_index
    if verdicts:
        item["verdicts"] = verdicts
    if voice is not None:
        item["voice"] = voice
    return item


def call_item(call: ToolCallRecord) -> Part:
    """A call's :class:`ChatItem` part, as :func:`page_part` makes it, made field by field in ChatItem's order."""
    item: Part = {"kind": CALL}
    if call.step != 0:
        item["step"] = call.step
    item["turn"] = call.turn  # never None: a call belongs to a turn
    if call.tool != "":
        item["tool"] = call.tool
    arguments = arguments_text(call)
    if arguments != "":
        item["arguments"] = arguments
    if call.result != "":
        item["result"] = clip(call.result)
    if not call.ok:
        item["ok"] = False
    if call.error_kind != "":
        item["error_kind"] = call.error_kind
    if call.is_write:
        item["write"] = True
    return item


def _reasoning(trace: EpisodeTrace) -> dict[int, str]:
    out: dict[int, list[str]] = {}
    for call in trace.model_calls:
        if call.reasoning.strip():
            out.setdefault(call.turn, []).append(call.reasoning.strip())
    return {turn: "\n\n".join(texts) for turn, texts in out.items()}


def chat_items(
    trace: EpisodeTrace,
    parties: Mapping[str, str] | None = None,
    verdicts: Callable[[int], list[Part]] | None = None,
    voices: Callable[[Event], VoiceView | None] | None = None,
) -> list[Part]:
    """The conversation of a trace, in order (the system prompt is left out: see :func:`system_prompt`): each
    item a :class:`ChatItem` as plain data (:func:`commitbench.analysis.view.model.page_part`).

    ``parties`` maps a sender's display name to their part in the episode (creditor, peer...);
    ``verdicts`` gives the judges' labels of the n-th judged assistant message (:class:`VerdictView` parts; the
    pre-seeded promise is not judged); ``voices`` says how a party model voiced a person's message (live parties; it is
    asked only of messages whose trace event carries a voice mark).
    """
    parties = parties or {}
    turns = list(trace.turns)
    by_id = {c.call_id: c for t in turns for c in t.calls if c.call_id}
    reasoning = _reasoning(trace)
    items: list[Part] = []
    shown: set[int] = set()  # id() of the call records already shown
    current: TurnRecord | None = None
    next_turn = 0
    judged = 0

    def close(turn: TurnRecord | None) -> None:
        if turn is None:
            return
        for call in turn.calls:
            if id(call) not in shown:
                shown.add(id(call))
                items.append(call_item(call))
        for revision in turn.revisions:
            items.append(page_part(
                ChatItem, kind=REVISION, step=turn.opened_by.step, turn=turn.index, channel=turn.reply_channel,
                text=clip(turn.reply or ""), act=revision.kind, result=revision.note, by=revision.by,
                original=clip(revision.original),
            ))

    opening = turns[0].opened_by if turns else None  # the message that opens the next turn
    for event in trace.events:
        kind = event.kind
        if kind is _SYSTEM:
            continue
        turn_index = current.index if current is not None else None
        if kind is _TOOL_RESULT:
            call = by_id.get(event.call_id)
            if call is not None and id(call) not in shown:
                shown.add(id(call))
                items.append(call_item(call))
            else:
                items.append(page_part(ChatItem, kind=CALL, step=event.step, turn=turn_index, tool=event.tool,
                                       result=clip(event.text), ok=event.ok))
            continue
        if kind is _ASSISTANT:
            index = None
            found: list[Part] = []
            if event.act != PROMISE_ACT:
                index = judged
                judged += 1
                found = verdicts(index) if verdicts is not None else []
            items.append(said_item(ASSISTANT, event.step, turn_index, event.sender, event.role, "", event.channel,
                                   clip(event.text), event.act, "", index, found))
            continue
        # Whether this is the message that opened the next turn: the same step, text, kind, sender and channel.
        opens = (opening is not None and event.step == opening.step and event.text == opening.text
                 and kind is opening.kind and event.sender == opening.sender and event.channel == opening.channel)
        if opens:
            if current is not None and (current.calls or current.revisions):
                close(current)
            current = turns[next_turn]
            next_turn += 1
            opening = turns[next_turn].opened_by if next_turn < len(turns) else None
        voice = voices(event) if voices is not None and event.voice is not None else None
        items.append(said_item(
            MESSAGE if kind is _MESSAGE else NOTICE, event.step,
            current.index if opens and current is not None else turn_index, event.sender, event.role,
            parties.get(event.sender, ""), event.channel, clip(event.text),
            event.act if kind is _MESSAGE else kind.value, event.subject,
            voice=voice.model_dump(mode="json", exclude_defaults=True) if voice is not None else None,
        ))
        if opens and current is not None and current.index in reasoning:
            items.append(page_part(ChatItem, kind=REASONING, step=event.step, turn=current.index,
                                   text=clip(reasoning[current.index])))
    close(current)
    for turn in turns[next_turn:]:  # turns whose opening message is not in the event log
        close(turn)
    return items


def model_call_views(trace: EpisodeTrace) -> list[Part]:
    """Every model call of the agent, a :class:`ModelCallView` each, as plain data."""
    return [
        page_part(
            ModelCallView, turn=c.turn, purpose=c.purpose, latency_s=round(c.latency_s, 4),
            prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, cache_hit=c.cache_hit,
            finish_reason=c.finish_reason, error=c.error,
        )
        for c in trace.model_calls
    ]


def search_text(trace: EpisodeTrace, shared: Collection[str]) -> str:
    """Every word of the run a free-text search should find, less the texts in ``shared`` (stored once)."""
    parts: list[str] = []
    for event in trace.events:
        if event.kind is not _SYSTEM and event.text and event.text not in shared:
            parts.append(event.text)
    for turn in trace.turns:  # most turns of a long run call nothing and revise nothing
        if turn.calls:
            parts.extend(_ARGUMENTS.encode(c.arguments) if c.arguments is not None else (c.raw_arguments or "")
                         for c in turn.calls)
        if turn.revisions:
            parts.extend(r.original for r in turn.revisions)
    parts.extend(c.reasoning for c in trace.model_calls if c.reasoning)
    return "\n".join(p for p in parts if p)


def event_speakers(trace: EpisodeTrace) -> str:
    """Who speaks in a run, for search (what ``site.speakers`` reads from its :func:`chat_items` made without
    parties, read from the events): each person's name and job title, once, in the order they first speak."""
    seen: dict[str, str] = {}
    for event in trace.events:
        sender = event.sender
        if event.kind is _MESSAGE and sender and sender not in seen:
            seen[sender] = f"{sender} · {event.role}" if event.role else sender
    return "\n".join(seen.values())


def fact(label: str, value: str, field: str = "", detail: bool = False) -> Part:
    """A :class:`Fact` part, as :func:`page_part` makes it (made directly: a page has a dozen or more)."""
    made: Part = {"label": label, "value": value}
    if field != "":
        made["field"] = field
    if detail:
        made["detail"] = detail
    return made


def identity_facts(trace: EpisodeTrace, agent_field: str, arm_field: str, arm: str) -> list[Part]:
    """The facts every run has: who played, under which arm, the sample, its status and timing."""
    agent = trace.agent.name if trace.agent else ""
    facts = [
        fact("agent", agent, agent_field),
        fact("arm", arm, arm_field),
        fact("sample", str(trace.sample)),
        fact("episode", trace.episode_id, "episode_id"),
        fact("status", "infra error" if trace.infra_error else "finished", "status"),
        fact("duration", f"{trace.duration_s:.2f} s"),
        fact("model calls", str(len(trace.model_calls))),
        fact("run key", trace.run_key, detail=True),
    ]
    if trace.agent and trace.agent.settings:
        facts.append(fact("agent settings", settings_text(trace.agent.settings), detail=True))
    return facts


_SETTINGS_TEXTS: dict[bytes, str] = {}  # an agent's settings (orjson's text, keys sorted) -> json's text of them
SETTINGS_TEXTS_KEPT = 256


def settings_text(settings: dict[str, Any]) -> str:
    """``json.dumps(settings, sort_keys=True)``, made once per distinct settings (every run of a player has the
    same, and :mod:`json` takes several times as long as orjson, which serves as the key)."""
    try:
        key = orjson.dumps(settings, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):  # a key orjson refuses, an integer past 64 bits
        return json.dumps(settings, sort_keys=True)
    if b"null" in key:  # orjson writes NaN and infinities as null, where json writes NaN and Infinity: settings
        return json.dumps(settings, sort_keys=True)  # whose text holds null (or "null") are written each time
    text = _SETTINGS_TEXTS.get(key)
    if text is None:
        if len(_SETTINGS_TEXTS) >= SETTINGS_TEXTS_KEPT:
            _SETTINGS_TEXTS.clear()
        text = _SETTINGS_TEXTS[key] = json.dumps(settings, sort_keys=True)
    return text


def sample_group(trace: EpisodeTrace) -> str:
    """What the samples of one run share: its episode, its player, its arm and its factors (the sample aside)."""
    agent = trace.agent.model_dump(mode="json") if trace.agent else None
    group = [trace.env_id, trace.episode_id, agent, [str(i) for i in trace.interventions], trace.factors]
    try:  # a key compared for equality only: orjson's text, keys sorted, is as good as json's and made faster
        return orjson.dumps(group, option=orjson.OPT_SORT_KEYS, default=str).decode("utf-8")
    except orjson.JSONEncodeError:  # an integer past 64 bits, say
        return json.dumps(group, sort_keys=True, default=str)


def script_texts(texts: Iterable[str]) -> frozenset[str]:
    return frozenset(t for t in texts if t)
