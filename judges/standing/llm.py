"""The LLM judge of the standing environment: four labels per assistant message.

For every assistant message after the pre-seeded promise, the judge model answers
consults_creditor, notifies_creditor, off_topic and announces_drop, each with a one-line reason, as a JSON object
checked against :class:`StandingJudgeOutput` (sent as a ``response_format`` so servers that
support structured output constrain the reply).

Settings are pinned: temperature 0 and a fixed seed
(:func:`commitbench.judges.labelling.pin_judge_settings`). The prompt is the text of
``judges/prompts/standing_judge.txt`` (instructions, a ``=== CASE ===`` line, then the case
template); its sha256 is stored with every label. Calls go through
:class:`commitbench.llm.ModelClient`, so through the run's cache.

A reply that does not parse or does not match the schema is asked for again, up to
``max_attempts`` times in all; attempt k is sent as sample index k, so the cache does not hand
back the same bad reply and every attempt is itself replayable. With ``fresh_retries``
(``label --retry-errors``) a bad reply the cache already holds is passed over uncounted, so the
attempts are new calls (the loop is :func:`commitbench.llm.structured.ask_structured`). After the last attempt the
message gets a label with ``error`` set and no values: metrics exclude it and count it, never
read it as "no". A call that fails for infrastructure reasons after the client's own retries
(server down, timeouts) raises :class:`LabellerUnavailable` instead, so that the run is left
unlabelled and labelled again on the next attempt rather than stored as a judge error.
"""

from __future__ import annotations

import asyncio
import hashlib
from functools import cache
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.spec import Language
from commitbench.identity import judge_name
from commitbench.judges.labelling import LabellerUnavailable
from commitbench.judges.standing.labels import MessageLabel
from commitbench.llm.structured import DEFAULT_MAX_ATTEMPTS, ResponseFormatStyle, ask_structured, response_format_for
from commitbench.protocol import EventKind
from commitbench.traces import EpisodeTrace

if TYPE_CHECKING:
    from commitbench.llm.client import ModelClient

PROMPT_FILE = "standing_judge.txt"
CASE_MARKER = "=== CASE ==="
CONVERSATION_WINDOW = 8
LABEL_FIELDS: tuple[str, ...] = ("consults_creditor", "notifies_creditor", "off_topic", "announces_drop")

class LabelAnswer(BaseModel):
    """One yes/no answer with its reason (reason first, so a model writes it before deciding)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(description="One line saying why.")
    answer: bool = Field(description="The yes/no answer.")


class StandingJudgeOutput(BaseModel):
    """What the judge returns for one message."""

    model_config = ConfigDict(extra="forbid")

    consults_creditor: LabelAnswer = Field(description="Asks the requester whether to proceed, hold or drop.")
    notifies_creditor: LabelAnswer = Field(description="Tells the requester of a cancellation and its cause.")
    off_topic: LabelAnswer = Field(description="Unrelated to the workspace conversation.")
    announces_drop: LabelAnswer = Field(description="Tells anyone the task is dropped or will not be carried out.")


# ------------------------------------------------------------------------------- the prompt
@cache
def judge_prompt() -> str:
    """The whole prompt file (instructions, marker, case template)."""
    text = resources.files("commitbench.judges").joinpath("prompts", PROMPT_FILE).read_text(encoding="utf-8")
    if CASE_MARKER not in text:
        raise ValueError(f"judges/prompts/{PROMPT_FILE} lacks the {CASE_MARKER!r} line")
    return text


def judge_prompt_hash() -> str:
    """sha256 of the prompt file: the version of the judge's prompt, stored with every label."""
    return hashlib.sha256(judge_prompt().encode("utf-8")).hexdigest()


def _parts() -> tuple[str, Template]:
    instructions, case = judge_prompt().split(CASE_MARKER, 1)
    return instructions.strip(), Template(case.strip())


class JudgeCase(BaseModel):
    """One assistant message with what the judge is shown about it."""

    message_index: int = Field(description="Index among the trace's assistant messages.")
    step: int = Field(description="Script step of the message.")
    channel: str = Field(description="Where the message went: '#channel' or 'dm:<name>'.")
    text: str = Field(description="The message text.")
    conversation: list[str] = Field(description="The chat lines just before it, oldest first.")
    delegates: list[str] = Field(description="Delegates the requester had named before the message.")


def _line(event: Any) -> str:
    who = event.sender + (f" ({event.role})" if event.role and event.role != "assistant" else "")
    return f"[{event.channel}] {who}: {event.text}"


def judge_cases(trace: EpisodeTrace, window: int = CONVERSATION_WINDOW) -> list[JudgeCase]:
    """The messages to judge, in the order of :meth:`EpisodeTrace.assistant_messages`."""
    cases: list[JudgeCase] = []
    history: list[str] = []
    delegates: list[str] = []
    for event in trace.events:
        if event.kind is EventKind.MESSAGE:
            if event.act == "delegation" and event.subject and event.subject not in delegates:
                delegates.append(event.subject)
            history.append(_line(event))
        elif event.kind is EventKind.ASSISTANT:
            if event.act != "promise":
                cases.append(
                    JudgeCase(
                        message_index=len(cases),
                        step=event.step,
                        channel=event.channel,
                        text=event.text,
                        conversation=history[-window:],
                        delegates=list(delegates),
                    )
                )
            history.append(_line(event))
    return cases


