"""Load a standing data directory: every file validated, then the checks across files.

:func:`load_spec` reads ``world.yaml``, ``policies.yaml``, ``replies.yaml``, ``filler.yaml``, ``cells.yaml``,
``styles.yaml``, ``types/*.yaml`` and ``system_prompt.jinja`` into a
:class:`~commitbench.episodes.standing.spec.StandingSpec`; every problem is a
:class:`~commitbench.episodes.standing.spec.SpecError` naming the file and the field (a cell by its id). The
models and each file's own checks are :mod:`commitbench.episodes.standing.spec`'s. Overlays are read the same
way: a language's texts from ``languages/<code>/``, the train split's from ``splits/train/`` (what a split overlay
takes from the directory, and must not share with it, is :mod:`commitbench.episodes.standing.splits`'s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from commitbench.episodes.standing.spec import (
    DEFAULT_DATA_DIR,
    ENGLISH_WORKSPACE,
    LANGUAGES_DIR,
    SPLITS_DIR,
    CellSpec,
    CommitmentTypeSpec,
    FillerSpec,
    Language,
    PoliciesSpec,
    RepliesSpec,
    SpecError,
    Split,
    StandingSpec,
    StyleSpec,
    StylesSpec,
    WorkspaceTexts,
    WorldSpec,
    split_part,
    word_pattern,
)
from commitbench.episodes.standing.splits import (
    check_apart,
    check_split_fields,
    check_takes_instructions,
)
from commitbench.yamlfile import YamlError, read_yaml

__all__ = ["STYLES_FILE", "WORKSPACE_FILE", "cell_label", "check_styles", "check_types", "language_dir",
           "languages_of", "load_spec", "load_type"]

M = TypeVar("M", bound=BaseModel)


def _read_yaml(path: Path) -> Any:
    try:
        return read_yaml(path)
    except YamlError as exc:
        raise SpecError(path, "<file>", exc.detail) from None


def _validate(model: type[M], data: Any, path: Path, prefix: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        field = f"{prefix}{loc}" if prefix else loc
        extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise SpecError(path, field, f"{first['msg']}{extra}") from None


def load_type(path: Path) -> CommitmentTypeSpec:
    """Load and validate one commitment-type file (its own checks; :func:`check_types` checks across files)."""
    ctype = _validate(CommitmentTypeSpec, _read_yaml(path), path)
    missing = ctype.missing_own_words()
    if missing is not None:
        raise SpecError(path, *missing)
    return ctype


def check_types(types: list[tuple[Path, CommitmentTypeSpec]], filler: FillerSpec, filler_path: Path) -> None:
    """Checks across type files: unique ids, and each type's distinctive words its own.

    A type's words must not occur in another type's texts (a copied file still talking about its
    original) nor in the shared filler and wiki (where they would make filler look like part of the
    promise). Errors name the offending file and field.
    """
    seen: dict[str, Path] = {}
    for path, ctype in types:
        if ctype.id in seen:
            raise SpecError(path, "id", f"type id '{ctype.id}' is already used by {seen[ctype.id]}")
        seen[ctype.id] = path
    shared = [f"chatter[{i}]: {t}" for i, t in enumerate(filler.chatter)]
    shared += [f"lookups[{i}]: {lk.question}" for i, lk in enumerate(filler.lookups)]
    shared += [f"wiki.{key}: {key} {' '.join(e.keywords)} {e.text}" for key, e in filler.wiki.items()]
    for path, ctype in types:
        pattern = word_pattern(ctype.words)
        for text in shared:
            found = pattern.search(text.split(": ", 1)[1])
            if found:
                raise SpecError(
                    path, "words",
                    f"'{found.group(0)}' also occurs in the shared filler ({filler_path.name} {text.split(':')[0]}); "
                    "choose words only this type uses",
                )
        for other_path, other in types:
            if other is ctype:
                continue
            for field, text in other.texts():
                found = pattern.search(text)
                if found:
                    raise SpecError(
                        other_path, field,
                        f"uses '{found.group(0)}', a distinctive word of type '{ctype.id}' ({path.name}): "
                        "is this text left over from the type the file was copied from?",
                    )


STYLES_FILE = "styles.yaml"
_STYLE_HELP = "see docs/student-guide.md, 'A new utterance style'"


def cell_label(item: Any, index: int) -> str:
    """How an error names a cell of cells.yaml: by its id (``cells[RELAY-DELEG]``), by position without one."""
    cell_id = item.get("id") if isinstance(item, dict) else None
    return f"cells[{cell_id}]" if isinstance(cell_id, str) and cell_id and len(cell_id) <= 40 else f"cells[{index}]"


def check_styles(styles: dict[str, StyleSpec], styles_path: Path, cells: list[CellSpec], cells_path: Path,
                 types: list[tuple[Path, CommitmentTypeSpec]]) -> None:
    """Checks across styles.yaml, cells.yaml and the types: every event's style exists and may word its act,
    every type words every style a cell uses, a type words only known styles, and a style's shared texts use
    no type's own words (they are said about every type). Errors name the file and the field."""
    for name, style in styles.items():
        if style.type_field is None and style.texts is None and not any(name in t.utterances for _, t in types):
            raise SpecError(styles_path, f"styles.{name}", "the style has no wording: give it shared 'texts', a "
                            "'type_field', or an utterances entry in the types")
    used: dict[str, str] = {}
    for cell in cells:
        for k, event in enumerate(cell.events):
            where = f"cells[{cell.id}].events[{k}].style"
            if event.style not in styles:
                raise SpecError(cells_path, where, f"unknown style {event.style!r}: {STYLES_FILE} defines "
                                f"{', '.join(sorted(styles))} ({_STYLE_HELP})")
            style = styles[event.style]
            if event.act not in style.acts:
                acts = ", ".join(a.value for a in style.acts)
                raise SpecError(cells_path, where, f"the style {event.style!r} words {acts}, not {event.act.value}")
            used.setdefault(event.style, cell.id)
    for path, ctype in types:
        for name in ctype.utterances:
            if name not in styles:
                raise SpecError(path, f"utterances.{name}", f"no style {name!r} in {STYLES_FILE} ({_STYLE_HELP})")
        for name, cell_id in used.items():
            if ctype.wording(name, styles[name]) is None:
                raise SpecError(path, f"utterances.{name}", f"cell {cell_id} uses the style {name!r}, which has no "
                                "shared texts: word it for this type (three texts, one per surface variant)")
    for path, ctype in types:
        pattern = word_pattern(ctype.words)
        for name, style in styles.items():
            for i, text in enumerate(style.texts or []):
                found = pattern.search(text)
                if found:
                    raise SpecError(styles_path, f"styles.{name}.texts[{i}]",
                                    f"uses '{found.group(0)}', a distinctive word of type '{ctype.id}' ({path.name}): "
                                    "shared texts are said about every type; name it as {{ thing }}")


