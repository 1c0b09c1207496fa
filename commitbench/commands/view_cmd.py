"""``commitbench view RUN_DIR``: a static site to browse a run of either suite (the suite comes from its manifest).

    commitbench view runs/x                      # writes runs/x/view/index.html; open it in a browser
    commitbench view runs/x --out site --open    # somewhere else, and open it
    commitbench view runs/x --serve 8000         # and serve it on http://127.0.0.1:8000/ until Ctrl-C
                                                 # (a site built from the same run files is served as it is)
    commitbench view runs/x --serve 0 --watch    # and add the runs a running 'commitbench run' appends
    commitbench view runs/x --judge llm:MODEL    # grade with labels stored by 'commitbench label'
    commitbench view runs/a runs/b --out site    # several runs in one site, a picker chooses the run
    commitbench view runs --out site             # every run directory under runs/ likewise

Pages: the overview (every table of 'commitbench report' with its intervals; each number links to
the runs behind it; the figures), the run list (filter and sort by any column, free text over the
messages; the filter lives in the page address), a transcript per run, and two runs of one episode
side by side. The site needs no server and no network: it works from file://, loading the
transcripts it shows from script files. Without --out it also refreshes RUN_DIR/report/ as 'commitbench report'
does; with --out it writes nothing into RUN_DIR (which may be on read-only storage), and --labels DIR reads
labels written by 'commitbench label --out DIR'.
An inspect log directory of the tasks commitbench/standing or commitbench/followup is read as the run
directory made of it (the sibling LOG_DIR-commitbench, as 'commitbench report' makes it); the site goes
under that run directory unless --out says otherwise.
While it builds it shows a progress bar (on a terminal) or a progress line every 20 s (in a log or a pipe).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.cli import UsageError
from commitbench.commands.common import add_labels_flag
from commitbench.filethread import FileThread

DEFAULT_OUT = "view"
HOST = "127.0.0.1"
MAX_PORT = 65535


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("view", help="a static site to browse a run: tables, runs, transcripts",
                                   description=__doc__.split("\n\n", 1)[0], epilog=__doc__.split("\n\n", 1)[1],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, nargs="+", help="directory written by 'commitbench run', or an inspect "
                        "log directory (or log file) of commitbench/standing or commitbench/followup; several (or a "
                        "directory of run directories) make one site with a run picker (--out required)")
    parser.add_argument("--out", type=Path, default=None, help=f"site directory (default RUN_DIR/{DEFAULT_OUT})")
    parser.add_argument("--judge", default=None,
                        help="whose labels grade the runs: 'rules' (default) or a stored labeller such as llm:MODEL")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates of the tables (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add_labels_flag(parser)
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (on a terminal) or progress lines (every 20 s otherwise)")
    parser.add_argument("--open", action="store_true", help="open the site in the default browser")
    parser.add_argument("--serve", type=int, default=None, metavar="PORT",
                        help=f"serve the site on http://{HOST}:PORT/ until interrupted (0: any free port)")
    parser.add_argument("--watch", action="store_true",
                        help="with --serve: follow RUN_DIR/traces.jsonl; runs appended to it appear in the open page")
    parser.set_defaults(func=_handle)


class SiteSummary(BaseModel):
    """What :func:`write_site` wrote."""

    out: str = Field(description="The site directory.")
    index: str = Field(description="The page to open.")
    runs: int = Field(description="Runs listed.")
    finished: int = Field(description="Runs without an infrastructure error.")
    run_shards: int = Field(description="Transcript files.")
    text_shards: int = Field(description="Search-text files.")
    bytes: int = Field(description="Bytes written in all.")


SITE_PARTS = ("data", "assets", "img", "index.html", "report.json")
# Written before an earlier site is removed and removed once the new one is whole: a build that was stopped (Ctrl-C,
# SIGTERM, a crash) leaves it, so the next build knows the half-written site as its own and replaces it.
UNFINISHED_FILE = "unfinished.txt"
UNFINISHED_TEXT = ("commitbench view began writing the site in this directory and did not finish it. Run the same "
                   "command again: the new build replaces what is here.\n")
PROGRESS_UNIT = "runs"
# The report files a site shows (copied into img/); its tables are the site's own pages.
FIGURE_KEYS = ("figure", "comparisons_figure")


def _clear(out: Path) -> None:
    """Mark ``out`` as a site being written (:data:`UNFINISHED_FILE`) and remove what an earlier build wrote (only
    the site's own folders and files).

    A directory that holds anything else and no earlier site, finished or not, is refused: nothing of it is
    removed.
    """
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; the site needs a directory")
    ours = (out / "data" / "meta.js").is_file() or (out / UNFINISHED_FILE).is_file()
    if out.exists() and any(out.iterdir()) and not ours:
        raise UsageError(f"{out} is not empty and holds no site written by commitbench view; "
                         "choose a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)
    (out / UNFINISHED_FILE).write_text(UNFINISHED_TEXT, encoding="utf-8")  # first: a stop from here on leaves it
    for name in SITE_PARTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


class _Building:
    """What the progress display reads while a site is written: runs with an infrastructure error."""

    name = "view"

    def __init__(self) -> None:
        self.failed = 0

    def failed_cells(self) -> int:
        return self.failed

    def client_totals(self) -> None:
        return None


def write_site(
    out: Path, source: Any, ending: Any, progress: Any = None, stamp: bytes | None = None,
    siblings: Sequence[dict[str, str]] = (),
) -> SiteSummary:
    """Write the site's files under ``out`` (an earlier site there is replaced) and copy the figures.

    ``ending`` is called once every run is written, and returns the overview, the report document and the
    report's figures (a report built while the runs are read is then done). ``progress`` (a display of
    :mod:`commitbench.progress`) advances by one per run written; ``stamp`` is written last as the site's stamp
    file (:mod:`commitbench.analysis.view.stamp`); ``siblings`` (name and address of each run of a site of
    several runs) fill the page's run picker.
    """
    from commitbench.analysis.view.site import site_files_then
    from commitbench.analysis.view.stamp import STAMP_FILE

    def taken(runs: int, failed: int) -> None:
        if progress is not None:
            progress.source.failed += failed
            for _ in range(runs):
                progress.advance()

    figures: list[Path] = []

    def ended() -> tuple[Any, dict[str, Any]]:
        overview, document, drawn = ending()
        figures.extend(drawn)
        return overview, document

    _clear(out)
    written = 0
    folders: set[Path] = set()  # made already (a large site has a thousand files in a few folders)
    files = site_files_then(source, ended, facts={"siblings": list(siblings)}, on_run=taken)
    with FileThread(name="commitbench-view-files") as whole:  # whole files: written while the next are made
        while True:
            try:
                relative, data = next(files)
            except StopIteration as stop:
                counts = stop.value
                break
            path = out / relative
            if path.parent not in folders:
                path.parent.mkdir(parents=True, exist_ok=True)
                folders.add(path.parent)
            if isinstance(data, bytes):
                whole.put(path, data)
                written += len(data)
                continue
            # A file made in pieces is written here, a piece at a time: its pieces may read what the build holds.
            with path.open("wb") as handle:
                for piece in data:
                    handle.write(piece)
                    written += len(piece)
    for figure in figures:
        (out / "img").mkdir(exist_ok=True)
        shutil.copyfile(figure, out / "img" / figure.name)
        written += figure.stat().st_size
    if stamp is not None:
        (out / STAMP_FILE).write_bytes(stamp)
        written += len(stamp)
    (out / UNFINISHED_FILE).unlink()  # last: the site is whole
    return SiteSummary(out=str(out), index=str(out / "index.html"), bytes=written, **counts.model_dump())


def _facts(run_dir: Path, suite: Any, report: dict[str, Any]) -> list[Any]:
    from commitbench.analysis.view.model import Fact
    from commitbench.rundir import read_manifest

    manifest = read_manifest(run_dir)
    facts = [Fact(label="suite", value=suite.describe()), Fact(label="run directory", value=str(run_dir))]
    if manifest is not None:
        facts = [
            Fact(label="experiment", value=manifest.name), *facts,
            Fact(label="profile", value=str(report.get("profile") or manifest.config.get("profile") or "commitbench")),
            Fact(label="status", value=manifest.status.value),
            Fact(label="cells", value=f"{manifest.cells_done} of {manifest.cells_total} done"),
            Fact(label="players", value=", ".join(str(p.get("name", "")) for p in manifest.players)),
            Fact(label="arms", value=", ".join(manifest.interventions)),
            Fact(label="episodes", value=str(manifest.episodes)),
            Fact(label="samples", value=str(manifest.samples)),
            Fact(label="started", value=manifest.started_at),
            Fact(label="config hash", value=manifest.config_hash[:16]),
        ]
        if manifest.git:
            facts.append(Fact(label="commit", value=str(manifest.git.get("commit", ""))[:12]
                              + (" (dirty)" if manifest.git.get("dirty") else "")))
    facts.append(Fact(label="judge", value=str(report.get("judge", ""))))
    return facts


def site_dir(run_dir: Path | str, out: Path | str | None) -> Path:
    """Where the site of ``run_dir`` goes: ``out``, else ``RUN_DIR/view``."""
    from commitbench.commands.common import readable_run_dir

    return Path(out) if out is not None else readable_run_dir(Path(run_dir)) / DEFAULT_OUT


def site_stamp(run_dir: Path | str, judge: str | None = None, n_boot: int = 1000, seed: int = 0,
               labels_dir: Path | None = None) -> Any:
    """The stamp a site built now from ``run_dir`` with these options gets (see :mod:`..analysis.view.stamp`)."""
    from commitbench.analysis.view.stamp import current_stamp
    from commitbench.commands.common import readable_run_dir

    resolved = readable_run_dir(Path(run_dir)).resolve()
    options = {"run_dir": str(resolved), "judge": judge, "n_boot": n_boot, "seed": seed,
               "labels_dir": str(labels_dir.resolve()) if labels_dir is not None else None}
    return current_stamp([resolved], options, labels_dir)


def build_site(
    run_dir: Path | str, out: Path | str | None = None, judge: str | None = None, n_boot: int = 1000, seed: int = 0,
    labels_dir: Path | None = None, progress: bool | str = False, siblings: Sequence[dict[str, str]] = (),
) -> SiteSummary:
    """Build the site of a run directory (default ``RUN_DIR/view``), or of an inspect log directory of the tasks
    (read as the run directory made of it: :func:`commitbench.commands.common.readable_run_dir`).

    With ``out`` nothing is written into the run directory: the report's figures are drawn in a temporary
    directory and copied into the site. Without it the site and the report files go into the run directory,
    which must then be writable (a one-line error naming it otherwise). ``progress`` is a mode of
    :func:`commitbench.progress.make_progress` (False: none); ``siblings`` fill the run picker of a site of
    several runs (see :func:`build_sites`).
    """
    from commitbench.commands.common import check_n_boot, labels_dir_arg, readable_run_dir, unwritable_reason

    run_dir = readable_run_dir(Path(run_dir))
    check_n_boot(n_boot)
    labels_dir = labels_dir_arg(labels_dir)
    if out is None:
        problem = unwritable_reason(run_dir) if run_dir.is_dir() else None
        if problem is not None:
            raise UsageError(f"cannot write the site into {run_dir} ({problem}); give --out DIR to write it "
                             "elsewhere (nothing is then written into the run directory)")
        return _build_site(run_dir, run_dir / DEFAULT_OUT, judge, n_boot, seed, labels_dir, None, progress, siblings)
    with tempfile.TemporaryDirectory(prefix="commitbench-view-") as scratch:
        return _build_site(run_dir, Path(out), judge, n_boot, seed, labels_dir, Path(scratch), progress, siblings)


def _build_site(run_dir: Path, out: Path, judge: str | None, n_boot: int, seed: int, labels_dir: Path | None,
                files_dir: Path | None, progress_mode: bool | str, siblings: Sequence[dict[str, str]]) -> SiteSummary:
    from commitbench.analysis.view.stamp import stamp_bytes
    from commitbench.progress import make_progress, ticking
    from commitbench.rundir.reader import run_suite
    from commitbench.traces import count_latest_traces

    try:
        stamp = stamp_bytes(site_stamp(run_dir, judge, n_boot, seed, labels_dir))
        suite = run_suite(run_dir)
        total = count_latest_traces(run_dir, include_failed=True) if progress_mode else 0
        _check_writable(out)  # before the progress display: a site that cannot be written is one line
        progress = make_progress(_Building(), total, progress_mode, unit=PROGRESS_UNIT, calls=False)
        with ticking(progress):
            return _write(run_dir, out, judge, n_boot, seed, labels_dir, files_dir, suite, progress, stamp, siblings)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
    except OSError as exc:  # the site (or, without --out, the report files) cannot be written
        raise UsageError(f"cannot write {exc.filename or out}: {exc.strerror or exc}") from None


def _check_writable(out: Path) -> None:
    """Make the site directory and write and remove one file in it (an OSError naming it when it cannot)."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out, prefix=".writable-"):
        pass


