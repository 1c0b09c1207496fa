"""Secrets the harness holds, kept out of everything it records or prints.

A model client holds secrets: its API key, the user and password of a base URL
(``http://user:password@host/v1``, sent as HTTP basic authentication, so also in their base64 form)
and the values of a base URL's query (``?token=...``, sent as the query of every request). A server
may send any of them back: an error body that repeats the ``Authorization`` header, a reply that
quotes the URL it was called on. :class:`Secrets` collects every form of the secrets of a client and
:meth:`Secrets.scrub` replaces them with :data:`REDACTED` in any text, before the text reaches a
trace, the cache, a manifest, the console or an exception. URLs the harness writes (a config in a
manifest, a command line, an error message) are written without user-info and with every query
value replaced (:func:`redact_credentials`).

Values shorter than :data:`MIN_SECRET_CHARS` are not scrubbed from texts: a password ``test`` would
rewrite every "test" a model writes. Real keys and tokens are longer.
"""

from __future__ import annotations

import base64
import re
import urllib.parse

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "Secrets",
    "redact_credentials",
    "split_credentials",
    "split_query",
]

# What stands for a secret (the user-info of a URL, a query value, a key) wherever text is written or printed.
REDACTED = "***"
MIN_SECRET_CHARS = 8
_AUTHORITY_END = re.compile(r"[/?#]")
_URL_END = re.compile(r"[\s\"'<>\\]")


def _redact_query(query: str) -> str:
    parts: list[str] = []
    for part in query.split("&"):
        if not part:
            parts.append(part)
        elif "=" in part:
            parts.append(f"{part.split('=', 1)[0]}={REDACTED}")
        else:
            parts.append(REDACTED)
    return "&".join(parts)


def redact_credentials(text: str) -> str:
    """``text`` with the user-info and the query values of every URL in it replaced:
    ``http://user:pw@host/v1?token=x`` -> ``http://***@host/v1?token=***``.

    Runs in linear time: from each ``://`` it reads no further than the next one (or the end of the
    URL: a space, a quote, ``<``, ``>`` or a backslash).
    """
    out: list[str] = []
    position = 0
    while (found := text.find("://", position)) >= 0:
        start = found + 3
        following = text.find("://", start)
        limit = following if following >= 0 else len(text)
        end_match = _URL_END.search(text, start, limit)
        url_end = end_match.start() if end_match else limit
        authority_match = _AUTHORITY_END.search(text, start, url_end)
        authority_end = authority_match.start() if authority_match else url_end
        out.append(text[position:start])
        cursor = start
        at = text.rfind("@", start, authority_end)
        if at >= 0:
            out.append(f"{REDACTED}@")
            cursor = at + 1
        question = text.find("?", cursor, url_end)
        if question >= 0:
            fragment = text.find("#", question, url_end)
            query_end = fragment if fragment >= 0 else url_end
            out.append(text[cursor:question + 1])
            out.append(_redact_query(text[question + 1:query_end]))
            cursor = query_end
        out.append(text[cursor:url_end])
        position = url_end
    out.append(text[position:])
    return "".join(out)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """A base URL without its user-info, and the ``(user, password)`` it held (percent-decoding applied)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), (user, password)


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """A base URL without its query (and fragment), and the query's parameters: the client sends them
    as the query of every request (``.../v1/chat/completions?token=...``), not glued into the path."""
    parts = urllib.parse.urlsplit(url)
    if not parts.query and not parts.fragment:
        return url, {}
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit(parts._replace(query="", fragment="")), query


class Secrets:
    """Every form in which a client's secrets could come back, and the means to scrub them from text."""

    def __init__(self) -> None:
        self._forms: set[str] = set()
        self._ordered: list[str] = []

    def __bool__(self) -> bool:
        return bool(self._forms)

    def add(self, value: str | None) -> None:
        """One secret, as it is and percent-encoded (shorter than :data:`MIN_SECRET_CHARS`: ignored)."""
        if not value or len(value) < MIN_SECRET_CHARS or value == "EMPTY":
            return
        for form in (value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)):
            self._forms.add(form)
        self._ordered = sorted(self._forms, key=len, reverse=True)  # a longer form first: no half-scrubbed key

    def add_url(self, url: str) -> None:
        """The user-info of a base URL (user:password, the password, their basic-auth base64) and its query values."""
        _, credentials = split_credentials(url)
        if credentials is not None:
            user, password = credentials
            pair = f"{user}:{password}"
            self.add(pair)
            self.add(password)
            self.add(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
        for value in split_query(url)[1].values():
            self.add(value)

    def scrub(self, text: str) -> str:
        """``text`` with every form of a secret replaced (what a model wrote: its URLs are left as they are)."""
        for form in self._ordered:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def scrub_message(self, text: str) -> str:
        """An error message or any text of the harness: URLs redacted (:func:`redact_credentials`), then
        every form of a secret replaced."""
        return self.scrub(redact_credentials(text))
