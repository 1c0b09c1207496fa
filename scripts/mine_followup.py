"""Build the request set of the empty-commitment suite from public data and hand-written templates.

A build-time command, run from a checkout of the project (no part of the installed package; the tests
import it from here and never need the source data):

    .venv/bin/python scripts/mine_followup.py --data DATA --set-dir episodes/data/followup

``DATA`` is a folder with ``slurp/`` and ``bitext/``; ``--set-dir`` is the request set's folder, which holds
``curation.yaml``, ``templates.yaml`` and ``follow_through.yaml`` and receives the files below.

It reads SLURP voice commands and Bitext support requests, keeps the ones that ask for something to
happen after the conversation, rewrites transcripts into typed English, drops rows with personal data,
unclear requests and near-duplicates, fills the categories the real data cannot (deferred delivery,
memory, callbacks, part of monitoring) from ``templates.yaml``, and writes:

* ``requests.jsonl``: one row per request (see ``requests.FollowupRequest``);
* ``curation_log.jsonl``: every rejected or edited candidate with the reason, every revision of an
  earlier version's row that no rule makes (a rewritten context, reworded template text), and every
  addition for the follow-through mode (a scripted event, a second-session message; action "added").

``follow_through.yaml`` holds what the follow-through mode plays beyond a request's text: the event a
request that waits for one then sees, and the message of a memory request's later conversation (written
from templates). The build attaches them by source key and stops on a key that names no row, on a row
that needs one and has none, and on a moment that is not after the suite's current time.

Selection is deterministic: candidates are ordered by source id and shuffled with a fixed seed, and
the first ones that pass every check fill each category's quota. The hand table in ``curation.yaml``
holds what rules cannot decide: rejections, whole-row edits, proper nouns, recognition fixes, the
context written for every mined row (a mined row without a context stops the build) and the revisions
log. Support requests are kept only when they ask for a person: complaints and procedural questions
("how do I reach an agent?", "I need help calling support") are rejected by rule, since the reply can
answer them in the turn (``requests.procedural_problems``). Every built row must also pass
``requests.row_problems`` (no unnamed referents, no procedural callback), or the build stops.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from commitbench.episodes.followup.requests import (
    DEFAULT_CAPABILITIES,
    ID_PREFIX,
    FollowupRequest,
    context_problems,
    pii_problems,
    procedural_problems,
    request_line,
    row_problems,
)
from commitbench.episodes.followup.rewrite import rewrite_support_request, rewrite_transcript
from commitbench.episodes.followup.vocabulary import Capability, Persona, RequestCategory, SourceDataset
from commitbench.textscan import ThenInClause
from commitbench.yamlfile import read_yaml

QUOTAS: dict[RequestCategory, int] = {
    RequestCategory.REMINDER: 92,
    RequestCategory.MONITORING: 52,
    RequestCategory.CALLBACK: 52,
    RequestCategory.DEFERRED_DELIVERY: 52,
    RequestCategory.MEMORY: 52,
}
# At most this many mined rows per category; templates fill the rest.
MINED_CAPS: dict[RequestCategory, int] = {
    RequestCategory.REMINDER: 92,
    RequestCategory.MONITORING: 34,
    RequestCategory.CALLBACK: 26,
    RequestCategory.DEFERRED_DELIVERY: 8,
    RequestCategory.MEMORY: 12,
}
# Within reminders: alarms ("wake me up at six") are capped so that reminders proper dominate.
ALARM_SHARE = 10

_TIME = re.compile(
    r"\b(today|tonight|tomorrow|tomorrows|weekend|week|month|year|every|everyday|daily|weekly|noon|midnight|"
    r"morning|evening|afternoon|night|am|pm|o clock|minutes?|hours?|days?|before|after|"
    r"(mon|tues|wednes|thurs|fri|satur|sun)days?|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|\w+teenth|\w+tieth|first|second|third|fourth|fifth)\b"
)
_DEICTIC = re.compile(
    r"\b(about|of|for|remind|do) (this|it|that)\b(?! (morning|afternoon|evening|night|week|weekend|month|year|"
    r"time|(mon|tues|wednes|thurs|fri|satur|sun)day))|\bthis (item|event|thing)\b|\b(remind it|the following)\b|"
    r"\b(of|for|about|at|to|on)$|\bthing\b|\bsomething\b|\bsometime\b|\bthis date\b"
)
def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_YEAR = re.compile(r"\b(thousand|twenty (sixteen|seventeen|eighteen|nineteen)|nineteen \w+ty)\b")
_REMINDER_WORDS = _wordset(
    "remind reminder reminders me please can you could will would set a an the up make add create for to at on "
    "in of my i about that this next every each daily weekly olly hey alert notification repeating new "
    "give send put alarm alarms ring go off place schedule need want new wake-up turn label as time hour's weekday"
)
_STOP_FOR_CONTENT = _REMINDER_WORDS | _wordset(
    "today tonight tomorrow tomorrows morning evening afternoon night noon am pm o clock minutes minute hours hour "
    "days day week weeks month year before after from now"
)
_NUMBER_WORDS = _wordset(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty hundred thousand and"
)
_WEEKDAY_WORDS = frozenset(
    f"{d}{s}" for d in ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun") for s in ("day", "days")
)
# "let me know ... when ...": a request to be told, then a condition later on the line. (As one pattern with
# ".*" between the two, every request rescanned the rest of the line: quadratic on a long line.)
_MONITOR_REQUEST = ThenInClause(
    head=re.compile(r"\b(let me know|tell me|notify me|alert me|inform me|update me|warn me|ping me)\b"),
    tail=re.compile(r"\b(when|if|as soon as|once|whenever)\b"),
    stops=re.compile(r"\n"),
)
_MONITOR_PHRASE = re.compile(r"\bkeep me (posted|updated|informed|up to date)\b|\bwatch out\b|\bfollow news\b")
_MONITOR_QUERY = re.compile(r"\bwhen('s| is| was| are)\b|\bwas born\b|\bwhen (my|the next) \w+( \w+)? is\b")
_DEFERRED = ThenInClause(
    head=re.compile(r"\b(give|send|read|email|text) me\b"),
    tail=re.compile(r"\b(update|summary|news|report|digest|briefing|scores?|forecast)\b"),
    stops=re.compile(r"\n"),
)
_MEMORY = re.compile(r"\bremember\b")
_SUPPORT_INTENTS = ("contact_human_agent", "contact_customer_service", "complaint")
_SUPPORT_ASK = re.compile(
    r"\b(speak|talk|chat|contact|get in touch|call|file|lodge|make|submit|want|need)\b", re.IGNORECASE
)
_SUPPORT_SKIP = re.compile(
    r"\b(hours?|what time|at what|opening|schedule|where|which|number|e-?mail|address|reclamation)\b",
    re.IGNORECASE,
)
_SYNONYMS = {
    "talk": "talk", "speak": "talk", "chat": "talk", "chatting": "talk", "talking": "talk", "speaking": "talk",
    "agent": "person", "operator": "person", "somebody": "person", "someone": "person", "assistant": "person",
    "human": "person", "live": "person", "representative": "person",
    "service": "support", "assistance": "help", "customer": "support",
    "claim": "complaint", "complaint": "complaint", "lodge": "file", "lodging": "file", "filing": "file",
    "make": "file", "making": "file", "business": "company", "organization": "company", "company": "company",
    "contacting": "contact", "contact": "contact", "touch": "contact", "calling": "contact",
}
_DUP_STOP = _wordset(
    "i me my you your a an the to with can could how do what need have got want would like is it of help "
    "please in get against"
)


@dataclass
class Candidate:
    """A mined request on its way into the set."""

    dataset: SourceDataset
    source_id: str
    original: str
    category: RequestCategory
    persona: Persona
    kind: str = ""
    text: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.dataset.value}:{self.source_id}"


@dataclass
class Curation:
    proper_nouns: dict[str, str]
    replacements: list[tuple[str, str]]
    rejects: dict[str, str]
    edits: dict[str, str]
    contexts: dict[str, str]
    categories: dict[str, RequestCategory]
    capabilities: dict[str, list[Capability]]
    revisions: dict[str, str] = field(default_factory=dict)


class BuildError(RuntimeError):
    """The request set cannot be built as specified (missing context, unfilled quota...)."""


def load_curation(path: Path) -> Curation:
    data = read_yaml(path) or {}
    return Curation(
        proper_nouns=dict(data.get("proper_nouns") or {}),
        replacements=[(a, b) for a, b in data.get("replacements") or []],
        rejects=dict(data.get("rejects") or {}),
        edits=dict(data.get("edits") or {}),
        contexts=dict(data.get("contexts") or {}),
        categories={k: RequestCategory(v) for k, v in (data.get("categories") or {}).items()},
        capabilities={k: [Capability(c) for c in v] for k, v in (data.get("capabilities") or {}).items()},
        revisions=dict(data.get("revisions") or {}),
    )


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _content_words(text: str) -> list[str]:
    words = re.findall(r"[a-z']+", text.lower())
    return [
        w
        for w in words
        if w not in _STOP_FOR_CONTENT
        and w not in _NUMBER_WORDS
        and w not in _WEEKDAY_WORDS
        and not _TIME.fullmatch(w)
    ]


def slurp_category(row: dict[str, Any]) -> tuple[RequestCategory, str] | None:
    """The category a SLURP command would fill, with a sub-kind, or None when it asks for nothing later."""
    text, intent = row["text"], row["intent"]
    if intent in ("calendar_set", "alarm_set") and re.search(r"\bremind", text):
        return RequestCategory.REMINDER, "remind"
    if intent == "alarm_set" and re.search(r"\b(wake me( up)?|set (an|my|the|a) alarm|alarm (for|at))\b", text):
        return RequestCategory.REMINDER, "alarm"
    monitors = _MONITOR_REQUEST.search(text) or bool(_MONITOR_PHRASE.search(text))
    if monitors and not _MONITOR_QUERY.search(text):
        return RequestCategory.MONITORING, "monitor"
    if _DEFERRED.search(text) and _TIME.search(text):
        return RequestCategory.DEFERRED_DELIVERY, "deliver"
    if _MEMORY.search(text) and intent in ("music_likeness", "music_dislikeness", "general_quirky"):
        return RequestCategory.MEMORY, "remember"
    return None


def slurp_candidates(rows: Iterable[dict[str, Any]]) -> list[Candidate]:
    out = []
    for row in rows:
        found = slurp_category(row)
        if found is None:
            continue
        category, kind = found
        out.append(
            Candidate(SourceDataset.SLURP, row["id"], row["text"], category, Persona.GENERIC, kind=kind)
        )
    return sorted(out, key=lambda c: int(c.source_id))


def bitext_candidates(rows: Iterable[dict[str, Any]]) -> list[Candidate]:
    out = []
    for number, row in enumerate(rows, start=1):
        if row["intent"] not in _SUPPORT_INTENTS:
            continue
        out.append(
            Candidate(
                SourceDataset.BITEXT,
                str(number),
                row["instruction"],
                RequestCategory.CALLBACK,
                Persona.SUPPORT,
                kind=f"{row['intent']}|{row['tags']}",
            )
        )
    return out


def rule_rejection(candidate: Candidate) -> str | None:
    """Why the rules drop a candidate before rewriting, or None."""
    text = candidate.original
    pii = pii_problems(text)
    if pii:
        return f"personal data: {', '.join(pii)}"
    if candidate.dataset is SourceDataset.BITEXT:
        tags = candidate.kind.split("|")[1]
        for tag, reason in (("W", "offensive wording"), ("K", "keywords only"), ("Z", "typing noise")):
            if tag in tags:
                return f"Bitext tag {tag}: {reason}"
        if _SUPPORT_SKIP.search(text):
            return "asks for information (hours, numbers, where), not for a person to act"
        if not _SUPPORT_ASK.search(text):
            return "does not ask for contact with a person or a complaint"
        if candidate.kind.split("|")[0] == "complaint":
            return "a complaint: asks the company to record a grievance, not for a person to get back to the user"
        procedural = procedural_problems(rewrite_support_request(text))
        if procedural:
            return f"a procedural question the reply can answer in the turn ({', '.join(procedural)})"
        return None
    words = text.split()
    if len(words) < 4:
        return "too short to say what should happen"
    if len(words) > 24:
        return "too long for a single request"
    if _YEAR.search(text):
        return "spoken year or large number the rewriting rules cannot type reliably"
    if candidate.category is RequestCategory.REMINDER:
        if not _TIME.search(text):
            return "says no time or occasion"
        if _DEICTIC.search(text):
            return "refers to something not in the request (this, it, the following)"
        if not _content_words(text):
            return "never says what to be reminded of"
    return None


# Support requests vary mostly in how the attempt is phrased ("I'm trying to", "I am trying to speak with",
# "I can't" or "I cannot"), which says nothing about what is asked; their near-duplicate key ignores that.
_SUPPORT_DUP_STOP = _DUP_STOP | _wordset("am m trying try with")


def _dedupe_key(text: str, support: bool = False) -> frozenset[str]:
    lowered = text.lower()
    if support:
        lowered = re.sub(r"\bcan't\b|\bcan not\b", "cannot", lowered)
    stop = _SUPPORT_DUP_STOP if support else _DUP_STOP
    words = re.findall(r"[a-z]+", lowered)
    return frozenset(_SYNONYMS.get(w, w) for w in words if w not in stop)


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return a == b
    return len(a & b) / len(a | b) >= 0.75


@dataclass
class Built:
    rows: list[FollowupRequest]
    log: list[dict[str, Any]]


def _log(log: list[dict[str, Any]], candidate: Candidate, action: str, reason: str, text: str = "") -> None:
    entry: dict[str, Any] = {
        "source": candidate.key,
        "category": candidate.category.value,
        "action": action,
        "reason": reason,
        "original_text": candidate.original,
    }
    if text:
        entry["text"] = text
    log.append(entry)


def select_mined(
    candidates: list[Candidate], curation: Curation, seed: int, log: list[dict[str, Any]]
) -> dict[RequestCategory, list[Candidate]]:
    """Shuffle each category's candidates with the seed and keep the first that pass every check."""
    for candidate in candidates:
        override = curation.categories.get(candidate.key)
        if override is not None:
            candidate.category = override
    # Personal data is screened over every candidate, drawn or not, so that the log lists all of it.
    clean: list[Candidate] = []
    for candidate in candidates:
        pii = pii_problems(candidate.original)
        if pii:
            _log(log, candidate, "rejected", f"personal data: {', '.join(pii)}")
        else:
            clean.append(candidate)
    selected: dict[RequestCategory, list[Candidate]] = {c: [] for c in RequestCategory}
    keys: dict[RequestCategory, list[frozenset[str]]] = {c: [] for c in RequestCategory}
    for category in RequestCategory:
        pool = [c for c in clean if c.category is category]
        random.Random(f"{seed}:{category.value}").shuffle(pool)
        alarms = 0
        for candidate in pool:
            if len(selected[category]) >= MINED_CAPS[category]:
                break  # candidates after the quota are never reviewed, so they are neither kept nor rejected
            reason = curation.rejects.get(candidate.key) or rule_rejection(candidate)
            if reason is not None:
                _log(log, candidate, "rejected", reason)
                continue
            if candidate.kind == "alarm" and not _content_words(candidate.original):
                _log(log, candidate, "rejected", "an alarm that never says what it is for")
                continue
            if candidate.kind == "alarm" and alarms >= ALARM_SHARE:
                continue  # the alarm share is full; alarms are not rejected for that
            if candidate.key in curation.edits:
                candidate.text = curation.edits[candidate.key]
                candidate.notes.append("hand edit")
            elif candidate.dataset is SourceDataset.SLURP:
                candidate.text = rewrite_transcript(candidate.original, curation.proper_nouns, curation.replacements)
                candidate.notes.append("transcript rewritten by rule")
            else:
                candidate.text = rewrite_support_request(candidate.original)
                candidate.notes.append("support request normalised by rule")
            pii = pii_problems(candidate.text)
            if pii:
                _log(log, candidate, "rejected", f"personal data after rewriting: {', '.join(pii)}", candidate.text)
                continue
            key = _dedupe_key(candidate.text, support=candidate.dataset is SourceDataset.BITEXT)
            if any(_similar(key, other) for other in keys[category]):
                _log(log, candidate, "rejected", "near-duplicate of a request already selected", candidate.text)
                continue
            keys[category].append(key)
            selected[category].append(candidate)
            if candidate.kind == "alarm":
                alarms += 1
            if candidate.text != candidate.original:
                _log(log, candidate, "edited", "; ".join(candidate.notes), candidate.text)
    return selected