def _write(run_dir: Path, out: Path, judge: str | None, n_boot: int, seed: int, labels_dir: Path | None,
           files_dir: Path | None, suite: Any, progress: Any, stamp: bytes,
           siblings: Sequence[dict[str, str]]) -> SiteSummary:
    from commitbench.analysis.view.model import Figure, Overview
    from commitbench.jointread import joint_read
    from commitbench.rundir import read_manifest
    from commitbench.suites import ReportOptions
    from commitbench.suites.kits import generic_view
    from commitbench.traces import trace_file

    source = (suite.view or generic_view(suite))(run_dir, judge or suite.offline_labeller, labels_dir)
    options = ReportOptions(judge=judge, n_boot=n_boot, seed=seed, labels_dir=labels_dir, files_dir=files_dir)
    manifest = read_manifest(run_dir)
    title = f"{manifest.name if manifest else run_dir.name}: {suite.name} run"

    def ending(report: Any, reason: str) -> tuple[Any, dict[str, Any], list[Path]]:
        if report is None:
            document: dict[str, Any] = {"suite": suite.name, "run_dir": str(run_dir), "error": reason}
            overview = Overview(title=title, facts=_facts(run_dir, suite, {"judge": judge or "rules"}),
                                summary=[f"No report: {reason}"], tables=[])
            return overview, document, []
        document = report.model_dump(mode="json")
        figures = [Path(p) for key in FIGURE_KEYS for p in report.files.get(key, [])]
        if files_dir is not None:  # drawn in a scratch directory: the site's own copies are what remains
            document["files"] = {key: [f"img/{Path(p).name}" for p in paths]
                                 for key, paths in report.files.items() if key in FIGURE_KEYS}
        overview = Overview(
            title=title, facts=_facts(run_dir, suite, document), summary=report.summary_lines(),
            tables=report.views(detail=True),
            figures=[Figure(title=p.stem.replace("_", " "), file=f"img/{p.name}") for p in figures],
        )
        return overview, document, figures

    # The report is built on another thread while the pages are written, from the same read of the traces.
    with joint_read(trace_file(run_dir), include_failed=True) as joint:
        reporter = _Reporter(suite, run_dir, options, joint)
        reporter.start()

        def finished() -> tuple[Any, dict[str, Any], list[Path]]:
            joint.host_done()  # the pages and the run index are written: the report takes the rest of its read
            return ending(*reporter.result())

        try:
            return write_site(out, source, finished, progress, stamp, siblings)
        finally:
            joint.host_done()  # on an error, a report still waiting for traces stops (its thread is a daemon)
            # and one that had every trace ends its work first: it writes its files into ``files_dir``, which may be
            # a scratch directory removed once this returns, and would make it again after that.
            reporter.join()


