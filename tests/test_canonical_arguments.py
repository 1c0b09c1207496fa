"""Arguments compared in canonical form: equivalent spellings are one value, different values never are.

The table holds the spellings an assistant writes for the promised arguments (articles, room and number
prefixes, ranges written with 'to', seconds, weekday and month abbreviations, numbers written as text);
the property test builds values and random equivalent spellings of them, and checks that two spellings
compare equal exactly when they spell the same value.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitbench.calendar_words import ABBREVIATIONS, MONTHS, WEEKDAYS
from commitbench.episodes.standing.outcome import canonical_argument

EQUIVALENT = [
    ("the leadership list", "leadership list"),
    ("the Acme team", "Acme team"),
    ("Room 4B", "4B"),
    ("room #4B", "4b"),
    ("No. 5", "5"),
    ("10:00 to 12:00", "10:00-12:00"),
    ("10 am until 12 pm", "10:00-12:00"),
    ("15:00:00", "15:00"),
    ("3 p.m.", "15:00"),
    ("Tue", "Tuesday"),
    ("Tues.", "tuesday"),
    ("Thu", "Thursday"),
    ("Thurs", "Thursday"),
    ("Sept", "September"),
    ("Dec.", "December"),
    ("08", "8"),
    ("8.0", 8),
    ("1,000", 1000),
    ("'Q3 sales report'", "Q3 sales report"),
    ("#announcements", "announcements"),
    ("Thursday, 10:00 to 12:00", "thursday, 10:00-12:00"),
]

DIFFERENT = [
    ("4B", "4C"),
    ("Room 4B", "Room 4C"),
    ("Tue", "Thu"),
    ("Tuesday", "Thursday"),
    ("15:00", "15:30"),
    ("15:00:30", "15:00"),
    ("10:00-12:00", "10:00-13:00"),
    ("8", "9"),
    ("8", "80"),
    ("8.5", "8"),
    ("the leadership list", "the board list"),
    ("Q3 sales report", "Q2 sales report"),
    ("March", "May"),
    ("a", "an"),  # an article alone is no article of anything
    ("staging", "production"),
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_spellings_compare_equal(a: object, b: object) -> None:
    assert canonical_argument(a) == canonical_argument(b), (canonical_argument(a), canonical_argument(b))


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_values_do_not(a: object, b: object) -> None:
    assert canonical_argument(a) != canonical_argument(b)


# ------------------------------------------------------------------ values and their spellings
def _day_spellings(day: str) -> st.SearchStrategy[str]:
    shorts = [short for short, full in ABBREVIATIONS.items() if full == day]
    forms = [day, day.capitalize(), day.upper(), *shorts, *(s.capitalize() + "." for s in shorts)]
    return st.sampled_from(forms)


def _time_spellings(hour: int, minute: int) -> st.SearchStrategy[str]:
    forms = [f"{hour:02d}:{minute:02d}", f"{hour}:{minute:02d}", f"{hour:02d}:{minute:02d}:00"]
    twelve = hour % 12 or 12
    suffix = "pm" if hour >= 12 else "am"
    forms += [f"{twelve}:{minute:02d}{suffix}", f"{twelve}:{minute:02d} {suffix[0]}.m."]
    if minute == 0:
        forms += [f"{twelve}{suffix}", f"{twelve} {suffix}"]
    return st.sampled_from(forms)


def _number_spellings(n: int) -> st.SearchStrategy[object]:
    forms: list[object] = [n, str(n), f"{n}.0", f"0{n}"]
    if n >= 1000:
        forms.append(f"{n:,}")
    return st.sampled_from(forms)


def _phrase_spellings(words: tuple[str, ...]) -> st.SearchStrategy[str]:
    text = " ".join(words)
    return st.sampled_from([text, f"the {text}", text.title(), f"  {text}  ", f'"{text}"', f"{text}."])


def _room_spellings(code: str) -> st.SearchStrategy[str]:
    return st.sampled_from([code, code.lower(), f"Room {code}", f"room #{code}", f"#{code}"])


VALUE = st.one_of(
    st.tuples(st.just("day"), st.sampled_from(WEEKDAYS + MONTHS)),
    st.tuples(st.just("time"), st.tuples(st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))),
    st.tuples(st.just("number"), st.integers(0, 5000)),
    st.tuples(st.just("phrase"), st.tuples(st.sampled_from(["q3", "q2", "acme", "sales", "board"]),
                                            st.sampled_from(["report", "team", "list", "draft"]))),
    st.tuples(st.just("room"), st.tuples(st.integers(1, 9), st.sampled_from("ABC")).map(lambda t: f"{t[0]}{t[1]}")),
)


def spelling(value: tuple[str, object]) -> st.SearchStrategy[object]:
    kind, what = value
    if kind == "day":
        return _day_spellings(str(what))
    if kind == "time":
        hour, minute = what  # type: ignore[misc]
        return _time_spellings(hour, minute)
    if kind == "number":
        return _number_spellings(int(what))  # type: ignore[call-overload]
    if kind == "phrase":
        return _phrase_spellings(what)  # type: ignore[arg-type]
    return _room_spellings(str(what))


@st.composite
def two_spellings(draw: st.DrawFn) -> tuple[tuple[str, object], object, tuple[str, object], object]:
    a = draw(VALUE)
    b = draw(st.one_of(st.just(a), VALUE))
    return a, draw(spelling(a)), b, draw(spelling(b))


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(two_spellings())
def test_two_spellings_compare_equal_exactly_when_they_spell_one_value(
    case: tuple[tuple[str, object], object, tuple[str, object], object],
) -> None:
    value_a, written_a, value_b, written_b = case
    same = canonical_argument(written_a) == canonical_argument(written_b)
    # A number and a time never spell one value, nor do two kinds; a room code and a number neither.
    assert same == (value_a == value_b), (value_a, written_a, value_b, written_b)


def test_canonical_form_takes_linear_time() -> None:
    for text in ("10 to " * 20_000, "room " * 20_000 + "4b", "tue. " * 20_000, "9" * 100_000, "1,000" * 20_000):
        started = time.perf_counter()
        canonical_argument(text)
        assert time.perf_counter() - started < 1.0, text[:20]


def test_a_short_value_is_made_canonical_once_and_a_long_one_each_time_alike() -> None:
    from commitbench.episodes.standing.outcome import _CACHED_LENGTH, _canonical, _canonical_short

    _canonical_short.cache_clear()
    short = "  Tues. 3:00 P.M. to 5pm "
    assert canonical_argument(short) == _canonical(short) == "tuesday 15:00-17:00"
    assert canonical_argument(short) == "tuesday 15:00-17:00" and _canonical_short.cache_info().hits == 1
    long = "Room 4B, " * (_CACHED_LENGTH // 9 + 1)
    assert len(long) > _CACHED_LENGTH
    before = _canonical_short.cache_info().currsize
    assert canonical_argument(long) == _canonical(long)
    assert _canonical_short.cache_info().currsize == before  # a long text is not kept
    assert canonical_argument(8) == canonical_argument("08") == canonical_argument(8.0) == "8"
