"""Personas are crossed: every request is played under both personas unless a selection names one, so
persona is never confounded with request category (most callbacks are written for the support persona)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from commitbench.envs.followup.env import FollowUpEnv
from commitbench.episodes.followup.episodes import (
    FollowUpEpisode,
    FollowupSelection,
    full_run_size,
    select_followup_episodes,
)
from commitbench.episodes.followup.requests import load_requests
from commitbench.episodes.followup.vocabulary import Persona, RequestCategory, SetupId, Variant

REQUESTS = load_requests()
ROOT = Path(__file__).resolve().parents[1]


def personas_by_request(episodes: Sequence[FollowUpEpisode]) -> dict[str, set[Persona]]:
    out: dict[str, set[Persona]] = defaultdict(set)
    for episode in episodes:
        out[episode.request.id].add(episode.persona)
    return out


def test_every_default_selection_plays_every_request_under_both_personas() -> None:
    for episodes in (FollowupSelection().select(), select_followup_episodes(), FollowUpEnv().pool):
        played = personas_by_request(episodes)
        assert set(played) == {r.id for r in REQUESTS}
        assert all(personas == set(Persona) for personas in played.values())
    # The text's own persona does not decide: support-written callbacks run under the generic persona too.
    support_written = [r for r in REQUESTS if r.persona is Persona.SUPPORT]
    assert len(support_written) >= 40
    generic_runs = {e.request.id for e in FollowupSelection().select() if e.persona is Persona.GENERIC}
    assert {r.id for r in support_written} <= generic_runs


def test_a_full_run_is_every_request_in_twenty_conditions() -> None:
    full = FollowupSelection().select()
    assert len(full) == full_run_size(len(REQUESTS)) == len(REQUESTS) * 5 * 2 * 2 == 6000
    conditions = Counter((e.setup, e.variant, e.persona) for e in full)
    assert set(conditions) == {(s, v, p) for s in SetupId for v in Variant for p in Persona}
    assert set(conditions.values()) == {len(REQUESTS)}


def test_the_persona_split_of_a_cell_is_not_confounded_with_category() -> None:
    cell = select_followup_episodes(setup="C0", variant="inferred")
    counts = Counter((e.request.category, e.persona) for e in cell)
    sizes = Counter(r.category for r in REQUESTS)
    for category in RequestCategory:
        assert counts[(category, Persona.GENERIC)] == counts[(category, Persona.SUPPORT)] == sizes[category]
    # The generic persona's share is the same (one half) in every category, callbacks included.
    callbacks = [e for e in cell if e.request.category is RequestCategory.CALLBACK]
    assert sum(e.persona is Persona.GENERIC for e in callbacks) == len(callbacks) // 2


def test_naming_one_persona_still_works() -> None:
    episodes = FollowupSelection(personas=[Persona.SUPPORT], setups=[SetupId.C4]).select()
    assert {e.persona for e in episodes} == {Persona.SUPPORT}
    assert len(episodes) == len(REQUESTS) * len(Variant)


def test_documented_followup_runs_cross_personas() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = 0
    for path in docs:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"commitbench run followup\b", line):
                commands += 1
                named = re.search(r"--personas ([\w ]+)", line)
                assert named is None or set(named.group(1).split()) == {p.value for p in Persona}, (path.name, line)
    assert commands >= 2
