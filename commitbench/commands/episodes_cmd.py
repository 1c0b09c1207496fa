"""``commitbench episodes``: list, show, validate and describe the standing episodes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError
from commitbench.dataversion import DataCheck, check_data, write_lock

SCHEMA_PARTS = ("type", "cell", "styles", "world", "replies", "filler", "policies", "workspace")
LANGUAGES = ("en", "tr")
SPLITS = ("dev", "test", "train")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("episodes", help="list, show, validate and describe standing episodes")
    sub = parser.add_subparsers(dest="episodes_command", metavar="ACTION", required=True)

    p_list = sub.add_parser("list", help="list compiled episodes")
    _add_filters(p_list)
    p_list.add_argument("--json", action="store_true", help="print a JSON document")
    p_list.set_defaults(func=_list)

    p_show = sub.add_parser("show", help="show one episode")
    p_show.add_argument("episode_id")
    p_show.add_argument("--data", type=Path, default=None, help="episode data directory (default: the shipped one)")
    p_show.add_argument("--json", action="store_true", help="print the episode as JSON")
    p_show.add_argument("--split", choices=SPLITS, default=None,
                        help="look among this split's episodes (default: dev and test, then the train split)")
    p_show.set_defaults(func=_show)

    p_val = sub.add_parser("validate", help="validate a data directory or one commitment-type file")
    p_val.add_argument("path", nargs="?", type=Path, default=None, help="directory or type YAML (default: shipped)")
    p_val.add_argument("--json", action="store_true", help="print a JSON document")
    p_val.add_argument("--language", choices=LANGUAGES, default=None,
                       help="the language validated (default: en, or the language folder a type file is in); "
                       "another language is also checked to have an English twin for each episode")
    p_val.add_argument("--split", choices=["train"], default=None,
                       help="validate the train split's overlay (splits/train/: its own types, people and chat, "
                       "checked to share none of them with dev and test) instead of the directory's own dev and test "
                       "types; with --lock, lock the overlay")
    p_val.add_argument("--lock", action="store_true",
                       help="after validating, record the directory's files as its VERSION (VERSION.lock); refused "
                       "when the files changed under a version that was locked with other files")
    p_val.set_defaults(func=_validate)

    p_schema = sub.add_parser("schema", help="print the JSON schema of the episode files")
    p_schema.add_argument("--part", choices=SCHEMA_PARTS, default=None, help="one file kind only")
    p_schema.set_defaults(func=_schema)


def _add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None, help="episode data directory (default: the shipped one)")
    parser.add_argument("--split", choices=SPLITS, default=None,
                        help="dev, test or train (default: dev and test; train, the training split, is listed only "
                        "when named)")
    parser.add_argument("--cells", nargs="+", default=None, metavar="CELL", help="cell ids")
    parser.add_argument("--types", nargs="+", default=None, metavar="TYPE", help="commitment type ids")
    parser.add_argument("--policies", nargs="+", default=None, choices=["explicit", "silent"], help="release policies")
    parser.add_argument("--gaps", nargs="+", type=int, default=None, help="filler gaps (1, 20)")
    parser.add_argument("--surfaces", nargs="+", type=int, default=None, help="surface wordings (0-2)")
    parser.add_argument("--language", nargs="+", choices=LANGUAGES, default=None,
                        help="the episodes' language(s) (default: en)")
    parser.add_argument(
        "--profile", choices=["commitbench", "paper"], default="commitbench",
        help="the profile the episodes compile under (default commitbench; paper: the paper's design)",
    )
    parser.add_argument(
        "--creditor-replies", choices=["per_event", "paper"], default=None,
        help="the creditor's reply rule the episodes compile under (default: the profile's)",
    )


def _episodes(data: Path | None, profile: str | None, reply_rule: str | None = None,
              languages: list[str] | None = None, split: str | None = None) -> tuple[Any, ...]:
    """The episodes of a data directory (of ``split``: default dev and test) under a profile (and reply rule), or
    under both profiles and in every language (profile None)."""
    from commitbench.episodes.standing.compiler import episodes_of_profiles, load_episodes
    from commitbench.episodes.standing.profile import standing_settings
    from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR, SpecError
    from commitbench.profiles import ProfileError

    try:
        if profile is None:
            return tuple(episodes_of_profiles(data or DEFAULT_DATA_DIR, split).values())
        return load_episodes(data or DEFAULT_DATA_DIR, standing_settings(profile, creditor_replies=reply_rule),
                             languages or ["en"], split=split)
    except (SpecError, ProfileError) as exc:
        raise UsageError(str(exc)) from None


def _emit(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _list(args: argparse.Namespace) -> int:
    from commitbench.episodes.standing.selection import select_episodes

    try:
        chosen = select_episodes(
            _episodes(args.data, args.profile, args.creditor_replies, args.language, args.split),
            split=args.split,
            cells=args.cells,
            commitment_types=args.types,
            policies=args.policies,
            gaps=args.gaps,
            surfaces=args.surfaces,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    rows = [{"id": e.id, **e.factors(), "language": e.language.value, "twins": e.twins, "messages": len(e.script)}
            for e in chosen]
    if args.json:
        _emit({"count": len(rows), "episodes": rows})
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} episodes")
    for col in ("id", "split", "commitment_type", "cell", "policy", "gap", "variant", "messages"):
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("id", "split", "commitment_type", "cell", "policy", "gap", "variant",
                                              "messages")))
    Console(width=max(Console().width, 110)).print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    found = [e for e in _episodes(args.data, None, split=args.split) if e.id == args.episode_id]
    if not found and args.split is None and _has_train(args.data):
        found = [e for e in _episodes(args.data, None, split="train") if e.id == args.episode_id]
    if not found:
        raise UsageError(f"no episode with id {args.episode_id!r} (try 'commitbench episodes list')")
    ep = found[0]
    if args.json:
        _emit(ep.model_dump(mode="json"))
        return 0
    people = {p.role: p for p in ep.people}
    print(f"{ep.id}  {ep.commitment_type} / {ep.cell} / policy={ep.policy.value} / gap={ep.gap} / variant={ep.variant}"
          f" / language={ep.language.value}")
    if ep.twins:
        print("twins: " + ", ".join(f"{lang} {twin}" for lang, twin in sorted(ep.twins.items())))
    print(f"expected: {ep.expected.model_dump(mode='json')}   check possible: {ep.check_possible}")
    print(f"promised action: {ep.action_tool.name}({json.dumps(ep.target_args, ensure_ascii=False)})")
    print("\n--- system prompt ---\n" + ep.system_prompt + "\n--- script ---")
    for m in ep.script:
        who = ep.assistant if m.sender == "assistant" else f"{people[m.sender].name} ({m.sender})"
        marker = "  <- trigger" if m.step == ep.trigger_step else ""
        print(f"[{m.step:>2}] {m.act.value:<10} {who}: {m.text}{marker}")
    print(f"--- the creditor's answers ({ep.reply_rule.value} rule; otherwise: {ep.acknowledgement!r})")
    for r in ep.creditor_replies:
        print(f"after step {r.after_step:>2} ({r.kind.value}): {r.text}")
    return 0


def _has_train(data: Path | None) -> bool:
    from commitbench.episodes.standing.loader import languages_of
    from commitbench.episodes.standing.spec import DEFAULT_DATA_DIR

    return bool(languages_of(data or DEFAULT_DATA_DIR, "train"))


def _overlay_kind(folder: Path) -> str | None:
    """``languages`` or ``splits`` for an overlay folder of a data directory (``<data>/languages/<code>/``,
    ``<data>/splits/<split>/``), else None."""
    from commitbench.episodes.standing.spec import LANGUAGES_DIR, SPLITS_DIR

    folder = folder.resolve()
    kind = folder.parent.name
    return kind if kind in (LANGUAGES_DIR, SPLITS_DIR) and (folder.parent.parent / "cells.yaml").exists() else None


def _overlay_split(folder: Path) -> Any:
    """The split an overlay folder ``splits/<split>/`` holds; a SpecError for a folder no split is kept in."""
    from commitbench.episodes.standing.spec import SPLITS_DIR, SpecError, Split

    if folder.name not in {s.value for s in Split if s.in_overlay}:
        raise SpecError(folder, "<directory>", f"no split is kept in {SPLITS_DIR}/{folder.name}/ (the train split's "
                        "folder is splits/train/)")
    return Split(folder.name)


def _validate(args: argparse.Namespace) -> int:
    from commitbench.episodes.standing.compiler import compile_spec, link_twins
    from commitbench.episodes.standing.loader import load_spec
    from commitbench.episodes.standing.spec import (
        DEFAULT_DATA_DIR,
        LANGUAGES_DIR,
        SPLITS_DIR,
        Language,
        SpecError,
        Split,
    )

    path: Path | None = args.path
    data_dir: Path | None = None  # the data directory validated whole (its version lock is checked)
    language = Language(args.language or "en")
    split = Split(args.split) if args.split else None  # the overlay validated (train), or the directory's own types
    twins = 0
    try:
        if path is not None and path.is_dir() and _overlay_kind(path) is not None:
            # An overlay folder (languages/<code>/, splits/<split>/) is validated with its data directory.
            data_dir = path.resolve().parent.parent
            if _overlay_kind(path) == LANGUAGES_DIR:
                language = Language(args.language or path.resolve().name)
            else:
                split = _overlay_split(path.resolve())
            spec = load_spec(data_dir, language=language, split=split)
        elif path is None or path.is_dir():
            data_dir = path or DEFAULT_DATA_DIR
            spec = load_spec(data_dir, language=language, split=split)
        elif path.exists():
            # A type file inside a data directory's types/ (or a language's, languages/<code>/types/, or a split
            # overlay's, splits/<split>/types/) is validated with that directory (it is one of its types already);
            # a file elsewhere is added to the shipped data.
            home = path.resolve().parent
            overlay_kind = home.parent.parent.name if home.name == "types" else None
            in_overlay = overlay_kind in (LANGUAGES_DIR, SPLITS_DIR)
            root = home.parent.parent.parent if in_overlay else home.parent
            inside = home.name == "types" and (root / "cells.yaml").exists()
            if inside and overlay_kind == LANGUAGES_DIR:
                language = Language(args.language or home.parent.name)
            if inside and overlay_kind == SPLITS_DIR:
                split = _overlay_split(home.parent)
            data_dir = root if inside else None
            spec = (load_spec(root, language=language, split=split) if inside
                    else load_spec(DEFAULT_DATA_DIR, extra_types=[path], language=language, split=split))
        else:
            raise SpecError(path, "<file>", "file not found")
        episodes = compile_spec(spec)
        if language is not Language.EN and data_dir is not None:
            linked = link_twins(data_dir, {Language.EN: compile_spec(load_spec(data_dir)), language: episodes})
            twins = sum(1 for e in linked[language] if e.twins)
        if args.lock and data_dir is None:
            raise UsageError("--lock locks a data directory: give the directory, not a type file outside one")
        if data_dir is None:
            check = _data_version(None, args.lock)
        elif split is not None:
            check = _data_version(data_dir / SPLITS_DIR / split.value, args.lock)
        else:
            check = _data_version(data_dir if language is Language.EN else data_dir / LANGUAGES_DIR / language.value,
                                  args.lock)
    except SpecError as exc:
        if args.json:
            _emit({"ok": False, "file": exc.path, "field": exc.field, "reason": exc.reason})
        else:
            print(f"invalid: {exc}", file=sys.stderr)
        return 1
    splits = (split.value,) if split is not None else ("dev", "test")
    by_split = {s: sum(1 for e in episodes if e.split.value == s) for s in splits}
    summary: dict[str, Any] = {
        "ok": True,
        "episodes": len(episodes),
        "types": len(spec.types),
        "cells": len(spec.cells),
        "by_split": by_split,
        "language": language.value,
        "with_english_twin": twins if language is not Language.EN else None,
        "data_version": check.model_dump(mode="json") if check is not None else None,
    }
    if args.json:
        _emit(summary)
    else:
        print(
            f"ok: {summary['episodes']} episodes from {summary['types']} commitment types x {summary['cells']} cells "
            f"({', '.join(f'{s} {n}' for s, n in by_split.items())}), language {language.value}"
            + (f", each with its English twin ({twins})" if language is not Language.EN else "")
        )
        if check is not None and args.lock:
            print(f"locked: {check.directory} is version {check.version} (sha256 {check.digest[:12]})")
    if check is not None and not check.ok:
        print(f"commitbench: warning: {check.message()}", file=sys.stderr)
    return 0


def _data_version(data_dir: Path | None, lock: bool) -> DataCheck | None:
    """A validated data directory (or language folder) against its VERSION and lock (written first with ``lock``);
    None for a type file validated with the shipped data."""
    from commitbench.episodes.standing.spec import read_version

    if data_dir is None:
        return None
    version = read_version(data_dir)
    if not lock:
        return check_data(data_dir, version)
    try:
        return write_lock(data_dir, version)
    except ValueError as exc:
        raise UsageError(f"not locked: {exc}") from None


def _schema(args: argparse.Namespace) -> int:
    from pydantic import BaseModel

    from commitbench.episodes.standing import spec as s

    models: dict[str, type[BaseModel]] = {
        "type": s.CommitmentTypeSpec,
        "cell": s.CellSpec,
        "styles": s.StylesSpec,
        "world": s.WorldSpec,
        "replies": s.RepliesSpec,
        "filler": s.FillerSpec,
        "policies": s.PoliciesSpec,
        "workspace": s.WorkspaceTexts,
    }
    if args.part:
        _emit(models[args.part].model_json_schema())
    else:
        _emit({name: model.model_json_schema() for name, model in models.items()})
    return 0
