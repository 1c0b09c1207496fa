"""Expand the standing spec into concrete episodes.

The expansion is a pure, deterministic function of the spec and the settings a profile resolves to
(:mod:`commitbench.episodes.standing.profile`): 15 cells x 2 policies x 2 gaps x 8 commitment types x 3
surface variants = 1,440 episodes. Filler is drawn with a seed derived from the type, the *shape* of
the cell's script (each event's act, style and subject, and the delegation; never who speaks), the gap
and the variant, so the two policies of an episode see identical chats, and cells that differ only in
who speaks (a peer's and a manager's cancellation: the rank comparison's twins) see identical chats but
for that speaker. The trigger falls on the same step in every cell at a given gap (shorter openings are
padded with filler before the first event), so the cells differ only in what is said, not in how long
the assistant has been holding the promise. Ids are content hashes, so they are the same on every
machine; settings that change what an episode holds compile to other ids.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateError, nodes
from jinja2.sandbox import SandboxedEnvironment

from commitbench.digests import digest
from commitbench.episodes.standing.episode import (
    PROMISE_STEP,
    CreditorReply,
    Episode,
    Person,
    Policy,
    ScriptAct,
    ScriptMessage,
)
from commitbench.episodes.standing.loader import STYLES_FILE, language_dir, languages_of, load_spec
from commitbench.episodes.standing.profile import PROFILE_SETTINGS, StandingSettings
from commitbench.episodes.standing.spec import (
    DEFAULT_DATA_DIR,
    ENGLISH_WORKSPACE,
    CellSpec,
    CommitmentTypeSpec,
    EventSpec,
    Language,
    NotifyDeadline,
    PolicyWording,
    ReplyKind,
    ReplyRule,
    RoleKey,
    SpecError,
    Split,
    StandingSpec,
    ToolParam,
    TypeTexts,
    VariantSpec,
    split_part,
)
from commitbench.profiles import Profile
from commitbench.protocol import ToolSpec

GAPS: tuple[int, ...] = (1, 20)
POLICIES: tuple[Policy, ...] = (Policy.EXPLICIT, Policy.SILENT)
MAX_CALLS_PER_TURN = 8
LOOKUPS_IN_LONG_GAP = 5
CLOSING_MESSAGES = 2

_JINJA = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)

# Episode templates fill in names; they do not compute. A template may hold text, variables (an attribute
# of a variable, such as person.name), the filters below, ``if`` and ``for`` over a list of the context, at
# most two loops deep, and nothing else: no calls, arithmetic, assignments, macros or includes. So rendering
# takes time in proportion to the template and the context, and its output is bounded besides. A variable
# is a name of the template's context (or a loop's own variable): Jinja's globals (``range``, ``lipsum``,
# ``dict``, ``cycler``, ``joiner``, ``namespace``) and ``self`` render as objects whose text holds a memory
# address, which would make episode texts, and the ids hashed from them, differ from one process to the next.
_FILTERS = frozenset({"capitalize", "lower", "upper", "title", "trim"})
_PLAIN_NODES = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.Name, nodes.Const, nodes.If, nodes.Not, nodes.And,
    nodes.Or, nodes.Compare, nodes.Operand,
)  # fmt: skip
_COMPARISONS = frozenset({"eq", "ne"})
MAX_TEMPLATE_CHARS = 20_000
MAX_RENDERED_CHARS = 20_000
MAX_LOOP_DEPTH = 2


def template_problem(source: str, variables: frozenset[str]) -> str | None:
    """Why a template is not a plain episode template over ``variables`` (None when it is one)."""
    if len(source) > MAX_TEMPLATE_CHARS:
        return f"the template is longer than {MAX_TEMPLATE_CHARS:,} characters"
    try:
        tree = _JINJA.parse(source)
    except TemplateError as exc:
        return f"template error: {exc}"
    return _node_problem(tree, loops=0, names=variables)


def _loop_problem(node: nodes.For, loops: int, names: frozenset[str]) -> str | None:
    """A for loop: its list is read with the names around it; its body also sees its own variables."""
    if loops >= MAX_LOOP_DEPTH:
        return f"loops are nested more than {MAX_LOOP_DEPTH} deep"
    if node.recursive or not isinstance(node.iter, (nodes.Name, nodes.Getattr)):
        return f"a for loop must run over a list of the episode's context, not {type(node.iter).__name__}"
    targets = node.target.items if isinstance(node.target, nodes.Tuple) else [node.target]
    if not all(isinstance(t, nodes.Name) for t in targets):
        return "a for loop's variables must be plain names"
    inner = names | {t.name for t in targets if isinstance(t, nodes.Name)} | {"loop"}
    parts: list[tuple[list[nodes.Node], frozenset[str]]] = [
        ([node.iter], names), ([node.test] if node.test is not None else [], inner), (node.body, inner),
        (node.else_, names),
    ]
    for children, scope in parts:
        for child in children:
            problem = _node_problem(child, loops + 1, scope)
            if problem is not None:
                return problem
    return None


def _node_problem(node: nodes.Node, loops: int, names: frozenset[str]) -> str | None:
    if isinstance(node, nodes.For):
        return _loop_problem(node, loops, names)
    if isinstance(node, nodes.Name):
        if node.ctx == "load" and node.name not in names:
            known = ", ".join(sorted(names))
            return f"the template uses {node.name!r}, which is not one of its variables ({known})"
    elif isinstance(node, nodes.Getattr):
        if node.attr.startswith("_"):
            return f"the template reads the attribute {node.attr!r}"
    elif isinstance(node, nodes.Filter):
        if node.name not in _FILTERS or node.args or node.kwargs or node.dyn_args or node.dyn_kwargs:
            allowed = ", ".join(sorted(_FILTERS))
            return f"the template uses the filter {node.name!r} (allowed, without arguments: {allowed})"
    elif isinstance(node, nodes.Operand):
        if node.op not in _COMPARISONS:
            return f"the template compares with {node.op!r} (only == and != are allowed)"
    elif not isinstance(node, _PLAIN_NODES):
        return (
            f"the template uses {type(node).__name__}: episode templates fill in names (variables, filters, "
            "if, for over the context's lists) and compute nothing"
        )
    for child in node.iter_child_nodes():
        problem = _node_problem(child, loops, names)
        if problem is not None:
            return problem
    return None


@lru_cache(maxsize=4096)
def _template(source: str, variables: frozenset[str]) -> tuple[Any, str | None]:
    problem = template_problem(source, variables)
    return (None, problem) if problem is not None else (_JINJA.from_string(source), None)


def render(source: str, context: dict[str, Any], where: tuple[str, str]) -> str:
    """Render one template over ``context`` (its keys are the template's variables); a problem names the
    file and field it came from (never a traceback)."""
    template, problem = _template(source, frozenset(context))
    if problem is not None:
        raise SpecError(where[0], where[1], problem)
    pieces: list[str] = []
    size = 0
    try:
        for piece in template.generate(**context):
            size += len(piece)
            if size > MAX_RENDERED_CHARS:
                reason = f"the rendered text is longer than {MAX_RENDERED_CHARS:,} characters"
                raise SpecError(where[0], where[1], reason)
            pieces.append(piece)
    except SpecError:
        raise
    except TemplateError as exc:
        raise SpecError(where[0], where[1], f"template error: {exc}") from None
    except Exception as exc:  # a template that passed the check and still failed: report it, never a traceback
        raise SpecError(where[0], where[1], f"template error: {type(exc).__name__}: {exc}") from None
    return "".join(pieces)


def _tool(name: str, description: str, params: dict[str, ToolParam], is_write: bool) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {k: {"type": p.type, "description": p.description} for k, p in params.items()},
            "required": list(params),
            "additionalProperties": False,
        },
        is_write=is_write,
    )


def _context(spec: StandingSpec, variant: VariantSpec, ctype: CommitmentTypeSpec) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "assistant": spec.world.assistant,
        "team": variant.team,
        "channel": variant.channel,
        "thing": ctype.thing,
        "condition": ctype.condition,
    }
    for role, person in variant.people.items():
        ctx[role.value] = person.name
        ctx[f"{role.value}_first"] = person.name.split()[0]
    return ctx


class _TypeVariantTexts:
    """Every text of one commitment type in one surface variant, rendered once."""

    def __init__(
        self, spec: StandingSpec, ctype: CommitmentTypeSpec, v: int, source: str, settings: StandingSettings
    ) -> None:
        variant = spec.world.variants[v]
        ctx = _context(spec, variant, ctype)
        self.ctx = ctx

        def one(field: str, text: str) -> str:
            return render(text, ctx, (source, field))

        paper = ctype.paper if settings.type_texts is TypeTexts.PAPER else None
        if paper is not None and paper.request is not None:
            self.request = one(f"paper.request[{v}]", paper.request[v])
        else:
            self.request = one(f"request[{v}]", ctype.request[v])
        if paper is not None and paper.promise is not None:
            self.promise = one("paper.promise", paper.promise)
        else:
            self.promise = one("promise", ctype.promise)
        self.compared_args = paper.compared_args if paper is not None else None
        self.explicit_policy = (
            spec.policies.explicit_paper if settings.policy_wording is PolicyWording.PAPER else spec.policies.explicit
        ).strip()
        self.delegation = one(f"delegation[{v}]", ctype.delegation[v])
        self.trigger = one(f"trigger[{v}]", ctype.trigger[v])
        self.v = v
        # style -> (file, field, template) of this type's wording in this variant
        self.style_sources: dict[str, tuple[str, str, str]] = {}
        for name, style in spec.styles.items():
            wording = ctype.wording(name, style)
            if wording is not None:
                field, texts = wording
                home = STYLES_FILE if field.startswith("styles.") else source
                self.style_sources[name] = (home, f"{field}[{v}]", texts[v])
        self.reply_sources = {kind: texts[v] for kind, texts in spec.replies.replies.items()}
        self._rendered: dict[tuple[str, str, str, str], str] = {}
        # Every wording is rendered once up front, as said by the creditor about themselves, so a template
        # error is found whichever cells use it.
        for name in self.style_sources:
            self.style_text(name, RoleKey.CREDITOR, RoleKey.CREDITOR)
        for kind in self.reply_sources:
            self.reply_text(kind, RoleKey.CREDITOR, RoleKey.CREDITOR)
        self.chatter = [render(t, ctx, ("filler.yaml", f"chatter[{i}]")) for i, t in enumerate(spec.filler.chatter)]
        self.lookups = [
            (render(lk.question, ctx, ("filler.yaml", f"lookups[{i}].question")), lk.entry)
            for i, lk in enumerate(spec.filler.lookups)
        ]
        self.people = [
            Person(role=role.value, name=p.name, title=p.title, rank=p.rank) for role, p in variant.people.items()
        ]
        at = ctype.action_tool
        self.action_tool = _tool(at.name, at.description, at.parameters, is_write=True)
        ct = ctype.check_tool
        self.check_tool = _tool(ct.name, ct.description, ct.parameters, is_write=False)
        self.prompts = {
            policy: render(
                spec.system_prompt,
                {
                    **ctx,
                    "people": [{"name": p.name, "title": p.title} for p in variant.people.values()],
                    "max_calls": MAX_CALLS_PER_TURN,
                    "action_tool": at.name,
                    "check_tool": ct.name,
                    "policy": self.explicit_policy if policy is Policy.EXPLICIT else "",
                },
                ("system_prompt.jinja", "<template>"),
            ).strip()
            for policy in POLICIES
        }


    def _event_context(self, speaker: RoleKey, subject: RoleKey) -> dict[str, Any]:
        return {**self.ctx, "speaker": self.ctx[speaker.value], "speaker_first": self.ctx[f"{speaker.value}_first"],
                "subject": self.ctx[subject.value], "subject_first": self.ctx[f"{subject.value}_first"]}

    def style_text(self, style: str, speaker: RoleKey, subject: RoleKey) -> str:
        """The type's wording of a style in this variant, said by ``speaker`` about ``subject``."""
        key = ("style", style, speaker.value, subject.value)
        if key not in self._rendered:
            home, field, template = self.style_sources[style]
            self._rendered[key] = render(template, self._event_context(speaker, subject), (home, field))
        return self._rendered[key]

    def reply_text(self, kind: ReplyKind, speaker: RoleKey, subject: RoleKey) -> str:
        """The creditor's answer of a kind to the event said by ``speaker`` about ``subject``."""
        key = ("reply", kind.value, speaker.value, subject.value)
        if key not in self._rendered:
            where = ("replies.yaml", f"replies.{kind.value}[{self.v}]")
            self._rendered[key] = render(self.reply_sources[kind], self._event_context(speaker, subject), where)
        return self._rendered[key]

    def event_text(self, event: EventSpec) -> str:
        return self.style_text(event.style, event.speaker, event.subject_role())

    def answer(self, kind: ReplyKind, event: EventSpec | None) -> str:
        """The answer of a kind to an event (None: to the promise itself, the creditor's own request)."""
        if event is None:
            return self.reply_text(kind, RoleKey.CREDITOR, RoleKey.CREDITOR)
        return self.reply_text(kind, event.speaker, event.subject_role())


def _seed(*parts: object) -> int:
    return int(digest(*(str(p) for p in parts), sep="|", length=16), 16)


def script_shape(cell: CellSpec) -> str:
    """What a cell's script does, without who says it: each event's act, style and subject, and the delegation.

    The filler's seed: cells of one shape (a peer's and a manager's direct cancellation, say) get the same
    chat, line for line, except the speaker of their events.
    """
    events = ",".join(f"{e.act.value}/{e.style}/{e.subject.value if e.subject else ''}" for e in cell.events)
    return f"{'delegated;' if cell.delegation else ''}{events}"


def opening_length(cell: CellSpec) -> int:
    """Messages from the request to the last event, before padding: request, promise, the
    delegation if any, the events and one filler message between consecutive events."""
    return 2 + int(cell.delegation) + len(cell.events) + max(len(cell.events) - 1, 0)


def trigger_step_for(cells: Iterable[CellSpec], gap: int) -> int:
    """The step of the trigger at a gap, the same in every cell: the longest opening plus the gap."""
    return max(opening_length(c) for c in cells) + gap


def _build_script(
    texts: _TypeVariantTexts, cell: CellSpec, gap: int, rng: random.Random, channel: str, opening: int
) -> tuple[list[ScriptMessage], int, list[int]]:
    """One episode's script. ``opening`` is the longest opening over all cells: shorter openings are
    padded with filler between the promise (or delegation) and the first event, so the trigger falls
    on the same step in every cell and the gap after the last event stays exact."""
    n_between = max(len(cell.events) - 1, 0)
    n_pad = opening - opening_length(cell)
    n_lookups = LOOKUPS_IN_LONG_GAP if gap >= LOOKUPS_IN_LONG_GAP * 2 else 0
    n_chatter = n_pad + n_between + (gap - n_lookups) + CLOSING_MESSAGES
    if n_chatter > len(texts.chatter):
        raise SpecError(
            "filler.yaml", "chatter",
            f"cell {cell.id} at gap {gap} needs {n_chatter} distinct chatter messages, the filler has "
            f"{len(texts.chatter)}",
        )
    chatter = rng.sample(texts.chatter, n_chatter)
    lookups = rng.sample(texts.lookups, n_lookups)
    chat_speakers = (RoleKey.COLLEAGUE.value, RoleKey.BYSTANDER.value)
    lookup_speakers = (RoleKey.COLLEAGUE.value, RoleKey.BYSTANDER.value, RoleKey.PEER.value)

    script: list[dict[str, Any]] = [
        {"sender": "creditor", "text": texts.request, "act": ScriptAct.REQUEST},
        {"sender": "assistant", "text": texts.promise, "act": ScriptAct.PROMISE},
    ]
    if cell.delegation:
        script.append(
            {"sender": "creditor", "text": texts.delegation, "act": ScriptAct.DELEGATION, "subject": "delegate"}
        )
    for _ in range(n_pad):
        script.append({"sender": rng.choice(chat_speakers), "text": chatter.pop(), "act": ScriptAct.FILLER})
    event_steps: list[int] = []
    for i, event in enumerate(cell.events):
        if i > 0:
            script.append({"sender": rng.choice(chat_speakers), "text": chatter.pop(), "act": ScriptAct.FILLER})
        event_steps.append(len(script))
        script.append(
            {
                "sender": event.speaker.value,
                "text": texts.event_text(event),
                "act": ScriptAct(event.act.value),
                "style": event.style,
                "subject": event.subject.value if event.subject else "",
            }
        )
    gap_items: list[dict[str, Any]] = [
        {"sender": rng.choice(chat_speakers), "text": chatter.pop(), "act": ScriptAct.FILLER}
        for _ in range(gap - n_lookups)
    ]
    gap_items += [
        {"sender": rng.choice(lookup_speakers), "text": q, "act": ScriptAct.LOOKUP, "lookup_entry": entry}
        for q, entry in lookups
    ]
    rng.shuffle(gap_items)
    script.extend(gap_items)
    trigger_step = len(script)
    script.append({"sender": "colleague", "text": texts.trigger, "act": ScriptAct.TRIGGER})
    for _ in range(CLOSING_MESSAGES):
        script.append({"sender": rng.choice(chat_speakers), "text": chatter.pop(), "act": ScriptAct.CLOSING})
    messages = [ScriptMessage(step=i, channel=channel, **item) for i, item in enumerate(script)]
    return messages, trigger_step, event_steps


def creditor_replies(
    texts: _TypeVariantTexts, cell: CellSpec, event_steps: list[int], rule: ReplyRule
) -> list[CreditorReply]:
    """The creditor's scripted answers of one episode under a reply rule (the paper's single answer follows the
    last event that changes or challenges the promise: see :class:`ReplyRule`).

    In a cell without events (BASE) the creditor still answers the first message addressed to them, under
    either rule, with the cell's answer (the promise stands): it follows the promise itself, so an assistant
    that asks before acting is told to go ahead rather than left without an answer.
    """
    if not event_steps:
        text = texts.answer(cell.paper_reply, None)
        return [CreditorReply(after_step=PROMISE_STEP, kind=cell.paper_reply, text=text)]
    if rule is ReplyRule.PAPER:
        text = texts.answer(cell.paper_reply, cell.events[-1])
        return [CreditorReply(after_step=event_steps[-1], kind=cell.paper_reply, text=text)]
    return [
        CreditorReply(after_step=step, kind=event.reply, text=texts.answer(event.reply, event))
        for step, event in zip(event_steps, cell.events, strict=True)
    ]


def _episode_id(payload: dict[str, Any]) -> str:
    episode = Episode.model_validate({**payload, "id": ""})
    if episode.language is Language.EN and episode.workspace == ENGLISH_WORKSPACE:
        canonical = episode.model_dump_json(exclude={"id", "twins", "language", "workspace"})
        return "st-" + digest(canonical, length=12)
    return "st-" + digest(json=episode.id_fields(), length=12)


def compile_type(
    spec: StandingSpec,
    ctype: CommitmentTypeSpec,
    source: str | None = None,
    cells: Iterable[CellSpec] | None = None,
    settings: StandingSettings | None = None,
) -> list[Episode]:
    """All episodes of one commitment type (every cell, policy, gap and variant) under one set of settings
    (default: the project's profile)."""
    settings = settings or PROFILE_SETTINGS[Profile.COMMITBENCH]
    reply_rule = settings.creditor_replies
    source = source or spec.type_files.get(ctype.id) or f"types/{ctype.id}.yaml"
    opening = max(opening_length(c) for c in spec.cells)
    episodes: list[Episode] = []
    check = ctype.check_tool
    for v, variant in enumerate(spec.world.variants):
        texts = _TypeVariantTexts(spec, ctype, v, source, settings)
        wiki = dict(spec.filler.wiki)
        for cell in cells if cells is not None else spec.cells:
            for gap in GAPS:
                rng = random.Random(_seed(ctype.id, script_shape(cell), gap, v))
                script, trigger_step, event_steps = _build_script(texts, cell, gap, rng, variant.channel, opening)
                replies = creditor_replies(texts, cell, event_steps, reply_rule)
                paper = reply_rule is ReplyRule.PAPER
                acknowledgement = spec.replies.paper_acknowledgement if paper else spec.replies.acknowledgement
                for policy in POLICIES:
                    payload: dict[str, Any] = {
                        "split": ctype.split,
                        "commitment_type": ctype.id,
                        "cell": cell.id,
                        "policy": policy,
                        "gap": gap,
                        "variant": v,
                        "manager_cell": cell.manager,
                        "assistant": spec.world.assistant,
                        "team": variant.team,
                        "channel": variant.channel,
                        "people": texts.people,
                        "system_prompt": texts.prompts[policy],
                        "thing": ctype.thing,
                        "condition": ctype.condition,
                        "action_tool": texts.action_tool,
                        "target_args": dict(ctype.action_tool.target_args),
                        "compared_args": texts.compared_args,
                        "action_done_text": ctype.action_tool.done_text,
                        "action_failed_text": ctype.action_tool.failed_text,
                        "check_tool": texts.check_tool,
                        "check_possible": cell.check_possible,
                        "check_text": check.possible_text if cell.check_possible else check.impossible_text,
                        "wiki": wiki,
                        "script": script,
                        "trigger_step": trigger_step,
                        "event_steps": event_steps,
                        "reply_rule": reply_rule,
                        "creditor_replies": replies,
                        "acknowledgement": acknowledgement,
                        "expected": cell.expected,
                        "explicit_policy": texts.explicit_policy,
                        "policy_wording": settings.policy_wording,
                        "notify_by_trigger": settings.notify_deadline is NotifyDeadline.BEFORE_TRIGGER,
                        "language": spec.language,
                        "workspace": spec.workspace,
                    }
                    episodes.append(Episode.model_validate({**payload, "id": _episode_id(payload)}))
    return episodes


def compile_spec(spec: StandingSpec, settings: StandingSettings | None = None) -> list[Episode]:
    """Every episode of the spec under one set of settings, in a fixed order (type, variant, cell, gap, policy)."""
    episodes: list[Episode] = []
    for ctype in spec.types:
        episodes.extend(compile_type(spec, ctype, settings=settings))
    ids = [e.id for e in episodes]
    if len(set(ids)) != len(ids):
        raise SpecError("<spec>", "id", "two episodes compiled to the same content hash")
    return episodes


TwinKey = tuple[str, int, str, int, str]  # commitment type, surface, cell, gap, policy


def twin_key(episode: Episode) -> TwinKey:
    """What an episode shares with its twins in the other languages."""
    return (episode.commitment_type, episode.variant, episode.cell, episode.gap, episode.policy.value)


def _structure(episode: Episode) -> tuple[object, ...]:
    """The step structure twins must share: every scripted message's step, kind, act and speaker's role."""
    return (episode.trigger_step, tuple(episode.event_steps), episode.split,
            tuple((m.step, m.act, m.sender, m.style, m.subject, m.lookup_entry) for m in episode.script),
            tuple((r.after_step, r.kind) for r in episode.creditor_replies))


def link_twins(root: Path | str, by_language: dict[Language, list[Episode]]) -> dict[Language, list[Episode]]:
    """Record each episode's twins in the other languages; every episode of another language must have an
    English twin with the same step structure (a SpecError names the language's folder otherwise). An English
    episode may have none: a type added to the English data alone (a student's new type) plays in English only."""
    if len(by_language) < 2:
        return by_language
    keyed = {lang: {twin_key(e): e for e in episodes} for lang, episodes in by_language.items()}
    english = keyed[Language.EN]
    for lang, by_key in keyed.items():
        if lang is Language.EN:
            continue
        where = language_dir(root, lang)
        missing = sorted(set(by_key) - set(english))
        if missing:
            raise SpecError(where, "types", f"{len(missing)} {lang.value} episodes have no English twin, e.g. "
                            f"{missing[0]} (type, surface, cell, gap, policy): every type of a language must be a "
                            "type of the English data, with the same split")
        for key, episode in by_key.items():
            if _structure(episode) != _structure(english[key]):
                raise SpecError(where, f"types.{key[0]}", f"the {lang.value} episode {key} does not have its English "
                                "twin's step structure (steps, acts, speakers, replies)")
    linked: dict[Language, list[Episode]] = {}
    for lang, played in by_language.items():
        linked[lang] = [
            e.model_copy(update={"twins": {other.value: keyed[other][twin_key(e)].id
                                           for other in by_language if other is not lang
                                           and twin_key(e) in keyed[other]}})
            for e in played
        ]
    return linked


@lru_cache(maxsize=8)
def _compiled(
    root: str, settings: StandingSettings, stamp: tuple[tuple[str, int, int], ...], overlay: Split | None = None
) -> dict[Language, tuple[Episode, ...]]:
    """Every language's episodes of one part of a data directory: its own types (``overlay`` None) or a split
    overlay's (train, English only), twins linked."""
    by_language = {lang: compile_spec(load_spec(Path(root), language=lang, split=overlay), settings)
                   for lang in languages_of(root, overlay)}
    return {lang: tuple(episodes) for lang, episodes in link_twins(root, by_language).items()}


def _stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, size and modification time of every file of a data directory: a changed file recompiles."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)


def load_episodes(
    root: Path | str = DEFAULT_DATA_DIR, settings: StandingSettings | Profile | str | None = None,
    languages: Language | str | Iterable[Language | str] = Language.EN, split: Split | str | None = None,
) -> tuple[Episode, ...]:
    """The episodes of a data directory in ``languages`` (default English) under a profile or its settings
    (default: the project's profile), compiled once per process while its files are unchanged (an edited file is
    picked up by the next call). Every language the directory has is compiled, so each episode carries its twins.

    ``split`` None: the directory's own episodes (dev and test); dev or test: that split's; train: the train
    overlay's (``splits/train/``, English only), compiled only when asked for.
    """
    if not isinstance(settings, StandingSettings):
        settings = PROFILE_SETTINGS[Profile(settings or Profile.COMMITBENCH)]
    path = Path(root).resolve()
    wanted = [Language(languages)] if isinstance(languages, str | Language) else [Language(x) for x in languages]
    try:
        overlay = split_part(split)
    except ValueError as exc:
        raise SpecError(path, "split", str(exc)) from None
    keep = None if split is None else Split(split)
    compiled = _compiled(str(path), settings, _stamp(path), overlay)
    for lang in wanted:
        if lang not in compiled:
            load_spec(path, language=lang, split=overlay)  # raises the SpecError that names the missing folder
    return tuple(e for lang in wanted for e in compiled[lang] if keep is None or e.split is keep)


def episodes_of_profiles(root: Path | str = DEFAULT_DATA_DIR, split: Split | str | None = None) -> dict[str, Episode]:
    """Every episode of a data directory under both profiles and in every language, by id (for traces whose
    settings are unknown); ``split`` train: the train overlay's instead (English only)."""
    path = Path(root).resolve()
    return {e.id: e for profile in Profile for lang in languages_of(path, split)
            for e in load_episodes(path, profile, lang, split=split)}
