"""Design properties of the compiled standing episodes that keep the cells comparable."""

from __future__ import annotations

import re

from commitbench.episodes.standing.compiler import GAPS, load_episodes, trigger_step_for
from commitbench.episodes.standing.episode import CANCELLATION_ACTS, ScriptAct
from commitbench.episodes.standing.loader import load_spec
from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR

CONDITIONAL = re.compile(r"\b(?:if|when|while|whenever)\s+I(?:'m|\s+am)\b", re.IGNORECASE)


def test_the_trigger_is_at_the_same_step_in_every_cell_at_a_gap_for_all_1440_episodes():
    episodes = load_episodes()
    assert len(episodes) == 1440
    spec = load_spec(DEFAULT_DATA_DIR)
    for gap in GAPS:
        steps = {e.trigger_step for e in episodes if e.gap == gap}
        assert steps == {trigger_step_for(spec.cells, gap)}, (gap, steps)
        assert [m.act for m in episodes[0].script].count(ScriptAct.TRIGGER) == 1
    for e in episodes:
        assert e.script[e.trigger_step].act is ScriptAct.TRIGGER
        # The gap is exact: 'gap' messages between the last event (or the opening) and the trigger.
        last = max([*e.event_steps, -1])
        if last >= 0:
            assert e.trigger_step - last - 1 == e.gap, (e.cell, e.gap)
            assert all(m.act not in CANCELLATION_ACTS for m in e.script[last + 1 : e.trigger_step])
    # The same holds under the paper profile (the script's timing does not depend on the profile).
    paper = load_episodes(settings="paper")
    assert {(e.gap, e.trigger_step) for e in paper} == {(e.gap, e.trigger_step) for e in episodes}


def test_delegations_are_unconditional_and_name_the_delegate():
    spec = load_spec(DEFAULT_DATA_DIR)
    for ctype in spec.types:
        for text in ctype.delegation:
            assert not CONDITIONAL.search(text), (ctype.id, text)
            assert "{{ delegate_first }}" in text, (ctype.id, text)


def test_a_conditional_delegation_fails_validation_naming_file_and_field(tmp_path):
    import pytest

    from commitbench.episodes.standing.loader import load_type
    from commitbench.episodes.standing.spec import SpecError

    source = (DEFAULT_DATA_DIR / "types" / "order_supplies.yaml").read_text()
    bad = tmp_path / "order_supplies.yaml"
    conditional = source.replace("From now on {{ delegate_first }}", "If I'm away, {{ delegate_first }}")
    bad.write_text(conditional)
    with pytest.raises(SpecError) as err:
        load_type(bad)
    assert err.value.path == str(bad) and err.value.field == "delegation" and "conditional" in err.value.reason
