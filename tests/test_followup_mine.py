"""The request-set build: candidate rules, rewriting, screening and seeded template draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mine_followup import (
    BuildError,
    Candidate,
    Curation,
    _dedupe_key,
    _fill,
    _similar,
    draw_templates,
    rule_rejection,
    select_mined,
    slurp_category,
    template_rows,
)

from commitbench.episodes.followup.requests import FOLLOWUP_DATA_DIR
from commitbench.episodes.followup.rewrite import (
    capitalise,
    digits_for_numbers,
    fix_apostrophes,
    punctuate_clauses,
    rewrite_support_request,
    rewrite_transcript,
    strip_wake_words,
)
from commitbench.episodes.followup.vocabulary import Persona, RequestCategory, SourceDataset

NOUNS = {"joe": "Joe", "thanksgiving": "Thanksgiving"}


@pytest.mark.parametrize(
    ("spoken", "typed"),
    [
        ("olly remind me at three thirty pm to call mom", "Remind me at 3:30 pm to call mom."),
        ("remind me to call the bank next thursday", "Remind me to call the bank next Thursday."),
        ("remind me of my appointment on the fifteenth", "Remind me of my appointment on the 15th."),
        ("remind me about the march sixteen meeting", "Remind me about the March 16 meeting."),
        ("set a reminder every monday at three hundred and thirty pm", "Set a reminder every Monday at 3:30 pm."),
        ("remind me at eight hundred am", "Remind me at 8:00 am."),
        ("add a reminder on thursdays at eleven and thirty am", "Add a reminder on Thursdays at 11:30 am."),
        ("remind me that i have an appointment twelve o clock on saturday",
         "Remind me that I have an appointment 12 o'clock on Saturday."),
        ("remind me about the meeting on the twenty third of may", "Remind me about the meeting on the 23rd of May."),
        ("alert me when it reaches sixty eight degrees", "Alert me when it reaches 68 degrees."),
        ("can you remind me about the gym class in two hours", "Can you remind me about the gym class in two hours?"),
        ("remind me about tomorrows meeting tonight", "Remind me about tomorrow's meeting tonight."),
        ("remind me about my meeting with joe at ten on monday",
         "Remind me about my meeting with Joe at 10 on Monday."),
        ("i have an appointment tomorrow remind me", "I have an appointment tomorrow, remind me."),
        ("every other wednesday remind me to go shopping", "Every other Wednesday, remind me to go shopping."),
        ("i have a meeting on friday at noon can you remind me",
         "I have a meeting on Friday at noon, can you remind me?"),
        ("remind me to order the turkey before thanksgiving", "Remind me to order the turkey before Thanksgiving."),
        ("i dont know if i may go in march", "I don't know if I may go in march."),
        ("remind me about my meeting this afternoon please", "Remind me about my meeting this afternoon, please."),
    ],
)
def test_rewrite_transcript(spoken: str, typed: str) -> None:
    assert rewrite_transcript(spoken, NOUNS) == typed


def test_rewrite_pieces() -> None:
    assert strip_wake_words("olly set an alarm olly") == "set an alarm"
    assert strip_wake_words("hey olly") == ""
    typed = "my mom's birthday and my doctor's appointment"
    assert fix_apostrophes("my moms birthday and my doctors appointment") == typed
    assert fix_apostrophes("my parents visit") == "my parents visit"  # not a listed owner
    assert digits_for_numbers("wake me in thirty minutes") == "wake me in 30 minutes"
    assert digits_for_numbers("wake me in two minutes") == "wake me in two minutes"
    assert digits_for_numbers("the first time") == "the first time"
    assert capitalise("may i go in may", {}) == "may I go in may"
    assert capitalise("on the 3rd of may", {}) == "on the 3rd of May"
    assert punctuate_clauses("remind me") == "remind me"


@pytest.mark.parametrize(
    ("raw", "typed"),
    [
        ("can u help me to speak  to a live agent", "Can you help me to speak to a live agent?"),
        ("i dont know what i need to do to speak with somebody",
         "I don't know what I need to do to speak with somebody."),
        ("need to file a claim against ur company", "Need to file a claim against your company."),
        ("I want a live agent", "I want a live agent."),
        ("can uhelp me speak to customer support", "Can you help me speak to customer support?"),
        ("i dont understand ui wanna contact a live agent", "I don't understand you, I want to contact a live agent."),
    ],
)
def test_rewrite_support_request(raw: str, typed: str) -> None:
    assert rewrite_support_request(raw) == typed


@pytest.mark.parametrize(
    ("text", "intent", "expected"),
    [
        ("remind me to call mom at five pm", "calendar_set", RequestCategory.REMINDER),
        ("wake me up at six tomorrow", "alarm_set", RequestCategory.REMINDER),
        ("let me know when casey emails me", "email_query", RequestCategory.MONITORING),
        ("tell me when is my next meeting", "calendar_query", None),
        ("tell me when trump was born", "qa_factoid", None),
        ("give me an update on the election tomorrow at noon", "calendar_set", RequestCategory.DEFERRED_DELIVERY),
        ("remember that i do not like this music", "music_likeness", RequestCategory.MEMORY),
        ("play some jazz", "play_music", None),
    ],
)
def test_slurp_category(text: str, intent: str, expected: RequestCategory | None) -> None:
    found = slurp_category({"text": text, "intent": intent})
    assert (found[0] if found else None) is expected


def candidate(text: str, category: RequestCategory = RequestCategory.REMINDER, source_id: str = "1", **kw) -> Candidate:
    dataset = kw.get("dataset", SourceDataset.SLURP)
    persona = Persona.SUPPORT if dataset is SourceDataset.BITEXT else Persona.GENERIC
    return Candidate(dataset, source_id, text, category, persona, kind=kw.get("kind", "remind"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("remind me", "too short"),
        ("remind me to call mom", "no time"),
        ("remind me about this tomorrow at noon please", "refers to something"),
        ("set a reminder for tomorrow at two pm", "never says what"),
        ("remind me on the first of february twenty seventeen to pay", "spoken year"),
        ("remind me to water the plants every monday", None),
    ],
)
def test_rule_rejection_for_transcripts(text: str, reason: str | None) -> None:
    result = rule_rejection(candidate(text))
    assert (result is None) if reason is None else (reason in (result or ""))


@pytest.mark.parametrize(
    ("text", "tags", "reason"),
    [
        ("I want to talk to a human agent", "BL", None),
        ("help me talk to a fucking agent", "BLW", "offensive"),
        ("human agent", "BK", "keywords"),
        ("I wnat to tlak to an agnet", "BLZ", "typing noise"),
        ("what hours can I call customer service", "BIL", "asks for information"),
        ("I do not know how I can contact a human agent", "BEL", "procedural question"),
        ("need assistance calling customer support", "BLQ", "procedural question"),
        ("is it possible to talk with a human agent?", "BIL", "procedural question"),
        ("can uhelp me speak to customer support", "BILQ", "procedural question"),
        ("need to chat with an agent", "BLQ", None),
    ],
)
def test_rule_rejection_for_support_requests(text: str, tags: str, reason: str | None) -> None:
    row = candidate(text, RequestCategory.CALLBACK, dataset=SourceDataset.BITEXT, kind=f"contact_human_agent|{tags}")
    result = rule_rejection(row)
    assert (result is None) if reason is None else (reason in (result or ""))


def test_complaints_are_not_callback_requests() -> None:
    row = candidate("I want to lodge a consumer claim against your company", RequestCategory.CALLBACK,
                    dataset=SourceDataset.BITEXT, kind="complaint|BL")
    assert (rule_rejection(row) or "").startswith("a complaint")


def test_near_duplicates_use_synonyms() -> None:
    assert _similar(_dedupe_key("I want to talk to a human agent."), _dedupe_key("I want to speak with an operator."))
    assert not _similar(_dedupe_key("I want to talk to an agent."), _dedupe_key("I want to file a complaint."))
    # Support requests: how the attempt is phrased does not make a request new.
    trying = ("I'm trying to contact an operator.", "I need to contact somebody.")
    assert not _similar(_dedupe_key(trying[0]), _dedupe_key(trying[1]))
    assert _similar(_dedupe_key(trying[0], support=True), _dedupe_key(trying[1], support=True))
    assert _similar(_dedupe_key("I can't speak to a live agent.", support=True),
                    _dedupe_key("I cannot chat with a person.", support=True))


def empty_curation(**kw) -> Curation:
    base = {
        "proper_nouns": {},
        "replacements": [],
        "rejects": {},
        "edits": {},
        "contexts": {},
        "categories": {},
        "capabilities": {},
    }
    base.update(kw)
    return Curation(**base)


def test_select_mined_screens_logs_edits_and_dedupes() -> None:
    pool = [
        candidate("remind me to call five five five one two three four five at noon", source_id="1"),
        candidate("remind me to water the plants every monday", source_id="2"),
        candidate("please remind me to water the plants every monday", source_id="3"),
        candidate("remind me to pay rent tomorrow morning", source_id="4"),
        candidate("remind me to feed the cat at six pm", source_id="5"),
    ]
    log: list[dict] = []
    curation = empty_curation(
        rejects={"slurp:5": "reviewer says no"}, edits={"slurp:4": "Remind me to pay the rent tomorrow."}
    )
    selected = select_mined(pool, curation, seed=0, log=log)
    kept = {c.source_id: c.text for c in selected[RequestCategory.REMINDER]}
    assert "1" not in kept and "5" not in kept
    assert kept["4"] == "Remind me to pay the rent tomorrow."
    assert len({"2", "3"} & set(kept)) == 1  # the near-duplicate is dropped
    by_source = {e["source"]: e for e in log if e["action"] == "rejected"}
    assert by_source["slurp:1"]["reason"].startswith("personal data: spoken phone number")
    assert by_source["slurp:5"]["reason"] == "reviewer says no"
    assert any(e["reason"] == "near-duplicate of a request already selected" for e in by_source.values())
    assert {e["source"] for e in log if e["action"] == "edited"} >= {"slurp:4"}


def test_selection_is_seeded() -> None:
    pool = [candidate(f"remind me to do task number {i} at noon", source_id=str(i)) for i in range(200)]

    def pick(seed: int) -> list[str]:
        fresh = [Candidate(c.dataset, c.source_id, c.original, c.category, c.persona, c.kind) for c in pool]
        return [c.source_id for c in select_mined(fresh, empty_curation(), seed, [])[RequestCategory.REMINDER]]

    assert pick(0) == pick(0)
    assert pick(0) != pick(1)


def test_template_rows_and_draws() -> None:
    rows = template_rows(FOLLOWUP_DATA_DIR / "templates.yaml", seed=0)
    again = template_rows(FOLLOWUP_DATA_DIR / "templates.yaml", seed=0)
    assert [[r.text for r in f] for f in rows[RequestCategory.MEMORY]] == [
        [r.text for r in f] for f in again[RequestCategory.MEMORY]
    ]
    drawn = draw_templates(rows[RequestCategory.MONITORING], 10, 0, RequestCategory.MONITORING)
    assert len(drawn) == 10
    assert len({r.template_id for r in drawn}) == len(rows[RequestCategory.MONITORING])  # round-robin
    with pytest.raises(BuildError, match="templates provide"):
        draw_templates(rows[RequestCategory.MONITORING], 10_000, 0, RequestCategory.MONITORING)
    assert not rows[RequestCategory.REMINDER]


def test_fill() -> None:
    assert _fill("{when}, send me {item.what}.", {"when": "tomorrow", "item": {"what": "the list"}}) == (
        "Tomorrow, send me the list."
    )


SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mine_followup.py"


def test_the_command_needs_both_folders_and_names_a_missing_input(tmp_path: Path) -> None:
    bare = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "--data" in bare.stderr and "--set-dir" in bare.stderr
    empty = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path), "--set-dir", str(FOLLOWUP_DATA_DIR)],
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2
    assert "missing input file(s)" in empty.stderr and str(tmp_path / "slurp" / "slurp_en.jsonl") in empty.stderr
    assert "curation.yaml" not in empty.stderr  # the set's own files are there
