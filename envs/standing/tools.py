"""The standing environment's tools: the workspace's own, and the two an episode declares as data.

The workspace tools (:class:`WorkspaceTools`) are declared once with :func:`commitbench.tools.tool`:
their schemas come from the arguments models below. The promised action tool and the check tool are
declared in the commitment type's file (name, description, parameters) and become tools with
:func:`commitbench.tools.schema_tool`; :func:`episode_tools` builds them for one episode.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

from pydantic import Field

from commitbench.claimguard.guard import fold
from commitbench.envs.standing.workspace import Workspace, dm_channel
from commitbench.episodes.standing.episode import Episode
from commitbench.episodes.standing.spec import ENGLISH_WORKSPACE, WikiEntry, WorkspaceTexts
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

    def __init__(self, workspace: Workspace, wiki: dict[str, WikiEntry], post: Poster,
                 texts: WorkspaceTexts = ENGLISH_WORKSPACE) -> None:
        self.workspace = workspace
        self.wiki = wiki
        self.post = post
        self.texts = texts

    @tool(write=True)
    def post_message(self, args: PostMessageArgs) -> str:
        """Write a message in a channel that everyone in it can read."""
        channel = self.workspace.channel
        if not self.workspace.is_team_channel(args.channel):
            raise ToolError(self.texts.result("unknown_channel", channel=repr(args.channel[:80]), team_channel=channel))
        self.post(channel, args.text, "post_message")
        return self.texts.result("posted", channel=channel)

    @tool(write=True)
    def send_dm(self, args: SendDmArgs) -> str:
        """Send a direct message to one person."""
        person = self.workspace.resolve(args.to)
        if person is None:
            names = ", ".join(p.name for p in self.workspace.people)
            raise ToolError(self.texts.result("unknown_person", name=repr(args.to[:80]), people=names))
        self.post(dm_channel(person.name), args.text, "send_dm")
        return self.texts.result("sent", name=person.name)

    @tool()
    def lookup(self, args: LookupArgs) -> str:
        """Search the team wiki and return the entries that match."""
        hits = search_wiki(self.wiki, args.query)
        return " ".join(hits[:2]) if hits else self.texts.result("no_match", query=repr(args.query[:80]))

    @tool()
    def end_turn(self, args: NoArgs) -> str:
        """Finish your turn without writing anything."""
        return self.texts.result("turn_ended")


def episode_tools(episode: Episode) -> list[Tool]:
    """The promised action tool and the check tool of an episode, with the outcomes its data fixes."""

    def check(_: dict[str, object]) -> str:
        verdict = episode.workspace.result("possible" if episode.check_possible else "not_possible")
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


def bind_workspace_tools(workspace: Workspace, wiki: dict[str, WikiEntry], post: Poster,
                         texts: WorkspaceTexts = ENGLISH_WORKSPACE) -> list[Tool]:
    """The workspace tools of an episode, described and answering in its language's words."""
    tools = bound_tools(WorkspaceTools(workspace, wiki, post, texts))
    return tools if texts == ENGLISH_WORKSPACE else [_worded(t, texts) for t in tools]


def _worded(tool: Tool, texts: WorkspaceTexts) -> Tool:
    """A workspace tool whose description and parameter descriptions are ``texts``' (names stay: they are the API)."""
    words = texts.tools[tool.name]
    parameters = copy.deepcopy(tool.spec.parameters)
    for name, prop in parameters.get("properties", {}).items():
        prop["description"] = words.parameters[name]
    spec = tool.spec.model_copy(update={"description": words.description, "parameters": parameters})
    return dataclasses.replace(tool, spec=spec)


def search_wiki(wiki: dict[str, WikiEntry], query: str) -> list[str]:
    """Entries whose keywords occur in the query (or the query in them), best match first. Both are compared
    lower-cased with Turkish letters folded (ç→c, ı/İ→i, ...), so "YANGIN TATBİKATI" finds "yangın tatbikatı"."""
    q = _fold_lower(query)
    words = set(q.replace("?", " ").replace(",", " ").split())
    scored: list[tuple[int, str, str]] = []
    for key, entry in wiki.items():
        score = 0
        for kw in entry.keywords:
            kw_l = _fold_lower(kw)
            if kw_l in words or (" " in kw_l and kw_l in q) or (len(q) >= 4 and q in kw_l):
                score += 1
        if score:
            scored.append((-score, key, entry.text))
    return [text for _, _, text in sorted(scored)]


def _fold_lower(text: str) -> str:
    return fold(text.replace("İ", "i")).lower()
