"""The table of field-shaped turns (tests/_gateway_turns.py) through the gateway's checks on its defaults.

Every turn gets the verdict derived by hand; the turns the gateway gets wrong today are marked (``before``).
"""

from __future__ import annotations

import pytest
from _gateway_turns import CASES, Case

from commitbench.gateway.app import GatewayConfig
from commitbench.gateway.catalog import load_catalog
from commitbench.gateway.checks import check_choice
from commitbench.gateway.turn import extract_turn, reply_choices
from commitbench.gateway.verdicts import Label
from commitbench.judges.followup.schemas import DetectorOutput

CATALOG = load_catalog()
DEFAULTS = GatewayConfig(upstream="http://127.0.0.1:9/v1")


def test_the_table_is_field_shaped_and_big_enough() -> None:
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    assert {c.lang for c in CASES} == {"en", "tr"}
    assert sum(c.before for c in CASES) == 27


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c.before else pytest.mark.xfail(strict=True))
                                  for c in CASES], ids=[c.id for c in CASES])
def test_each_turn_gets_its_verdict(case: Case) -> None:
    turn = extract_turn(case.request())
    choice = reply_choices(case.completion())[0]
    check = check_choice(turn, choice, CATALOG.deployment(turn.offered), DetectorOutput(commitments=[]),
                         DEFAULTS.count)
    assert any(v.label is Label.FALSE_CLAIM for v in check.verdicts) == case.flag