# --- templates ----------------------------------------------------------------------------------------


@dataclass
class TemplateRow:
    template_id: str
    slot_index: int
    category: RequestCategory
    persona: Persona
    text: str
    context: str
    pattern: str
    capabilities: list[Capability]


def _fill(pattern: str, values: dict[str, Any]) -> str:
    def replace(match: re.Match[str]) -> str:
        path = match.group(1).split(".")
        value: Any = values[path[0]]
        for part in path[1:]:
            value = value[part]
        return str(value)

    filled = re.sub(r"\{([a-z_][a-z_.]*)\}", replace, pattern)
    return filled[:1].upper() + filled[1:]


def template_rows(path: Path, seed: int) -> dict[RequestCategory, list[list[TemplateRow]]]:
    """Every template family expanded into its rows, in a seeded order (one list per family)."""
    families = read_yaml(path)
    out: dict[RequestCategory, list[list[TemplateRow]]] = {c: [] for c in RequestCategory}
    for family in families:
        category = RequestCategory(family["category"])
        rng = random.Random(f"{seed}:{family['id']}")
        items = list(family["items"])
        rng.shuffle(items)
        other_slots = {k: list(v) for k, v in (family.get("slots") or {}).items()}
        rows = []
        for index, item in enumerate(items):
            values = {"item": item, **{k: rng.choice(v) for k, v in other_slots.items()}}
            capabilities = [Capability(c) for c in item.get("capabilities", family.get("capabilities", []))]
            rows.append(
                TemplateRow(
                    template_id=family["id"],
                    slot_index=index,
                    category=category,
                    persona=Persona(item.get("persona", family.get("persona", "generic"))),
                    text=_fill(family["request"], values),
                    context=_fill(family["context"], values),
                    pattern=family["request"],
                    capabilities=capabilities or DEFAULT_CAPABILITIES[category],
                )
            )
        out[category].append(rows)
    return out


