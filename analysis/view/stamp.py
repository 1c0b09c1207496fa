"""What a site was built from: a small stamp file written with the site, so an unchanged site is served again.

The stamp records the build's options, the viewer's own code (its version and the digest of its page,
script and style) and, for each run file the site reads (traces, manifest, cell table, stored labels),
its size, modification time and, for a file of at most :data:`DIGEST_LIMIT` bytes, its SHA-256. A site
whose stamp equals the stamp the run files give now was built from the same inputs with the same
options: ``commitbench view --serve`` serves it without a rebuild.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from commitbench.digests import digest

STAMP_FILE = "data/stamp.json"
RUN_FILES = ("traces.jsonl", "manifest.json", "cells.jsonl")
LABEL_FILES = "labels-*.jsonl"
# Files up to this size are digested too; a larger one (a long run's traces) is known by size and time.
DIGEST_LIMIT = 16 * 1024 * 1024


class FileStamp(BaseModel):
    """One input file as the build found it."""

    size: int = Field(description="Bytes.")
    mtime_ns: int = Field(description="Modification time (ns since the epoch).")
    sha256: str = Field(default="", description=f"SHA-256 of the content ('' for a file over {DIGEST_LIMIT} bytes).")


class SiteStamp(BaseModel):
    """What a site was built from."""

    code: str = Field(description="The viewer's version and the digest of its assets.")
    options: dict[str, Any] = Field(description="The build's options (run directory, judge, bootstrap, labels).")
    inputs: dict[str, FileStamp] = Field(description="Each run file read, by path.")


def _file_stamp(path: Path) -> FileStamp:
    info = path.stat()
    content = digest(path.read_bytes()) if info.st_size <= DIGEST_LIMIT else ""
    return FileStamp(size=info.st_size, mtime_ns=info.st_mtime_ns, sha256=content)


def input_files(run_dir: Path, labels_dir: Path | None) -> list[Path]:
    """The run files a site is built from: traces, manifest, cell table, and every stored labels file."""
    found = [run_dir / name for name in RUN_FILES if (run_dir / name).is_file()]
    for folder in (run_dir, labels_dir):
        if folder is not None and folder.is_dir():
            found.extend(sorted(folder.glob(LABEL_FILES)))
    return found


def code_identity() -> str:
    """The viewer's version and the digest of its page, script and style: a new viewer builds anew."""
    from commitbench import __version__
    from commitbench.analysis.view.site import assets

    parts = [part for name, data in assets() for part in (name.encode(), b"\0", data)]
    return f"{__version__}:{digest(*parts, length=16)}"


def current_stamp(run_dirs: list[Path], options: dict[str, Any], labels_dir: Path | None) -> SiteStamp:
    """The stamp the run directories and options give now."""
    inputs = {str(path.resolve()): _file_stamp(path)
              for run_dir in run_dirs for path in input_files(run_dir, labels_dir)}
    return SiteStamp(code=code_identity(), options=options, inputs=inputs)


def stamp_bytes(stamp: SiteStamp) -> bytes:
    return json.dumps(stamp.model_dump(mode="json"), indent=1, sort_keys=True).encode("utf-8")


def read_stamp(site: Path) -> SiteStamp | None:
    """The stamp of a built site (None: no site there, or one built before stamps were written)."""
    path = site / STAMP_FILE
    if not path.is_file() or not (site / "data" / "meta.js").is_file():
        return None
    try:
        return SiteStamp.model_validate_json(path.read_bytes())
    except ValidationError:
        return None


def unchanged(site: Path, stamp: SiteStamp) -> bool:
    """The site at ``site`` was built from these inputs with these options."""
    return read_stamp(site) == stamp
