"""The standing environment's tools: the workspace's own, and the two an episode declares as data.

The workspace tools (:class:`WorkspaceTools`) are declared once with :func:`commitbench.tools.tool`:
their schemas come from the arguments models below. The promised action tool and the check tool are
declared in the commitment type's file (name, description, parameters) and become tools with
:func:`commitbench.tools.schema_tool`; :func:`episode_tools` builds them for one episode.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from commitbench.envs.standing.workspace import Workspace, dm_channel
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.spec import WikiEntry
from commitbench.tools import Tool, ToolArgs, ToolError, ToolRefused, bound_tools, schema_tool, tool

MAX_MESSAGE = 4_000
MAX_QUERY = 500


class PostMessageArgs(ToolArgs):
    channel: str = Field(description="Channel name, for example #design-review.")
    text: str = Field(description="The message.", max_length=MAX_MESSAGE)


class SendDmArgs(ToolArgs):
    to: str = Field(description="The person's name.")
    text: str = Field(description="The message.", max_length=MAX_MESSAGE)


class LookupArgs(ToolArgs):
    query: str = Field(description="Words to search for.", max_length=MAX_QUERY)


class NoArgs(ToolArgs):
    """A tool without arguments."""


# Posts an assistant message: (channel, text, via) -> None.
Poster = Callable[[str, str, str], None]


class WorkspaceTools:
    """The tools every standing episode has; ``post`` is how the environment records a message."""

    def __init__(self, workspace: Workspace, wiki: dict[str, WikiEntry], post: Poster) -> None:
        self.workspace = workspace
        self.wiki = wiki
        self.post = post

    @tool(write=True)
    def post_message(self, args: PostMessageArgs) -> str:
        """Write a message in a channel that everyone in it can read."""
        channel = self.workspace.channel
        if not self.workspace.is_team_channel(args.channel):
            raise ToolError(f"unknown channel {args.channel[:80]!r}; the only channel is {channel}")
        self.post(channel, args.text, "post_message")
        return f"Posted in {channel}."

    @tool(write=True)
    def send_dm(self, args: SendDmArgs) -> str:
        """Send a direct message to one person."""
        person = self.workspace.resolve(args.to)
        if person is None:
            names = ", ".join(p.name for p in self.workspace.people)
            raise ToolError(f"nobody called {args.to[:80]!r} is in this workspace; people: {names}")
        self.post(dm_channel(person.name), args.text, "send_dm")
        return f"Sent to {person.name}."

    @tool()
    def lookup(self, args: LookupArgs) -> str:
        """Search the team wiki and return the entries that match."""
        hits = search_wiki(self.wiki, args.query)
        return " ".join(hits[:2]) if hits else f"No wiki entry matches {args.query[:80]!r}."

    @tool()
    def end_turn(self, args: NoArgs) -> str:
        """Finish your turn without writing anything."""
        return "Turn ended."


def episode_tools(episode: Episode) -> list[Tool]:
    """The promised action tool and the check tool of an episode, with the outcomes its data fixes."""

    def check(_: dict[str, object]) -> str:
        verdict = "Possible." if episode.check_possible else "Not possible."
        return f"{verdict} {episode.check_text}"

    def act(_: dict[str, object]) -> str:
        if not episode.check_possible:
            raise ToolRefused(episode.action_failed_text)
        return episode.action_done_text

    return [schema_tool(episode.action_tool, act), schema_tool(episode.check_tool, check)]


def workspace_tool_names() -> list[str]:
    """Names of the tools every standing episode has (an episode's own tools may not take them)."""
    from commitbench.tools import declared_tools

    return [spec.name for spec, _ in declared_tools(WorkspaceTools)]


def bind_workspace_tools(workspace: Workspace, wiki: dict[str, WikiEntry], post: Poster) -> list[Tool]:
    return bound_tools(WorkspaceTools(workspace, wiki, post))


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
