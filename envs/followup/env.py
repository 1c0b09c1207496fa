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
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import math
import operator
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.envs import FOLLOWUP_ENV_ID
from commitbench.envs.spaces import action_space, observation_space
from commitbench.episodes.followup.requests import FollowupRequest
from commitbench.episodes.followup.setups import SuiteSetups, load_setups
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId, Variant
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

USER_NAME = "User"
USER_CHANNEL = "chat"



class FollowUpEpisode(BaseModel):
    """One request in one setup, variant and persona."""

    model_config = ConfigDict(frozen=True)

    request: FollowupRequest = Field(description="The user's request with its context.")
    setup: SetupId = Field(description="Which tools exist and what persists.")
    variant: Variant = Field(description="Whether the system prompt states what persists.")
    persona: Persona = Field(description="Generic assistant or utility support agent.")
    doability: Doability = Field(description="Whether the setup can fully serve the request.")

    @property
    def id(self) -> str:
        return f"{self.request.id}:{self.setup.value}:{self.variant.value}:{self.persona.value}"

    def factors(self) -> dict[str, str | int]:
        return {
            "request_id": self.request.id,
            "category": self.request.category.value,
            "source": self.request.source.dataset.value,
            "setup": self.setup.value,
            "variant": self.variant.value,
            "persona": self.persona.value,
            "doability": self.doability.value,
            "required_capabilities": ",".join(c.value for c in self.request.required_capabilities),
        }