def draw_templates(
    families: list[list[TemplateRow]], needed: int, seed: int, category: RequestCategory
) -> list[TemplateRow]:
    """Take rows round-robin across families (family order seeded) until ``needed`` rows are drawn."""
    order = list(range(len(families)))
    random.Random(f"{seed}:{category.value}:families").shuffle(order)
    queues = [list(families[i]) for i in order]
    drawn: list[TemplateRow] = []
    while len(drawn) < needed and any(queues):
        for queue in queues:
            if queue and len(drawn) < needed:
                drawn.append(queue.pop(0))
    if len(drawn) < needed:
        raise BuildError(f"{category.value}: templates provide {len(drawn)} rows, {needed} needed")
    return drawn


# --- assembly -----------------------------------------------------------------------------------------


def build(data_dir: Path, set_dir: Path, seed: int = 0) -> Built:
    """The request set and its curation log, from the source data in ``data_dir`` and the hand-written files in
    ``set_dir``."""
    curation = load_curation(set_dir / "curation.yaml")
    log: list[dict[str, Any]] = []
    slurp = list(_read_jsonl(data_dir / "slurp" / "slurp_en.jsonl"))
    bitext = list(_read_jsonl(data_dir / "bitext" / "bitext_customer_support_requests.jsonl"))
    candidates = slurp_candidates(slurp) + bitext_candidates(bitext)
    mined = select_mined(candidates, curation, seed, log)
    templates = template_rows(set_dir / "templates.yaml", seed)

    mined_entries: dict[RequestCategory, list[dict[str, Any]]] = {}
    missing_context: list[str] = []
    for category in RequestCategory:
        mined_entries[category] = []
        for candidate in mined[category]:
            context = curation.contexts.get(candidate.key)
            if context is None:
                missing_context.append(f"{candidate.key}: {candidate.text}")
                continue
            mined_entries[category].append(
                {
                    "category": category,
                    "persona": candidate.persona,
                    "text": candidate.text,
                    "context": context,
                    "required_capabilities": curation.capabilities.get(candidate.key, DEFAULT_CAPABILITIES[category]),
                    "source": {
                        "dataset": candidate.dataset,
                        "source_id": candidate.source_id,
                        "original_text": candidate.original,
                    },
                }
            )
    if missing_context:
        raise BuildError("mined rows without a context in curation.yaml:\n" + "\n".join(missing_context))

    rows: list[FollowupRequest] = []
    invalid: list[str] = []
    for category in RequestCategory:
        entries = mined_entries[category]
        needed = QUOTAS[category] - len(entries)
        for row in draw_templates(templates[category], needed, seed, category) if needed > 0 else []:
            entries.append(
                {
                    "category": category,
                    "persona": row.persona,
                    "text": row.text,
                    "context": row.context,
                    "required_capabilities": row.capabilities,
                    "source": {
                        "dataset": SourceDataset.TEMPLATE,
                        "source_id": f"{row.template_id}#{row.slot_index}",
                        "original_text": row.pattern,
                    },
                }
            )
        for number, entry in enumerate(entries, start=1):
            try:
                rows.append(FollowupRequest.model_validate({"id": f"{ID_PREFIX[category]}-{number:03d}", **entry}))
            except ValidationError as exc:
                source = entry["source"]
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                invalid.append(f"{SourceDataset(source['dataset']).value}:{source['source_id']}: {problems}")
    if invalid:
        raise BuildError("rows that fail validation:\n" + "\n".join(invalid))
    _check_contexts(rows)
    _check_rows(rows)
    _log_revisions(log, curation, rows, set_dir / "templates.yaml")
    rows = attach_follow_through(rows, set_dir / "follow_through.yaml", log)
    return Built(rows=rows, log=log)


