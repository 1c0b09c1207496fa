"""Invariants of the shipped request set and its curation log (no source data needed)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from commitbench.episodes.followup.doability import load_doability
from commitbench.episodes.followup.mine import PACKAGE_DATA, QUOTAS, build
from commitbench.episodes.followup.requests import (
    ID_PREFIX,
    RequestFileError,
    context_problems,
    load_requests,
    parse_requests,
    pii_problems,
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
LOG = [json.loads(line) for line in (PACKAGE_DATA / "curation_log.jsonl").read_text().splitlines() if line]


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
    families = {f["id"] for f in yaml.safe_load((PACKAGE_DATA / "templates.yaml").read_text())}
    for row in REQUESTS:
        assert row.source.original_text.strip()
        assert row.source.source_id.strip()
        if row.source.dataset is SourceDataset.TEMPLATE:
            assert row.source.source_id.split("#")[0] in families
        else:
            assert row.source.source_id.isdigit()
    datasets = Counter(r.source.dataset for r in REQUESTS)
    assert datasets[SourceDataset.SLURP] >= 100 and datasets[SourceDataset.BITEXT] >= 20


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
        assert entry["action"] in {"edited", "rejected"}
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
    reasons = Counter(e["reason"] for e in LOG if e["action"] == "rejected")
    assert reasons["near-duplicate of a request already selected"] > 0
    assert all(not pii_problems(e["original_text"]) for e in LOG if not e["reason"].startswith("personal data"))


def test_request_file_errors_name_the_line() -> None:
    good = (PACKAGE_DATA / "requests.jsonl").read_text().splitlines()[0]
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
def test_rebuilding_reproduces_the_shipped_files() -> None:
    built = build(SOURCE_DATA, seed=0)
    shipped = (PACKAGE_DATA / "requests.jsonl").read_text().splitlines()
    assert [json.dumps(r.model_dump(mode="json"), ensure_ascii=False) for r in built.rows] == shipped
    assert [json.dumps(e, ensure_ascii=False) for e in built.log] == [json.dumps(e, ensure_ascii=False) for e in LOG]
