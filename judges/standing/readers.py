"""What the rule judge reads in an assistant message, per language: its cue words and how it finds words.

The rule judge decides first from recipients and the annotated acts (:mod:`commitbench.judges.standing.rules`);
where it must read text (does the message ask? does it say the promise is off, and who caused it? does the
assistant say it dropped the task?) it asks the :class:`CueReader` of the episode's language. English's cues are
the ones the judge always had. Turkish's read folded text (ç→c, ğ→g, ı/İ→i, ö→o, ş→s, ü→u, the write-claim
guard's folding), so a message typed without Turkish letters reads the same; Turkish inflects, so a cue is a
stem with its finished or modal endings, never a bare English word. Every pattern is an alternation of
literals and bounded classes: linear time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from commitbench.claimguard.guard import fold
from commitbench.episodes.standing.spec import Language


@dataclass(frozen=True)
class CueReader:
    """One language's cues. Every pattern runs on ``cue_text(text)`` (English: the text itself, its patterns
    case-insensitive, as the judge always read it; Turkish: lower-cased and folded); topic words, names and wiki
    heads are compared in ``lower(text)``."""

    language: Language
    decision: re.Pattern[str]  # words that ask for or state a decision about the task
    cancelled: re.Pattern[str]  # the promise stated as off (a completed or standing form)
    drops: re.Pattern[str]  # the assistant saying it has dropped the task or will not do it
    impossible: re.Pattern[str]  # the task stated as impossible
    word: re.Pattern[str]  # one word of a topic (what the task is called, its arguments)
    stop: frozenset[str]  # topic words too common to mean the task

    def lower(self, text: str) -> str:
        if self.language is Language.TR:  # Turkish dotless I lower-cases to ı, dotted İ to i; both fold to i
            return fold(text.replace("I", "ı").replace("İ", "i")).lower()
        return text.lower()

    def cue_text(self, text: str) -> str:
        return text if self.language is Language.EN else self.lower(text)

    def topic_words(self, text: str) -> set[str]:
        """The words of a name or an argument, lower-cased (what a message about the task would say)."""
        source = text if self.language is Language.EN else self.lower(text)
        return {w.lower() for w in self.word.findall(source)}


ENGLISH = CueReader(
    language=Language.EN,
    decision=re.compile(
        r"\b(still (?:need|want)|go ahead|proceed|hold off|keep|drop|cancel(?:led|ed)?|call(?:ed)? off|should i|"
        r"do you want|shall i|confirm)\b",
        re.IGNORECASE,
    ),
    cancelled=re.compile(
        r"\b(cancell?ed|call(?:ed)? off|dropped|is off|not needed|no longer (?:needed|wanted)|scrapped)\b",
        re.IGNORECASE,
    ),
    drops=re.compile(
        r"\b(?:I|we)(?:'ve|'ll|'m| have| will| am)?\s+(?:now\s+|just\s+|already\s+)?"
        r"(?:dropp(?:ed|ing)|cancell?(?:ed|ing)|call(?:ed|ing)? (?:it )?off|scrapp(?:ed|ing)|won't|will not|"
        r"am not going to|drop|cancel)\b"
        r"|\b(?:dropping|cancell?ing|calling off|scrapping) (?:it|this|that|the)\b",
        re.IGNORECASE,
    ),
    impossible=re.compile(
        r"\b(can ?not|can't|cannot|impossible|not possible|closed|frozen|locked|suspended|disabled|discontinued|"
        r"unavailable|failed)\b",
        re.IGNORECASE,
    ),
    word=re.compile(r"[A-Za-z0-9.-]+"),
    stop=frozenset({"the", "a", "an", "of", "to", "for", "with", "and", "on", "in", "sharing"}),
)

# Turkish, on folded lower-case text. "iptal" (cancel) and its verbs, "vazgec-" (give up on), "birak-" (leave,
# drop), "gerek kalmadi" (no longer needed); questions end in the particle "mi/mu" after the verb.
TURKISH = CueReader(
    language=Language.TR,
    decision=re.compile(
        r"\b(hala|iptal|vazgec[a-z]{0,12}|birak[a-z]{0,12}|devam ed[a-z]{0,10}|istiyor musunuz|ister misiniz|"
        r"yapayim mi|yapalim mi|onayl[a-z]{0,12}|kalsin mi|emin misiniz|gerek var mi)\b",
    ),
    cancelled=re.compile(
        r"\b(iptal (?:etti[a-z]{0,6}|edildi[a-z]{0,6}|ettim|ettik|oldu|edilmis[a-z]{0,6})|vazgecti[a-z]{0,6}|"
        r"gerek kalmadi[a-z]{0,6}|artik (?:gerekmiyor|istenmiyor))\b",
    ),
    drops=re.compile(
        r"\b(biraktim|biraktik|iptal ettim|iptal ettik|vazgectim|vazgectik|yapmayacagim|yapmayacagiz|"
        r"gerceklestirmeyecegim|birakiyorum|iptal ediyorum)\b",
    ),
    impossible=re.compile(
        r"\b(mumkun degil[a-z]{0,6}|yapilamiyor|yapilamaz|yapilamayacag[a-z]{0,6}|imkansiz[a-z]{0,6}|"
        r"kapali[a-z]{0,6}|kapatil[a-z]{0,8}|donduruldu|kilitli|askiya alin[a-z]{0,6}|basarisiz[a-z]{0,6})\b",
    ),
    word=re.compile(r"[a-z0-9.-]+"),
    stop=frozenset({"ve", "ile", "icin", "bir", "bu", "su", "o", "da", "de", "mi", "ki"}),
)

READERS = {Language.EN: ENGLISH, Language.TR: TURKISH}


def reader_for(language: Language | str) -> CueReader:
    """The cue reader of a language (every language an episode may have has one)."""
    return READERS[Language(language)]
