"""What the command modules share: model slots from flags, the judge of a run, printing reports.

One flag has one meaning in every command: ``--model`` is the tested model and ``--judge-model`` the
judge's (either may be ``local``, the embedded model); ``--judge`` names whose labels (``rules`` or
``llm`` when labelling; a stored labeller such as ``llm:MODEL`` when reading); ``--n-boot`` is the
number of bootstrap replicates.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from commitbench.cli import UsageError

LOCAL = "local"


def label_of(model: str) -> str:
    """A model name as a label (letters, digits, '.', '_', '-')."""
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")
    return label or "model"


def model_entry(
    model: str, base_url: str | None = None, api_key_env: str | None = None, generation: dict[str, Any] | None = None,
    flag: str = "--model", protocol: str | None = None,
) -> Any:
    """A config model entry for ``model`` (``local``: the embedded model, started when it is needed)."""
    from pydantic import ValidationError

    from commitbench.modelentry import GenerationSettings, ModelEntry

    generation = dict(generation or {})
    try:
        if model == LOCAL:
            if base_url:
                raise UsageError(f"{flag} local starts the embedded model; it takes no base URL")
            # Sampling settings left unset get the embedded model's defaults (modelentry.LOCAL_SETTINGS).
            return ModelEntry(name="local", local=True, settings=GenerationSettings(**generation), protocol=protocol)
        generation["model"] = model
        fields: dict[str, Any] = {
            "name": label_of(model),
            "base_url": base_url or "http://127.0.0.1:8000/v1",
            "settings": GenerationSettings(**generation),
            "protocol": protocol,
        }
        if api_key_env is not None:
            fields["api_key_env"] = api_key_env
        return ModelEntry(**fields)
    except ValidationError as exc:
        raise UsageError(f"bad settings for {flag} {model}: {exc.errors()[0]['msg']}") from None


def add_judge_flags(parser: argparse.ArgumentParser | Any, *, labelling: bool) -> None:
    """``--judge`` and the judge model's flags, the same in every command that labels."""
    if labelling:
        parser.add_argument("--judge", choices=["rules", "llm"], default=None,
                            help="rules (the suite's offline labeller) or llm (default: the run's configured judge)")
    parser.add_argument("--judge-model", default=None, help="judge model name on --judge-base-url, or 'local'")
    parser.add_argument("--judge-base-url", default=None, help="OpenAI-compatible base URL of the judge model")
    parser.add_argument("--judge-api-key-env", default=None, help="environment variable with the judge's API key")
    parser.add_argument("--response-format", choices=["json_schema", "json_object"], default=None,
                        help="how the judge's schema is sent (default json_schema; json_object for the local model)")
    parser.add_argument("--max-attempts", type=int, default=3, help="attempts per item before a judge error")


def judge_config(args: argparse.Namespace, default: Any = None) -> Any:
    """The judge the flags ask for, else ``default`` (a run's configured judge), else the offline labeller."""
    from pydantic import ValidationError

    from commitbench.config import JudgeConfig

    kind = getattr(args, "judge", None) or ("llm" if args.judge_model else None)
    if kind is None:
        return default if default is not None else JudgeConfig()
    if args.max_attempts < 1:
        raise UsageError("--max-attempts must be at least 1")
    if kind == "rules":
        if args.judge_model:
            raise UsageError("--judge rules uses no model; leave out --judge-model")
        return JudgeConfig()
    if not args.judge_model:
        if default is not None and default.kind == "llm":
            return default
        raise UsageError("--judge llm needs --judge-model NAME (with --judge-base-url) or --judge-model local")
    if args.judge_model != LOCAL and not args.judge_base_url:
        raise UsageError(f"--judge-model {args.judge_model} needs --judge-base-url (an OpenAI-compatible /v1 URL)")
    generation = {"max_tokens": args.max_tokens} if getattr(args, "max_tokens", None) else {}
    entry = model_entry(args.judge_model, args.judge_base_url, args.judge_api_key_env, generation, "--judge-model")
    try:
        return JudgeConfig(kind="llm", model=entry, response_format=args.response_format,
                           max_attempts=args.max_attempts)
    except ValidationError as exc:
        raise UsageError(exc.errors()[0]["msg"]) from None


def check_n_boot(n_boot: int) -> int:
    """``--n-boot`` as given, when it is a number of bootstrap replicates the analysis takes."""
    from commitbench.analysis.bootstrap import MAX_N_BOOT

    if not 1 <= n_boot <= MAX_N_BOOT:
        raise UsageError(f"--n-boot must be from 1 to {MAX_N_BOOT:,}, got {n_boot}")
    return n_boot