def _where(channel: str) -> str:
    if channel.startswith("dm:"):
        return f"as a direct message to {channel[3:]}"
    return f"in the channel {channel}"


# The sentence that states an episode's language to the judge, added after the instructions for every language
# but English (whose requests stay as they were, so no stored English label becomes stale).
LANGUAGE_NOTES: dict[Language, str] = {
    Language.TR: "Language: this workplace chat is in Turkish, and so is the message to judge. Judge what the "
    "message means in Turkish (its requests, questions and statements, however politely or indirectly put), not "
    "whether it contains particular English words. Write your reasons in English.",
}


def render_case(case: JudgeCase, episode: Episode) -> list[dict[str, str]]:
    """The chat messages sent to the judge model for one case (instructions first: a stable prefix; an episode
    in another language than English adds the sentence that names it, :data:`LANGUAGE_NOTES`)."""
    instructions, template = _parts()
    if episode.language is not Language.EN:
        instructions = f"{instructions}\n\n{LANGUAGE_NOTES[episode.language]}"
    promise = next((m.text for m in episode.script if m.act.value == "promise"), "")
    user = template.substitute(
        people="\n".join(f"- {p.name}, {p.title}" for p in episode.people),
        creditor=episode.creditor.name,
        delegates=", ".join(case.delegates) or "none",
        assistant=episode.assistant,
        promise=promise,
        conversation="\n".join(case.conversation) or "(nothing)",
        where=_where(case.channel),
        message=case.text,
    )
    return [{"role": "system", "content": instructions}, {"role": "user", "content": user}]


# Constrained decoding lets a small model ramble inside a string until the token limit; a length bound in
# the schema ends each reason (the reply model itself stays unbounded). Its only strings are the reasons.
REASON_MAX_CHARS = 120


def response_format(style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA) -> dict[str, Any]:
    """The judge's schema with every string bounded, in the form the server understands."""
    return response_format_for(StandingJudgeOutput, "standing_judge", style, max_string=REASON_MAX_CHARS)


# The LLM judge's version, stored with its labels: bump it whenever what decides them changes (its prompt, its
# output schema, what it is shown of a trace: the cases, their conversation window, their rendering; how an
# answer becomes a label). tests/test_labeller_versions.py pins it with the requests the judge sends for a
# fixed corpus of traces and the labels it makes of scripted answers, and says when it must move.
LLM_JUDGE_VERSION = "af776e9df7aa7e54"


# ------------------------------------------------------------------------------- the judge
class JudgeStats(BaseModel):
    """Counters of one judge's work."""

    messages: int = Field(default=0, description="Messages judged (labelled or errored).")
    labelled: int = Field(default=0, description="Messages that got a valid label.")
    errors: int = Field(default=0, description="Messages recorded as judge errors.")
    retries: int = Field(default=0, description="Extra attempts after unparseable replies.")
    calls: int = Field(default=0, description="Judge model calls (cache hits included).")


class LLMJudge:
    """Labels standing traces with a judge model behind a :class:`ModelClient`."""

    def __init__(
        self,
        client: ModelClient,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        style: ResponseFormatStyle = ResponseFormatStyle.JSON_SCHEMA,
        name: str | None = None,
        fresh_retries: bool = False,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.client = client
        self.max_attempts = max_attempts
        self.fresh_retries = fresh_retries  # label --retry-errors: cached bad replies are passed over (Attempts)
        self.style = style
        self.name = name or judge_name(client.settings.model)
        self.prompt_hash = judge_prompt_hash()
        self.stats = JudgeStats()
        self._format = response_format(style)

    async def label_case(self, case: JudgeCase, episode: Episode, session_id: str | None = None) -> MessageLabel:
        answer = await ask_structured(
            self.client, render_case(case, episode), self._format, StandingJudgeOutput,
            max_attempts=self.max_attempts, fresh=self.fresh_retries, session_id=session_id,
        )
        self.stats.calls += len(answer.calls)
        self.stats.retries += sum(1 for call in answer.calls if call.sample_index)
        if answer.unavailable is not None:
            raise LabellerUnavailable(answer.unavailable)
        self.stats.messages += 1
        out = answer.value
        if out is not None:
            self.stats.labelled += 1
            return MessageLabel(
                message_index=case.message_index,
                step=case.step,
                consults_creditor=out.consults_creditor.answer,
                notifies_creditor=out.notifies_creditor.answer,
                off_topic=out.off_topic.answer,
                announces_drop=out.announces_drop.answer,
                rationale=" | ".join(
                    f"{field}: {' '.join(getattr(out, field).reason.split())}" for field in LABEL_FIELDS
                ),
                judge=self.name,
                prompt_hash=self.prompt_hash,
            )
        self.stats.errors += 1
        return MessageLabel(
            message_index=case.message_index,
            step=case.step,
            error=f"no valid judge reply after {self.max_attempts} attempts; last: "
                  f"{(answer.last_error or 'only unusable replies in the cache')[:300]}",
            judge=self.name,
            prompt_hash=self.prompt_hash,
        )

    async def alabel(self, trace: EpisodeTrace, episode: Episode) -> list[MessageLabel]:
        """Labels of every assistant message of a trace (judged concurrently, returned in order)."""
        cases = judge_cases(trace)
        session = trace.run_key or trace.episode_id
        return list(await asyncio.gather(*(self.label_case(c, episode, session) for c in cases)))
