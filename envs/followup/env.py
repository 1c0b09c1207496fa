"""``FollowUpEnv``: one follow-up request answered once, in one of the setups C0-C4.

Contract
--------
* An *episode* is one request in one setup, variant (inferred or stated) and persona.
  ``reset(seed, options)`` returns the opening observation: an event of kind ``system`` holding the
  system prompt (persona, the stated paragraph in the stated variant, the fixed current time) and
  one ``message`` event from the user holding the context followed by the request.
  ``info["tools"]`` lists the setup's tools as OpenAI function schemas, so a chat agent plays the
  environment unchanged. ``options={"episode_id": ...}`` picks an episode of the selection;
  otherwise a seeded draw picks one.
* There is a single assistant turn. A tool call runs a deterministic mock (its result is the next
  observation); at most ``max_tool_calls`` calls run, after which the episode ends with a notice.
  A reply ends the episode; so does ``end_turn`` (with no reply). The agent bounds its tool
  *rounds* (model calls that return tool calls); the chat agent does so with
  ``max_model_calls_per_turn``.
* Bad input never raises: unknown tools, unparseable actions and bad arguments come back as tool
  results with ``ok=0`` and are counted in ``env.trace``.
* Every reward is 0.0: the outcome is labelled afterwards, from ``env.trace``, by the checker.

Follow-through mode (an episode whose ``follow_through`` is set; ``docs/follow-through.md``)
------------------------------------------------------------------------------------------
The first turn is played exactly as above, and the outcome label is still taken from it. What the
agent's calls left for later (tasks, reminders, memories, tickets, escalations) is kept in the
commitment ledger on a simulated clock (:mod:`commitbench.envs.followup.runtime`). When the first turn
ends, the episode goes on: the clock moves to what comes due next and the runtime opens a new agent
turn with a short notice (a ``notice`` event naming the task, its text and the time). Every turn after
the first also offers the data tool ``look_up`` (``info["tools"]`` then lists the tools anew). A memory
request's later conversation opens with a new ``system`` event and the user's message, and
``info["session"]`` counts up: the agent starts a fresh conversation there. A reminder is shown to the
user by the runtime, and the support team (the runtime, never the agent) acts on a ticket or escalation at
its due time; both are recorded as ``notice`` events and open no turn. The episode ends when nothing more
comes due (or after ``MAX_FIRINGS`` firings); the ledger's audit trail is then in ``trace.ledger_audit``.
The tool-call bound applies per turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.envs.common import (
    check_settings,
    compose_system_prompt,
    observation,
    privileged_info,
    record_extras,
    run_tool,
)
from commitbench.envs.followup.runtime import Firing, FollowThroughRuntime
from commitbench.envs.spaces import action_space, observation_space
from commitbench.episodes.followup.episodes import FollowUpEpisode, select_followup_episodes
from commitbench.episodes.followup.profile import StatedParagraph, followup_settings
from commitbench.episodes.followup.requests import FollowupRequest
from commitbench.episodes.followup.setups import SuiteSetups, load_setups
from commitbench.episodes.followup.tools import bind_tools
from commitbench.episodes.followup.vocabulary import Doability, SetupId, Variant
from commitbench.extras import EnvExtras, extras_of
from commitbench.protocol import ActionKind, Event, EventKind, parse_action
from commitbench.textslots import SuppliedTexts
from commitbench.tools import Tool, Toolbox
from commitbench.traces import EpisodeTrace, TurnRecord

# The settings interventions may give this environment at reset (commitbench.extras).
SETTINGS: dict[str, str] = {"variant": "play every episode in this variant (inferred or stated)"}

USER_NAME = "User"
USER_CHANNEL = "chat"
# Script annotations (``Event.act``) of the follow-through mode's events.
FIRED_ACT = "fired"
SECOND_SESSION_ACT = "second_session"
REMINDER_ACT = "reminder_delivered"
TEAM_ACT = "team_acted"
# Tools offered only in the turns an episode opens after the first (the first turn stays the single-turn one).
LATER_TOOLS = ("look_up",)



class FollowUpEnv(gym.Env[dict[str, Any], str]):
    """A single-turn follow-up request in one of the suite's setups."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium convention)
    ENV_ID = FOLLOWUP_ENV_ID

    def __init__(
        self,
        setup: str | Sequence[str] | None = None,
        variant: str | Sequence[str] | None = None,
        persona: str | Sequence[str] | None = None,
        category: str | Sequence[str] | None = None,
        request_id: str | Sequence[str] | None = None,
        requests: Sequence[FollowupRequest] | None = None,
        suite: SuiteSetups | None = None,
        doability: Callable[[FollowupRequest, SetupId], Doability] | None = None,
        render_mode: str | None = None,
        max_tool_calls: int = 10,
        episodes: Sequence[FollowUpEpisode] | None = None,
        profile: str = "commitbench",
        texts: SuppliedTexts | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if max_tool_calls < 1:
            raise ValueError("max_tool_calls must be at least 1")
        self.suite = suite or load_setups()
        # Texts supplied for the slots the paper prints (persona, stated paragraph, time; the fixes read theirs here).
        self.texts = texts
        if episodes is not None:
            self.pool = list(episodes)
        else:
            self.pool = select_followup_episodes(
                requests, setup, variant, persona, category, request_id, doability, followup_settings(profile)
            )
        if not self.pool:
            raise ValueError("no episode matches the selection")
        self._by_id = {e.id: e for e in self.pool}
        self.render_mode = render_mode
        self.max_tool_calls = max_tool_calls
        self.observation_space = observation_space()
        self.action_space = action_space()
        self._extras = EnvExtras()
        self._toolbox = Toolbox(())
        self.episode: FollowUpEpisode = self.pool[0]
        self.trace: EpisodeTrace | None = None
        self._done = True
        self._calls = 0
        self.runtime: FollowThroughRuntime | None = None
        self._held: list[Tool] = []

    @property
    def variant(self) -> Variant:
        """The variant the current episode is played in (an intervention may set it for every episode)."""
        setting = self._extras.settings.get("variant")
        return Variant(setting) if setting is not None else self.episode.variant

    # --------------------------------------------------------------------- reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "episode_id" in options:
            chosen = self._by_id.get(str(options["episode_id"]))
            if chosen is None:
                raise ValueError(f"episode {options['episode_id']!r} is not in this environment's selection")
            self.episode = chosen
        elif len(self.pool) == 1:
            self.episode = self.pool[0]
        else:
            self.episode = self.pool[int(self.np_random.integers(len(self.pool)))]
        extras = extras_of(options)
        check_settings(extras, SETTINGS)
        self._extras = extras
        ep = self.episode
        names = [d.name for d in self.suite.tool_definitions(ep.setup, ep.persona)]
        if self.runtime is not None:
            self.runtime.close()
        self.runtime = FollowThroughRuntime(ep, self.suite) if ep.follow_through else None
        if self.runtime is not None:
            bound = bind_tools(self.suite.current_time, ep.persona, [*names, *LATER_TOOLS], clock=self.runtime.now,
                               keeper=self.runtime)
            tools, self._held = bound[: len(names)], bound[len(names):]
        else:
            tools, self._held = bind_tools(self.suite.current_time, ep.persona, names), []
        self._toolbox = Toolbox([*tools, *extras.tools])
        self._calls = 0
        self._done = False
        self._t0 = time.perf_counter()
        own = self.suite.system_prompt(ep.setup, ep.persona, self.variant, event_sentence=_event_sentence(ep),
                                       texts=self.texts)
        prompt = compose_system_prompt(own, [], extras.sections, ep, full=own)
        factors = ep.factors()
        factors["variant"] = self.variant.value
        self.trace = EpisodeTrace(env_id=FOLLOWUP_ENV_ID, episode_id=ep.id, factors=factors, started_at=time.time())
        record_extras(self.trace, extras)
        system = Event(kind=EventKind.SYSTEM, step=0, text=prompt)
        user = Event(
            kind=EventKind.MESSAGE, step=0, sender=USER_NAME, role="user", channel=USER_CHANNEL,
            text=ep.request.user_message, act="request",
        )
        self.trace.events.extend([system, user])
        self.trace.turns.append(TurnRecord(index=0, opened_by=user))
        shown = [system, user]
        info = self._info(shown)
        info["tools"] = [t.to_openai() for t in self._toolbox.specs()]
        info["write_tools"] = self._toolbox.write_tools()
        info["system_prompt"] = prompt
        info["user_message"] = user.text
        if self.runtime is not None:
            info["session"] = self.runtime.session
        return observation(shown), info

    # ---------------------------------------------------------------------- step
    def step(self, action: Any):
        if self._done or self.trace is None:
            notice = Event(kind=EventKind.NOTICE, step=0, text="The episode is over; call reset().")
            return observation([notice]), 0.0, True, False, self._info([notice])
        self.trace.steps += 1
        act = parse_action(action)
        turn = self.trace.turns[-1]
        index = turn.index
        events: list[Event] = []
        shown: list[Event] = []
        tools_changed = False
        if act.kind is ActionKind.REPLY:
            text = act.text or ""
            turn.reply, turn.reply_channel, turn.ended_by = text, USER_CHANNEL, "reply"
            if act.revision is not None:
                turn.revisions.append(act.revision)
            self.trace.events.append(
                Event(kind=EventKind.ASSISTANT, step=index, sender="assistant", role="assistant",
                      channel=USER_CHANNEL, text=text, tool="reply", act=act.revision.kind if act.revision else "")
            )
            shown, tools_changed = self._end_turn()
        elif act.kind is ActionKind.END_TURN:
            turn.ended_by = "end_turn"
            shown, tools_changed = self._end_turn()
        else:
            self._calls += 1
            if self.runtime is not None:
                self.runtime.turn, self.runtime.call_id = index, act.call_id or f"#{len(turn.calls)}"
            record = run_tool(self._toolbox, act, self.trace, index, index)
            turn.calls.append(record)
            events.append(
                Event(kind=EventKind.TOOL_RESULT, step=index, tool=record.tool, text=record.result, ok=record.ok,
                      call_id=record.call_id)
            )
            if self._calls >= self.max_tool_calls:
                self.trace.turn_limit_hits += 1
                turn.ended_by = "turn_limit"
                over = "the conversation is over" if self.runtime is None else "this turn is over"
                events.append(
                    Event(kind=EventKind.NOTICE, step=index,
                          text=f"You used all {self.max_tool_calls} tool calls; {over}.")
                )
            self.trace.events.extend(events)
            if turn.ended_by == "turn_limit":
                shown, tools_changed = self._end_turn()
            shown = [*events, *shown]
        info = self._info(shown)
        if tools_changed:
            info["tools"] = [t.to_openai() for t in self._toolbox.specs()]
            info["write_tools"] = self._toolbox.write_tools()
        return observation(shown), 0.0, self._done, False, info

    # ------------------------------------------------------------- follow-through
    def _end_turn(self) -> tuple[list[Event], bool]:
        """End the current turn; in the follow-through mode, open the next one if something comes due.

        Returns the events the next turn opens with (none when the episode ends) and whether the tools changed.
        """
        runtime, trace = self.runtime, self.trace
        assert trace is not None
        if runtime is None:
            self._finish()
            return [], False
        turn = trace.turns[-1]
        runtime.close_turn(turn.index, turn.reply or "")
        while (firing := runtime.next_firing()) is not None:
            index = len(trace.turns)
            opens_turn = runtime.needs_turn(firing)
            for delivered in runtime.fire(firing, index if opens_turn else None):
                act = REMINDER_ACT if delivered.by == "reminder" else TEAM_ACT
                trace.events.append(
                    Event(kind=EventKind.NOTICE, step=index, sender=delivered.by, channel=USER_CHANNEL,
                          text=delivered.shown, act=act)
                )
            if opens_turn:
                return self._open_turn(firing, index)
        self._finish()
        return [], False

    def _open_turn(self, firing: Firing, index: int) -> tuple[list[Event], bool]:
        runtime, trace = self.runtime, self.trace
        assert runtime is not None and trace is not None
        self._calls = 0
        events: list[Event] = []
        tools_changed = False
        if firing.reason == "session":
            session = self.episode.request.second_session
            assert session is not None
            prompt = self.suite.system_prompt(self.episode.setup, self.episode.persona, self.variant, now=session.at,
                                              event_sentence=_event_sentence(self.episode), texts=self.texts)
            prompt = compose_system_prompt(prompt, [], self._extras.sections, self.episode, full=prompt)
            events.append(Event(kind=EventKind.SYSTEM, step=index, text=prompt))
            tools_changed = True
        text = runtime.notice(firing)
        if text:
            events.append(Event(kind=EventKind.NOTICE, step=index, sender="scheduler", text=text, act=FIRED_ACT))
        if firing.reason == "session":
            session = self.episode.request.second_session
            assert session is not None
            user = Event(kind=EventKind.MESSAGE, step=index, sender=USER_NAME, role="user", channel=USER_CHANNEL,
                         text=session.text, act=SECOND_SESSION_ACT)
            events.append(user)
        missing = [t for t in self._held if t.name not in self._toolbox]
        if missing:
            self._toolbox = Toolbox([*self._toolbox.values(), *missing])
            tools_changed = True
        trace.events.extend(events)
        trace.turns.append(TurnRecord(index=index, opened_by=events[-1]))
        return events, tools_changed

    def _finish(self) -> None:
        assert self.trace is not None
        self._done = True
        self.trace.terminated = True
        self.trace.duration_s = time.perf_counter() - self._t0
        if self.runtime is not None:
            self.runtime.finish()
            self.trace.ledger_audit = self.runtime.audit()

    def _info(self, shown: Sequence[Event] = ()) -> dict[str, Any]:
        trace = self.trace
        info: dict[str, Any] = {
            "episode_id": self.episode.id,
            "turn": trace.turns[-1].index if trace and trace.turns else 0,
            "calls_left": max(self.max_tool_calls - self._calls, 0),
            "tool_errors": trace.tool_errors if trace else 0,
            "done": self._done,
        }
        if self.runtime is not None:
            info["session"] = self.runtime.session
        if self._extras.privileged:  # the episode's facts are made only for the privileged channel
            facts = {**self.episode.factors(), "variant": self.variant.value}
            info.update(privileged_info(self._extras, shown, episode=facts))
        return info

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None
        super().close()

    # -------------------------------------------------------------------- render
    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.trace is None:
            return None
        lines: list[str] = []
        for e in self.trace.events:
            if e.kind is EventKind.SYSTEM:
                lines.append(f"[system] {e.text}")
            elif e.kind is EventKind.TOOL_RESULT:
                lines.append(f"    -> {e.tool}: {'ok' if e.ok else 'ERROR'}: {e.text}")
            elif e.kind is EventKind.NOTICE:
                lines.append(f"    !! {e.text}")
            else:
                lines.append(f"[{e.sender}] {e.text}")
        return "\n".join(lines) + "\n"


def _event_sentence(episode: FollowUpEpisode) -> bool:
    """Whether the stated paragraph says that a task can wait for an event (the project's profile)."""
    return episode.settings.stated_paragraph is StatedParagraph.COMMITBENCH