class _Reporter(threading.Thread):
    """The suite's report, built on a thread of its own (the guest of a joint read of the run's traces)."""

    def __init__(self, suite: Any, run_dir: Path, options: Any, joint: Any) -> None:
        super().__init__(name="commitbench-view-report", daemon=True)
        self.suite, self.run_dir, self.options, self.joint = suite, run_dir, options, joint
        self.report: Any = None
        self.reason = ""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.report = self.suite.report(self.run_dir, self.options)
        except ValueError as exc:  # no finished or labelled run: the runs are still worth a look
            self.reason = str(exc).strip("'\"")
        except BaseException as exc:  # raised again where the result is asked for
            self.error = exc
        finally:
            self.joint.guest_done()

    def result(self) -> tuple[Any, str]:
        """The report (None when the suite could not make one) and why not; the report's error, raised here."""
        self.join()
        if self.error is not None:
            raise self.error
        return self.report, self.reason


RUNS_FOLDER = "runs"


def is_run_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "traces.jsonl").is_file()


def run_dirs_of(paths: Sequence[Path]) -> list[Path]:
    """The run directories named: each path, or for a directory that is no run, the run directories in it."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not is_run_dir(path):
            inside = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))
            found.extend(inside if inside else [path])  # none: the single-run path reports what is missing
        else:
            found.append(path)
    return found


def build_sites(run_dirs: Sequence[Path], out: Path, judge: str | None = None, n_boot: int = 1000, seed: int = 0,
                labels_dir: Path | None = None, progress: bool | str = False) -> list[SiteSummary]:
    """One site of several runs: each run's site under ``OUT/runs/NAME/`` with a picker of the others, and
    ``OUT/index.html`` that opens the first."""
    names = [p.absolute().name for p in run_dirs]
    if len(set(names)) != len(names):
        raise UsageError("the run directories need distinct names: " + ", ".join(names))
    if out.exists() and any(out.iterdir()) and not (out / RUNS_FOLDER).is_dir():
        raise UsageError(f"{out} is not empty and holds no site of several runs; choose a new or empty directory")
    siblings = [{"name": name, "href": f"../{name}/index.html"} for name in names]
    summaries = [build_site(run_dir, out / RUNS_FOLDER / name, judge, n_boot, seed, labels_dir, progress, siblings)
                 for run_dir, name in zip(run_dirs, names, strict=True)]
    first = f"{RUNS_FOLDER}/{names[0]}/index.html"
    (out / "index.html").write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>commitbench runs</title>'
        f'<meta http-equiv="refresh" content="0; url={first}"></head>'
        f'<body><p><a href="{first}">Open the runs</a></p></body></html>\n', encoding="utf-8")
    return summaries


class _QuietHandler(SimpleHTTPRequestHandler):
    live: Any = None  # the runs added since the build (a LiveRuns), when the run is watched

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        from commitbench.analysis.view.live import LIVE_PATH

        address = urlsplit(self.path)
        if address.path != LIVE_PATH:
            super().do_GET()
            return
        try:
            start = int(parse_qs(address.query).get("from", ["0"])[0])
            body = self.live.since(start) if self.live is not None else b'{"watch":false,"total":0,"runs":[]}'
        except (OSError, ValueError) as exc:
            self.send_error(500, f"cannot read the new runs: {exc}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def make_server(site: Path, port: int, live: Any = None) -> ThreadingHTTPServer:
    """An HTTP server for the site directory on 127.0.0.1 (port 0: any free port); not started. With ``live``
    (a :class:`commitbench.analysis.view.live.LiveRuns`) it also answers the page's polls for new runs."""
    handler = functools.partial(type("_Handler", (_QuietHandler,), {"live": live}), directory=str(site))
    if not 0 <= port <= MAX_PORT:
        raise UsageError(f"--serve PORT must be from 0 to {MAX_PORT}, got {port}")
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        raise UsageError(f"cannot serve on {HOST}:{port}: {exc.strerror or exc}") from None


