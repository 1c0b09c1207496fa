"""Invariants of the shipped request set and its curation log (no source data needed)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml
from mine_followup import QUOTAS, build
from mine_followup import main as mine_main

from commitbench.episodes.followup.doability import load_doability
from commitbench.episodes.followup.requests import (
    FOLLOWUP_DATA_DIR,
    ID_PREFIX,
    RequestFileError,
    context_problems,
    followup_data_version,
    load_requests,
    parse_requests,
    parse_version,
    pii_problems,
    procedural_problems,
    referent_problems,
    request_line,
    row_problems,
)
from commitbench.episodes.followup.setups import load_setups
from commitbench.episodes.followup.vocabulary import (
    CHANNEL_CAPABILITIES,
    Doability,
    Persona,
    RequestCategory,
    SetupId,
    SourceDataset,
)

REQUESTS = load_requests()
LOG = [json.loads(line) for line in (FOLLOWUP_DATA_DIR / "curation_log.jsonl").read_text().splitlines() if line]


def test_counts_per_category() -> None:
    counts = Counter(r.category for r in REQUESTS)
    assert counts == QUOTAS
    assert len(REQUESTS) == 300
    assert counts[RequestCategory.REMINDER] >= 90
    for category in RequestCategory:
        if category is not RequestCategory.REMINDER:
            assert counts[category] >= 50


def test_ids_are_unique_and_match_the_category() -> None:
    ids = [r.id for r in REQUESTS]
    assert len(ids) == len(set(ids))
    for row in REQUESTS:
        assert row.id.startswith(ID_PREFIX[row.category] + "-")


def test_every_row_has_a_source() -> None:
    families = {f["id"] for f in yaml.safe_load((FOLLOWUP_DATA_DIR / "templates.yaml").read_text())}
    for row in REQUESTS:
        assert row.source.original_text.strip()
        assert row.source.source_id.strip()
        if row.source.dataset is SourceDataset.TEMPLATE:
            assert row.source.source_id.split("#")[0] in families
        else:
            assert row.source.source_id.isdigit()
    datasets = Counter(r.source.dataset for r in REQUESTS)
    # Bitext holds few requests for a person once complaints and procedural questions are out (about 10
    # distinct ones); the rest of the callbacks come from templates.
    assert datasets[SourceDataset.SLURP] >= 100 and datasets[SourceDataset.BITEXT] >= 10


def test_the_attribution_counts_the_rows_of_each_source() -> None:
    rows = {}
    for line in (Path(FOLLOWUP_DATA_DIR) / "ATTRIBUTION.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[1].isdigit():
            rows[cells[0].strip("`")] = int(cells[1])
    assert rows == {dataset.value: n for dataset, n in Counter(r.source.dataset for r in REQUESTS).items()}


def test_mined_sources_are_unique() -> None:
    mined = [(r.source.dataset, r.source.source_id) for r in REQUESTS if r.source.dataset is not SourceDataset.TEMPLATE]
    assert len(mined) == len(set(mined))


def test_no_personal_data() -> None:
    for row in REQUESTS:
        assert pii_problems(row.text) == [], row.id
        assert pii_problems(row.context) == [], row.id


def test_contexts_never_mention_tools_or_persistence() -> None:
    tool_names = {t.name for t in load_setups().tools}
    for row in REQUESTS:
        assert context_problems(row.context) == [], row.id
        words = set(re.findall(r"[a-z_]+", row.context.lower()))
        assert not words & tool_names, row.id


def test_contexts_are_not_shared_by_three_or_more() -> None:
    counts = Counter(r.context for r in REQUESTS)
    assert max(counts.values()) <= 2


def test_requests_read_as_typed_text() -> None:
    for row in REQUESTS:
        assert row.text[0].isupper() or row.text[0].isdigit(), row.id
        assert row.text[-1] in ".?!", row.id
        assert not re.search(r"\b(olly|alexa)\b", row.text.lower()), row.id
        assert not re.search(r"(?<![\w'])i(?![\w'])", row.text), row.id  # lone lower-case "i"
        assert "  " not in row.text, row.id


def test_support_rows_come_from_bitext_or_support_templates() -> None:
    for row in REQUESTS:
        if row.source.dataset is SourceDataset.BITEXT:
            assert row.persona is Persona.SUPPORT and row.category is RequestCategory.CALLBACK
        if row.source.dataset is SourceDataset.SLURP:
            assert row.persona is Persona.GENERIC


def test_channel_requests_are_never_fully_doable() -> None:
    matrix = load_doability()
    matrix.check_request_ids([r.id for r in REQUESTS])
    for row in REQUESTS:
        if set(row.required_capabilities) & CHANNEL_CAPABILITIES:
            for setup in SetupId:
                assert matrix.lookup(row.id, row.category, setup) is not Doability.DOABLE, (row.id, setup)


def test_curation_log_records_every_edit_and_rejection() -> None:
    assert LOG, "the curation log is empty"
    for entry in LOG:
        assert entry["action"] in {"edited", "rejected", "revised", "added"}
        assert entry["reason"].strip()
        assert entry["original_text"].strip()
    edited = {e["source"]: e["text"] for e in LOG if e["action"] == "edited"}
    rejected = {e["source"] for e in LOG if e["action"] == "rejected"}
    for row in REQUESTS:
        if row.source.dataset is SourceDataset.TEMPLATE:
            continue
        key = f"{row.source.dataset.value}:{row.source.source_id}"
        assert key not in rejected
        if row.text != row.source.original_text:
            assert edited.get(key) == row.text, key
    revised = {e["source"]: e for e in LOG if e["action"] == "revised"}
    curation = yaml.safe_load((FOLLOWUP_DATA_DIR / "curation.yaml").read_text())
    assert set(revised) == set(curation["revisions"])
    for row in REQUESTS:
        key = f"{row.source.dataset.value}:{row.source.source_id}"
        if key in revised:
            assert revised[key]["context"] == row.context and revised[key]["text"] == row.text
    reasons = Counter(e["reason"] for e in LOG if e["action"] == "rejected")
    assert reasons["near-duplicate of a request already selected"] > 0
    assert all(not pii_problems(e["original_text"]) for e in LOG if not e["reason"].startswith("personal data"))


def test_request_file_errors_name_the_line() -> None:
    good = (FOLLOWUP_DATA_DIR / "requests.jsonl").read_text().splitlines()[0]
    with pytest.raises(RequestFileError, match=r"x\.jsonl: line 2: duplicate id"):
        parse_requests([good, good], "x.jsonl")
    bad = json.loads(good)
    bad["context"] = "I set a reminder on my phone."
    with pytest.raises(RequestFileError, match=r"line 1: context: .*mentions 'reminder'"):
        parse_requests([json.dumps(bad)], "x.jsonl")
    with pytest.raises(RequestFileError, match=r"line 1: not JSON"):
        parse_requests(["{"], "x.jsonl")
    bad = json.loads(good)
    bad["text"] = "Call me on 0161 496 0000 tomorrow."
    with pytest.raises(RequestFileError, match=r"long number"):
        parse_requests([json.dumps(bad)], "x.jsonl")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("write to jo.smith@example.org", "email address"),
        ("my email is jo at gmail dot com", "email address"),
        ("see www.example.com", "url"),
        ("call 0161 496 0000", "long number"),
        ("call five five five one two three four", "spoken phone number"),
        ("I live at 42 Elm Street", "street address"),
        ("order 1234567 is late", "long number"),
        ("the code is {{Order Number}}", "placeholder"),
        ("invoice #00108", "account or order number"),
    ],
)
def test_pii_patterns(text: str, problem: str) -> None:
    assert problem in pii_problems(text)


def test_clean_text_has_no_pii() -> None:
    assert pii_problems("Remind me at 3:30 pm to call mom on 5 April.") == []


SOURCE_DATA = Path(os.environ.get("COMMITBENCH_SOURCE_DATA", "/work/shared/data"))


@pytest.mark.slow
@pytest.mark.skipif(not (SOURCE_DATA / "slurp" / "slurp_en.jsonl").exists(), reason="source data not present")
def test_rebuilding_reproduces_the_shipped_files(tmp_path: Path) -> None:
    built = build(SOURCE_DATA, FOLLOWUP_DATA_DIR, seed=0)
    shipped = (FOLLOWUP_DATA_DIR / "requests.jsonl").read_text().splitlines()
    assert [request_line(r) for r in built.rows] == shipped
    assert [json.dumps(e, ensure_ascii=False) for e in built.log] == [json.dumps(e, ensure_ascii=False) for e in LOG]
    # The command writes the same bytes into the set's folder it is given.
    set_dir = tmp_path / "followup"
    shutil.copytree(FOLLOWUP_DATA_DIR, set_dir)
    for name in ("requests.jsonl", "curation_log.jsonl"):
        (set_dir / name).unlink()
    assert mine_main(["--data", str(SOURCE_DATA), "--set-dir", str(set_dir)]) == 0
    for name in ("requests.jsonl", "curation_log.jsonl"):
        assert (set_dir / name).read_bytes() == (FOLLOWUP_DATA_DIR / name).read_bytes(), name


# ------------------------------------------------------------------------- curation rules of version 2
def by_source(key: str):
    dataset, source_id = key.split(":")
    return next(r for r in REQUESTS if r.source.dataset.value == dataset and r.source.source_id == source_id)


@pytest.mark.parametrize(
    ("text", "procedural"),
    [
        ("How to lodge a claim against your company?", True),
        ("I do not know how I can contact a human agent.", True),
        ("I don't know what I have to do to talk to customer support.", True),
        ("Need assistance calling customer support.", True),
        ("Is it possible to talk with a human agent?", True),
        ("I have to contact customer service, could I get some help?", True),
        ("Where can I reach an operator?", True),
        ("I am calling to lodge a customer complaint.", True),
        ("Need to chat with an agent.", False),
        ("I want a live agent.", False),
        ("Get in touch with customer assistance.", False),
        ("Have someone call me back tomorrow morning about my bill.", False),
        ("Could someone ring me this afternoon about my final bill?", False),
        ("I want a supervisor to look at the handling of my case and contact me.", False),
    ],
)
def test_the_procedural_question_rule(text: str, procedural: bool) -> None:
    assert bool(procedural_problems(text)) is procedural


def test_no_callback_request_is_a_procedural_question() -> None:
    """A callback asks that a person act; "how do I reach someone?" is answered in the turn (rule stated in
    requests.procedural_problems: how, what to do, where, whether possible, help to make the contact, the
    user placing the call)."""
    callbacks = [r for r in REQUESTS if r.category is RequestCategory.CALLBACK]
    assert len(callbacks) >= 50
    for row in callbacks:
        assert procedural_problems(row.text) == [], (row.id, row.text)
        assert not re.search(r"\b(lodge|file|make)\b.*\b(claim|complaint|reclamation)\b", row.text, re.I), row.id
    rejected = {e["source"]: e["reason"] for e in LOG if e["action"] == "rejected"}
    # The rows of the first version that were not callback requests are out, each with its reason.
    assert rejected["bitext:5158"].startswith("a complaint")  # "Assistance to make a customer complaint ..."
    assert rejected["bitext:5361"].startswith("a procedural question")  # "... how I can contact a human agent"
    assert rejected["bitext:5256"].startswith("a procedural question")  # "Need assistance calling customer support"
    assert rejected["bitext:1225"].startswith("a complaint")  # "How to lodge a claim against your company?"


def test_every_row_passes_the_row_rules() -> None:
    assert [(r.id, row_problems(r)) for r in REQUESTS if row_problems(r)] == []


def test_memory_rows_name_what_they_point_at() -> None:
    pointing = [r for r in REQUESTS if re.search(r"\bthis (song|music)\b|\bthis is my favou?rite\b", r.text, re.I)]
    assert len(pointing) >= 4  # the SLURP rows stay, with a context that names the song
    for row in pointing:
        assert re.search(r'"[^"]+"', row.context), (row.id, row.context)
    assert referent_problems("Remember that I like this song.", "I'm listening to a new folk singer.")
    assert not referent_problems("Remember that I like this song.", 'I\'m listening to "Fast Car".')


def test_rem010_context_agrees_with_its_request() -> None:
    row = by_source("slurp:7473")  # "Remind me of the meeting with my teacher today by 5 pm."
    assert "my teacher" in row.text
    assert "teacher" in row.context and "son" not in row.context.split()
    assert "son's" not in row.context


def test_mem004_states_the_preferences_it_asks_to_remember() -> None:
    row = by_source("slurp:13341")  # "I want you to remember my preferences and recommend things ..."
    assert "my preferences" in row.text
    assert referent_problems(row.text, row.context) == []
    assert referent_problems(row.text, "I ask you for film and book ideas quite often.")  # the old, vague one


def test_the_data_version_is_read_from_the_version_file() -> None:
    assert followup_data_version() == int((FOLLOWUP_DATA_DIR / "VERSION").read_text())
    assert followup_data_version() >= 2  # version 2: the re-curated callbacks and contexts
    assert parse_version("3\n", "VERSION") == 3
    for bad in ("", "two", "0", "-1"):
        with pytest.raises(ValueError, match="VERSION: expected a positive integer"):
            parse_version(bad, "VERSION")


# ------------------------------------------------------------------------- follow-through data of version 3
def test_every_request_that_waits_for_an_event_has_one_and_every_memory_request_a_later_session() -> None:
    from commitbench.episodes.followup.requests import follow_through_problems
    from commitbench.episodes.followup.setups import CURRENT_TIME
    from commitbench.episodes.followup.vocabulary import Capability

    assert all(follow_through_problems(row, CURRENT_TIME) == [] for row in REQUESTS)
    waiting = [r for r in REQUESTS if Capability.WATCH_EVENT in r.required_capabilities]
    memory = [r for r in REQUESTS if r.category is RequestCategory.MEMORY]
    assert len(waiting) == 53 and all(r.event is not None for r in waiting)
    assert len(memory) == 52 and all(r.second_session is not None for r in memory)
    # nothing else gets either, and every later-session message comes from a template, never from the request
    assert sum(r.event is not None for r in REQUESTS) == 53
    assert sum(r.second_session is not None for r in REQUESTS) == 52
    for row in memory:
        session = row.second_session
        assert session is not None and session.source.dataset is SourceDataset.TEMPLATE
        assert session.source.source_id.startswith("ss-") and session.text != row.text


def test_every_follow_through_addition_is_logged_with_its_source() -> None:
    added = {e["source"]: e for e in LOG if e["action"] == "added"}
    assert len([e for e in LOG if e["action"] == "added"]) == 119  # 53 events, 52 later sessions, 14 facts
    for row in REQUESTS:
        key = f"{row.source.dataset.value}:{row.source.source_id}"
        texts = {e["text"] for e in LOG if e["action"] == "added" and e["source"] == key}
        expected = {part.text for part in (row.event, row.second_session, row.facts) if part is not None}
        assert texts == expected, key
        if expected:
            assert added[key]["category"] == row.category.value


def test_only_deferred_deliveries_carry_delivery_facts() -> None:
    from commitbench.episodes.followup.requests import follow_through_problems
    from commitbench.episodes.followup.setups import CURRENT_TIME

    with_facts = [r for r in REQUESTS if r.facts is not None]
    assert len(with_facts) == 14 and {r.category for r in with_facts} == {RequestCategory.DEFERRED_DELIVERY}
    reminder = next(r for r in REQUESTS if r.category is RequestCategory.REMINDER)
    moved = reminder.model_copy(update={"facts": with_facts[0].facts})
    assert follow_through_problems(moved, CURRENT_TIME) == ["has delivery facts but is not a deferred delivery"]


def test_a_follow_through_key_that_names_no_row_stops_the_build(tmp_path: Path) -> None:
    from mine_followup import BuildError, attach_follow_through

    path = tmp_path / "follow_through.yaml"
    path.write_text('events:\n  "slurp:0": {at: "2026-10-02T09:00", text: "Something happened at last."}\n')
    with pytest.raises(BuildError, match=r"follow_through.yaml: key\(s\) that name no row of the set: \['slurp:0'\]"):
        attach_follow_through(list(REQUESTS), path, [])
    bare = [r.model_copy(update={"event": None, "second_session": None}) for r in REQUESTS]
    path.write_text("events: {}\n")
    with pytest.raises(BuildError, match=r"mon-001 .*waits for an event but has no scripted event"):
        attach_follow_through(bare, path, [])
