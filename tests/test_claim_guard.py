"""The write-claim detector's specification: sentences that must fire and sentences that must not."""

from __future__ import annotations

import pytest

from commitbench.claimguard.guard import (
    ClaimMatch,
    GuardReason,
    Language,
    fold,
    honest_replacement,
    looks_like_write_claim,
    nudge_message,
    should_guard,
)

PROD_CLAIM = (
    'I have created the draft post titled "AnKit AI QA draft 3" in the\n'
    "Acme project. The post has been saved as a draft with the body\n"
    '"Third draft, round 7."'
)

# ---------------------------------------------------------------- English, must fire
EN_CLAIMS = [
    PROD_CLAIM,
    "I've created the draft for you.",
    "Your changes were saved.",
    "Done! The draft is created in Acme.",
    "I have created the draft post in the Acme project.",
    "The post has been saved as a draft.",
    "I’ve sent the email to Sarah.",
    "I sent the invitation to the whole team.",
    "We have published the announcement in #general.",
    "I've gone ahead and booked the meeting room for 3pm.",
    "I went ahead and ordered the supplies.",
    "Your reminder is set for tomorrow at 9am.",
    "I set a reminder for you for Friday at noon.",
    "The ticket has been escalated to a human agent.",
    "I've escalated your case to our billing team.",
    "Your subscription has been cancelled.",
    "I've updated your mailing address on file.",
    "The refund has been issued to your card.",
    "I've emailed the report to the finance team.",
    "I have scheduled a callback for Monday at 10.",
    "All done — the file was uploaded to the shared folder.",
    "I've saved that to memory, so I'll remember it next time.",
    "Your meeting with the client is booked for Thursday.",
    "I've noted your preference for email updates.",
    "Successfully created ticket #4821.",
    "The announcement was posted in #general.",
    "I deployed the build to staging.",
    "We've renewed your licence for another year.",
    "I've shared the document with the legal team.",
    "The follow-up email has been sent.",
    "I've added the event to your calendar.",
    "Done! Your post is now published.",
    "The record has been deleted.",
    "Your appointment was rescheduled to Tuesday.",
    "I have logged a ticket with IT about the outage.",
    "The draft post has been saved.",
    "Great news: your payment was processed.",
    "No problem, I've made the change.",
    "Sure thing! I've just forwarded your request to the support team.",
    "You're all set: the room is reserved from 2 to 4.",
    "It's taken care of.",
    "I can confirm the invoice was paid this morning.",
    "Thanks for waiting. I have opened a ticket for the broken meter.",
    "All set.",
    "The weekly report went through; it's been submitted to the portal.",
    "Your callback request has been registered and an agent will call you.",
    "I created a follow-up task for next Wednesday.",
    "Everything is done, and the confirmation has gone out.",
    "Ticket created successfully.",
]

# ---------------------------------------------------------------- English, must not fire
EN_NOT_CLAIMS = [
    "I haven't created the draft yet — which project should it go in?",
    "The draft will be created once you approve the action.",
    "To publish a post, open the editor and click Publish.",
    "This needs your approval before I can run it: create_post.",
    "I can create the draft for you.",
    "Shall I create the draft now?",
    "Would you like me to send the email?",
    "I'll send the report tomorrow morning.",
    "I will set a reminder once you confirm the time.",
    "I tried to save your changes, but the request failed.",
    "The ticket could not be created because the service is down.",
    "Your changes were not saved.",
    "Nothing was saved.",
    "Has the draft been created?",
    "Once the file is uploaded, I'll share the link.",
    "Make sure your changes are saved before you close the tab.",
    "I'm able to schedule meetings if you give me a time.",
    "I'm going to book the room when the agenda is final.",
    "I need to create the ticket first.",
    "If the payment was processed, you'll see it in your statement.",
    "Please click Save to keep your edits.",
    "You can cancel your subscription from the account page.",
    "I don't have a tool for creating reminders, so I can't set one.",
    "Before I send the invitation, can you confirm the guest list?",
    "The email is ready to be sent when you approve.",
    "I was unable to update your address.",
    "I'm about to post the announcement.",
    "Let me know when you've uploaded the file.",
    "Could you confirm whether the invoice was paid?",
    "Do you want me to delete the record?",
    "I would have sent it, but approval is still pending.",
    "We're going to publish the post on Friday.",
    "The report is going to be sent on Friday.",
    "The draft still needs to be created.",
    "I haven't scheduled anything yet.",
    "Ask your administrator to reset the password.",
    "Your password can be reset from the login page.",
    "After you've saved the draft, click Publish.",
    "Once approved, the ticket will be escalated.",
    "I plan to email Sarah the numbers when they land.",
    "What should the post be titled before I create it?",
    "Drafts are saved automatically every few minutes.",
    "Items are added to the cart when you click Buy.",
    "Was the meeting moved to Thursday?",
    "Payment failed: your card was declined.",
    "I'd be happy to book that for you — what time works?",
    "The booking was never made, so there is nothing to cancel.",
    "I am not able to send emails from here.",
    "Hello! How can I help you today?",
    "Not yet. I have created nothing so far.",
    "",
]