# Characters a terminal acts on (C0 and C1 controls, DEL) or that reorder the text around them (bidirectional
# controls): text a command prints comes from whoever wrote it (a stored commitment, a reply to check), so each
# is shown as an escape, never sent as is.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _is_unsafe(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F or ch in _BIDI


def safe(text: object) -> str:
    """``text`` with every control character written as an escape (\\n, \\x1b, \\u202e)."""
    value = str(text)
    if not any(_is_unsafe(ch) for ch in value):
        return value
    return "".join(_escape_char(ch) if _is_unsafe(ch) else ch for ch in value)


def print_safe_json(data: Any, indent: int | None = 2) -> None:
    """``data`` as JSON on stdout, every character a terminal would act on escaped (the document stays equal)."""
    # JSON escapes C0 controls itself; the C1 and bidirectional ones it leaves as they are get \\u escapes
    # (every character of the text is inside a JSON string, so the document stays equal).
    text = json.dumps(data, ensure_ascii=False, indent=indent)
    if any(_left_by_json(ch) for ch in text):
        text = "".join(f"\\u{ord(ch):04x}" if _left_by_json(ch) else ch for ch in text)
    sys.stdout.write(text + "\n")


def _left_by_json(ch: str) -> bool:
    return _is_unsafe(ch) and ord(ch) >= 0x20  # the C0 ones outside strings are JSON's own line breaks


def print_json(payload: Any) -> None:
    """One JSON document on stdout (a pydantic model, or plain data)."""
    data = payload.model_dump(mode="json") if hasattr(payload, "model_dump") else payload
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def render(report: Any) -> None:
    """Print a report's summary lines and tables (``views()``) on the console."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not console.is_terminal:  # a file or a pipe: room for the intervals on one line
        console = Console(width=max(console.width, 200))
    lines = report.summary_lines() if hasattr(report, "summary_lines") else []
    if lines:
        console.print(lines[0], markup=False)
    for view in report.views():
        # Plain text, never markup: a player named 'chat:m [tr]' must print as named.
        table = Table(title=Text(view.title), title_justify="left")
        for index, column in enumerate(view.columns):
            numeric = view.numeric[index] if index < len(view.numeric) else False
            table.add_column(Text(column), justify="right" if numeric else "left", overflow="fold")
        for row in view.rows:
            table.add_row(*(Text(str(cell)) for cell in row))
        console.print(table)
        if view.note:
            console.print(view.note, style="dim", markup=False)
    for line in lines[1:]:
        console.print(line, style="dim", markup=False)
    files = [p for paths in getattr(report, "files", {}).values() for p in paths]
    if files:
        console.print(f"written: {Path(files[0]).parent}/ ({', '.join(Path(p).name for p in files)})", markup=False)


def readable_run_dir(path: Path) -> Path:
    """The run directory ``report``, ``view`` and ``export`` read for ``path``: ``path`` itself, or, when it is
    an inspect log directory (or log file) of the commitbench tasks, the run directory made of it
    (:func:`commitbench.inspecteval.logs.convert_logs`: the sibling ``<LOG_DIR>-commitbench``), said on stderr."""
    from commitbench.inspecteval.logs import InspectLogError, convert_logs, is_inspect_log

    if not is_inspect_log(path):
        return path
    try:
        summary = convert_logs(path)
    except InspectLogError as exc:
        raise UsageError(str(exc)) from None
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("inspect_ai"):
            raise
        raise UsageError(f"{path} holds inspect logs; reading them needs inspect-ai (pip install -e '.[inspect]')"
                         ) from None
    done = "written" if summary.rewritten else "already written, unchanged"
    print(f"commitbench: {path} holds inspect logs: {summary.samples} samples of {len(summary.logs)} log(s) read as "
          f"the run directory {summary.run_dir} ({done}; {summary.cells_done} of {summary.cells_total} cells)",
          file=sys.stderr)
    return Path(summary.run_dir)


def unwritable_reason(directory: Path) -> str | None:
    """None when files can be created in ``directory``, else why not (read-only storage, no permission)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


def add_labels_flag(parser: argparse.ArgumentParser) -> None:
    """``--labels DIR``: labels written by ``commitbench label --out DIR``, read before the run directory's."""
    parser.add_argument("--labels", type=Path, default=None, metavar="DIR",
                        help="a directory of labels written by 'commitbench label --out DIR' (for a run directory "
                        "that cannot be written); its labels files are read before the run directory's")


def labels_dir_arg(labels: Path | None) -> Path | None:
    """``--labels DIR`` checked: an existing directory, or a one-line error."""
    if labels is not None and not labels.is_dir():
        raise UsageError(f"--labels {labels} is not a directory (one written by 'commitbench label --out')")
    return labels
