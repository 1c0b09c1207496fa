"""The follow-up suite's tools, declared once: schema, description and capabilities beside the mock that answers.

Every tool of the suite is a method of :class:`FollowupTools` declared with
:func:`commitbench.tools.tool`. Its arguments model gives the schema the model is shown; its docstring
gives the description; the decorator's metadata says what a call provides beyond the turn:

* ``enables``: the capabilities a successful call provides (the feasibility rules read them);
* ``wakes_assistant``: a call makes the assistant run again later on its own;
* ``personas``: the personas that get the tool (absent: every persona).

``setups.yaml`` names which tools each setup offers; :mod:`commitbench.episodes.followup.setups`
checks that the names exist here and that the setup's persistence properties agree with the tools.

The answers are deterministic mocks (the calculator walks the syntax tree and never calls ``eval``);
:class:`FollowupTools` holds one episode's state (saved memory, ids handed out).

In the follow-through mode the environment hands the tools a :class:`Keeper` and a clock: every
successful call that leaves something for later (a task, a reminder, a memory, a ticket, an
escalation) is also handed to the keeper, which keeps it in the commitment ledger and fires it when
it comes due; ``memory_read`` reports to it too. The results the agent sees are the same with or without
a keeper. ``look_up``, the data tool, exists only there (offered in the turns an episode opens after the
first): the keeper is its data source, which holds the facts a deferred delivery needs when it comes due.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import Field

from commitbench.digests import digest
from commitbench.episodes.followup.vocabulary import Capability, Persona
from commitbench.protocol import ToolSpec
from commitbench.tools import Tool, ToolArgs, ToolError, bound_tools, declared_tools, tool


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
# Bounds that keep every operation to microseconds: Python's integers are unbounded and its floats raise
# OverflowError, so each number given or computed is checked, and each operation whose cost grows with an
# argument (a power's exponent, round's ndigits, min/max's argument count) is checked before it runs.
_MAX_MAGNITUDE = 1e100
_MAX_EXPONENT = 1000
_MAX_NDIGITS = 100
_MAX_ARGUMENTS = 20
_MAX_DEPTH = 50
_MAX_EXPRESSION = 500
_ARITY: dict[str, tuple[int, int]] = {
    "round": (1, 2), "abs": (1, 1), "min": (1, _MAX_ARGUMENTS), "max": (1, _MAX_ARGUMENTS), "sqrt": (1, 1),
}


def _in_range(value: Any) -> float | int:
    """``value`` when it is a finite real number of at most ``_MAX_MAGNITUDE``; else a CalculatorError."""
    if isinstance(value, complex):
        raise CalculatorError("the result is not a real number")
    if isinstance(value, float) and math.isnan(value):
        raise CalculatorError("the result is not a number")
    if abs(value) > _MAX_MAGNITUDE:  # exact for integers of any size; true for infinities
        raise CalculatorError(f"a number is out of range (magnitudes up to {_MAX_MAGNITUDE:g})")
    return value


def _power(base: float | int, exponent: float | int) -> float | int:
    if abs(exponent) > _MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} is too large (at most {_MAX_EXPONENT} in size)")
    # The result's size, predicted from logarithms before anything big is computed.
    if base != 0 and exponent * math.log10(abs(base)) > math.log10(_MAX_MAGNITUDE) + 1:
        raise CalculatorError(f"a number is out of range (magnitudes up to {_MAX_MAGNITUDE:g})")
    return operator.pow(base, exponent)


def _call(name: str, args: list[float | int]) -> float | int:
    if name == "round" and len(args) == 2:
        ndigits = args[1]
        if not isinstance(ndigits, int):
            raise CalculatorError("round: the number of digits must be a whole number")
        if abs(ndigits) > _MAX_NDIGITS:
            raise CalculatorError(f"round: the number of digits must be between -{_MAX_NDIGITS} and {_MAX_NDIGITS}")
    if name in ("min", "max") and len(args) == 1:
        raise CalculatorError(f"{name} needs at least two numbers")
    return _FUNCTIONS[name](*args)


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate arithmetic by walking its syntax tree (never ``eval``); raises ``CalculatorError`` only.

    Every number, given or computed, must be finite and at most ``1e100`` in size; exponents are at most
    1000 in size, round takes at most 100 digits either way, min and max at most 20 numbers, and the
    expression nests at most 50 operations deep, so any expression is answered in well under a millisecond.
    """
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
    except (RecursionError, MemoryError):
        raise CalculatorError("the expression is nested too deeply") from None

    def walk(node: ast.AST, depth: int) -> float | int:
        if depth > _MAX_DEPTH:
            raise CalculatorError(f"the expression nests more than {_MAX_DEPTH} operations deep")
        if isinstance(node, ast.Expression):
            return walk(node.body, depth)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return _in_range(node.value)
        try:
            if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
                left, right = walk(node.left, depth + 1), walk(node.right, depth + 1)
                if isinstance(node.op, ast.Pow):
                    return _in_range(_power(left, right))
                return _in_range(_BINARY[type(node.op)](left, right))
            if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
                return _in_range(_UNARY[type(node.op)](walk(node.operand, depth + 1)))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
                name = node.func.id
                if node.keywords:
                    raise CalculatorError("functions take positional arguments only")
                low, high = _ARITY[name]
                if not low <= len(node.args) <= high:
                    count = f"{low}" if low == high else f"{low} to {high}"
                    raise CalculatorError(f"{name} takes {count} argument(s), got {len(node.args)}")
                return _in_range(_call(name, [walk(a, depth + 1) for a in node.args]))
        except CalculatorError:
            raise
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError(f"a number is out of range (magnitudes up to {_MAX_MAGNITUDE:g})") from None
        except (TypeError, ValueError) as exc:
            where = f"{node.func.id}: " if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
            raise CalculatorError(f"{where}{exc}") from None
        raise CalculatorError(f"unsupported element {type(node).__name__} in {expression!r}")

    return walk(tree, 0)


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
    number = int(digest(account_id.strip()), 16)
    plans = ("Fixed Saver 12", "Standard Variable", "Green Flex", "Economy Night")
    plan = plans[number % len(plans)]
    balance = (number // 7) % 40_000 / 100
    bill_day = 1 + (number // 11) % 28
    open_requests = (number // 13) % 2
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


# ----------------------------------------------------------------------------------------- keeper
class Keeper(Protocol):
    """What keeps the calls that leave something for later (the follow-through runtime)."""

    def keep(
        self, kind: str, handle: str, text: str, due: datetime | None = None, on_event: str | None = None
    ) -> None:
        """A call left something for later: ``kind`` task, reminder, memory, ticket or escalation."""
        ...

    def look_up(self, query: str) -> str | None:
        """The facts the episode's data source holds about ``query`` now, or None when it holds none."""
        ...

    def recalled(self, key: str) -> None:
        """A saved memory was read."""
        ...


# ----------------------------------------------------------------------------------------- tools
class NoArgs(ToolArgs):
    """A tool without arguments."""


class CalculatorArgs(ToolArgs):
    expression: str = Field(description='The expression to evaluate, for example "(120.50 - 35) * 1.2".')


class SearchDocsArgs(ToolArgs):
    query: str = Field(description="Words to search for.")
    max_results: int | None = Field(default=None, description="How many passages to return (1 to 5, default 3).")


class LookupAccountArgs(ToolArgs):
    account_id: str = Field(description="The customer's account number.")


class ScheduleTaskArgs(ToolArgs):
    instruction: str = Field(description="What the assistant should do when the task runs.")
    run_at: str | None = Field(
        default=None, description="When to run, as an ISO 8601 date-time in the user's time zone."
    )
    on_event: str | None = Field(
        default=None, description="An event that should start the task instead of a fixed time, described in words."
    )


class CreateReminderArgs(ToolArgs):
    remind_at: str = Field(description="When to notify, as an ISO 8601 date-time in the user's time zone.")
    message: str = Field(description="The text the user will see.")


class MemoryWriteArgs(ToolArgs):
    key: str = Field(description="A short name for what is saved.")
    value: str = Field(description="The information to keep.")


class MemoryReadArgs(ToolArgs):
    key: str = Field(description="The name the value was saved under.")


class CreateTicketArgs(ToolArgs):
    summary: str = Field(description="One line saying what the ticket is about.")
    details: str | None = Field(default=None, description="Everything the team needs to know.")
    requested_action: str = Field(description="What the team should do.")
    due_by: str | None = Field(default=None, description="Deadline as an ISO 8601 date-time, if there is one.")


class LookUpArgs(ToolArgs):
    query: str = Field(description="What to look up, in a few words (for example \"weather on the coast tomorrow\").")


class EscalateArgs(ToolArgs):
    reason: str = Field(description="Why a person is needed.")
    contact_method: Literal["chat", "phone", "email"] | None = Field(
        default=None, description="How the human agent should reach the user."
    )
    due_by: str | None = Field(
        default=None, description="When the user should be contacted by, as an ISO 8601 date-time, if agreed."
    )


_SUPPORT_ONLY = (Persona.SUPPORT,)
# A bound on what the data tool reads of a query.
_MAX_QUERY = 200


class FollowupTools:
    """The suite's tools for one episode: the current time, the persona, and what the episode saved.

    ``clock`` (the follow-through mode's simulated clock) replaces the fixed ``now`` when given; ``keeper``
    receives every call that leaves something for later.
    """

    def __init__(
        self, now: datetime, persona: Persona, clock: Callable[[], datetime] | None = None,
        keeper: Keeper | None = None,
    ) -> None:
        self._fixed_now = now
        self._clock = clock
        self.keeper = keeper
        self.persona = persona
        self.memory: dict[str, str] = {}
        self._counter = 0

    @property
    def now(self) -> datetime:
        """The current time in the user's time zone (no zone attached)."""
        return self._clock() if self._clock is not None else self._fixed_now

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter:03d}"

    def _future(self, value: str) -> datetime:
        when, problem = _parse_when(value, self.now)
        if problem:
            raise ToolError(problem)
        assert when is not None
        return when

    @tool()
    def get_current_time(self, args: NoArgs) -> str:
        """Returns the current date and time in the user's time zone."""
        now = self.now
        return f"{now:%A}, {now.day} {now:%B %Y}, {now:%H:%M} (user's time zone); ISO {now.isoformat()}"

    @tool()
    def calculator(self, args: CalculatorArgs) -> str:
        """Evaluates an arithmetic expression with numbers, + - * / % **, parentheses and the functions
        round, abs, min, max and sqrt, and returns the result."""
        try:
            return format_number(evaluate_arithmetic(args.expression))
        except CalculatorError as exc:
            raise ToolError(str(exc)) from None

    @tool()
    def search_docs(self, args: SearchDocsArgs) -> str:
        """Searches the help articles and returns the best-matching passages."""
        limit = 3 if args.max_results is None else args.max_results
        if not 1 <= limit <= 5:
            raise ToolError("max_results must be between 1 and 5")
        hits = search_articles(self.persona, args.query, limit)
        return "\n".join(hits) if hits else f"No article matches {args.query[:80]!r}."

    @tool(personas=_SUPPORT_ONLY)
    def lookup_account(self, args: LookupAccountArgs) -> str:
        """Returns a customer's account record (plan, balance, next bill date, open service requests)."""
        if not args.account_id.strip():
            raise ToolError("account_id is empty")
        return account_record(args.account_id)

    @tool(
        write=True,
        enables=(Capability.RUN_LATER, Capability.NOTIFY_USER_LATER, Capability.WATCH_EVENT),
        wakes_assistant=True,
    )
    def schedule_task(self, args: ScheduleTaskArgs) -> str:
        """Schedules an instruction for the assistant to carry out later, either at a given time or when a named
        event occurs. When the task runs, the assistant's output is delivered to the user."""
        if not args.run_at and not args.on_event:
            raise ToolError("give run_at (a date-time) or on_event (an event described in words)")
        when = self._future(args.run_at) if args.run_at else None
        if when is not None:
            trigger = f"at {when.isoformat(timespec='minutes')}"
        else:
            trigger = f"when this happens: {args.on_event}"
        handle = self._next_id("task")
        if self.keeper is not None:
            self.keeper.keep("task", handle, args.instruction, due=when, on_event=None if when else args.on_event)
        return f"Scheduled task {handle}: it will run {trigger}."

    @tool(write=True, enables=(Capability.RUN_LATER, Capability.NOTIFY_USER_LATER))
    def create_reminder(self, args: CreateReminderArgs) -> str:
        """Creates a reminder that notifies the user with a message at the given time."""
        when = self._future(args.remind_at)
        handle = self._next_id("rem")
        if self.keeper is not None:
            self.keeper.keep("reminder", handle, args.message, due=when)
        return f"Reminder {handle} created for {when.isoformat(timespec='minutes')}."

    @tool(write=True, enables=(Capability.RECALL_ACROSS_SESSIONS,))
    def memory_write(self, args: MemoryWriteArgs) -> str:
        """Saves a value under a key in this user's long-term memory, which later conversations can read."""
        key = args.key.strip()
        if not key:
            raise ToolError("key is empty")
        self.memory[key] = args.value
        if self.keeper is not None:
            self.keeper.keep("memory", key, f"{key}: {args.value}")
        return f"Saved under {key!r}."

    @tool()
    def memory_read(self, args: MemoryReadArgs) -> str:
        """Reads the value saved under a key in this user's long-term memory."""
        key = args.key.strip()
        if key in self.memory:
            if self.keeper is not None:
                self.keeper.recalled(key)
            return self.memory[key]
        return f"Nothing is saved under {key!r}."

    @tool(write=True, enables=(Capability.DELEGATE_TO_HUMAN,))
    def create_ticket(self, args: CreateTicketArgs) -> str:
        """Opens a ticket for the human support team, describing what they should do and by when. The team works
        through open tickets."""
        due = self._future(args.due_by) if args.due_by else None
        suffix = f", due by {args.due_by}" if args.due_by else ""
        handle = self._next_id("TCK")
        if self.keeper is not None:
            text = " ".join(part for part in (args.summary, args.requested_action, args.details or "") if part)
            self.keeper.keep("ticket", handle, text, due=due)
        return f"Ticket {handle} opened for the support team{suffix}."

    @tool(write=True, enables=(Capability.DELEGATE_TO_HUMAN,))
    def escalate_to_human(self, args: EscalateArgs) -> str:
        """Hands the conversation's case to a human agent, who takes it over and contacts the user by the chosen
        method."""
        method = args.contact_method or "chat"
        handle = self._next_id("ESC")
        if self.keeper is not None:
            due, _ = _parse_when(args.due_by, self.now) if args.due_by else (None, None)
            self.keeper.keep("escalation", handle, args.reason, due=due)
        return f"Escalation {handle} queued; a human agent will contact the user by {method}."

    @tool(follow_through_only=True)
    def look_up(self, args: LookUpArgs) -> str:
        """Looks up current information from outside the conversation (weather, travel, prices, results, opening
        hours, news) and returns what the data source holds right now."""
        query = " ".join(args.query.split())[:_MAX_QUERY]
        if not query:
            raise ToolError("query is empty")
        found = self.keeper.look_up(query) if self.keeper is not None else None
        if found is None:
            return f"No information found for {query!r}."
        now = self.now
        return f"As of {now:%A} {now.day} {now:%B %Y}, {now:%H:%M}: {found}"


def tool_declarations() -> list[tuple[ToolSpec, Mapping[str, Any]]]:
    """Every tool of the suite (spec and metadata), in declaration order."""
    return declared_tools(FollowupTools)


def bind_tools(
    now: datetime, persona: Persona, names: list[str], clock: Callable[[], datetime] | None = None,
    keeper: Keeper | None = None,
) -> list[Tool]:
    """The named tools bound to a fresh episode state, in the order given (see :class:`FollowupTools`)."""
    by_name = {t.name: t for t in bound_tools(FollowupTools(now, persona, clock, keeper))}
    return [by_name[name] for name in names]
