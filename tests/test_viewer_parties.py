"""The viewer with live parties: a message a party model wrote is marked as generated, a fallback as the script's
words, and each carries its role card (rebuilt from the episode) and the manipulation check's verdict; answers
inside the assistant's turn are shown as such; the run's facts count what the parties did. A scripted run's page
shows none of it.

The runs are played on the mock server with the scripted party model and check of ``test_live_parties``: one
person's texts always fail the check, and a chat agent writes to a bystander so that an answer arrives inside its
turn. The site is checked in headless Chromium.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import Browser, browser_session
from _viewer_fixtures import route_ready
from test_live_parties import BAD, Parties, _config, _episode

from commitbench.analysis.view.model import ChatItem
from commitbench.analysis.view.standing import party_facts, voice_view
from commitbench.analysis.view.transcript import chat_items
from commitbench.commands.view_cmd import build_site
from commitbench.config import JudgeConfig
from commitbench.envs.standing.voices import ANSWER_ACT
from commitbench.episodes.standing.episode import Episode, ScriptAct
from commitbench.episodes.standing.rolecards import role_card
from commitbench.labeljob import label_directory
from commitbench.mock import DEFAULT_MODEL, MockServer, ReplySpec, ToolCallSpec
from commitbench.oracles.standing.parties import LIVE_NAME
from commitbench.protocol import CheckVerdict
from commitbench.runner import run_experiment
from commitbench.suites.standing import episodes_by_id
from commitbench.traces import EpisodeTrace, latest_traces

CELLS = ("PEER-DIRECT", "CRED-DIRECT")
QUESTION = "Did anyone ask you about the report?"


def _bystander(episode: Episode) -> str:
    """Who writes the first filler message (never the person whose texts fail the check)."""
    return episode.person(next(m.sender for m in episode.script if m.act is ScriptAct.FILLER)).name


def _responder(episodes: list[Episode], parties: Parties) -> Any:
    """The party model and the check (requests without tools); the chat agent (requests with tools) writes to a
    bystander when a cancellation arrives, and otherwise ends its turn in silence."""
    cancels = {m.text: _bystander(e) for e in episodes for m in e.script if m.act is ScriptAct.CANCEL}

    def respond(request: dict[str, Any]) -> Any:
        if not request.get("tools"):
            return parties(request)
        last = request["messages"][-1]
        if last["role"] == "user":
            to = next((name for text, name in cancels.items() if text in str(last["content"])), None)
            if to is not None:
                return ReplySpec(tool_calls=[ToolCallSpec(name="send_dm", arguments={"to": to, "text": QUESTION})])
        return ReplySpec(tool_calls=[ToolCallSpec(name="end_turn")])

    return respond


@pytest.fixture(scope="module")
def live_run(tmp_path_factory: pytest.TempPathFactory, _mock_server_process_wide: MockServer) -> Iterator[Path]:
    """Both cells under the scripted and the live arm, played by the chat agent and creditor-rule; the peer's
    texts always fail the check. Labelled by the rule judge, and a site built."""
    server = _mock_server_process_wide
    episodes = [_episode(cell) for cell in CELLS]
    parties = Parties(bad_for=[episodes[0].person("peer").name])
    out = tmp_path_factory.mktemp("viewer-parties") / "run"
    server.reset()
    server.set_responder(_responder(episodes, parties))
    try:
        models = [{"name": name, "base_url": server.base_url, "settings": {"model": model}}  # the same server
                  for name, model in (("party", DEFAULT_MODEL), ("player", "mock-player"))]
        config = _config(server.base_url, episodes, parties=["scripted", "live"], agents=["chat", "creditor-rule"],
                         models=models)
        summary = run_experiment(config, out)
        assert summary.cells_failed == 0, summary.failures
    finally:
        server.reset()
    label_directory(out, JudgeConfig())
    build_site(out, out / "site", judge="rules", n_boot=20)
    yield out


def _traces(run: Path) -> list[EpisodeTrace]:
    return latest_traces(run)


def _live_chat(run: Path, cell: str) -> EpisodeTrace:
    return next(t for t in _traces(run) if t.interventions == [LIVE_NAME] and t.factors["cell"] == cell
                and t.agent is not None and t.agent.kind == "chat")


# --------------------------------------------------------------------------------------- pure parts
def test_each_voiced_message_carries_its_rebuilt_card_and_the_checks_verdict(live_run: Path) -> None:
    trace = _live_chat(live_run, "PEER-DIRECT")
    episode = episodes_by_id()[trace.episode_id]
    made = chat_items(trace, {p.name: p.role for p in episode.people}, None, lambda e: voice_view(episode, e))
    items = [ChatItem.model_validate(item) for item in made]
    assert [item.model_dump(mode="json", exclude_defaults=True) for item in items] == made  # each is its model's
    voiced = [e for e in trace.events if e.voice is not None]
    shown = [it for it in items if it.voice is not None]
    assert len(shown) == len(voiced) >= 7
    for item in shown:
        assert item.voice is not None and item.voice.card and not item.voice.card_note
        assert item.sender.split()[0] in item.voice.card  # the card is the speaker's
    fallback = next(it for it in shown if it.voice is not None and it.voice.fallback)
    cancel = next(m for m in episode.script if m.act is ScriptAct.CANCEL)
    assert fallback.text == cancel.text and fallback.voice is not None
    assert fallback.voice.check == CheckVerdict.FAILED.value and fallback.voice.attempts == 3
    assert fallback.voice.problems == ["claims to be the delegate"] * 3
    assert fallback.voice.card == role_card(episode, cancel.sender, cancel.step, cancel).text()
    answer = next(it for it in shown if it.act == ANSWER_ACT)
    assert answer.voice is not None and answer.voice.answer and answer.voice.generated
    assert answer.sender == _bystander(episode) and answer.voice.check == CheckVerdict.PASSED.value
    assert not any(it.voice is not None and it.voice.answer for it in shown if it.act != ANSWER_ACT)


def test_a_card_whose_digest_differs_is_not_shown_and_the_page_says_why(live_run: Path) -> None:
    trace = _live_chat(live_run, "CRED-DIRECT")
    episode = episodes_by_id()[trace.episode_id]
    event = next(e for e in trace.events if e.voice is not None)
    assert event.voice is not None
    changed = event.model_copy(update={"voice": event.voice.model_copy(update={"card": "0" * 64})})
    view = voice_view(episode, changed)
    assert view is not None and view.card == "" and "could not be rebuilt" in view.card_note
    assert voice_view(episode, event.model_copy(update={"voice": None})) is None


def test_a_scripted_runs_page_is_as_it_was(live_run: Path) -> None:
    """A scripted trace: no item carries a voice, the page's JSON names none, and no party fact is added."""
    for trace in _traces(live_run):
        if trace.interventions:
            continue
        episode = episodes_by_id()[trace.episode_id]
        people = {p.name: p.role for p in episode.people}
        with_voices = chat_items(trace, people, None, lambda e, episode=episode: voice_view(episode, e))
        assert with_voices == chat_items(trace, people)
        assert all("voice" not in it for it in with_voices)
        assert '"voice"' not in json.dumps(with_voices)
    record = next(t.parties for t in _traces(live_run) if t.parties is not None)
    labels = [f["label"] for f in party_facts(record)]
    assert labels[:4] == ["party model", "voiced messages", "party answers", "budget refusals"]


