"""What every intervention shares: a stable name, a slot in the stack, and acting through reset and step only.

An intervention is a gymnasium wrapper that changes what the agent is told or what its final reply
becomes, never what happens in the scripted world. It never reaches into the environment it wraps:

* at ``reset`` it hands the environment its prompt sections, tools and settings through the reset
  options (:meth:`Intervention.extras`, see :mod:`commitbench.extras`); the environment records
  them on the trace;
* after every step it may show a *context section* (dynamic state) in ``observation["context"]``,
  which agents show last so the stable prompt prefix stays cacheable; every intervention of the
  stack rebuilds the whole context in a fixed slot order (:func:`compose_context`);
* it may change the agent's action in ``step`` (the claim guard, detect-and-rewrite);
* when it needs what the script knows (an oracle store follows who released the promise), it asks
  for the privileged channel (``privileged = True``): it then sees the annotations in ``info`` and
  removes them before the agent does, unless a wrapper further out asked for them too.

Stacking rules (:func:`check_stack_members`): at most one intervention per slot (one release policy,
one oracle store, one ledger, one claim guard, ...), plus pairwise refusals a class declares
(:meth:`Intervention.refuses`). The registry applies the same function to configs before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from itertools import combinations
from typing import Any, ClassVar, SupportsFloat

import gymnasium as gym

from commitbench.digests import digest
from commitbench.envs.common import PRIVILEGED_KEY
from commitbench.extras import EnvExtras, add_extras, extras_of
from commitbench.textslots import SuppliedTexts


class InterventionError(ValueError):
    """An intervention cannot be applied: bad parameter, wrong environment or a refused combination."""


@lru_cache(maxsize=64)
def prompt_text(filename: str) -> str:
    """A text shipped in ``oracles/prompts`` (trailing whitespace removed)."""
    return resources.files("commitbench.oracles").joinpath("prompts", filename).read_text(encoding="utf-8").rstrip()


def supplied_texts(env: gym.Env[Any, Any]) -> SuppliedTexts | None:
    """The texts the environment under an intervention was given for the papers' slots (None: the project's
    wording; :mod:`commitbench.textslots`)."""
    texts = getattr(env.unwrapped, "texts", None)
    return texts if isinstance(texts, SuppliedTexts) else None


def text_hash(*texts: str) -> str:
    return digest(*texts, sep="\x00")


class Intervention(gym.Wrapper[dict[str, Any], Any, dict[str, Any], Any], gym.utils.RecordConstructorArgs):
    """Base of every intervention (see the module docstring).

    Subclasses set ``kind``, ``slot``, ``slot_plural``, ``order`` and ``env_ids``, and override any of
    :meth:`param`, :meth:`extras`, :meth:`prepare`, :meth:`begin`, :meth:`observe`, :meth:`context_section`,
    :meth:`act` and :meth:`refuses`.
    """

    kind: ClassVar[str] = ""
    slot: ClassVar[str] = ""
    slot_plural: ClassVar[str] = ""
    order: ClassVar[int] = 100  # position of its prompt and context sections among the stack's
    env_ids: ClassVar[frozenset[str]] = frozenset()
    privileged: ClassVar[bool] = False
    # The languages the intervention's own words (tool descriptions, notes, a prompt paragraph) are written in;
    # None: it shows no words of its own, or only the episode's. An environment whose episodes are in another
    # language refuses it when it is made, rather than mixing languages in front of the agent.
    languages: ClassVar[frozenset[str] | None] = None

    def __init__(self, env: gym.Env[Any, Any], **params: Any) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, **params)
        gym.Wrapper.__init__(self, env)
        env_id = getattr(type(env.unwrapped), "ENV_ID", None)
        if env_id not in self.env_ids:
            wraps, found = ", ".join(sorted(self.env_ids)), env_id or type(env.unwrapped).__name__
            raise InterventionError(f"{type(self).__name__} wraps {wraps}, not {found}")
        self._check_languages(env)
        members = [(w.name, type(w)) for w in intervention_stack(env)]
        check_stack_members([*members, (self.name, type(self))])
        self._strip = False

    def words_languages(self) -> frozenset[str] | None:
        """The languages this instance's own words are in (None: it shows none of its own)."""
        return self.languages

    def _check_languages(self, env: gym.Env[Any, Any]) -> None:
        written = self.words_languages()
        if written is None:
            return
        pool = getattr(env.unwrapped, "pool", ())
        played = {str(getattr(getattr(e, "language", None), "value", "en")) for e in pool}
        missing = sorted(played - written)
        if missing:
            raise InterventionError(
                f"{self.name} is written in {', '.join(sorted(written))} only, and these episodes are in "
                f"{', '.join(missing)}: play it on English episodes (docs/languages.md lists what each intervention "
                "supports)"
            )

    # -------------------------------------------------------------- identity
    def param(self) -> str:
        """The parameter that enters the name ('' for none)."""
        return ""

    @property
    def name(self) -> str:
        param = self.param()
        return f"{self.kind}:{param}" if param else self.kind

    @classmethod
    def refuses(cls, name: str, other: type[Intervention], other_name: str) -> str | None:
        """Why this intervention (named ``name``) cannot share a stack with another; None when it can."""
        return None

    # -------------------------------------------------------------- hooks
    def extras(self) -> EnvExtras:
        """What this intervention hands the environment at reset (prompt sections, tools, settings)."""
        return EnvExtras()

    def begin(self, info: dict[str, Any]) -> None:
        """Reset per-episode state from the reset's ``info`` (privileged facts included when asked for)."""

    def observe(self, event: dict[str, Any], annotation: dict[str, Any] | None) -> None:
        """Update state from one event the agent observes (``annotation`` when privileged)."""

    def context_section(self) -> str:
        """Text shown after the latest message ('' for none)."""
        return ""

    def act(self, action: Any) -> Any:
        """The action to pass on for the agent's ``action`` (unchanged by default)."""
        return action

    async def prepare(self, options: Mapping[str, Any] | None) -> None:
        """Await what this intervention needs before the episode that ``options`` picks is reset (model calls
        that depend on the episode alone); nothing by default. :func:`play_reset` calls it."""

    async def review(self, action: Any) -> None:
        """Await what this intervention needs before ``action`` reaches the environment (the verdict of a
        harness service that calls a model, say); nothing by default. :func:`play_step` calls it."""

    # -------------------------------------------------------------- gymnasium
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        extras = self.extras()
        if self.privileged:
            self._strip = not extras_of(options).privileged  # nobody further out asked for the channel
            extras = extras.model_copy(update={"privileged": (*extras.privileged, self.name)})
        options = add_extras(options, extras)
        obs, info = self.env.reset(seed=seed, options=options)
        self.begin(info)
        return self._after(obs, info)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(self.act(action))
        obs, info = self._after(obs, info)
        return obs, reward, terminated, truncated, info

    def _after(self, obs: dict[str, Any], info: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        script = info.get(PRIVILEGED_KEY) if self.privileged else None
        notes = script["annotations"] if isinstance(script, dict) else None
        for index, event in enumerate(obs["events"]):
            self.observe(event, notes[index] if notes is not None else None)
        obs = {**obs, "context": compose_context(intervention_stack(self))}
        if self._strip:
            info = {key: value for key, value in info.items() if key != PRIVILEGED_KEY}
        return obs, info


async def play_reset(
    env: gym.Env[Any, Any], *, seed: int | None = None, options: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """``env.reset(seed, options)`` after every intervention of the stack has prepared the episode (outermost
    first): the one way to reset an environment an agent plays, as :func:`play_step` is the one way to step it."""
    for wrapper in reversed(intervention_stack(env)):
        await wrapper.prepare(options)
    return env.reset(seed=seed, options=options)


async def play_step(env: gym.Env[Any, Any], action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
    """``env.step(action)`` after every intervention of the stack has reviewed the action (outermost first).

    The one way to step an environment an agent plays: an intervention whose decision needs a model call
    (the detect-and-rewrite fix's flagger) makes it here, awaited, rather than blocking inside ``step``.
    """
    for wrapper in reversed(intervention_stack(env)):
        await wrapper.review(action)
    return env.step(action)


# Builds the wrapper: (env, params, services) -> env.
InterventionFactory = Callable[[gym.Env[Any, Any], Mapping[str, Any], Mapping[str, Any]], gym.Env[Any, Any]]


@dataclass(frozen=True)
class InterventionEntry:
    """One registered intervention: its name, class (slot, environments, stacking rules) and factory."""

    name: str
    cls: type[Intervention]
    factory: InterventionFactory
    summary: str = ""
    params: tuple[str, ...] = field(default=())
    # Services of the harness the intervention uses (their identity enters the run key of its cells).
    services: tuple[str, ...] = field(default=())

    @property
    def env_ids(self) -> frozenset[str]:
        return self.cls.env_ids


def intervention_stack(env: gym.Env[Any, Any]) -> list[Intervention]:
    """The interventions wrapped around an environment, innermost first."""
    found: list[Intervention] = []
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, Intervention):
            found.append(current)
        current = current.env
    return list(reversed(found))


def intervention_names(env: gym.Env[Any, Any]) -> list[str]:
    """Names of the interventions around ``env``, innermost first (the order of ``trace.interventions``)."""
    return [w.name for w in intervention_stack(env)]


def compose_context(stack: Sequence[Intervention]) -> str:
    """Every context section of the stack, in slot order, separated by blank lines."""
    ordered = sorted(stack, key=lambda w: w.order)
    return "\n\n".join(s for s in (w.context_section() for w in ordered) if s)


def check_stack_members(members: Sequence[tuple[str, type[Intervention]]]) -> None:
    """Raise :class:`InterventionError` when the named interventions cannot be stacked together."""
    by_slot: dict[str, str] = {}
    for name, cls in members:
        if cls.slot in by_slot:
            raise InterventionError(
                f"two {cls.slot_plural or cls.slot} in one stack ({by_slot[cls.slot]} and {name}); apply at most one"
            )
        by_slot[cls.slot] = name
    for (name_a, cls_a), (name_b, cls_b) in combinations(members, 2):
        problem = cls_a.refuses(name_a, cls_b, name_b) or cls_b.refuses(name_b, cls_a, name_a)
        if problem:
            raise InterventionError(problem)