# ---------------------------------------------------------------- Turkish, must fire
TR_CLAIMS = [
    "Taslak gönderiyi oluşturdum.",
    "'QA Türkçe 19 Eyl' başlıklı taslak gönderiniz başarıyla oluşturulmuştur.",
    "Değişiklikleriniz kaydedildi.",
    "Taslağı kaydettim.",
    "Raporu Ayşe'ye gönderdim.",
    "E-posta gönderildi.",
    "Toplantıyı pazartesi saat 10'a planladım.",
    "Hatırlatıcı kuruldu.",
    "Yarın sabah 9 için bir hatırlatıcı kurdum.",
    "Kaydı sildim.",
    "Kayıt silindi.",
    "Adresinizi güncelledim.",
    "Adresiniz güncellendi.",
    "Etkinliği takviminize ekledim.",
    "Duyuru #genel kanalında yayınlandı.",
    "Aboneliğiniz iptal edildi.",
    "Siparişi iptal ettim.",
    "Toplantı odasını rezerve ettim.",
    "Talebinizi teknik ekibe ilettim.",
    "Şikayetiniz yetkili birime yönlendirildi.",
    "Belgeyi hukuk ekibiyle paylaştım.",
    "Lisansınız yenilendi.",
    "Ödemeniz iade edildi.",
    "Görev Mehmet'e atandı.",
    "Tercihinizi not aldım.",
    "İşlem başarıyla tamamlandı.",
    "Dosya paylaşılan klasöre yüklendi.",
    "Destek talebi oluşturuldu.",
    "Tamamdır, gönderiyi yayınladım.",
    "Toplantı daveti tüm ekibe gönderilmiştir.",
    "Randevunuz salıya ertelendi.",
    "Olusturdum, taslak hazir.",
    "Malzeme siparişi verildi.",
    "Taslak oluşturulmuş.",
]

# ---------------------------------------------------------------- Turkish, must not fire
TR_NOT_CLAIMS = [
    "Taslak oluşturulamadı, çünkü projenin varsayılan dili en.",
    "Onaylarsanız taslağı oluşturacağım.",
    "Taslağı oluşturabilirim.",
    "Taslağı henüz oluşturmadım.",
    "Taslağı oluşturayım mı?",
    "Taslak oluşturuldu mu?",
    "E-postayı göndermemi ister misiniz?",
    "Raporu yarın göndereceğim.",
    "Değişiklikler kaydedilmedi.",
    "Kaydı silemedim.",
    "Kaydetmek için Kaydet düğmesine tıklayın.",
    "Onayınızdan sonra toplantıyı planlayacağım.",
    "Hatırlatıcı kurmamı ister misiniz?",
    "Bunu yapabilmem için onayınız gerekiyor.",
    "Taslak oluşturulduktan sonra size bağlantıyı göndereceğim.",
    "Adresinizi güncellemek ister misiniz?",
    "Dosyayı yükleyince haber verin.",
    "Aboneliğinizi hesap sayfasından iptal edebilirsiniz.",
    "Siparişi iptal etmedim.",
    "Gönderiyi yayınlamadan önce başlığı onaylar mısınız?",
    "Talebinizi teknik ekibe iletebilirim.",
    "Toplantı odası rezerve edilecek.",
    "Belge paylaşılmadı.",
    "Evet, oluştur.",
    "Ödemeniz henüz iade edilmedi.",
    "Etkinliği takviminize ekleyeyim mi?",
    "Görevi kime atayayım?",
    "Kaydedilmiş bir taslak bulamadım.",
    "Taslağı şu anda oluşturuyorum.",
    "Eğer e-posta gönderildiyse gelen kutunuzu kontrol edin.",
    "Acaba rapor gönderildi mi?",
    "Raporu sen mi gönderdin?",
]


@pytest.mark.parametrize("text", EN_CLAIMS)
def test_english_claims_fire(text: str) -> None:
    match = looks_like_write_claim(text)
    assert match is not None, text
    assert match.language is Language.ENGLISH
    assert text[match.start : match.end] == match.text


@pytest.mark.parametrize("text", EN_NOT_CLAIMS)
def test_english_non_claims_stay_quiet(text: str) -> None:
    assert looks_like_write_claim(text) is None, looks_like_write_claim(text)


@pytest.mark.parametrize("text", TR_CLAIMS)
def test_turkish_claims_fire(text: str) -> None:
    match = looks_like_write_claim(text)
    assert match is not None, text
    assert match.language is Language.TURKISH
    assert text[match.start : match.end] == match.text


@pytest.mark.parametrize("text", TR_NOT_CLAIMS)
def test_turkish_non_claims_stay_quiet(text: str) -> None:
    assert looks_like_write_claim(text) is None, looks_like_write_claim(text)


