"""``commitbench run SUITE``'s filter flags come from each suite's episode-filter model."""

from __future__ import annotations

import argparse
from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from commitbench.cli import build_parser, main
from commitbench.commands.filters import add_filter_flags, filter_flags, given_filters
from commitbench.commands.run_cmd import shorthand_config
from commitbench.suites import suites


class Colour(str, Enum):
    RED = "red"
    BLUE = "blue"


class ToyFilter(BaseModel):
    counts: list[int] | None = Field(default=None, description="Counts.")
    colour: Colour | None = Field(default=None, description="A colour.")
    mode: Literal["a", "b"] | None = Field(default=None, description="A mode.")
    deep: bool = Field(default=False, description="Go deep.")
    note: str | None = Field(default=None, description="Free text.")
    limit: int | None = Field(default=None, description="Skipped: the command's own.")


class OtherFilter(BaseModel):
    counts: list[int] | None = Field(default=None, description="Counts.")
    colour: Colour | None = Field(default=None, description="A colour.")
    only_here: str | None = Field(default=None, description="Only the other suite's.")


def test_each_field_kind_becomes_the_right_flag() -> None:
    flags = filter_flags([("toy", ToyFilter), ("other", OtherFilter)], skip=("limit",))
    by_field = {f.field: f for f in flags}
    assert set(by_field) == {"counts", "colour", "mode", "deep", "note", "only_here"}
    assert by_field["counts"].suites == ("toy", "other") and by_field["only_here"].suites == ("other",)
    parser = argparse.ArgumentParser()
    add_filter_flags(parser, flags)
    args = parser.parse_args(["--counts", "1", "20", "--colour", "blue", "--mode", "b", "--deep"])
    assert (args.counts, args.colour, args.mode, args.deep, args.note) == ([1, 20], "blue", "b", True, None)
    assert ToyFilter.model_validate(given_filters(args, flags, "toy")[0]).colour is Colour.BLUE
    for bad in (["--counts", "x"], ["--colour", "green"], ["--mode", "c"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)
    given, foreign = given_filters(parser.parse_args(["--only-here", "x", "--counts", "2"]), flags, "toy")
    assert given == {"counts": [2]} and foreign == ["--only-here"]


def test_two_suites_that_disagree_on_a_field_are_refused() -> None:
    class Clash(BaseModel):
        counts: str | None = None

    with pytest.raises(TypeError, match="'counts' takes different values"):
        filter_flags([("toy", ToyFilter), ("clash", Clash)])


def test_every_field_of_every_registered_suite_is_a_flag_of_run() -> None:
    parser = build_parser(["run"])
    run = parser.parse_args(["run", "x"])
    fields = {f.field for f in run.filter_flags}
    for suite in suites():
        expected = set(suite.selection.model_fields) - {"profile", "limit"}
        assert expected <= fields, f"{suite.name}: {expected - fields} have no flag"
    assert not hasattr(build_parser(["report"]).parse_args(["report", "x"]), "filter_flags")


def _config(*argv: str):
    arguments = ["run", *argv]
    return shorthand_config(build_parser(arguments).parse_args(arguments))


def test_the_shorthands_take_their_suites_defaults() -> None:
    standing = _config("standing", "--agent", "creditor-rule", "--cells", "BASE")
    assert standing.episodes.split == "test" and standing.episodes.cells == ["BASE"]
    assert _config("standing", "--agent", "creditor-rule", "--types", "book_room").episodes.split is None
    followup = _config("followup", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--setups", "C2",
                       "--follow-through", "--limit", "3")
    assert followup.agents == ["chat"] and followup.env == "commitbench/FollowUp-v0"
    assert followup.episodes.follow_through is True and followup.episodes.limit == 3
    assert [s.value for s in followup.episodes.setups] == ["C2"]


def test_a_filter_of_another_suite_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "followup", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--cells", "BASE",
                 "--dry-run"]) == 2
    assert "--cells filter another suite's episodes, not followup's" in capsys.readouterr().err
    assert main(["run", "standing", "--dry-run"]) == 2
    assert "needs --agent" in capsys.readouterr().err