WORKSPACE_FILE = "workspace.yaml"


def language_dir(root: Path | str, language: Language | str, split: Split | str | None = None) -> Path:
    """Where a language's texts live: the data directory itself for English, ``languages/<code>/`` otherwise; a
    split kept in an overlay (``split``: train) has its texts in ``splits/<split>/``, in English only (a SpecError
    for another language). ``split`` None, dev or test: the directory's own texts."""
    language = Language(language)
    root = Path(root)
    overlay = split_part(split)
    if overlay is not None:
        if language is not Language.EN:
            raise SpecError(root / SPLITS_DIR / overlay.value, "language", f"the {overlay.value} split is English "
                            f"only: there is no {language.value} {overlay.value} split (see docs/rl.md)")
        return root / SPLITS_DIR / overlay.value
    return root if language is Language.EN else root / LANGUAGES_DIR / language.value


def languages_of(root: Path | str, split: Split | str | None = None) -> list[Language]:
    """The languages a data directory has: English, and each known language with a ``languages/<code>/`` folder;
    for a split kept in an overlay (train), English when the directory has ``splits/<split>/``, else none."""
    if split_part(split) is not None:
        return [Language.EN] if language_dir(root, Language.EN, split).is_dir() else []
    return [lang for lang in Language if language_dir(root, lang).is_dir()]


