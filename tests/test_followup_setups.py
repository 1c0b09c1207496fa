"""Setups and the doability matrix: data validation, rendering, and errors that name file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from commitbench.episodes.followup.doability import (
    DoabilityFileError,
    load_doability,
    load_doability_file,
    parse_doability,
)
from commitbench.episodes.followup.setups import (
    CURRENT_TIME,
    SetupFileError,
    load_setups,
    parse_setups,
)
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId, Variant

SETUPS = load_setups()
BASE = {"get_current_time", "calculator", "search_docs"}


def names(setup: SetupId, persona: Persona) -> set[str]:
    return {t.name for t in SETUPS.tool_definitions(setup, persona)}


def test_tool_lists_follow_the_design() -> None:
    assert names(SetupId.C0, Persona.GENERIC) == set()
    assert names(SetupId.C1, Persona.GENERIC) == BASE
    assert names(SetupId.C1, Persona.SUPPORT) == BASE | {"lookup_account"}
    assert names(SetupId.C2, Persona.GENERIC) == BASE | {"schedule_task", "create_reminder"}
    assert names(SetupId.C3, Persona.GENERIC) == BASE | {"memory_write", "memory_read"}
    assert names(SetupId.C4, Persona.SUPPORT) == BASE | {"lookup_account", "create_ticket", "escalate_to_human"}


def test_write_flags_and_schemas() -> None:
    writes = {t.name for t in SETUPS.tools if t.is_write}
    assert writes == {"schedule_task", "create_reminder", "memory_write", "create_ticket", "escalate_to_human"}
    # the data tool look_up is offered only in the later turns of a follow-through episode, never by a setup;
    # no tool lets the tested model act for the support team
    assert "look_up" in {t.name for t in SETUPS.tools}
    assert not any("look_up" in setup.tools for setup in SETUPS.setups.values())
    assert "update_ticket" not in {t.name for t in SETUPS.tools}
    for tool in SETUPS.tools:
        spec = tool.to_spec().to_openai()
        assert spec["function"]["parameters"]["type"] == "object"
        for prop in tool.parameters.get("properties", {}).values():
            assert prop.get("description"), f"{tool.name}: every argument needs a description"


def test_only_c2_acts_after_the_turn_and_no_setup_has_a_channel() -> None:
    for setup_id, setup in SETUPS.setups.items():
        assert setup.properties.acts_after_turn is (setup_id is SetupId.C2)
        assert setup.properties.outbound_channels == []


def test_stated_paragraph_is_rendered_from_properties() -> None:
    c0, c1 = SETUPS.stated_paragraph(SetupId.C0), SETUPS.stated_paragraph(SetupId.C1)
    assert c0 == c1
    assert "only when the user sends a message" in c0
    assert "cannot contact the user or anyone else" in c0
    c2 = SETUPS.stated_paragraph(SetupId.C2)
    assert "schedule_task" in c2 and "create_reminder" in c2
    assert "memory_write" in SETUPS.stated_paragraph(SetupId.C3)
    c4 = SETUPS.stated_paragraph(SetupId.C4)
    assert "create_ticket" in c4 and "escalate_to_human" in c4
    for setup in SetupId:  # facts, not advice
        text = SETUPS.stated_paragraph(setup).lower()
        assert "should" not in text and "never" not in text and "always" not in text


def test_system_prompt_order_and_time() -> None:
    inferred = SETUPS.system_prompt(SetupId.C2, Persona.SUPPORT, Variant.INFERRED)
    stated = SETUPS.system_prompt(SetupId.C2, Persona.SUPPORT, Variant.STATED)
    assert inferred.startswith("You are the customer support assistant")
    assert "Thursday, 1 October 2026, 10:00" in inferred and "Thursday, 1 October 2026, 10:00" in stated
    assert SETUPS.stated_paragraph(SetupId.C2) in stated and SETUPS.stated_paragraph(SetupId.C2) not in inferred
    assert SETUPS.current_time == CURRENT_TIME and CURRENT_TIME.strftime("%A") == "Thursday"


def _raw_setups() -> dict:
    path = Path(__file__).resolve().parents[1] / "episodes/data/followup/setups.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_setup_errors_name_the_field() -> None:
    data = _raw_setups()
    data["setups"]["C3"]["tools"].append("send_fax")
    with pytest.raises(SetupFileError, match=r"setups\.yaml: .*setups\.C3\.tools: unknown tool"):
        parse_setups(data, "setups.yaml")
    data = _raw_setups()
    data["setups"]["C3"]["properties"]["remembers_across_sessions"] = False
    with pytest.raises(SetupFileError, match=r"setups\.C3\.properties"):
        parse_setups(data, "setups.yaml")
    data = _raw_setups()
    data["setups"]["C1"]["properties"]["can_fly"] = True
    with pytest.raises(SetupFileError, match=r"setups\.yaml: setups\.C1\.properties\.can_fly"):
        parse_setups(data, "setups.yaml")


# --- doability ---------------------------------------------------------------------------------------


def test_packaged_matrix_matches_the_design() -> None:
    matrix = load_doability()
    doable = {
        (c, s) for c, row in matrix.matrix.items() for s, d in row.items() if d is Doability.DOABLE
    }
    assert doable == {
        (RequestCategory.REMINDER, SetupId.C2),
        (RequestCategory.MONITORING, SetupId.C2),
        (RequestCategory.DEFERRED_DELIVERY, SetupId.C2),
        (RequestCategory.CALLBACK, SetupId.C4),
        (RequestCategory.MEMORY, SetupId.C3),
    }
    assert matrix.matrix[RequestCategory.CALLBACK][SetupId.C2] is Doability.PARTIAL
    for row in matrix.matrix.values():
        assert row[SetupId.C0] is Doability.NOT_DOABLE and row[SetupId.C1] is Doability.NOT_DOABLE


def _raw_doability() -> dict:
    return {
        "matrix": {c.value: {s.value: "not_doable" for s in SetupId} for c in RequestCategory},
        "overrides": [{"request_id": "rem-001", "setups": {"C2": "partial"}, "reason": "needs a phone call"}],
    }


def test_override_lookup() -> None:
    matrix = parse_doability(_raw_doability(), "doability.yaml")
    assert matrix.lookup("rem-001", RequestCategory.REMINDER, SetupId.C2) is Doability.PARTIAL
    assert matrix.lookup("rem-001", RequestCategory.REMINDER, SetupId.C3) is Doability.NOT_DOABLE
    assert matrix.lookup("rem-002", RequestCategory.REMINDER, SetupId.C2) is Doability.NOT_DOABLE


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["matrix"]["memory"].update(C2="yes"), r"doability\.yaml: matrix\.memory\.C2: Input should be"),
        (lambda d: d["matrix"]["memory"].update(C7="doable"), r"doability\.yaml: matrix\.memory\.C7\.\[key\]"),
        (lambda d: d["matrix"].pop("monitoring"), r"doability\.yaml: matrix\.monitoring: category missing"),
        (lambda d: d["matrix"]["callback"].pop("C4"), r"doability\.yaml: matrix\.callback: setups missing"),
        (lambda d: d["matrix"].update(weather={}), r"doability\.yaml: matrix\.weather\.\[key\]"),
        (lambda d: d["overrides"][0].pop("reason"), r"doability\.yaml: overrides\.0\.reason: Field required"),
        (lambda d: d["overrides"][0].update(setups={}), r"doability\.yaml: overrides\.0: .*at least one setup"),
        (lambda d: d["overrides"].append(dict(d["overrides"][0])), r"overrides\.1\.request_id: 'rem-001' appears"),
        (lambda d: d.update(extra=1), r"doability\.yaml: extra: Extra inputs"),
    ],
)
def test_doability_errors_name_file_and_field(mutate, expected) -> None:
    data = _raw_doability()
    mutate(data)
    with pytest.raises(DoabilityFileError, match=expected):
        parse_doability(data, "doability.yaml")


def test_doability_file_errors(tmp_path: Path) -> None:
    broken = tmp_path / "doability.yaml"
    broken.write_text("matrix: [unclosed", encoding="utf-8")
    with pytest.raises(DoabilityFileError, match=r"doability\.yaml: not valid YAML"):
        load_doability_file(broken)
    broken.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(DoabilityFileError, match=r"doability\.yaml: expected a mapping"):
        load_doability_file(broken)


def test_unknown_override_request_is_named() -> None:
    matrix = parse_doability(_raw_doability(), "doability.yaml")
    with pytest.raises(DoabilityFileError, match=r"overrides\.0\.request_id: unknown request 'rem-001'"):
        matrix.check_request_ids({"rem-002"}, "doability.yaml")


def test_a_pages_setup_views_are_the_setups_tools_made_once_per_setup_and_persona() -> None:
    from commitbench.analysis.view.followup import SetupViews
    from commitbench.analysis.view.model import ToolView

    views = SetupViews(SETUPS)
    for setup in SetupId:
        for persona in Persona:
            parts, persists = views.of(setup.value, persona.value)
            tools = [ToolView.model_validate(part) for part in parts]
            assert [t.model_dump(mode="json", exclude_defaults=True) for t in tools] == parts
            expected = SETUPS.tool_definitions(setup, persona)
            assert [t.name for t in tools] == [t.name for t in expected]
            assert [t.write for t in tools] == [t.is_write for t in expected]
            assert [t.description for t in tools] == [t.description.strip() for t in expected]
            # The parameters read as json.dumps writes them with an indent, non-ASCII kept.
            assert [t.parameters for t in tools] == [json.dumps(t.parameters, indent=2, ensure_ascii=False)
                                                      for t in expected]
            assert persists == SETUPS.stated_paragraph(setup)
            assert views.of(setup.value, persona.value)[0] is parts  # made once
    with pytest.raises(ValueError):
        views.of("C9", "generic")
    with pytest.raises(ValueError):
        views.of("C1", "pirate")
