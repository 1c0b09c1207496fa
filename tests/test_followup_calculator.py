"""The follow-up calculator is bounded: every expression answers quickly, with a result or a CalculatorError.

The table lists expressions that once escaped (an OverflowError out of ``env.step``) or ran for minutes;
the property test draws random expression trees (huge, negative and fractional numbers, every operator and
function) and checks that nothing but :class:`CalculatorError` comes out, each within a generous time.
"""

from __future__ import annotations

import math
import time
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commitbench.episodes.followup.tools import CalculatorError, FollowupTools, evaluate_arithmetic
from commitbench.episodes.followup.vocabulary import Persona
from commitbench.tools import ToolErrorKind, bound_tools

# Far above what a bounded operation needs (milliseconds), far below the minutes an unbounded one took.
GENEROUS_SECONDS = 0.5

OUT_OF_RANGE = [
    "10.0**400",
    "10.0 ** 400 - 1",
    "sqrt(" + "9" * 400 + ")",
    "9" * 400 + " + 1",
    "abs(" + "9" * 400 + ".0)",
    "1e400",
    "1e400 - 1e400",
    "round(5, -(10**8))",
    "round(5, 10**8)",
    "round(5.5, -(10**8))",
    "round(1, 2.5)",
    "(10**100) ** 1000",
    "(-7) ** 999 * 2 ** 999",
    "0.5 ** -1000",
    "0 ** -1",
    "(-8) ** 0.5",
    "max(" + ", ".join(["1"] * 200) + ")",
    "-" * 450 + "1",
    "(" * 250 + "1" + ")" * 250,
    "min(3)",
]


@pytest.mark.parametrize("expression", OUT_OF_RANGE, ids=lambda e: e[:40])
def test_out_of_range_expressions_are_refused_quickly(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(CalculatorError):
        evaluate_arithmetic(expression)
    assert time.perf_counter() - started < GENEROUS_SECONDS


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("10 ** 100", 10**100),
        ("2.0 ** 300 / 2 ** 290", 1024.0),
        ("round(123456, -3)", 123000),
        ("round(2.675, 2)", round(2.675, 2)),
        ("sqrt(10 ** 100)", 1e50),
        ("max(1, 2, 3, 4, 5, 6, 7, 8)", 8),
        ("-(-(-3))", -3),
    ],
)
def test_in_range_expressions_still_evaluate(expression: str, value: object) -> None:
    assert evaluate_arithmetic(expression) == value


def test_the_calculator_tool_refuses_with_a_tool_error_not_a_handler_error() -> None:
    tools = {t.name: t for t in bound_tools(FollowupTools(datetime(2026, 10, 1, 9, 0), Persona.GENERIC))}
    for expression in ("10.0**400", "sqrt(" + "9" * 400 + ")", "round(5, -(10**8))"):
        started = time.perf_counter()
        ok, text, kind = tools["calculator"].run({"expression": expression})
        assert time.perf_counter() - started < GENEROUS_SECONDS
        assert (ok, kind) == (False, ToolErrorKind.BAD_ARGUMENTS.value), text


# ----------------------------------------------------------------------------------- random trees
_NUMBERS = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, 1, 2, 10, 10**8, 10**100, 10**101, 10**400]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 0.5, 1e-300, 1e100, 1e300, 1.7976931348623157e308]),
)
_BINARY = ["+", "-", "*", "/", "%", "**", "//", "^"]
_FUNCTIONS = ["round", "abs", "min", "max", "sqrt"]


def _number(value: int | float) -> str:
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(_BINARY), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    unary = st.tuples(st.sampled_from(["-", "+"]), children).map(lambda t: f"{t[0]}({t[1]})")
    call = st.tuples(st.sampled_from(_FUNCTIONS), st.lists(children, min_size=0, max_size=4)).map(
        lambda t: f"{t[0]}({', '.join(t[1])})"
    )
    return st.one_of(binary, unary, call)


EXPRESSIONS = st.recursive(_NUMBERS.map(_number), _extend, max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_random_expressions_answer_quickly_with_a_number_or_a_calculator_error(expression: str) -> None:
    started = time.perf_counter()
    try:
        value = evaluate_arithmetic(expression)
    except CalculatorError:
        pass
    else:
        assert isinstance(value, (int, float)) and not isinstance(value, bool)
        assert math.isfinite(value)
    assert time.perf_counter() - started < GENEROUS_SECONDS, expression
