"""What points a Turkish promise past the turn: time words, events, the next conversation, the user's move.

The Turkish cue detector (:mod:`commitbench.judges.followup.turkish_cues`) reads these on text folded by
:func:`commitbench.claimguard.guard.fold` (ç→c, ğ→g, ı/İ→i, ö→o, ş→s, ü→u, curly apostrophes straightened;
same length as the original, so offsets stay valid), case-insensitively. They play the parts the English
cue detector's ``_TIME_EXPRESSION``, ``_EVENT``, ``_NEXT_SESSION``, ``_WAITS_FOR_USER``, ``_IF_YOU_WANT`` and
``_NOW`` play for English:

* a time: "yarın sabah 9'da", "cuma günü", "bir saat sonra", "akşam 6'da", "iki gün içinde", "daha sonra";
* an event: "rapor hazır olunca", "toplantıdan sonra", "fiyat düşerse", "kargo geldiğinde";
* the next conversation: "bir dahaki sefere", "bir sonraki görüşmemizde", "bundan sonra";
* the user's move: "dosyayı gönderirseniz", "siz yazdığınızda" (the promise waits for the user) and
  "isterseniz", "dilerseniz" (an offer);
* now: "şimdi", "hemen", "şu anda" (an action inside the turn).

Every pattern is literals, bounded classes and, where a word is read whole, a ``\\w+`` that starts only at
a word's start, so a scan is linear in the text.
"""

from __future__ import annotations

import re

__all__ = [
    "EVENT",
    "IF_YOU_WANT",
    "NEXT_SESSION",
    "NEXT_STEP",
    "NOW",
    "TIME_EXPRESSION",
    "WAITS_FOR_USER",
    "time_expression",
]

_I = re.IGNORECASE

# Folded weekday names, the longer first ("cumartesi" before "cuma", "pazartesi" before "pazar").
WEEKDAYS_TR: tuple[str, ...] = ("pazartesi", "sali", "carsamba", "persembe", "cumartesi", "cuma", "pazar")
_DAY = "(?:" + "|".join(WEEKDAYS_TR) + ")"
_PART = r"(?:sabah(?:leyin)?|ogle(?:den\s+sonra)?|aksam(?:ustu|leyin)?|gece|ikindi)"
_COUNT = r"(?:\d{1,3}|bir|iki|uc|dort|bes|alti|yedi|sekiz|dokuz|on|on\s+bes|yirmi|otuz|kirk|birkac|bir\s+iki|yarim)"
_UNIT = r"(?:dakika|saat|gun|hafta|ay)"
_CLOCK = r"\d{1,2}(?:[:.]\d{2})?"
# A case ending after a clock time or a day: 9'da, 18.30'dan, 6'ya, cumaya; the apostrophe may be left out.
_AT = r"'?(?:[dt][ae]n?|y?[ae])"

TIME_EXPRESSION = re.compile(
    r"(?<!\w)(?:"
    r"yarin(?:a\s+kadar|dan\s+itibaren|ki)?(?:\s+" + _PART + r")?"
    r"|bugun(?:\s+icinde)?|bu\s+(?:sabah|aksam|ogleden\s+sonra|gece|hafta(?:\s+sonu)?|ay|yil)(?:\s+icinde)?"
    r"|(?:gelecek|onumuzdeki|haftaya|sonraki|ertesi)\s+(?:hafta|ay|yil|gun|" + _DAY + r")(?:y?[ae]|\s+gunu)?"
    r"|haftaya|ertesi\s+gun"
    r"|" + _DAY + r"(?:\s+gunu|\s+gunleri)?(?:y?[ae]\s+kadar)?(?:\s+" + _PART + r")?"
    r"|saat\s+" + _CLOCK + r"(?:" + _AT + r")?(?:\s+(?:gibi|civari|sularinda|kadar))?"
    r"|" + _CLOCK + _AT + r"(?:\s+(?:kadar|gibi|sonra))?"
    r"|" + _COUNT + r"\s+" + _UNIT + r"(?:\s+(?:sonra|icinde|icerisinde|zarfinda|once)|\s*y?[ae]\s+kadar)"
    r"|(?:daha|biraz)\s+sonra|yakinda|birazdan|en\s+kisa\s+(?:surede|zamanda)|ilerleyen\s+(?:gunlerde|saatlerde)"
    r"|gun\s+(?:icinde|sonunda|sonuna\s+kadar|bitmeden)|hafta\s+(?:icinde|sonunda|sonu)|ay\s+(?:sonunda|sonuna\s+kadar)"
    r"|mesai\s+(?:bitmeden|sonunda|bitiminde)"
    r"|her\s+(?:gun|sabah|aksam|gece|hafta|ay|" + _DAY + r")|gunluk|haftalik"
    r"|(?:bir|iki|" + r"\d{1,2})\s+(?:gun|gece|saat)\s+once|" + _PART + r")(?!\w)",
    _I,
)

