"""The rule judge's bilingual reader: the same acts read the same in English and in Turkish (with and without
Turkish letters), and neither language's cues fire on the other's everyday words."""

from __future__ import annotations

import pytest

from commitbench.judges.standing.readers import ENGLISH, TURKISH, reader_for

# (text, asks-for-a-decision, states-it-off, says-I-dropped-it, says-impossible), derived by hand.
ROWS_TR = [
    ("Merhaba Ayşe, Mehmet iptal etmemi istedi: oda rezervasyonu. Siz hâlâ istiyor musunuz?",
     True, False, False, False),
    ("Merhaba Ayse, Mehmet iptal etmemi istedi: oda rezervasyonu. Siz hala istiyor musunuz?",
     True, False, False, False),
    ("Deniz yine de yapmamı istedi. Yapayım mı, yoksa iptal olarak mı kalsın?", True, False, False, False),
    ("Bu konuda karar yetkisi verdiğiniz Can iptal etti, ben de bıraktım: rapor gönderimi.", True, True, True, False),
    ("Can bunun mümkün olmadığını söyledi; kontrol ettim, gerçekten yapılamıyor, bu yüzden bıraktım.", True, False,
     True, True),
    ("Tamamdır, koşul sağlandı ve iş yapıldı: oda rezervasyonu.", False, False, False, False),
    ("Rezervasyon iptal edildi, Selin vazgeçti.", True, True, False, False),
    ("Artık gerekmiyor diye haber verdiler.", False, True, False, False),
    ("ODA KAPALI OLDUĞU İÇİN YAPILAMIYOR.", False, False, False, True),
    ("Günaydın, kahve makinesi tamir edilmiş.", False, False, False, False),
    ("Lisans yenilemesini yapmayacağım, Ali iptal ettiğini söyledi.", True, True, True, False),  # reported: off
]

ROWS_EN = [
    ("Hi Alice, Ben asked me to cancel the room booking. Do you still want it once the agenda is final?", True, False,
     False, False),
    ("Hi Alice, Dana, whom you named for this, cancelled the room booking, so I dropped it.", True, True, True, False),
    ("Ben said the booking is impossible; I checked and it cannot be done, so I have dropped it.", False, True, True,
     True),
    ("Done: the room booking is taken care of, since the agenda is final.", False, False, False, False),
    ("Morning! The coffee machine works again.", False, False, False, False),
]


@pytest.mark.parametrize(("text", "decision", "off", "drops", "impossible"), ROWS_TR)
def test_turkish_cues(text: str, decision: bool, off: bool, drops: bool, impossible: bool) -> None:
    cue = TURKISH.cue_text(text)
    assert (TURKISH.decision.search(cue) is not None) is decision
    assert (TURKISH.cancelled.search(cue) is not None) is off
    assert (TURKISH.drops.search(cue) is not None) is drops
    assert (TURKISH.impossible.search(cue) is not None) is impossible


@pytest.mark.parametrize(("text", "decision", "off", "drops", "impossible"), ROWS_EN)
def test_english_cues(text: str, decision: bool, off: bool, drops: bool, impossible: bool) -> None:
    cue = ENGLISH.cue_text(text)
    assert (ENGLISH.decision.search(cue) is not None) is decision
    assert (ENGLISH.cancelled.search(cue) is not None) is off
    assert (ENGLISH.drops.search(cue) is not None) is drops
    assert (ENGLISH.impossible.search(cue) is not None) is impossible


def test_no_english_cue_fires_on_turkish_text_and_no_turkish_cue_on_english() -> None:
    for text, *_ in ROWS_TR:
        cue = ENGLISH.cue_text(text)
        assert not any(p.search(cue) for p in (ENGLISH.cancelled, ENGLISH.drops)), text
    for text, *_ in ROWS_EN:
        cue = TURKISH.cue_text(text)
        assert not any(p.search(cue) for p in (TURKISH.cancelled, TURKISH.drops, TURKISH.impossible)), text


def test_turkish_lower_case_folds_dotted_and_dotless_i() -> None:
    assert TURKISH.lower("IŞIK İPTAL") == "isik iptal"
    assert TURKISH.topic_words("Oda 4B, Perşembe") == {"oda", "4b", "persembe"}
    assert reader_for("tr") is TURKISH and reader_for("en") is ENGLISH
