"""Turkish completed-write grammar for the write-claim guard: verb stem plus a finished suffix.

Turkish inflects, so finished forms are open-ended (oluşturdum, oluşturuldu, oluşturulmuştur, ...).
A claim is a write stem followed, as one whole word, by either

- an active past in the first person (-DIm, -DIk; -mIşIm, -mIşIz) or the formal perfect (-mIştIr), or
- a passive (-Il / -In / -n) followed by a past (-DI) or perfect (-mIş, -mIştIr).

Because the whole word must be stem + one of those tails, the forms that mean *not done* never
match: negative (-mA: oluşturmadım, gönderilmedi), inability (-(y)AmA: oluşturulamadı), future
(-(y)AcAk: oluşturacağım), potential (-(y)Abil: oluşturabilirim), optative (oluşturayım),
progressive, aorist and participles (oluşturulduktan sonra). A question particle after the verb
(oluşturuldu mu?) or a conditional/doubt word before it (eğer, acaba) cancels the match, and a bare
passive -mIş followed by a noun is an adjective (kaydedilmiş bir taslak), not a claim.

Patterns run on folded text (ç→c, ğ→g, ı/İ→i, ö→o, ş→s, ü→u), so ASCII-typed Turkish matches too.
"""

from __future__ import annotations

import re

# Write verb stems, folded. kaydet/kayded: the t of "kaydet" softens before a vowel (kaydedildi).
WRITE_STEMS = (
    "olustur", "yarat", "kaydet", "kayded", "guncelle", "duzenle", "sil", "kaldir", "ekle", "gonder",
    "yayinla", "yayimla", "paylas", "yukle", "ata", "planla", "ayarla", "zamanla", "programla", "kur",
    "ilet", "yonlendir", "bildir", "aktar", "tasi", "degistir", "tamamla", "gerceklestir", "yenile",
    "ertele", "onayla", "ode", "hazirla", "yaz", "sakla", "arsivle", "kapat", "isle", "ekle", "bagla",
    "sifirla", "etkinlestir", "kapa", "duzelt",
)  # fmt: skip
# Nouns that form a write verb with et-/ed- ("iptal ettim", "rezerve edildi").
LIGHT_VERB_NOUNS = (
    "iptal", "rezerve", "teslim", "iade", "transfer", "tahsil", "kayit", "not", "organize", "revize",
    "arsiv", "tamir", "teyit", "havale", "siparis", "tahsis", "kabul", "rezervasyon",
)  # fmt: skip
# Other two-word write verbs.
COMPOUND_STEMS = (r"not\s+al", r"randevu\s+al", r"siparis(?:i)?\s+ver", r"(?:mail|e-?posta|mesaj)\s+at")

_STEM = (
    r"(?:"
    + "|".join(sorted((re.escape(s).replace(r"\ ", r"\s+") for s in set(WRITE_STEMS)), key=len, reverse=True))
    + r"|(?:" + "|".join(LIGHT_VERB_NOUNS) + r")\s+(?:et|ed)"
    + r"|" + "|".join(COMPOUND_STEMS)
    + r")"
)
_PASSIVE = r"(?:[iu]?[ln])"
_TAIL = (
    r"(?:"
    r"(?P<active_past>[dt][iu](?:m|k))"  # active past, I / we: oluşturdum, gönderdik
    r"|(?P<active_perfect>m[iu]s(?:[iu]m|[iu]z)|m[iu]s[dt][iu]r(?:l[ae]r)?)"  # oluşturmuşum, oluşturmuştur
    rf"|(?P<passive_past>{_PASSIVE}[dt][iu](?:l[ae]r)?)"  # oluşturuldu, eklendi
    rf"|(?P<passive_perfect>{_PASSIVE}m[iu]s(?:l[ae]r)?[dt][iu]r(?:l[ae]r)?)"  # oluşturulmuştur
    rf"|(?P<bare_mis>{_PASSIVE}m[iu]s(?:l[ae]r)?)"  # participle oluşturulmuş: a claim only clause-finally
    r")"
)
CLAIM_WORD = re.compile(rf"(?<!\w){_STEM}{_TAIL}(?!\w)", re.IGNORECASE)

# The "after" patterns are matched at the end of a candidate word (``pattern.match(text, end)``).
# A bare -mIş is a claim only at the end of a clause; before a noun it is an adjective. (The look-behinds
# keep a scan over a long run of spaces linear: only the run's first space starts a match.)
CLAUSE_END_AFTER = re.compile(r"(?<!\s)\s*(?:$|[.!,;:)\"'»]|ve\b|—|–|-)", re.IGNORECASE)
# Question particle (mı/mi/mu/mü and person forms), or a word that reports or doubts the claim.
CANCEL_AFTER = re.compile(
    r"(?<!\s)\s*(?:m[iu](?:s[iu]n(?:[iu]z)?|y[iu]m|y[iu]z|d[iu]r)?(?!\w)|degil|diye|gibi|san[iu]yor|zannet|"
    r"varsay)",
    re.IGNORECASE,
)
CANCEL_BEFORE = re.compile(r"\b(?:eger|sayet|acaba|sanki|belki|varsayalim)\b[^.!?;\n]{0,40}$", re.IGNORECASE)