# ----------------------------------------------------------------------------------- calculator
class CalculatorError(ValueError):
    """An expression the calculator refuses; the message says why."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"round": round, "abs": abs, "min": min, "max": max, "sqrt": math.sqrt}
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 1e100
_MAX_EXPRESSION = 500


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate arithmetic by walking its syntax tree (never ``eval``); raises ``CalculatorError``."""
    text = expression.strip().replace("^", "**")
    if not text:
        raise CalculatorError("the expression is empty")
    if len(text) > _MAX_EXPRESSION:
        raise CalculatorError(f"the expression is longer than {_MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise CalculatorError(f"cannot parse {expression!r}: {reason}") from None

    def walk(node: ast.AST) -> float | int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
                raise CalculatorError(f"exponent {right} is too large")
            try:
                value = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalculatorError("division by zero") from None
            if isinstance(value, complex):
                raise CalculatorError("the result is not a real number")
            if abs(value) > _MAX_MAGNITUDE:
                raise CalculatorError("the result is too large")
            return value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            if node.keywords:
                raise CalculatorError("functions take positional arguments only")
            args = [walk(a) for a in node.args]
            try:
                return _FUNCTIONS[node.func.id](*args)
            except (TypeError, ValueError) as exc:
                raise CalculatorError(f"{node.func.id}: {exc}") from None
        raise CalculatorError(f"unsupported element {type(node).__name__} in {expression!r}")

    return walk(tree)


def format_number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


# ----------------------------------------------------------------------------------- documents
HELP_ARTICLES: dict[Persona, tuple[tuple[str, str], ...]] = {
    Persona.GENERIC: (
        ("Time zones", "Times are given in the user's local time zone unless another zone is named."),
        ("Units", "A kilometre is 1,000 metres; a mile is about 1.609 kilometres; a pound is about 0.454 kg."),
        ("Writing tips", "Short sentences and one idea per paragraph make notes and e-mails easier to read."),
        ("Packing lists", "A weekend packing list usually covers clothes, toiletries, chargers and documents."),
        ("Budgeting", "A monthly budget lists income, fixed costs and savings; the rest is spending money."),
    ),
    Persona.SUPPORT: (
        ("Bills", "Bills are issued monthly on the account's bill date and are due 14 days later."),
        ("Payments", "Payments by card or bank transfer appear on the account within two working days."),
        ("Meter readings", "Meter readings can be submitted any day; a reading near the bill date gives the "
         "most accurate bill."),
        ("Outages", "Planned outages are announced 48 hours ahead; unplanned outages are usually fixed within "
         "four hours."),
        ("Moving home", "Customers moving home give the move date and a final meter reading; the final bill "
         "follows within two weeks."),
        ("Payment plans", "Customers in arrears can spread the balance over up to 12 monthly payments."),
    ),
}

_WORD = re.compile(r"[a-z]+")


def search_articles(persona: Persona, query: str, max_results: int = 3) -> list[str]:
    """Articles ranked by shared words with the query (ties keep file order); empty when none share one."""
    words = set(_WORD.findall(query.lower()))
    scored = []
    for index, (title, body) in enumerate(HELP_ARTICLES[persona]):
        article_words = set(_WORD.findall(f"{title} {body}".lower()))
        overlap = len(words & article_words)
        if overlap:
            scored.append((-overlap, index, f"{title}: {body}"))
    return [text for _, _, text in sorted(scored)[:max_results]]


def account_record(account_id: str) -> str:
    """A deterministic account record derived from the account number."""
    digest = int(hashlib.sha256(account_id.strip().encode()).hexdigest(), 16)
    plans = ("Fixed Saver 12", "Standard Variable", "Green Flex", "Economy Night")
    plan = plans[digest % len(plans)]
    balance = (digest // 7) % 40_000 / 100
    bill_day = 1 + (digest // 11) % 28
    open_requests = (digest // 13) % 2
    return (
        f"Account {account_id.strip()}: plan {plan}; balance {balance:.2f} due; next bill on "
        f"{bill_day} October 2026; open service requests: {open_requests}."
    )


def _parse_when(value: str, now: datetime) -> tuple[datetime | None, str | None]:
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None, f"{value!r} is not an ISO 8601 date-time (for example 2026-10-02T09:00)"
    if when.tzinfo is not None:
        when = when.replace(tzinfo=None)
    if when <= now:
        return None, f"{value!r} is not in the future (it is now {now.isoformat(timespec='minutes')})"
    return when, None


# ----------------------------------------------------------------------------------- selection
def _as_list(value: Any, enum: type, what: str) -> list[Any] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, (str, enum)) else list(value)
    out = []
    for item in items:
        try:
            out.append(enum(item))
        except ValueError:
            known = ", ".join(e.value for e in enum)
            raise ValueError(f"unknown {what} {item!r} (known: {known})") from None
    return out


def build_episodes(
    requests: Sequence[FollowupRequest],
    setups: Sequence[SetupId],
    variants: Sequence[Variant],
    personas: Sequence[Persona] | None,
    doability: Callable[[FollowupRequest, SetupId], Doability],
) -> list[FollowUpEpisode]:
    """Every (request, setup, variant, persona) combination; ``personas=None`` keeps each request's own."""
    episodes = []
    for request, setup, variant in itertools.product(requests, setups, variants):
        for persona in personas if personas is not None else [request.persona]:
            episodes.append(
                FollowUpEpisode(
                    request=request, setup=setup, variant=variant, persona=persona,
                    doability=doability(request, setup),
                )
            )
    return episodes


def _packaged_doability(request: FollowupRequest, setup: SetupId) -> Doability:
    from commitbench.episodes.followup.doability import load_doability

    return load_doability().lookup(request.id, request.category, setup)


class FollowUpEnv(gym.Env[dict[str, Any], str]):
    """A single-turn follow-up request in one of the suite's setups."""

    metadata = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium convention)

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
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if max_tool_calls < 1:
            raise ValueError("max_tool_calls must be at least 1")
        self.suite = suite or load_setups()
        if requests is None:
            from commitbench.episodes.followup.requests import load_requests

            requests = load_requests()
        setups = _as_list(setup, SetupId, "setup") or list(SetupId)
        variants = _as_list(variant, Variant, "variant") or [Variant.INFERRED]
        personas = _as_list(persona, Persona, "persona")
        categories = _as_list(category, RequestCategory, "category")
        chosen = list(requests)
        if categories is not None:
            chosen = [r for r in chosen if r.category in categories]
        if request_id is not None:
            wanted = [request_id] if isinstance(request_id, str) else list(request_id)
            known = {r.id for r in chosen}
            unknown = [w for w in wanted if w not in known]
            if unknown:
                raise ValueError(f"unknown request id(s) {unknown} in this selection")
            chosen = [r for r in chosen if r.id in wanted]
        self.pool = build_episodes(chosen, setups, variants, personas, doability or _packaged_doability)
        if not self.pool:
            raise ValueError("no episode matches the selection")
        self._by_id = {e.id: e for e in self.pool}
        self.render_mode = render_mode
        self.max_tool_calls = max_tool_calls
        self.observation_space = observation_space()
        self.action_space = action_space()
        self._extra_tools: dict[str, tuple[ToolSpec, ToolHandler]] = {}
        self._variant_override: Variant | None = None
        self._system_sections: dict[str, Callable[[FollowUpEpisode], str]] = {}
        self.episode: FollowUpEpisode = self.pool[0]
        self.trace: EpisodeTrace | None = None
        self._done = True
        self._memory: dict[str, str] = {}
        self._counter = 0

    # ----------------------------------------------------------------- extension
    def register_tool(self, spec: ToolSpec, handler: ToolHandler) -> None:
        """Add a tool (for wrappers). Takes effect at the next reset."""
        if spec.name in {t.name for t in self.suite.tools}:
            raise ValueError(f"tool {spec.name!r} already exists")
        self._extra_tools[spec.name] = (spec, handler)

    def set_variant_override(self, variant: Variant | None) -> None:
        """Play every episode in ``variant`` (wrappers use it); None restores the episode's own."""
        self._variant_override = variant

    def add_system_section(self, name: str, render: Callable[[FollowUpEpisode], str]) -> None:
        """A block appended to every system prompt, rendered per episode (wrappers use it for cards)."""
        if name in self._system_sections:
            raise ValueError(f"system section {name!r} is already present")
        self._system_sections[name] = render

    @property
    def variant(self) -> Variant:
        return self._variant_override or self.episode.variant

    @property
    def tools(self) -> list[ToolSpec]:
        ep = self.episode
        return self.suite.tool_specs(ep.setup, ep.persona) + [spec for spec, _ in self._extra_tools.values()]

    def system_prompt(self) -> str:
        ep = self.episode
        parts = [self.suite.system_prompt(ep.setup, ep.persona, self.variant)]
        parts.extend(render(ep).strip() for render in self._system_sections.values())
        return "\n\n".join(p for p in parts if p)

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
        ep = self.episode
        self._tool_specs = {t.name: t for t in self.tools}
        self._calls = 0
        self._memory = {}
        self._counter = 0
        self._done = False
        self._t0 = time.perf_counter()
        factors = ep.factors()
        factors["variant"] = self.variant.value
        self.trace = EpisodeTrace(env_id=FOLLOWUP_ENV_ID, episode_id=ep.id, factors=factors, started_at=time.time())
        system = Event(kind=EventKind.SYSTEM, step=0, text=self.system_prompt())
        user = Event(
            kind=EventKind.MESSAGE, step=0, sender=USER_NAME, role="user", channel=USER_CHANNEL,
            text=ep.request.user_message, act="request",
        )
        self.trace.events.extend([system, user])
        self.trace.turns.append(TurnRecord(index=0, opened_by=user))
        obs = {"events": (system.to_obs(), user.to_obs()), "context": ""}
        info = self._info()
        info["tools"] = [t.to_openai() for t in self.tools]
        info["system_prompt"] = system.text
        info["user_message"] = user.text
        info["factors"] = dict(factors)
        return obs, info

    # ---------------------------------------------------------------------- step
    def step(self, action: Any):
        if self._done or self.trace is None:
            notice = Event(kind=EventKind.NOTICE, step=0, text="The episode is over; call reset().")
            return {"events": (notice.to_obs(),), "context": ""}, 0.0, True, False, self._info()
        self.trace.steps += 1
        act = parse_action(action)
        turn = self.trace.turns[0]
        events: list[Event] = []
        if act.kind is ActionKind.REPLY:
            text = act.text or ""
            turn.reply, turn.reply_channel, turn.ended_by = text, USER_CHANNEL, "reply"
            self.trace.events.append(
                Event(kind=EventKind.ASSISTANT, step=0, sender="assistant", role="assistant",
                      channel=USER_CHANNEL, text=text, tool="reply")
            )
            self._finish()
        elif act.kind is ActionKind.END_TURN:
            turn.ended_by = "end_turn"
            self._finish()
        else:
            record = self._run_tool(act)
            turn.calls.append(record)
            events.append(
                Event(kind=EventKind.TOOL_RESULT, step=0, tool=record.tool, text=record.result, ok=record.ok,
                      call_id=record.call_id)
            )
            if self._calls >= self.max_tool_calls:
                self.trace.turn_limit_hits += 1
                turn.ended_by = "turn_limit"
                events.append(
                    Event(kind=EventKind.NOTICE, step=0,
                          text=f"You used all {self.max_tool_calls} tool calls; the conversation is over.")
                )
                self._finish()
            self.trace.events.extend(events)
        obs = {"events": tuple(e.to_obs() for e in events), "context": ""}
        return obs, 0.0, self._done, False, self._info()

    def _finish(self) -> None:
        assert self.trace is not None
        self._done = True
        self.trace.terminated = True
        self.trace.duration_s = time.perf_counter() - self._t0

    def _info(self) -> dict[str, Any]:
        trace = self.trace
        return {
            "episode_id": self.episode.id,
            "turn": 0,
            "calls_left": max(self.max_tool_calls - getattr(self, "_calls", 0), 0),
            "tool_errors": trace.tool_errors if trace else 0,
            "done": self._done,
        }

    # ------------------------------------------------------------------ tools
    def _run_tool(self, act: AgentAction) -> ToolCallRecord:
        assert self.trace is not None
        self._calls += 1
        record = dispatch_tool_call(act, self._tool_specs, lambda n, a: (*self._execute(n, a), ""), 0, 0)
        if is_agent_error(record):
            self.trace.tool_errors += 1
            if record.error_kind == "invalid_action":
                self.trace.invalid_actions += 1
        return record

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter:03d}"

    def _execute(self, name: str, args: dict[str, Any]) -> tuple[bool, str]:
        """Run a validated call of a suite tool (or a registered one). Returns (ok, text)."""
        now = self.suite.current_time
        persona = self.episode.persona
        if name == "get_current_time":
            return True, f"{now:%A}, {now.day} {now:%B %Y}, {now:%H:%M} (user's time zone); ISO {now.isoformat()}"
        if name == "calculator":
            try:
                return True, format_number(evaluate_arithmetic(args["expression"]))
            except CalculatorError as exc:
                return False, str(exc)
        if name == "search_docs":
            limit = args.get("max_results", 3)
            if not 1 <= limit <= 5:
                return False, "max_results must be between 1 and 5"
            hits = search_articles(persona, args["query"], limit)
            return True, ("\n".join(hits) if hits else f"No article matches {args['query']!r}.")
        if name == "lookup_account":
            if not args["account_id"].strip():
                return False, "account_id is empty"
            return True, account_record(args["account_id"])
        if name == "schedule_task":
            run_at, on_event = args.get("run_at"), args.get("on_event")
            if not run_at and not on_event:
                return False, "give run_at (a date-time) or on_event (an event described in words)"
            if run_at:
                when, problem = _parse_when(run_at, now)
                if problem:
                    return False, problem
                assert when is not None
                trigger = f"at {when.isoformat(timespec='minutes')}"
            else:
                trigger = f"when this happens: {on_event}"
            return True, f"Scheduled task {self._next_id('task')}: it will run {trigger}."
        if name == "create_reminder":
            when, problem = _parse_when(args["remind_at"], now)
            if problem:
                return False, problem
            assert when is not None
            return True, f"Reminder {self._next_id('rem')} created for {when.isoformat(timespec='minutes')}."
        if name == "memory_write":
            key = args["key"].strip()
            if not key:
                return False, "key is empty"
            self._memory[key] = args["value"]
            return True, f"Saved under {key!r}."
        if name == "memory_read":
            key = args["key"].strip()
            if key in self._memory:
                return True, self._memory[key]
            return True, f"Nothing is saved under {key!r}."
        if name == "create_ticket":
            due = args.get("due_by")
            if due:
                _, problem = _parse_when(due, now)
                if problem:
                    return False, problem
            suffix = f", due by {due}" if due else ""
            return True, f"Ticket {self._next_id('TCK')} opened for the support team{suffix}."
        if name == "escalate_to_human":
            method = args.get("contact_method", "chat")
            return True, f"Escalation {self._next_id('ESC')} queued; a human agent will contact the user by {method}."
        spec_handler = self._extra_tools.get(name)
        if spec_handler is None:
            return False, f"no handler for tool {name!r}"
        return spec_handler[1](args)

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