def load_spec(root: Path | str = DEFAULT_DATA_DIR, extra_types: list[Path] | None = None,
              language: Language | str = Language.EN, split: Split | str | None = None) -> StandingSpec:
    """Load the whole standing spec from a data directory, naming file and field on any error.

    English reads every file from ``root``; another language reads its texts from ``root/languages/<code>/``
    and the cells (structure only, no text) from ``root/cells.yaml``, so both languages play the same design.
    ``split`` train reads the train overlay, ``root/splits/train/``: its own people, filler, replies, styles and
    types, with the cells and the instructions to the assistant (:data:`~.splits.SHARED_FILES`) taken from
    ``root`` (docs/rl.md, 'Splits for training'); it must share no type and no name with dev and test. Any other
    ``split`` (None, dev, test) reads the directory's own types, which are dev or test.
    """
    root = Path(root)
    try:
        language = Language(language)
    except ValueError:
        known = ", ".join(lang.value for lang in Language)
        raise SpecError(root, "language", f"unknown language {language!r} (known: {known})") from None
    try:
        overlay = split_part(split)
    except ValueError as exc:
        raise SpecError(root, "split", str(exc)) from None
    texts = language_dir(root, language, overlay)
    if not texts.is_dir():
        where = (f"{SPLITS_DIR}/{overlay.value}/ beside cells.yaml; see docs/rl.md" if overlay is not None
                 else f"{LANGUAGES_DIR}/{language.value}/ beside cells.yaml; see docs/languages.md")
        what = f"{overlay.value} split" if overlay is not None else f"{language.value} texts"
        raise SpecError(texts, "<directory>", f"this data directory has no {what} (expected the folder {where})")
    # The instructions to the assistant (release policies, system prompt, workspace words): a language words its
    # own; a split overlay takes the data directory's, explicitly (it may not hold them).
    instructions = texts
    if overlay is not None:
        check_takes_instructions(texts)
        instructions = root
    parts: dict[str, Any] = {"language": language}
    for key, model, home, name in (
        ("world", WorldSpec, texts, "world.yaml"),
        ("policies", PoliciesSpec, instructions, "policies.yaml"),
        ("replies", RepliesSpec, texts, "replies.yaml"),
        ("filler", FillerSpec, texts, "filler.yaml"),
    ):
        parts[key] = _validate(model, _read_yaml(home / name), home / name)
    workspace_path = instructions / WORKSPACE_FILE
    if workspace_path.is_file():
        parts["workspace"] = _validate(WorkspaceTexts, _read_yaml(workspace_path), workspace_path)
    elif language is not Language.EN:
        raise SpecError(workspace_path, "<file>", "file not found: another language words the workspace tools too")
    else:
        parts["workspace"] = ENGLISH_WORKSPACE
    cells_path = root / "cells.yaml"
    cells_doc = _read_yaml(cells_path)
    if not isinstance(cells_doc, dict) or "cells" not in cells_doc:
        raise SpecError(cells_path, "cells", "expected a mapping with a 'cells' list")
    if not isinstance(cells_doc["cells"], list):
        raise SpecError(cells_path, "cells", "expected a list of cells")
    parts["cells"] = [_validate(CellSpec, item, cells_path, prefix=f"{cell_label(item, i)}.")
                      for i, item in enumerate(cells_doc["cells"])]
    styles_path = texts / STYLES_FILE
    parts["styles"] = _validate(StylesSpec, _read_yaml(styles_path), styles_path).styles
    type_paths = sorted((texts / "types").glob("*.yaml"))
    inside = {p.resolve() for p in type_paths}
    type_paths += [p for p in extra_types or [] if Path(p).resolve() not in inside]
    parts["types"] = [load_type(p) for p in type_paths]
    typed = list(zip(type_paths, parts["types"], strict=True))
    check_types(typed, parts["filler"], texts / "filler.yaml")
    check_styles(parts["styles"], styles_path, parts["cells"], cells_path, typed)
    check_split_fields(typed, overlay)
    if overlay is not None:
        _check_overlay_apart(root, texts, parts["world"], typed)
    parts["type_files"] = {t.id: str(p) for t, p in zip(parts["types"], type_paths, strict=True)}
    prompt_path = instructions / "system_prompt.jinja"
    try:
        parts["system_prompt"] = prompt_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(prompt_path, "<file>", "file not found") from None
    try:
        return StandingSpec.model_validate(parts)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(root, ".".join(str(p) for p in first["loc"]) or "<root>", first["msg"]) from None


def _check_overlay_apart(root: Path, overlay: Path, world: WorldSpec, typed: list[tuple[Path, CommitmentTypeSpec]]
                         ) -> None:
    """A split overlay against the data directory: no shared type, tool, type word, name, team or channel (the
    names against the directory's world in every language it has)."""
    main = load_spec(root)
    main_typed = [(Path(main.type_files[t.id]), t) for t in main.types]
    paths = [language_dir(root, lang) / "world.yaml" for lang in languages_of(root)]
    worlds = [(path, _validate(WorldSpec, _read_yaml(path), path)) for path in paths]
    check_apart(world, overlay / "world.yaml", typed, worlds, main_typed)