def _handle(args: argparse.Namespace) -> int:
    import webbrowser

    from commitbench.analysis.view.stamp import unchanged
    from commitbench.commands.common import labels_dir_arg
    from commitbench.progress import progress_mode

    if args.serve is not None and not 0 <= args.serve <= MAX_PORT:  # a usage error before the site is built
        raise UsageError(f"--serve PORT must be from 0 to {MAX_PORT}, got {args.serve}")
    if args.watch and args.serve is None:
        raise UsageError("--watch needs --serve PORT: the page picks the new runs up from the server")
    run_dirs = run_dirs_of(args.run_dir)
    if len(run_dirs) > 1:
        return _handle_several(args, run_dirs)
    args.run_dir = run_dirs[0]
    site = site_dir(args.run_dir, args.out)
    if args.serve is not None and unchanged(site, site_stamp(args.run_dir, args.judge, args.n_boot, args.seed,
                                                             labels_dir_arg(args.labels))):
        index = (site / "index.html").resolve()
        print(f"the site in {site} was built from the same run files with the same options: serving it "
              "without a rebuild", file=sys.stderr, flush=True)
    else:
        summary = build_site(args.run_dir, args.out, args.judge, args.n_boot, args.seed, args.labels,
                             progress_mode(not args.no_progress))
        index = Path(summary.index).resolve()
        megabytes = summary.bytes / 1e6
        print(f"wrote {summary.runs} runs ({summary.run_shards} transcript files, {megabytes:.1f} MB) to "
              f"{summary.out}; open {index.as_uri()}", flush=True)
    if args.serve is None:
        if args.open:
            webbrowser.open(index.as_uri())
        return 0
    live = None
    if args.watch:
        from commitbench.analysis.view.live import LiveRuns
        from commitbench.commands.common import readable_run_dir

        run_dir, labels_dir = readable_run_dir(Path(args.run_dir)), labels_dir_arg(args.labels)

        def view(folder: Path) -> Any:
            from commitbench.rundir.reader import run_suite
            from commitbench.suites.kits import generic_view

            suite = run_suite(folder)
            return (suite.view or generic_view(suite))(folder, args.judge or suite.offline_labeller,
                                                       labels_dir or run_dir)

        try:
            live = LiveRuns(run_dir, index.parent, view)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return _serve(make_server(index.parent, args.serve, live), args.open,
                  "; runs appended to the run's traces appear in the page" if live else "")


def _serve(server: ThreadingHTTPServer, open_page: bool, note: str = "") -> int:
    """Serve the site until Ctrl-C, saying where (and opening it in the browser with ``open_page``)."""
    import webbrowser

    url = f"http://{HOST}:{server.server_address[1]}/index.html"
    print(f"serving {url} (Ctrl-C stops){note}", flush=True)
    if open_page:
        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def _handle_several(args: argparse.Namespace, run_dirs: list[Path]) -> int:
    import webbrowser

    from commitbench.progress import progress_mode

    if args.out is None:
        raise UsageError("several runs make one site: give --out DIR")
    if args.watch:
        raise UsageError("--watch follows one run: name a single run directory")
    summaries = build_sites(run_dirs, args.out, args.judge, args.n_boot, args.seed, args.labels,
                            progress_mode(not args.no_progress))
    index = (args.out / "index.html").resolve()
    print(f"wrote the sites of {len(summaries)} run directories ({sum(s.runs for s in summaries)} runs) to "
          f"{args.out}; open {index.as_uri()}", flush=True)
    if args.serve is None:
        if args.open:
            webbrowser.open(index.as_uri())
        return 0
    return _serve(make_server(index.parent, args.serve), args.open)