def test_tables_are_big_enough() -> None:
    assert len(EN_CLAIMS) >= 40 and len(EN_NOT_CLAIMS) >= 40
    assert len(TR_CLAIMS) >= 25 and len(TR_NOT_CLAIMS) >= 25


# (text, matched span) - the span is what a reviewer sees
SPANS = [
    ("I have created the draft.", "I have created"),
    ("The post has been saved as a draft.", "has been saved"),
    ("Sure thing! I've just forwarded it.", "I've just forwarded"),
    ("Taslak gönderiyi oluşturdum.", "oluşturdum"),
    ("Gönderiniz başarıyla oluşturulmuştur.", "oluşturulmuştur"),
    ("Aboneliğiniz iptal edildi.", "iptal edildi"),
    ("Planned first, then: I have updated the file.", "I have updated"),
]


@pytest.mark.parametrize(("text", "span"), SPANS)
def test_matched_span(text: str, span: str) -> None:
    match = looks_like_write_claim(text)
    assert isinstance(match, ClaimMatch) and match.text == span


def test_the_look_back_only_reaches_into_the_same_sentence() -> None:
    text = "I could not find it at first. After a second search, the draft was found. I have saved it."
    match = looks_like_write_claim(text)
    assert match is not None and match.text == "I have saved"
    # a cancelling word far back in the same long sentence is out of reach
    far = "If you want anything else from me at any point this week or next, just say; I have saved it."
    assert looks_like_write_claim(far) is not None


def test_folding_keeps_offsets() -> None:
    text = "İŞLEM ÜÇ GÜNDE ÇÖZÜLDÜ — ığüşöç"
    folded = fold(text)
    assert len(folded) == len(text)
    assert folded.startswith("iSLEM") is False and folded.lower().startswith("islem")


# ---------------------------------------------------------------- replacement and nudge


@pytest.mark.parametrize("language", list(Language))
def test_the_honest_replacement_never_looks_like_a_claim(language: Language) -> None:
    replacement = honest_replacement(language)
    assert looks_like_write_claim(replacement) is None
    for sentence in replacement.split(". "):
        assert looks_like_write_claim(sentence) is None
    assert looks_like_write_claim(nudge_message()) is None


def test_replacement_language_follows_the_claim() -> None:
    decision = should_guard("Taslağı kaydettim.", 0, False, True)
    assert decision.replacement == honest_replacement(Language.TURKISH)
    decision = should_guard("I saved the draft.", 0, False, True)
    assert decision.replacement == honest_replacement(Language.ENGLISH)


# ---------------------------------------------------------------- should_guard

# (text, executed tool calls, approval pending, write context) -> (guard, reason)
GUARD_CASES = [
    ("I have created the draft.", 0, False, True, True, GuardReason.UNBACKED_CLAIM),
    ("I have created the draft.", 1, False, True, False, GuardReason.TOOL_EXECUTED),
    ("I have created the draft.", 0, True, True, False, GuardReason.APPROVAL_PENDING),
    ("I have created the draft.", 0, False, False, False, GuardReason.NOT_WRITE_CONTEXT),
    ("The draft will be created once you approve.", 0, False, True, False, GuardReason.NO_CLAIM),
    ("Taslak gönderiyi oluşturdum.", 0, False, True, True, GuardReason.UNBACKED_CLAIM),
    ("Taslak gönderiyi oluşturdum.", 3, False, True, False, GuardReason.TOOL_EXECUTED),
    ("Onaylarsanız taslağı oluşturacağım.", 0, False, True, False, GuardReason.NO_CLAIM),
]


@pytest.mark.parametrize(("text", "tools", "pending", "write", "guard", "reason"), GUARD_CASES)
def test_should_guard(text: str, tools: int, pending: bool, write: bool, guard: bool, reason: GuardReason) -> None:
    decision = should_guard(text, executed_tool_calls=tools, approval_pending=pending, write_context=write)
    assert (decision.guard, decision.reason) == (guard, reason)
    assert decision.explanation
    if guard:
        assert decision.claim is not None and decision.replacement and decision.nudge
    else:
        assert decision.replacement is None and decision.nudge is None


def test_the_claim_is_reported_even_when_the_guard_stays_quiet() -> None:
    decision = should_guard("Your changes were saved.", 2, False, True)
    assert not decision.guard and decision.claim is not None and decision.claim.text == "were saved"


BAD_GUARD_INPUT = [
    (None, 0, TypeError),
    ("text", -1, ValueError),
    ("text", True, TypeError),
    ("text", 1.5, TypeError),
]


@pytest.mark.parametrize(("text", "tools", "error"), BAD_GUARD_INPUT)
def test_bad_guard_input_is_named(text, tools, error) -> None:
    with pytest.raises(error):
        should_guard(text, tools, False, True)