# --------------------------------------------------------------------------------------- in the browser
@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    yield from browser_session()


def _open(chrome: Browser, run: Path, key: str) -> None:
    route = f"#/run/{key}"
    chrome.goto((run / "site" / "index.html").resolve().as_uri() + route, ready=route_ready(route))


ITEMS_JS = """Array.from(document.querySelectorAll('ol.chat > li.person')).map(li => ({
  text: li.querySelector('.text').textContent,
  badge: li.querySelector('.voice-badge') ? li.querySelector('.voice-badge').textContent : null,
  answer: !!li.querySelector('.tag.answer'),
  summary: li.querySelector('details.voice-panel summary') ? li.querySelector('details.voice-panel summary').textContent
    : null,
  card: li.querySelector('.voice-card pre') ? li.querySelector('.voice-card pre').textContent : null,
  problems: Array.from(li.querySelectorAll('.voice-problems li')).map(p => p.textContent),
}))"""


def _facts(chrome: Browser) -> dict[str, str]:
    pairs = chrome.evaluate("Array.from(document.querySelectorAll('dl.facts .fact'))"
                            ".map(f => [f.querySelector('dt').textContent, f.querySelector('dd').textContent])")
    return dict(pairs)


@pytest.mark.slow
def test_the_page_marks_generated_messages_with_their_card_and_verdict(
    chrome: Browser, live_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _live_chat(live_run, "PEER-DIRECT")
    episode = episodes_by_id()[trace.episode_id]
    _open(chrome, live_run, trace.run_key)
    chrome.evaluate("document.querySelectorAll('.fold-toggle').forEach(b => b.click())")  # unfold the filler
    items = chrome.evaluate(ITEMS_JS)
    by_text = {it["text"]: it for it in items}
    cancel = next(m for m in episode.script if m.act is ScriptAct.CANCEL)
    fallback = by_text[cancel.text]
    assert fallback["badge"] == "script (fallback after 3 failed checks)"
    assert fallback["problems"] == ["claims to be the delegate"] * 3
    assert fallback["summary"].startswith("Role card and check: every text failed")
    assert fallback["card"] == role_card(episode, cancel.sender, cancel.step, cancel).text()
    generated = [it for it in items if it["badge"] == "generated"]
    voiced = [e for e in trace.events if e.voice is not None and e.voice.generated]
    assert len(generated) == len(voiced) and all(it["summary"] == "Role card and check: passed" for it in generated)
    assert all(it["card"] and episode.thing in it["card"] for it in generated)
    answers = [it for it in items if it["answer"]]
    assert len(answers) == 1 and answers[0]["badge"] == "generated"
    assert _bystander(episode).split()[0] in answers[0]["card"]
    request = next(m for m in episode.script if m.act is ScriptAct.REQUEST)
    assert by_text[request.text]["badge"] is None and by_text[request.text]["summary"] is None  # the script's own
    assert BAD not in chrome.evaluate("document.getElementById('main').innerText")  # a rejected text never shows
    facts = _facts(chrome)
    assert trace.parties is not None
    assert facts["voiced messages"].startswith(f"{trace.parties.voiced_events} (1 in the script's words")
    assert facts["party answers"].startswith("1 (0 refused") and facts["budget refusals"] == "0"
    chrome.evaluate("document.querySelectorAll('details.voice-panel').forEach(d => { d.open = !!d.closest('li')"
                    ".querySelector('.voice-badge.fallback, .tag.answer'); })")
    written = chrome.screenshot(tmp_path / "live-parties-transcript.png", full_page=True)
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with capsys.disabled():
        print(f"\nscreenshot: {written}")
    assert chrome.problems() == []


@pytest.mark.slow
def test_a_scripted_run_shows_no_badge_no_panel_and_no_party_facts(chrome: Browser, live_run: Path) -> None:
    scripted = next(t for t in _traces(live_run) if not t.interventions and t.factors["cell"] == "PEER-DIRECT"
                    and t.agent is not None and t.agent.kind == "chat")
    _open(chrome, live_run, scripted.run_key)
    chrome.evaluate("document.querySelectorAll('.fold-toggle').forEach(b => b.click())")
    assert chrome.evaluate("document.querySelectorAll('.voice-badge, .voice-panel, .tag.answer').length") == 0
    assert chrome.evaluate("document.querySelectorAll('ol.chat > li.person').length") > 0
    assert not {"party model", "voiced messages", "party answers"} & set(_facts(chrome))
    # Side by side with the live run of the same episode and player: the marks are in the live column only.
    live = _live_chat(live_run, "PEER-DIRECT")
    route = f"#/compare/{scripted.run_key}/{live.run_key}"
    chrome.evaluate(f"location.hash = {route!r}")
    chrome.wait_for(route_ready(route))
    counts = chrome.evaluate("['left', 'right'].map(s => document.querySelectorAll("
                             "'#side-' + s + ' .voice-badge, #side-' + s + ' .voice-panel').length)")
    assert counts[0] == 0 and counts[1] == 2 * sum(1 for e in live.events if e.voice is not None)
    assert chrome.problems() == []


@pytest.mark.slow
def test_the_run_list_filters_runs_with_party_fallbacks(chrome: Browser, live_run: Path) -> None:
    route = "#/runs?party_fallbacks=1%2B"
    chrome.goto((live_run / "site" / "index.html").resolve().as_uri() + route, ready=route_ready(route))
    shown = chrome.evaluate("Array.from(document.querySelectorAll('#runs-table tbody tr'))"
                            ".map(r => r.dataset.key || '')")
    expected = {t.run_key for t in _traces(live_run) if t.parties is not None and t.parties.event_fallbacks}
    assert set(shown) == expected and len(expected) == 2  # the chat agent's and creditor-rule's live PEER-DIRECT
    assert chrome.problems() == []
