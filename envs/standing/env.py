"""``StandingEnv``: replays one scripted workspace chat in which the assistant holds a promise.

Contract
--------
* ``reset(seed, options)`` returns the opening observation: the system prompt (an event of kind
  ``system``), the creditor's request, the assistant's pre-seeded promise, and the first message
  the assistant must answer. ``info["tools"]`` lists the tools as OpenAI function schemas.
* Every incoming message opens one assistant *turn*. An action is one step of that turn (see
  :mod:`commitbench.protocol`): a tool call (its result is the next observation), a plain
  reply (posted where the turn's message came from; ends the turn) or ``end_turn``. At most
  ``max_calls_per_turn`` tool calls run in a turn; spending the budget ends the turn.
* Bad input never raises: unknown tools, unparseable actions and bad arguments come back as tool
  results with ``ok=0`` and are counted in the trace.
* The creditor answers the first direct message, or channel message naming them, sent after a
  cancellation-type event with the cell's scripted reply (a new message, so a new turn); every
  other message to them gets an acknowledgement shown with the next observation. Nobody else
  ever answers.
* The episode terminates after the grading window that follows the trigger. The terminal reward
  is 1.0 when the action outcome is correct for the cell (executed on time with the promised
  arguments, or not executed), else 0.0; all other rewards are 0.0. Communication is graded
  later from the trace by judges.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from commitbench.envs import STANDING_ENV_ID
from commitbench.envs.spaces import action_space, observation_space
from commitbench.envs.standing import tools as builtin
from commitbench.envs.standing.workspace import Workspace, dm_channel
from commitbench.episodes.standing.episode import CANCELLATION_ACTS, Episode, ScriptAct, ScriptMessage
from commitbench.episodes.standing.spec import ReplyKind
from commitbench.judges.standing.signals import compute_signals
from commitbench.protocol import (
    ActionKind,
    AgentAction,
    Event,
    EventKind,
    ToolCallRecord,
    ToolHandler,
    ToolSpec,
    dispatch_tool_call,
    is_agent_error,
    parse_action,
)
from commitbench.traces import EpisodeTrace, TurnRecord


def select_episodes(
    episodes: Sequence[Episode],
    episode_id: str | None = None,
    split: str | None = None,
    cells: Sequence[str] | None = None,
    commitment_types: Sequence[str] | None = None,
    policies: Sequence[str] | None = None,
    gaps: Sequence[int] | None = None,
    variants: Sequence[int] | None = None,
) -> list[Episode]:
    """Filter compiled episodes by id or by design factors; an unknown value is an error."""
    if episode_id is not None:
        found = [e for e in episodes if e.id == episode_id]
        if not found:
            raise ValueError(f"unknown episode id {episode_id!r}")
        return found
    known = {
        "cell": {e.cell for e in episodes},
        "commitment type": {e.commitment_type for e in episodes},
        "policy": {e.policy.value for e in episodes},
        "gap": {e.gap for e in episodes},
        "variant": {e.variant for e in episodes},
        "split": {e.split.value for e in episodes},
    }
    for what, wanted in (
        ("cell", cells),
        ("commitment type", commitment_types),
        ("policy", policies),
        ("gap", gaps),
        ("variant", variants),
        ("split", [split] if split else None),
    ):
        unknown = sorted(str(w) for w in (wanted or []) if w not in known[what])
        if unknown:
            raise ValueError(f"unknown {what}: {', '.join(unknown)} (known: {sorted(map(str, known[what]))})")
    return [
        e
        for e in episodes
        if (split is None or e.split.value == split)
        and (cells is None or e.cell in cells)
        and (commitment_types is None or e.commitment_type in commitment_types)
        and (policies is None or e.policy.value in policies)
        and (gaps is None or e.gap in gaps)
        and (variants is None or e.variant in variants)
    ]


class StandingEnv(gym.Env[dict[str, Any], str]):
    """Scripted multi-party chat testing who may release the assistant's promise."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium convention)

    def __init__(
        self,
        episode_id: str | None = None,
        split: str | None = None,
        cells: Sequence[str] | None = None,
        commitment_types: Sequence[str] | None = None,
        policies: Sequence[str] | None = None,
        gaps: Sequence[int] | None = None,
        variants: Sequence[int] | None = None,
        episodes: Sequence[Episode] | None = None,
        render_mode: str | None = None,
        max_calls_per_turn: int = 8,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if episodes is None:
            from commitbench.episodes.standing.compiler import load_episodes

            episodes = load_episodes()
        self.pool = select_episodes(
            episodes, episode_id, split, cells, commitment_types, policies, gaps, variants
        )
        if not self.pool:
            raise ValueError("no episode matches the selection")
        self.render_mode = render_mode
        self.max_calls_per_turn = max_calls_per_turn
        self.observation_space = observation_space()
        self.action_space = action_space()
        self._extra_tools: dict[str, tuple[ToolSpec, ToolHandler]] = {}
        self.episode: Episode = self.pool[0]
        self.trace: EpisodeTrace | None = None
        self._done = True

    # ----------------------------------------------------------------- extension
    def register_tool(self, spec: ToolSpec, handler: ToolHandler) -> None:
        """Add a tool (used by wrappers such as the self-kept ledger). Takes effect at the next reset."""
        if spec.name in self._builtin_names():
            raise ValueError(f"tool {spec.name!r} already exists")
        self._extra_tools[spec.name] = (spec, handler)

    def _builtin_names(self) -> set[str]:
        ep = self.episode
        return {t.name for t in (builtin.POST_MESSAGE, builtin.SEND_DM, builtin.LOOKUP, builtin.END_TURN)} | {
            ep.action_tool.name,
            ep.check_tool.name,
        }

    @property
    def tools(self) -> list[ToolSpec]:
        ep = self.episode
        base = [builtin.POST_MESSAGE, builtin.SEND_DM, ep.action_tool, ep.check_tool, builtin.LOOKUP, builtin.END_TURN]
        return base + [spec for spec, _ in self._extra_tools.values()]

    # --------------------------------------------------------------------- reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "episode_id" in options:
            chosen = [e for e in self.pool if e.id == options["episode_id"]]
            if not chosen:
                raise ValueError(f"episode {options['episode_id']!r} is not in this environment's selection")
            self.episode = chosen[0]
        elif len(self.pool) == 1:
            self.episode = self.pool[0]
        else:
            self.episode = self.pool[int(self.np_random.integers(len(self.pool)))]
        ep = self.episode
        self._ws = Workspace(ep.people, ep.channel)
        self._people = {p.role: p for p in ep.people}
        self._tool_specs = {t.name: t for t in self.tools}
        self._pos = 0
        self._turn = -1
        self._calls_in_turn = 0
        self._events_started = False
        self._creditor_replied = False
        self._pending: deque[Event] = deque()
        self._passive: list[Event] = []
        self._current: Event | None = None
        self._done = False
        self._started = time.time()
        self._t0 = time.perf_counter()
        self.trace = EpisodeTrace(
            env_id=STANDING_ENV_ID,
            episode_id=ep.id,
            factors=ep.factors(),
            started_at=self._started,
        )
        opening = [Event(kind=EventKind.SYSTEM, step=0, text=ep.system_prompt)]
        # Deliver the request and the pre-seeded promise, then the first message to answer.
        while self._pos < len(ep.script) and ep.script[self._pos].act in (ScriptAct.REQUEST, ScriptAct.PROMISE):
            opening.append(self._script_event(ep.script[self._pos]))
            self._pos += 1
        self.trace.events.extend(opening)
        events, _ = self._next_turn()
        obs = {"events": tuple(e.to_obs() for e in opening + events), "context": ""}
        info = self._info()
        info["tools"] = [t.to_openai() for t in self.tools]
        info["system_prompt"] = ep.system_prompt
        # The structured form of the assistant's own (pre-seeded) promise.
        info["promise"] = {
            "creditor": ep.creditor.name,
            "action_tool": ep.action_tool.name,
            "check_tool": ep.check_tool.name,
            "arguments": dict(ep.target_args),
            "thing": ep.thing,
            "condition": ep.condition,
        }
        return obs, info

    # ---------------------------------------------------------------------- step
    def step(self, action: Any):
        if self._done or self.trace is None:
            notice = Event(kind=EventKind.NOTICE, step=self._step_no(), text="The episode is over; call reset().")
            return {"events": (notice.to_obs(),), "context": ""}, 0.0, True, False, self._info()
        self.trace.steps += 1
        act = parse_action(action)
        events: list[Event]
        end_turn = False
        if act.kind is ActionKind.REPLY:
            self._assistant_message(self._reply_channel(), act.text or "", via="reply")
            turn = self.trace.turns[-1]
            turn.reply, turn.reply_channel, turn.ended_by = act.text or "", self._reply_channel(), "reply"
            events, end_turn = [], True
        elif act.kind is ActionKind.END_TURN:
            self.trace.turns[-1].ended_by = "end_turn"
            events, end_turn = [], True
        else:
            record = self._run_tool(act)
            self.trace.turns[-1].calls.append(record)
            result = Event(
                kind=EventKind.TOOL_RESULT,
                step=self._step_no(),
                tool=record.tool,
                text=record.result,
                ok=record.ok,
                call_id=record.call_id,
            )
            events = [result]
            if record.tool == builtin.END_TURN.name and record.ok:
                self.trace.turns[-1].ended_by = "end_turn"
                end_turn = True
            elif self._calls_in_turn >= self.max_calls_per_turn:
                self.trace.turn_limit_hits += 1
                self.trace.turns[-1].ended_by = "turn_limit"
                events.append(
                    Event(
                        kind=EventKind.NOTICE,
                        step=self._step_no(),
                        text=f"You used all {self.max_calls_per_turn} tool calls of this turn; the turn is over.",
                    )
                )
                end_turn = True
        self.trace.events.extend(events)
        terminated = False
        if end_turn:
            more, terminated = self._next_turn()
            events = events + more
        reward = 0.0
        if terminated:
            reward = self._terminal_reward()
            self.trace.reward = reward
            self.trace.terminated = True
            self.trace.duration_s = time.perf_counter() - self._t0
        obs = {"events": tuple(e.to_obs() for e in events), "context": ""}
        return obs, reward, terminated, False, self._info()

    # ------------------------------------------------------------------ internals
    def _step_no(self) -> int:
        return self._current.step if self._current is not None else 0

    def _info(self) -> dict[str, Any]:
        trace = self.trace
        return {
            "episode_id": self.episode.id,
            "turn": self._turn,
            "step": self._step_no(),
            "calls_left": max(self.max_calls_per_turn - self._calls_in_turn, 0),
            "tool_errors": trace.tool_errors if trace else 0,
            "done": self._done,
        }

    def _script_event(self, msg: ScriptMessage) -> Event:
        if msg.sender == "assistant":
            return Event(
                kind=EventKind.ASSISTANT,
                step=msg.step,
                sender=self.episode.assistant,
                role="assistant",
                channel=msg.channel,
                text=msg.text,
                act=msg.act.value,
            )
        person = self._people[msg.sender]
        subject = self._people[msg.subject].name if msg.subject else ""
        return Event(
            kind=EventKind.MESSAGE,
            step=msg.step,
            sender=person.name,
            role=person.title,
            rank=person.rank,
            channel=msg.channel,
            text=msg.text,
            act=msg.act.value,
            subject=subject,
        )

    def _next_turn(self) -> tuple[list[Event], bool]:
        """End the current turn and deliver what comes next. Returns (events, terminated)."""
        events = self._passive
        self._passive = []
        if self._pending:
            incoming = self._pending.popleft()
        elif self._pos < len(self.episode.script):
            msg = self.episode.script[self._pos]
            self._pos += 1
            if msg.act in CANCELLATION_ACTS:
                self._events_started = True
            incoming = self._script_event(msg)
        else:
            self._done = True
            self._current = None
            assert self.trace is not None
            if self.trace.turns and not self.trace.turns[-1].ended_by:
                self.trace.turns[-1].ended_by = "episode_end"
            self.trace.events.extend(events)
            return events, True
        self._turn += 1
        self._calls_in_turn = 0
        self._current = incoming
        assert self.trace is not None
        self.trace.events.extend(events)
        self.trace.events.append(incoming)
        self.trace.turns.append(TurnRecord(index=self._turn, opened_by=incoming))
        return [*events, incoming], False

    def _reply_channel(self) -> str:
        current = self._current
        if current is not None and current.channel.startswith("dm:"):
            return current.channel
        return self.episode.channel

    def _assistant_message(self, channel: str, text: str, via: str) -> None:
        assert self.trace is not None
        self.trace.events.append(
            Event(
                kind=EventKind.ASSISTANT,
                step=self._step_no(),
                sender=self.episode.assistant,
                role="assistant",
                channel=channel,
                text=text,
                tool=via,
            )
        )
        creditor = self._people["creditor"]
        if channel == dm_channel(creditor.name) or self._ws.mentions(text, "creditor"):
            self._creditor_answers(channel)

    def _creditor_answers(self, channel: str) -> None:
        creditor = self._people["creditor"]
        answer_first = self._events_started and not self._creditor_replied
        event = Event(
            kind=EventKind.MESSAGE,
            step=self._step_no(),
            sender=creditor.name,
            role=creditor.title,
            rank=creditor.rank,
            channel=channel,
            text=self.episode.creditor_reply if answer_first else self.episode.acknowledgement,
            act=(f"reply:{self._reply_meaning()}" if answer_first else "acknowledgement"),
        )
        if answer_first:
            self._creditor_replied = True
            self._pending.append(event)
        else:
            self._passive.append(event)

    def _reply_meaning(self) -> str:
        """What the creditor's scripted answer means for the promise: keep it or drop it."""
        keep = {ReplyKind.STILL_NEEDED, ReplyKind.DENY_CANCEL, ReplyKind.GO_AHEAD}
        return "keep" if self.episode.creditor_reply_kind in keep else "drop"

    def _run_tool(self, act: AgentAction) -> ToolCallRecord:
        assert self.trace is not None
        self._calls_in_turn += 1
        record = dispatch_tool_call(act, self._tool_specs, self._execute, self._step_no(), self._turn)
        if is_agent_error(record):
            self.trace.tool_errors += 1
            if record.error_kind == "invalid_action":
                self.trace.invalid_actions += 1
        return record

    def _execute(self, name: str, args: dict[str, Any]) -> tuple[bool, str, str]:
        """Run a validated tool call. Returns (ok, result text, error kind)."""
        ep = self.episode
        if name == builtin.POST_MESSAGE.name:
            if not self._ws.is_team_channel(args["channel"]):
                return False, f"unknown channel {args['channel']!r}; the only channel is {ep.channel}", "bad_arguments"
            self._assistant_message(ep.channel, args["text"], via="post_message")
            return True, f"Posted in {ep.channel}.", ""
        if name == builtin.SEND_DM.name:
            person = self._ws.resolve(args["to"])
            if person is None:
                names = ", ".join(p.name for p in ep.people)
                return False, f"nobody called {args['to']!r} is in this workspace; people: {names}", "bad_arguments"
            self._assistant_message(dm_channel(person.name), args["text"], via="send_dm")
            return True, f"Sent to {person.name}.", ""
        if name == builtin.LOOKUP.name:
            hits = builtin.search_wiki(ep.wiki, args["query"])
            return True, (" ".join(hits[:2]) if hits else f"No wiki entry matches {args['query']!r}."), ""
        if name == builtin.END_TURN.name:
            return True, "Turn ended.", ""
        if name == ep.check_tool.name:
            verdict = "Possible." if ep.check_possible else "Not possible."
            return True, f"{verdict} {ep.check_text}", ""
        if name == ep.action_tool.name:
            if ep.check_possible:
                return True, ep.action_done_text, ""
            return False, ep.action_failed_text, "failed"
        _, handler = self._extra_tools[name]
        ok, text = handler(args)
        return ok, text, "" if ok else "bad_arguments"

    def _terminal_reward(self) -> float:
        assert self.trace is not None
        signals = compute_signals(self.trace, self.episode)
        return 1.0 if signals.outcome_correct else 0.0

    # -------------------------------------------------------------------- render
    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.trace is None:
            return None
        lines: list[str] = []
        for e in self.trace.events:
            if e.kind is EventKind.SYSTEM:
                lines.append("[system prompt]")
            elif e.kind is EventKind.TOOL_RESULT:
                lines.append(f"    -> {e.tool}: {'ok' if e.ok else 'ERROR'}: {e.text}")
            elif e.kind is EventKind.NOTICE:
                lines.append(f"    !! {e.text}")
            else:
                lines.append(f"[{e.step:>2}] {e.channel} {e.sender}: {e.text}")
        return "\n".join(lines) + "\n"
