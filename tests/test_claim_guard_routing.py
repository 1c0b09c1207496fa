"""Routing rules that keep write turns armed: command words before length, affirmations inherit intent."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitbench.claimguard.routing import (
    PROPOSAL_PATTERNS,
    RouteReason,
    TurnIntent,
    has_command_word,
    inherits_write_intent,
    is_affirmation,
    is_small_talk,
    looks_like_write_proposal,
    route_turn,
)
from commitbench.textscan import ThenInClause

# text -> contains a command word
COMMAND_WORD_CASES = [
    ("Evet, oluştur.", True),
    ("Evet, olustur.", True),
    ("Kaydet", True),
    ("sil", True),
    ("Gönderin lütfen", True),
    ("Ekleyin", True),
    ("Taslağı oluşturur musun?", True),
    ("Raporu gönderebilir misiniz?", True),
    ("Hadi yayınlayalım", True),
    ("devam", True),
    ("create it", True),
    ("please send", True),
    ("go ahead", True),
    ("set a reminder", True),
    ("retry", True),
    ("thanks", False),
    ("merhaba", False),
    ("silahlar", False),  # a word that merely starts with a stem
    ("sounds good", False),
    ("what time is it", False),
    ("oluşturulmuş", False),  # a participle, not a command
]

# (user text, previous assistant message) -> (intent, reason)
ROUTE_CASES = [
    # the incident: two words, a Turkish command, once classified as small talk
    ("Evet, oluştur.", "Taslak gönderiyi oluşturayım mı?", TurnIntent.WRITE, RouteReason.AFFIRMATION_WITH_COMMAND),
    ("Evet, oluştur.", None, TurnIntent.WRITE, RouteReason.AFFIRMATION_WITH_COMMAND),
    ("yes", "Shall I create the draft in Acme?", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("Sure!", "Would you like me to publish the post now?", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("ok", "I can send the invitation to the team if you'd like.", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("tamam", "Raporu Ayşe'ye göndermemi ister misiniz?", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("Evet", "Etkinliği takviminize ekleyeyim mi?", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("olur", "Onaylarsanız taslağı oluşturacağım.", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("okay, create it", None, TurnIntent.WRITE, RouteReason.AFFIRMATION_WITH_COMMAND),
    ("yes please", "The forecast says rain. Anything else?", TurnIntent.GENERAL,
     RouteReason.AFFIRMATION_WITHOUT_WRITE),
    ("yes", None, TurnIntent.GENERAL, RouteReason.AFFIRMATION_WITHOUT_WRITE),
    ("thanks!", "I have created the draft.", TurnIntent.SMALL_TALK, RouteReason.SMALL_TALK_PHRASE),
    ("Teşekkürler", None, TurnIntent.SMALL_TALK, RouteReason.SMALL_TALK_PHRASE),
    ("hmm ok", None, TurnIntent.SMALL_TALK, RouteReason.SHORT_MESSAGE),
    ("Lütfen", "Göndereyim mi?", TurnIntent.WRITE, RouteReason.AFFIRMS_WRITE_OFFER),
    ("nice one", None, TurnIntent.SMALL_TALK, RouteReason.SHORT_MESSAGE),
    ("Please delete the old draft", None, TurnIntent.WRITE, RouteReason.COMMAND_WORD),
    ("Sil", None, TurnIntent.WRITE, RouteReason.COMMAND_WORD),
    # longer than five words: a sentence that starts with "sure" goes through normal classification
    ("Sure, but first tell me what the weather will be tomorrow", "Shall I create the draft?",
     TurnIntent.GENERAL, RouteReason.DEFAULT),
    # a reservation is not a yes
    ("yes but not now", "Shall I send it?", TurnIntent.GENERAL, RouteReason.DEFAULT),
    ("Evet ama bekle", "Göndereyim mi?", TurnIntent.GENERAL, RouteReason.DEFAULT),
    ("What is on my calendar tomorrow?", None, TurnIntent.GENERAL, RouteReason.DEFAULT),
]

PROPOSALS = [
    ("Shall I create the draft?", True),
    ("Would you like me to go ahead and publish it?", True),
    ("Do you want me to send the summary to Sarah?", True),
    ("Want me to book the room?", True),
    ("I can set a reminder for 9am — just say the word.", True),
    ("Should I go ahead?", True),
    ("Ready to publish?", True),
    ("Taslağı oluşturayım mı?", True),
    ("Kaydedeyim mi?", True),
    ("Göndermemi ister misiniz?", True),
    ("Taslağı oluşturabilirim, ister misiniz?", True),
    ("I have created the draft.", False),
    ("The forecast says rain tomorrow.", False),
    ("To publish, click the button.", False),
    ("Taslak oluşturuldu.", False),
    ("", False),
    (None, False),
]


@pytest.mark.parametrize(("text", "expected"), COMMAND_WORD_CASES)
def test_command_words(text: str, expected: bool) -> None:
    assert has_command_word(text) is expected


@pytest.mark.parametrize(("user", "previous", "intent", "reason"), ROUTE_CASES)
def test_route_turn(user: str, previous: str | None, intent: TurnIntent, reason: RouteReason) -> None:
    route = route_turn(user, previous)
    assert (route.intent, route.reason) == (intent, reason)
    assert route.write_context is (intent is TurnIntent.WRITE)
    assert route.tools is (intent is not TurnIntent.SMALL_TALK)


@pytest.mark.parametrize(("text", "expected"), PROPOSALS)
def test_write_proposals(text: str | None, expected: bool) -> None:
    assert looks_like_write_proposal(text) is expected


def test_command_words_are_checked_before_the_length_rule() -> None:
    assert is_small_talk("Evet, oluştur.") is False
    assert is_small_talk("ok thanks") is True
    assert is_small_talk("Kaydet") is False


def test_affirmation_cap_is_five_words() -> None:
    assert is_affirmation("yes, go ahead, create it")  # five words
    assert not is_affirmation("yes go ahead and create it")  # six
    assert inherits_write_intent("sure", "Shall I post it?")
    assert not inherits_write_intent("sure", "It is sunny today.")


def test_without_write_tools_nothing_routes_to_write() -> None:
    route = route_turn("Evet, oluştur.", "Oluşturayım mı?", can_write=False)
    assert route.intent is TurnIntent.GENERAL and not route.write_context
    route = route_turn("delete it please", None, can_write=False)
    assert route.intent is TurnIntent.GENERAL and route.reason is RouteReason.COMMAND_WORD


# ------------------------------------------------------- a clause rule says what its regular expression says
_OFFER_WORDS = [
    "i", "can", "could", "i'll", "will", "let", "me", "send", "set", "up", "go", "ahead", "and", "just", "ready",
    "for", "to", "?", ".", "!", "\n", "if", "you", "like", "want", "once", "confirm", "say", "the", "word", "it",
    "olusturabilirim", "ister", "misiniz", "onaylarsaniz", "isterseniz", "olusturacagim", "gonderecegim", "x", ",",
]


def _as_one_expression(rule: ThenInClause) -> re.Pattern[str]:
    """``head[^stops]*(?:tail)``: the backtracking form the rule replaces (quadratic, fine on short texts)."""
    assert rule.stops.pattern.startswith("[")
    return re.compile(
        f"{rule.head.pattern}[^{rule.stops.pattern[1:]}*(?:{rule.tail.pattern})", re.IGNORECASE
    )


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_OFFER_WORDS), min_size=1, max_size=10), st.sampled_from([" ", "", "\n", ", "]))
def test_clause_rules_agree_with_their_regular_expressions(words: list[str], separator: str) -> None:
    text = separator.join(words)
    for rule in (p for p in PROPOSAL_PATTERNS if isinstance(p, ThenInClause)):
        assert rule.search(text) == bool(_as_one_expression(rule).search(text)), (rule.head.pattern, text)