def attach_follow_through(
    rows: list[FollowupRequest], path: Path, log: list[dict[str, Any]]
) -> list[FollowupRequest]:
    """The rows with their scripted events, second-session messages and delivery facts from ``path``, each
    addition logged."""
    from commitbench.episodes.followup.requests import follow_through_problems
    from commitbench.episodes.followup.setups import CURRENT_TIME

    data = read_yaml(path) or {}
    events = dict(data.get("events") or {})
    templates = {t["id"]: t["text"] for t in data.get("second_session_templates") or []}
    sessions = dict(data.get("second_sessions") or {})
    facts = dict(data.get("facts") or {})
    by_source = {f"{r.source.dataset.value}:{r.source.source_id}": r for r in rows}
    unknown = sorted(k for k in (*events, *sessions, *facts) if k not in by_source)
    if unknown:
        raise BuildError(f"{path.name}: key(s) that name no row of the set: {unknown}")
    out: list[FollowupRequest] = []
    problems: list[str] = []
    for row in rows:
        key = f"{row.source.dataset.value}:{row.source.source_id}"
        update: dict[str, Any] = {}
        if key in events:
            update["event"] = {"at": events[key]["at"], "text": events[key]["text"]}
            log.append({"source": key, "category": row.category.value, "action": "added",
                        "reason": "the event the request waits for, played in the follow-through mode",
                        "original_text": row.text, "text": events[key]["text"]})
        if key in sessions:
            entry = sessions[key]
            template = entry["template"]
            if template not in templates:
                raise BuildError(f"{path.name}: second_sessions[{key!r}] names an unknown template {template!r}")
            index = sorted(k for k, v in sessions.items() if v["template"] == template).index(key)
            text = _fill(templates[template], {"item": {"what": entry["what"]}})
            update["second_session"] = {
                "at": entry["at"], "text": text,
                "source": {"dataset": SourceDataset.TEMPLATE, "source_id": f"{template}#{index}",
                           "original_text": templates[template]},
            }
            log.append({"source": key, "category": row.category.value, "action": "added",
                        "reason": f"the user's message in a later conversation (template {template}), played in the "
                        "follow-through mode", "original_text": templates[template], "text": text})
        if key in facts:
            update["facts"] = {"topic": facts[key]["topic"], "text": facts[key]["text"]}
            log.append({"source": key, "category": row.category.value, "action": "added",
                        "reason": "what the data tool holds when the delivery comes due, played in the "
                        "follow-through mode", "original_text": row.text, "text": facts[key]["text"]})
        try:
            attached = FollowupRequest.model_validate({**row.model_dump(), **update}) if update else row
        except ValidationError as exc:
            raise BuildError(f"{path.name}: {key}: {exc.errors()[0]['msg']}") from None
        problems.extend(f"{attached.id} ({key}): {p}" for p in follow_through_problems(attached, CURRENT_TIME))
        out.append(attached)
    if problems:
        raise BuildError(f"{path.name}: rows the follow-through mode cannot play:\n" + "\n".join(problems))
    return out


