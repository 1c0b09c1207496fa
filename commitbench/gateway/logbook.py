"""The gateway's log: one JSON line per checked turn.

A line holds the time, the turn's digest, hashed session and creditor ids (sha256, first 16 hex digits:
enough to group a conversation's turns, nothing to read them back by), the model, the mode, whether the
reply was streamed, the upstream's status, the latencies (upstream, checks, rewrite, total), and per choice
its labels, verdicts (label, span offsets, failure type, reason; the span's words only with ``--log-text``),
whether it holds promise- or claim-like wording (``cue``) and what the gateway did; the ledger ids recorded;
and the error of a check that raised. Message text (the user's last message, the upstream's reply, what was
sent instead) is written only with ``--log-text``. Headers are never written: no Authorization, no key.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, Field

from commitbench import jsoncodec
from commitbench.digests import digest
from commitbench.gateway.verdicts import ChoiceCheck
from commitbench.llm import redact_credentials

LOG_VERSION = 1


def pseudonym(value: str | None) -> str | None:
    """A stable stand-in for an id (sha256, 16 hex digits), or None."""
    if not value:
        return None
    return digest(value, length=16)


class ChoiceRecord(BaseModel):
    """One choice of a logged turn."""

    index: int = Field(description="The choice's index.")
    labels: list[str] = Field(description="Its labels (pass when none applies).")
    verdicts: list[dict[str, Any]] = Field(description="The verdicts, without the span's words unless text is logged.")
    cue: bool = Field(description="Promise- or claim-like wording was found (the prevalence estimator's stratum).")
    empty_commitments: int = Field(description="How many of its commitments were empty.")
    action: str = Field(description="none, marked, replaced, rewritten or rewrite_failed.")
    text: dict[str, str] | None = Field(default=None, description="reply and sent text (only with --log-text).")


class LoggedTurn(BaseModel):
    """One line of the log."""

    v: int = Field(default=LOG_VERSION, description="Version of the line's format.")
    time: str = Field(description="When the turn was checked (UTC, ISO 8601).")
    turn: str = Field(description="The turn's digest (sha256 of model, messages and creditor).")
    session: str | None = Field(description="Pseudonym of the session id (user field or x-session-id).")
    creditor: str | None = Field(description="Pseudonym of the creditor (user field or x-commitbench-user).")
    model: str = Field(description="The model the request named.")
    mode: str = Field(description="observe, enforce or rewrite.")
    stream: bool = Field(description="Whether the reply was streamed.")
    status: int = Field(description="The upstream's HTTP status.")
    latency_ms: dict[str, float] = Field(description="upstream, checks, rewrite and total, in milliseconds.")
    choices: list[ChoiceRecord] = Field(description="One entry per choice.")
    recorded: list[int] = Field(default_factory=list, description="Ledger ids of the anchored promises.")
    nudged: bool = Field(default=False, description="The request carried a nudge left by an earlier false claim.")
    error: str | None = Field(default=None, description="What went wrong in a check (type and message).")
    user: str | None = Field(default=None, description="The last user message (only with --log-text).")


def choice_record(check: ChoiceCheck, action: str, reply: str | None, sent: str | None, text: bool) -> ChoiceRecord:
    verdicts = []
    for verdict in check.verdicts:
        item = verdict.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        item["label"] = verdict.label.value
        if not text:
            item.pop("text", None)
        verdicts.append(item)
    empty = sum(1 for v in check.verdicts if v.label.value == "empty")
    logged = {"reply": reply or "", "sent": sent or ""} if text else None
    return ChoiceRecord(index=check.index, labels=[label.value for label in check.labels], verdicts=verdicts,
                        cue=check.cue, empty_commitments=empty, action=action, text=logged)


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class GatewayLog:
    """Appends turn records to a file (one JSON object per line); thread-safe."""

    def __init__(self, path: Path | str, text: bool = False) -> None:
        self.path = Path(path)
        self.text = text
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file: TextIO = self.path.open("a", encoding="utf-8", errors="backslashreplace")

    def write(self, record: LoggedTurn) -> None:
        line = jsoncodec.dumps(record.model_dump(mode="json", exclude_none=True)).decode("utf-8", "surrogatepass")
        line = redact_credentials(line)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
