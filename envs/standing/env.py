"""``StandingEnv``: replays one scripted workspace chat in which the assistant holds a promise.

Contract
--------
* ``reset(seed, options)`` returns the opening observation: the system prompt (an event of kind
  ``system``), the creditor's request, the assistant's pre-seeded promise, and the first message
  the assistant must answer. ``info["tools"]`` lists the tools as OpenAI function schemas and
  ``info["write_tools"]`` names those that change the world. ``options["episode_id"]`` picks an
  episode of the selection (otherwise a seeded draw picks one); interventions add prompt sections
  and tools through :mod:`commitbench.extras` (this environment has no settings).
* An observation holds what a participant sees: for each event its kind, step, sender, job title,
  channel, text, and for tool results the tool, ``ok`` and the call id. The script's annotations
  (what a message does, whom it is about, the sender's rank) and the structured promise stay in
  the trace; a wrapper gets them only through the privileged channel
  (:class:`commitbench.envs.privileged.RevealScriptAnnotations`).
* Every incoming message opens one assistant *turn*. An action is one step of that turn (see
  :mod:`commitbench.protocol`): a tool call (its result is the next observation), a plain
  reply (posted where the turn's message came from; ends the turn) or ``end_turn``. At most
  ``max_calls_per_turn`` tool calls run in a turn; spending the budget ends the turn.
* Bad input never raises: unknown tools, unparseable actions and bad arguments come back as tool
  results with ``ok=0`` and are counted in the trace.
* The creditor answers the first message addressed to them (a direct message, or a channel post that
  @-mentions them or opens with their name: :mod:`commitbench.episodes.standing.addressee`) sent after
  the latest scripted event that changes or challenges the promise (cancel, a delegate's cancel, relay,
  claim, reinstate; in a cell without one, after the promise) with the answer true at that point (a
  new message, so a new turn), and answers
  again after a further such event; every other message to them gets a neutral acknowledgement
  ("Thanks for the update.") shown with the next observation. Under the episode set's ``paper``
  reply rule (the paper profile) there is one answer, after the last such event, and a thumbs-up
  otherwise. Nobody else ever answers. With the reset setting ``voices`` (a
  :class:`~commitbench.envs.standing.voices.PartyVoices`, the live-parties arm) people's messages are shown in
  the words a party model gave them, and anyone the assistant addresses may answer inside the turn (after the
  tool result of the message); the script's steps, acts and the creditor's due answers are unchanged.
  ``profile`` (``commitbench`` or ``paper``) picks the episode
  set when ``episodes`` is not given; ``creditor_replies`` sets the reply rule within it.
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
from commitbench.envs.common import (
    check_settings,
    compose_system_prompt,
    observation,
    privileged_info,
    record_extras,
    run_tool,
)
from commitbench.envs.spaces import action_space, observation_space
from commitbench.envs.standing.tools import MAX_MESSAGE, bind_workspace_tools, episode_tools
from commitbench.envs.standing.voices import ANSWER_ACT, VOICES_SETTING, Outgoing, PartyVoices, VoicedText
from commitbench.envs.standing.workspace import Workspace
from commitbench.episodes.standing.addressee import addressed_to, addressees, dm_channel
from commitbench.episodes.standing.episode import (
    CANCELLATION_ACTS,
    PROMISE_STEP,
    Episode,
    ScriptAct,
    ScriptMessage,
)
from commitbench.episodes.standing.outcome import action_outcome_correct
from commitbench.episodes.standing.prompts import (
    POLICY_PARAGRAPH,
    own_policy_paragraph,
    prompt_without_policy,
    supplies_policy,
)
from commitbench.episodes.standing.selection import select_episodes
from commitbench.extras import EnvExtras, extras_of
from commitbench.protocol import END_TURN_TOOL, ActionKind, AgentAction, Event, EventKind, parse_action
from commitbench.textslots import SuppliedTexts
from commitbench.tools import Toolbox
from commitbench.traces import EpisodeTrace, TurnRecord


class StandingEnv(gym.Env[dict[str, Any], str]):
    """Scripted multi-party chat testing who may release the assistant's promise."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium convention)
    ENV_ID = STANDING_ENV_ID

    def __init__(
        self,
        episode_id: str | None = None,
        split: str | None = None,
        cells: Sequence[str] | None = None,
        commitment_types: Sequence[str] | None = None,
        policies: Sequence[str] | None = None,
        gaps: Sequence[int] | None = None,
        surfaces: Sequence[int] | None = None,
        episodes: Sequence[Episode] | None = None,
        render_mode: str | None = None,
        max_calls_per_turn: int = 8,
        profile: str = "commitbench",
        creditor_replies: str | None = None,
        texts: SuppliedTexts | None = None,
        language: str | Sequence[str] = "en",
    ) -> None:
        # Texts supplied for the slots the paper prints (the release policy; its paraphrases are the policy arm's).
        self.texts = texts
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if episodes is None:
            from commitbench.episodes.standing.compiler import load_episodes
            from commitbench.episodes.standing.profile import standing_settings

            episodes = load_episodes(settings=standing_settings(profile, creditor_replies=creditor_replies),
                                     languages=language)
        self.pool = select_episodes(
            episodes, episode_id, split, cells, commitment_types, policies, gaps, surfaces
        )
        if not self.pool:
            raise ValueError("no episode matches the selection")
        self._by_id: dict[str, Episode] = {}
        for episode in self.pool:  # the first episode of an id is the one reset(episode_id=...) plays
            self._by_id.setdefault(episode.id, episode)
        self.render_mode = render_mode
        self.max_calls_per_turn = max_calls_per_turn
        self.observation_space = observation_space()
        self.action_space = action_space()
        self._extras = EnvExtras()
        self._toolbox = Toolbox(())
        self.episode: Episode = self.pool[0]
        self.trace: EpisodeTrace | None = None
        self._done = True

    # --------------------------------------------------------------------- reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if "episode_id" in options:
            chosen = self._by_id.get(options["episode_id"])
            if chosen is None:
                raise ValueError(f"episode {options['episode_id']!r} is not in this environment's selection")
            self.episode = chosen
        elif len(self.pool) == 1:
            self.episode = self.pool[0]
        else:
            self.episode = self.pool[int(self.np_random.integers(len(self.pool)))]
        ep = self.episode
        extras = extras_of(options)
        check_settings(extras, {VOICES_SETTING: "the live parties' texts (a PartyVoices; absent: the script's)"})
        self._extras = extras
        voices = extras.settings.get(VOICES_SETTING)
        if voices is not None and not isinstance(voices, PartyVoices):
            raise TypeError(f"setting {VOICES_SETTING!r} must be a PartyVoices, got {type(voices).__name__}")
        self._voices: PartyVoices | None = voices
        self._ws = Workspace(ep.people, ep.channel)
        self._people = {p.role: p for p in ep.people}
        self._toolbox = Toolbox(
            [*bind_workspace_tools(self._ws, ep.wiki, self._assistant_message, ep.workspace), *episode_tools(ep),
             *extras.tools]
        )
        self._pos = 0
        self._turn = -1
        self._calls_in_turn = 0
        self._last_event_step = PROMISE_STEP  # answers are due from the promise on (BASE's follows it)
        self._answered: set[int] = set()
        self._pending: deque[Event] = deque()
        self._passive: list[Event] = []
        self._inturn: list[Event] = []
        self._current: Event | None = None
        self._done = False
        self._started = time.time()
        self._t0 = time.perf_counter()
        supplied = supplies_policy(ep, self.texts)  # a texts file gives the paper's policy in its own words
        head = prompt_without_policy(ep) if extras.sections or supplied else ep.system_prompt
        paragraph = own_policy_paragraph(ep, self.texts)
        full = "\n\n".join(p for p in (head, paragraph) if p) if supplied else ep.system_prompt
        prompt = compose_system_prompt(head, [(POLICY_PARAGRAPH, paragraph)], extras.sections, ep, full=full)
        self.trace = EpisodeTrace(
            env_id=STANDING_ENV_ID,
            episode_id=ep.id,
            factors=ep.factors(),
            started_at=self._started,
        )
        record_extras(self.trace, extras)
        opening = [Event(kind=EventKind.SYSTEM, step=0, text=prompt)]
        # Deliver the request and the pre-seeded promise, then the first message to answer.
        while self._pos < len(ep.script) and ep.script[self._pos].act in (ScriptAct.REQUEST, ScriptAct.PROMISE):
            opening.append(self._script_event(ep.script[self._pos]))
            self._pos += 1
        self.trace.events.extend(opening)
        events, _ = self._next_turn()
        shown = opening + events
        info = self._info(shown)
        info["tools"] = [t.to_openai() for t in self._toolbox.specs()]
        info["write_tools"] = self._toolbox.write_tools()
        info["system_prompt"] = prompt
        return observation(shown), info

    # ---------------------------------------------------------------------- step
    def step(self, action: Any):
        if self._done or self.trace is None:
            notice = Event(kind=EventKind.NOTICE, step=self._step_no(),
                           text=self.episode.workspace.notice("episode_over"))
            return observation([notice]), 0.0, True, False, self._info([notice])
        self.trace.steps += 1
        act = parse_action(action)
        events: list[Event]
        end_turn = False
        turn = self.trace.turns[-1]
        if act.kind is ActionKind.REPLY:
            text = act.text or ""
            channel = self._reply_channel()
            self._assistant_message(channel, text, "reply", act.revision.kind if act.revision else "")
            turn.reply, turn.reply_channel, turn.ended_by = text, channel, "reply"
            if act.revision is not None:
                turn.revisions.append(act.revision)
            events, end_turn = [], True
        elif act.kind is ActionKind.END_TURN:
            turn.ended_by = "end_turn"
            events, end_turn = [], True
        else:
            self._calls_in_turn += 1
            record = run_tool(self._toolbox, act, self.trace, self._step_no(), self._turn)
            turn.calls.append(record)
            result = Event(
                kind=EventKind.TOOL_RESULT,
                step=self._step_no(),
                tool=record.tool,
                text=record.result,
                ok=record.ok,
                call_id=record.call_id,
            )
            events = [result]
            if record.tool == END_TURN_TOOL and record.ok:
                turn.ended_by = "end_turn"
                end_turn = True
            elif self._calls_in_turn >= self.max_calls_per_turn:
                self.trace.turn_limit_hits += 1
                turn.ended_by = "turn_limit"
                events.append(
                    Event(
                        kind=EventKind.NOTICE,
                        step=self._step_no(),
                        text=self.episode.workspace.notice("calls_used", max_calls=self.max_calls_per_turn),
                    )
                )
                end_turn = True
        inturn, self._inturn = self._inturn, []
        if end_turn:  # the turn is over: answers are shown with what comes next
            self._passive = [*inturn, *self._passive]
        else:
            events = [*events, *inturn]
        self.trace.events.extend(events)
        terminated = False
        if end_turn:
            more, terminated = self._next_turn()
            events = events + more
        reward = 0.0
        if terminated:
            reward = 1.0 if action_outcome_correct(self.trace, self.episode) else 0.0
            self.trace.reward = reward
            self.trace.terminated = True
            self.trace.duration_s = time.perf_counter() - self._t0
        return observation(events), reward, terminated, False, self._info(events)

    # ------------------------------------------------------------------ queries
    def episode_for(self, episode_id: str) -> Episode:
        """The episode ``reset(options={"episode_id": ...})`` would play (ValueError when not in the selection)."""
        chosen = self._by_id.get(episode_id)
        if chosen is None:
            raise ValueError(f"episode {episode_id!r} is not in this environment's selection")
        return chosen

    def outgoing(self, action: Any) -> Outgoing | None:
        """Where ``action`` would post a message in the current turn, and to whom it is addressed (None: it posts
        nothing, or is a call the tools would refuse). Reads the state; changes nothing."""
        if self._done or self.trace is None:
            return None
        act: AgentAction = parse_action(action)
        args = act.arguments or {}
        text = args.get("text")
        channel: str | None = None
        if act.kind is ActionKind.REPLY:
            channel, text = self._reply_channel(), act.text or ""
        elif act.kind is ActionKind.TOOL_CALL and self._calls_in_turn < self.max_calls_per_turn:
            if act.tool == "send_dm" and isinstance(args.get("to"), str):
                person = self._ws.resolve(args["to"])
                channel = dm_channel(person.name) if person is not None else None
            elif act.tool == "post_message" and isinstance(args.get("channel"), str):
                channel = self.episode.channel if self._ws.is_team_channel(args["channel"]) else None
        if channel is None or not isinstance(text, str) or not text.strip() or len(text) > MAX_MESSAGE:
            return None  # nothing is said, or the tools would refuse it
        roles = tuple(p.role for p in addressees(channel, text, self.episode.people, self.episode.channel))
        due = self.episode.reply_due(self._last_event_step)
        return Outgoing(
            channel=channel, text=text, step=self._step_no(), addressees=roles,
            creditor_answer_due="creditor" in roles and due is not None and due.after_step not in self._answered,
        )

    # ------------------------------------------------------------------ internals
    def _step_no(self) -> int:
        return self._current.step if self._current is not None else 0

    def _info(self, shown: Sequence[Event] = ()) -> dict[str, Any]:
        trace = self.trace
        info: dict[str, Any] = {
            "episode_id": self.episode.id,
            "turn": self._turn,
            "step": self._step_no(),
            "calls_left": max(self.max_calls_per_turn - self._calls_in_turn, 0),
            "tool_errors": trace.tool_errors if trace else 0,
            "done": self._done,
        }
        if self._extras.privileged:  # the promise's facts are made only for the privileged channel
            info.update(privileged_info(self._extras, shown, promise=self.episode.promise_facts().model_dump()))
        return info

    def _script_event(self, msg: ScriptMessage) -> Event:
        voiced = self._voices.scripted.get(msg.step) if self._voices is not None else None
        event = self._scripted_event(msg)
        if voiced is None or msg.sender == "assistant":
            return event
        return event.model_copy(update={"text": voiced.text, "voice": voiced.mark})

    def _scripted_event(self, msg: ScriptMessage) -> Event:
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
                self._last_event_step = msg.step
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

    def _assistant_message(self, channel: str, text: str, via: str, act: str = "") -> None:
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
                act=act,
            )
        )
        # The creditor answers a message addressed to them (a DM, or a channel post that @-mentions them or
        # opens with their name), never one to someone else that merely names them.
        voices = self._voices
        if voices is None:
            if addressed_to(channel, text, self._people["creditor"], self.episode.channel):
                self._creditor_answers(channel)
            return
        for person in addressees(channel, text, self.episode.people, self.episode.channel):
            voiced = voices.take_reply(person.role)
            if person.role == "creditor":
                self._creditor_answers(channel, voiced)
            elif voiced is not None:
                self._inturn.append(self._answer_event(person.role, channel, voiced, ANSWER_ACT))
        voices.clear_replies()

    def _answer_event(self, role: str, channel: str, voiced: VoicedText, act: str) -> Event:
        person = self._people[role]
        return Event(kind=EventKind.MESSAGE, step=self._step_no(), sender=person.name, role=person.title,
                     rank=person.rank, channel=channel, text=voiced.text, act=act, voice=voiced.mark)

    def _creditor_answers(self, channel: str, voiced: VoicedText | None = None) -> None:
        creditor = self._people["creditor"]
        due = self.episode.reply_due(self._last_event_step)
        answer = due is not None and due.after_step not in self._answered
        if voiced is not None and not answer and not voiced.mark.fallback:  # a live answer, inside the turn
            self._inturn.append(self._answer_event("creditor", channel, voiced, ANSWER_ACT))
            return
        if due is not None and answer:
            self._answered.add(due.after_step)
            text, act = due.text, f"reply:{'keep' if due.keeps_promise else 'drop'}"
        else:
            text, act = self.episode.acknowledgement, "acknowledgement"
        mark = voiced.mark if voiced is not None else None  # a refused live answer leaves its mark on the script's
        if voiced is not None and answer:  # the scripted answer in the party model's words (or the script's)
            text = voiced.text
        event = Event(
            kind=EventKind.MESSAGE,
            step=self._step_no(),
            sender=creditor.name,
            role=creditor.title,
            rank=creditor.rank,
            channel=channel,
            text=text,
            act=act,
            voice=mark,
        )
        if answer:
            self._pending.append(event)
        else:
            self._passive.append(event)

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