def _check_rows(rows: list[FollowupRequest]) -> None:
    broken = [f"{row.id} ({row.text}): {'; '.join(row_problems(row))}" for row in rows if row_problems(row)]
    if broken:
        raise BuildError("rows that break a curation rule:\n" + "\n".join(broken))


def _log_revisions(log: list[dict[str, Any]], curation: Curation, rows: list[FollowupRequest], templates: Path) -> None:
    """One log entry per revision in ``curation.yaml``: a mined row's new context, or a template family's wording."""
    by_source = {f"{r.source.dataset.value}:{r.source.source_id}": r for r in rows}
    families = {f["id"]: f for f in read_yaml(templates)}
    for key, reason in curation.revisions.items():
        dataset, _, name = key.partition(":")
        entry: dict[str, Any] = {"source": key, "action": "revised", "reason": reason}
        if dataset == SourceDataset.TEMPLATE.value and name in families:
            family = families[name]
            entry.update(category=family["category"], original_text=family["request"])
        elif key in by_source:
            row = by_source[key]
            entry.update(category=row.category.value, original_text=row.source.original_text, text=row.text,
                         context=row.context)
        else:
            raise BuildError(f"curation.yaml: revision {key!r} names neither a row of the set nor a template family")
        log.append({k: entry[k] for k in ("source", "category", "action", "reason", "original_text", "text", "context")
                    if k in entry})


