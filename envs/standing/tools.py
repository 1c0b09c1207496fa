"""The standing environment's built-in tools, described once and exported as OpenAI schemas."""

from __future__ import annotations

from commitbench.episodes.standing.spec import WikiEntry
from commitbench.protocol import ToolSpec


def _object(properties: dict[str, dict[str, str]]) -> dict[str, object]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


POST_MESSAGE = ToolSpec(
    name="post_message",
    description="Write a message in a channel that everyone in it can read.",
    parameters=_object(
        {
            "channel": {"type": "string", "description": "Channel name, for example #design-review."},
            "text": {"type": "string", "description": "The message."},
        }
    ),
    is_write=True,
)

SEND_DM = ToolSpec(
    name="send_dm",
    description="Send a direct message to one person.",
    parameters=_object(
        {
            "to": {"type": "string", "description": "The person's name."},
            "text": {"type": "string", "description": "The message."},
        }
    ),
    is_write=True,
)

LOOKUP = ToolSpec(
    name="lookup",
    description="Search the team wiki and return the entries that match.",
    parameters=_object({"query": {"type": "string", "description": "Words to search for."}}),
)

END_TURN = ToolSpec(
    name="end_turn",
    description="Finish your turn without writing anything.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)


def search_wiki(wiki: dict[str, WikiEntry], query: str) -> list[str]:
    """Entries whose keywords occur in the query (or the query in them), best match first."""
    q = query.lower()
    words = set(q.replace("?", " ").replace(",", " ").split())
    scored: list[tuple[int, str, str]] = []
    for key, entry in wiki.items():
        score = 0
        for kw in entry.keywords:
            kw_l = kw.lower()
            if kw_l in words or (" " in kw_l and kw_l in q) or (len(q) >= 4 and q in kw_l):
                score += 1
        if score:
            scored.append((-score, key, entry.text))
    return [text for _, _, text in sorted(scored)]