NEXT_SESSION = re.compile(
    r"(?<!\w)(?:bir\s+dahaki\s+(?:sefere|gorusmemizde|sohbetimizde|konusmamizda)"
    r"|bir\s+sonraki\s+(?:gorusmemizde|sohbetimizde|konusmamizda|oturumda|seferde)"
    r"|(?:gelecek|sonraki|ilerideki)\s+(?:sohbet|gorusme|konusma|oturum)(?:ler)?(?:imiz)?de"
    r"|bundan\s+(?:sonra|boyle)|ileride|tekrar\s+(?:yazdiginizda|geldiginizde|konustugumuzda|gorustugumuzde)"
    r"|yeniden\s+(?:yazdiginizda|geldiginizde|konustugumuzda|gorustugumuzde))(?!\w)",
    _I,
)

# An event sets the promise off: -DIğIndA / -DIğImdA (kargo geldiğinde), -DIktAn sonra, -(y)IncA (olunca,
# bitince), "-dAn sonra" after a noun (toplantıdan sonra), "gelir gelmez", a third-person conditional
# (fiyat düşerse, bir değişiklik olursa). "öğleden sonra" is a time and "bundan sonra" the next conversation.
EVENT = re.compile(
    r"(?<!\w)(?:"
    r"\w+[dt][iu]g[iu][mn]d[ae]|\w+[dt][iu]k[dt][ae]n\s+sonra"
    r"|\w+[lntrk][iu]nc[ae]|\w+[aeiu]y[iu]nc[ae]"
    r"|(?!ogleden\b|bundan\b|ondan\b|ardindan\b|daha\b)\w+[dt][ae]n\s+sonra"
    r"|\w+[aeiu]r\s+\w+m[ae]z"
    r"|\w+(?:[aeiu]r|m[ae]z|[dt][iu]y)s[ae]"
    r")(?!\w)",
    _I,
)

# The promise waits for the user: a second-person conditional (gönderirseniz, ararsan, onaylarsanız) or
# "when you ..." (gönderdiğinizde, yazdığınızda).
WAITS_FOR_USER = re.compile(
    r"(?<!\w)(?:\w+s[ae]n[iu]z|\w+(?:[aeiu]r|m[ae]z|y[ae]c[ae]k)s[ae]n|\w+[dt][iu]ys[ae]n"
    r"|\w+[dt][iu]g[iu]n[iu]zd[ae]|\w+[dt][iu]g[iu]n[iu]zd[ae]n\s+sonra)(?!\w)",
    _I,
)

# The user is asked whether they want it: an offer ("isterseniz yarın hatırlatırım").
IF_YOU_WANT = re.compile(
    r"(?<!\w)(?:isters[ae]n(?:[iu]z)?|diler(?:s[ae]n(?:[iu]z)?)|arzu\s+eders[ae]n(?:[iu]z)?"
    r"|uygun\s+gorurs[ae]n(?:[iu]z)?|siz\s+de\s+isterseniz)(?!\w)",
    _I,
)

NOW = re.compile(
    r"(?<!\w)(?:simdi|hemen|su\s+an(?:da)?|derhal|ilk\s+(?:once|olarak)|asagida|bu\s+mesajda|bu\s+yanitta)(?!\w)",
    _I,
)
# A sentence that narrates the turn's next step ("Sonra raporu okuyacağım", "Önce dosyaya bakacağım").
NEXT_STEP = re.compile(r"^\s*(?:once|sonra|ardindan|simdi|ilk\s+olarak)(?!\w)", _I)


def time_expression(folded: str, original: str) -> str | None:
    """The first time words of ``folded`` (as written in ``original``), joined with those right after them
    ("yarın sabah" and "9'da" give "yarın sabah 9'da")."""
    matches = list(TIME_EXPRESSION.finditer(folded))
    if not matches:
        return None
    start, end = matches[0].span()
    for match in matches[1:]:
        if folded[end : match.start()].strip(" ,") != "":
            break
        end = match.end()
    return original[start:end]