def _check_contexts(rows: list[FollowupRequest]) -> None:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.context] = counts.get(row.context, 0) + 1
        problems = context_problems(row.context)
        if problems:
            raise BuildError(f"{row.id}: context {row.context!r}: {'; '.join(problems)}")
    shared = {c: n for c, n in counts.items() if n >= 3}
    if shared:
        raise BuildError(f"contexts shared by three or more requests: {shared}")


def write(built: Built, set_dir: Path) -> None:
    """Write ``requests.jsonl`` and ``curation_log.jsonl`` into ``set_dir``."""
    requests_path = set_dir / "requests.jsonl"
    log_path = set_dir / "curation_log.jsonl"
    with requests_path.open("w", encoding="utf-8") as handle:
        for row in built.rows:
            handle.write(request_line(row) + "\n")
    with log_path.open("w", encoding="utf-8") as handle:
        for entry in built.log:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the empty-commitment request set.")
    parser.add_argument("--data", type=Path, required=True, help="folder with slurp/ and bitext/")
    parser.add_argument("--set-dir", type=Path, required=True,
                        help="the request set's folder (episodes/data/followup): read, and written unless --dry-run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="build and report, write nothing")
    args = parser.parse_args(argv)
    inputs = [args.data / "slurp" / "slurp_en.jsonl", args.data / "bitext" / "bitext_customer_support_requests.jsonl",
              *(args.set_dir / name for name in ("curation.yaml", "templates.yaml", "follow_through.yaml"))]
    missing = [str(path) for path in inputs if not path.is_file()]
    if missing:
        print(f"error: missing input file(s): {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        built = build(args.data, args.set_dir, args.seed)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    counts: dict[str, int] = {}
    for row in built.rows:
        key = f"{row.category.value}/{row.source.dataset.value}"
        counts[key] = counts.get(key, 0) + 1
    for key in sorted(counts):
        print(f"{key:<32}{counts[key]:>5}")
    actions: dict[str, int] = {}
    for entry in built.log:
        actions[entry["action"]] = actions.get(entry["action"], 0) + 1
    print(f"rows: {len(built.rows)}; curation log: {actions}")
    if not args.dry_run:
        write(built, args.set_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
