"""Write the viewer's static site: one page, its script and style, and the run data as script files.

Layout of the site directory::

    index.html             the page (overview, run list, transcript, side by side: one page, routed by '#')
    assets/app.js, .css    hand-written script and style (package data; no framework, no network)
    data/meta.js           the run, its columns and metrics, the overview tables with their links
    data/index.js          the run list: one entry per run, column by column (values coded once)
    data/runs/NNNNN.js     transcript pages, RUN_SHARD runs per file, loaded when a page needs one
    data/text/NNNNN.js     words for free-text search, TEXT_SHARD runs per file, loaded at the first search
    img/                   the report's figures
    report.json            the report document (what ``commitbench report --json`` prints)

Browsers refuse fetch and XHR between ``file://`` pages, so every data file is a script that hands
its data to a global registry (``commitbench.meta(...)``, ``commitbench.runs(shard, [...])``...);
the page adds a ``<script>`` element to load one. Nothing is fetched from the network.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench.analysis.view.model import ColumnKind, Overview, RunRecord, RunSource

RUN_SHARD = 100
TEXT_SHARD = 2_000
ASSETS = ("index.html", "app.js", "style.css")
REGISTRY = "commitbench"
FLAG_CODES = {False: 0, True: 1, None: 2}


class SiteSummary(BaseModel):
    """What :func:`write_site` wrote."""

    out: str = Field(description="The site directory.")
    index: str = Field(description="The page to open.")
    runs: int = Field(description="Runs listed.")
    finished: int = Field(description="Runs without an infrastructure error.")
    run_shards: int = Field(description="Transcript files.")
    text_shards: int = Field(description="Search-text files.")
    bytes: int = Field(description="Bytes written in all.")


def _script(call: str, *args: Any) -> str:
    body = ",".join(json.dumps(a, separators=(",", ":"), ensure_ascii=True) for a in args)
    return f"{REGISTRY}.{call}({body});\n"


class _Column:
    """One run-list column, coded as it is filled."""

    def __init__(self, name: str, kind: ColumnKind) -> None:
        self.name, self.kind = name, kind
        self.values: list[str] = []
        self.codes: list[int] = []
        self._lookup: dict[str, int] = {}

    def add(self, value: Any) -> None:
        if self.kind is ColumnKind.FLAG:
            self.codes.append(FLAG_CODES[None if value is None else bool(value)])
        elif self.kind is ColumnKind.COUNT:
            self.codes.append(-1 if value is None or value != value else int(value))
        else:
            text = "" if value is None else str(value)
            code = self._lookup.get(text)
            if code is None:
                code = self._lookup[text] = len(self.values)
                self.values.append(text)
            self.codes.append(code)

    def data(self) -> dict[str, Any]:
        if self.kind is ColumnKind.FACET:
            return {"values": self.values, "codes": self.codes}
        return {"codes": self.codes}


class _Writer:
    """Streams records into shard files and collects the run index."""

    def __init__(self, out: Path, source: RunSource) -> None:
        self.out = out
        self.columns = [_Column(c.name, c.kind) for c in source.columns]
        self.keys: list[str] = []
        self.episode_codes: list[int] = []
        self.episodes: dict[str, int] = {}
        self.ok_rows: list[dict[str, Any]] = []
        self.ok_positions: list[int] = []
        self.pages: list[str] = []
        self.texts: list[str] = []
        self.shared: dict[int, str] = {}
        self.run_shards = 0
        self.text_shards = 0
        self.bytes = 0

    def write(self, relative: str, text: str) -> None:
        path = self.out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        self.bytes += len(data)

    def add(self, record: RunRecord) -> None:
        position = len(self.keys)
        self.keys.append(record.key)
        for column in self.columns:
            column.add(record.row.get(column.name))
        if record.ok:
            self.ok_rows.append(record.row)
            self.ok_positions.append(position)
        episode = self.episodes.get(record.episode)
        if episode is None:
            episode = self.episodes[record.episode] = len(self.episodes)
            self.shared[episode] = record.shared_text
        self.episode_codes.append(episode)
        self.pages.append(record.page.model_dump_json(exclude_defaults=True))
        self.texts.append(record.text)
        if len(self.pages) == RUN_SHARD:
            self.flush_pages()
        if len(self.texts) == TEXT_SHARD:
            self.flush_texts()

    def flush_pages(self) -> None:
        if self.pages:
            body = f"{REGISTRY}.runs({self.run_shards},[" + ",".join(self.pages) + "]);\n"
            self.write(f"data/runs/{self.run_shards:05d}.js", body)
            self.run_shards += 1
            self.pages = []

    def flush_texts(self) -> None:
        if self.texts:
            shared = {str(code): text for code, text in self.shared.items()}
            self.write(f"data/text/{self.text_shards:05d}.js",
                       _script("text", self.text_shards, {"runs": self.texts, "episodes": shared}))
            self.text_shards += 1
            self.texts = []
            self.shared = {}


def copy_assets(out: Path) -> None:
    """The page, script and style, from the package."""
    root = resources.files("commitbench.analysis.view").joinpath("assets")
    (out / "assets").mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        data = root.joinpath(name).read_bytes()
        target = out / name if name.endswith(".html") else out / "assets" / name
        target.write_bytes(data)


def _clear(out: Path) -> None:
    """Remove what an earlier build wrote (only the site's own folders and files).

    A directory that holds anything else and no earlier site is refused: nothing of it is removed.
    """
    if out.exists() and any(out.iterdir()) and not (out / "data" / "meta.js").is_file():
        raise ValueError(f"{out} is not empty and holds no site written by commitbench view; "
                         "choose a new or empty directory")
    for folder in ("data", "assets", "img"):
        if (out / folder).is_dir():
            shutil.rmtree(out / folder)
    for name in ("index.html", "report.json"):
        if (out / name).exists():
            (out / name).unlink()


def write_site(
    out: Path | str,
    source: RunSource,
    overview: Overview,
    report: dict[str, Any],
    figures: Sequence[Path] = (),
    facts: dict[str, Any] | None = None,
) -> SiteSummary:
    """Write the whole site under ``out`` (what an earlier build left there is replaced).

    ``figures`` are image files copied to ``img/`` (the overview's figures name them there);
    ``facts`` is extra plain data the page shows about the run (its manifest's name, status...).
    """
    out = Path(out)
    _clear(out)
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    writer = _Writer(out, source)
    for record in source.records:
        writer.add(record)
    writer.flush_pages()
    writer.flush_texts()
    metric_names = [m.name for m in source.metrics]
    masks = [0] * len(writer.keys)
    members = source.members(writer.ok_rows)
    for bit, name in enumerate(metric_names):
        for position, inside in zip(writer.ok_positions, members.get(name, []), strict=False):
            if inside:
                masks[position] |= 1 << bit
    index = {
        "n": len(writer.keys), "keys": writer.keys, "episodes": writer.episode_codes,
        "columns": {c.name: c.data() for c in writer.columns}, "metrics": masks,
    }
    writer.write("data/index.js", _script("index", index))
    if figures:
        (out / "img").mkdir(exist_ok=True)
    for figure in figures:
        shutil.copyfile(figure, out / "img" / Path(figure).name)
    writer.write("report.json", json.dumps(report, indent=2, sort_keys=True))
    meta = {
        "suite": source.suite, "judge": source.judge, "judges": list(source.judges),
        "columns": [c.model_dump(mode="json") for c in source.columns],
        "metrics": [m.model_dump(mode="json") for m in source.metrics],
        "overview": overview.model_dump(mode="json"), "facts": facts or {},
        "runShard": RUN_SHARD, "textShard": TEXT_SHARD, "runShards": writer.run_shards,
        "textShards": writer.text_shards, "runs": len(writer.keys), "finished": len(writer.ok_positions),
    }
    writer.write("data/meta.js", _script("meta", meta))
    return SiteSummary(
        out=str(out), index=str(out / "index.html"), runs=len(writer.keys), finished=len(writer.ok_positions),
        run_shards=writer.run_shards, text_shards=writer.text_shards, bytes=writer.bytes,
    )
