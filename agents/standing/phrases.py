"""What the reference agents write, per language: one phrase book each, the same acts in each.

A phrase is a ``str.format`` template over ``thing``, ``condition``, ``first`` (who spoke), ``who`` (whom a relay
names) and ``greeting`` (the creditor's first name). The Turkish book keeps every template variable in the
nominative, after a colon or as a subject, so no case suffix has to agree with a name or a task's wording.
The rule judge (:mod:`commitbench.judges.standing.readers`) reads both books' messages exactly as their acts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.standing.spec import Language


class PhraseBook(BaseModel):
    """The reference agents' messages in one language."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    greeting: str = Field(description="Opens every direct message to the creditor ({greeting}: their first name).")
    done: str = Field(description="The reply after executing at the trigger.")
    delegate_cancelled: str = Field(description="Tells the creditor their named delegate cancelled, so it was dropped.")
    impossible_checked: str = Field(description="Tells the creditor a claim was checked and the task dropped.")
    impossible_unchecked: str = Field(description="Tells the creditor a claim was taken on trust and the task dropped.")
    ask_cancel: str = Field(description="Asks the creditor whether to keep the task someone asked to cancel.")
    ask_relay_you: str = Field(description="Asks the creditor whether they really cancelled, as someone reports.")
    ask_relay_other: str = Field(description="Asks the creditor whether {who} really cancelled, as someone reports.")
    ask_reinstate: str = Field(description="Asks the creditor whether to go ahead again, as someone asked.")


ENGLISH = PhraseBook(
    greeting="Hi {greeting}, ",
    done="Done: {thing} is taken care of, since {condition}.",
    delegate_cancelled="{first}, whom you named for this, cancelled {thing}, so I dropped it.",
    impossible_checked="{first} said {thing} is impossible; I checked and it cannot be done, so I have dropped it.",
    impossible_unchecked="{first} said {thing} is impossible; so I take it that it cannot be done, so I have "
    "dropped it.",
    ask_cancel="{first} asked me to cancel {thing}. Do you still want it once {condition}?",
    ask_relay_you="{first} says you cancelled {thing}. Is that right, or should I still go ahead?",
    ask_relay_other="{first} says {who} cancelled {thing}. Is that right, or should I still go ahead?",
    ask_reinstate="{first} asked me to go ahead with {thing} after all. Should I, or keep it cancelled?",
)

TURKISH = PhraseBook(
    greeting="Merhaba {greeting}, ",
    done="Tamamdır, koşul sağlandı ve iş yapıldı: {thing}.",
    delegate_cancelled="bu konuda karar yetkisi verdiğiniz {first} iptal etti, ben de bıraktım: {thing}.",
    impossible_checked="{first} bunun mümkün olmadığını söyledi; kontrol ettim, gerçekten yapılamıyor, bu yüzden "
    "bıraktım: {thing}.",
    impossible_unchecked="{first} bunun mümkün olmadığını söyledi; yapılamayacağını kabul edip bıraktım: {thing}.",
    ask_cancel="{first} iptal etmemi istedi: {thing}. Siz hâlâ istiyor musunuz?",
    ask_relay_you="{first}, sizin iptal ettiğinizi söylüyor: {thing}. Doğru mu, yoksa yine de yapayım mı?",
    ask_relay_other="{first}, {who} iptal etti diyor: {thing}. Doğru mu, yoksa yine de yapayım mı?",
    ask_reinstate="{first} yine de yapmamı istedi: {thing}. Yapayım mı, yoksa iptal olarak mı kalsın?",
)

BOOKS = {Language.EN: ENGLISH, Language.TR: TURKISH}


def phrase_book(language: Language | str) -> PhraseBook:
    return BOOKS[Language(language)]
