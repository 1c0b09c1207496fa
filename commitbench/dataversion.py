"""Is a data directory's ``VERSION`` still true of its files? The digest lock of an episode set.

An episode data directory (``episodes/data/standing``, a student's copy of it) names its version in
``VERSION``; runs record it and refuse to mix versions. A version is only as good as the discipline of
bumping it: edit a text, forget the bump, and two different episode sets pass for one. So the directory
also holds ``VERSION.lock``: the version and the sha256 of the directory's files (every file but
``VERSION`` and the lock itself) when that version was last locked. :func:`check_data` compares the three:

* ``locked``: the files are the ones the version was locked with;
* ``changed``: the files differ but ``VERSION`` still names the locked version (data changed, version not
  bumped): bump ``VERSION`` and lock again;
* ``unlocked``: no lock, or ``VERSION`` names another version than the lock (bumped, not yet locked).

``commitbench episodes validate`` warns on anything but ``locked``; ``commitbench run`` refuses it unless
``--allow-unversioned`` (the manifest then records the state beside the digest). ``commitbench episodes
validate --lock`` writes the lock after validating, and refuses to lock changed files under a version that
was locked with other files: that is the mistake the lock is there to catch.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from commitbench.digests import digest
from commitbench.jsonl import write_atomic
from commitbench.yamlfile import YamlError, read_yaml

__all__ = [
    "LOCK_FILE", "OVERLAY_DIRS", "VERSION_FILE", "DataCheck", "DataState", "UnversionedDataError", "check_data",
    "combine_checks", "data_digest", "hash_tree", "write_lock",
]

VERSION_FILE = "VERSION"
LOCK_FILE = "VERSION.lock"
_LOCK_HEADER = (
    "# The digest of this directory's files (all but VERSION and this file) when VERSION was last locked.\n"
    "# Written by 'commitbench episodes validate DIR --lock'; edit the data, bump VERSION, lock again.\n"
)


# A data directory's overlays (languages/<code>/, splits/<split>/), each versioned and locked on its own.
OVERLAY_DIRS = frozenset({"languages", "splits"})


def hash_tree(root: Path, exclude: frozenset[str] = frozenset(), skip_dirs: frozenset[str] = frozenset()) -> str:
    """sha256 over the relative paths and bytes of every file below ``root`` (a data version), but those whose
    relative path is in ``exclude``, those under a top-level folder in ``skip_dirs``, and Python caches."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.relative_to(root).as_posix() not in exclude
                   and p.relative_to(root).parts[0] not in skip_dirs)
    return digest(*(part for path in files
                    for part in (path.relative_to(root).as_posix(), b"\0", path.read_bytes(), b"\0")))


def data_digest(root: Path | str) -> str:
    """The digest the lock records: every file of the directory but ``VERSION``, the lock, and its overlays
    (``languages/<code>/``, ``splits/<split>/``, which have versions and locks of their own)."""
    return hash_tree(Path(root), frozenset({VERSION_FILE, LOCK_FILE}), OVERLAY_DIRS)


class DataState(str, Enum):
    """How a data directory's files stand to its version."""

    LOCKED = "locked"
    CHANGED = "changed"
    UNLOCKED = "unlocked"


class DataCheck(BaseModel):
    """A data directory's files against its version and lock."""

    model_config = ConfigDict(frozen=True)

    directory: str = Field(description="The data directory.")
    version: str = Field(description="What its VERSION file says.")
    digest: str = Field(description="sha256 of its files now (all but VERSION and the lock).")
    state: DataState = Field(description="locked, changed (files differ, version not bumped) or unlocked.")
    locked_version: str | None = Field(description="The version the lock records (null: no lock).")
    locked_digest: str | None = Field(description="The digest the lock records (null: no lock).")

    @property
    def ok(self) -> bool:
        return self.state is DataState.LOCKED

    def message(self) -> str:
        """What is wrong and what to do (empty when the files are the locked ones)."""
        where = self.directory
        if self.state is DataState.CHANGED:
            return (f"the episode data in {where} changed since version {self.version} was locked, but VERSION "
                    f"still says {self.version}: runs on it would pass for version {self.version}. Bump VERSION "
                    f"(e.g. {self.version}+mine) and run 'commitbench episodes validate {where} --lock'")
        if self.state is DataState.UNLOCKED:
            if self.locked_version is None:
                return (f"{where} has no {LOCK_FILE}: nothing says its files are version {self.version}. Run "
                        f"'commitbench episodes validate {where} --lock'")
            return (f"VERSION in {where} says {self.version}, the lock records version {self.locked_version}: "
                    f"lock the new version with 'commitbench episodes validate {where} --lock'")
        return ""


class UnversionedDataError(ValueError):
    """A run on episode data whose files are not the ones its version was locked with."""


def _read_lock(root: Path) -> tuple[str, str] | None:
    path = root / LOCK_FILE
    if not path.exists():
        return None
    try:
        data = read_yaml(path)
    except YamlError as exc:
        raise ValueError(f"{path}: {exc.detail}") from None
    if not isinstance(data, dict) or not isinstance(data.get("version"), str | int) or not isinstance(
            data.get("digest"), str):
        raise ValueError(f"{path}: expected 'version' and 'digest' (write it with 'commitbench episodes validate "
                         f"{root} --lock')")
    return str(data["version"]), data["digest"]


def check_data(root: Path | str, version: str) -> DataCheck:
    """Compare a data directory's files with its lock (``version``: what its VERSION file says)."""
    root = Path(root)
    now = data_digest(root)
    lock = _read_lock(root)
    if lock is None or lock[0] != version:
        state = DataState.UNLOCKED
    else:
        state = DataState.LOCKED if lock[1] == now else DataState.CHANGED
    return DataCheck(directory=str(root), version=version, digest=now, state=state,
                     locked_version=lock[0] if lock else None, locked_digest=lock[1] if lock else None)


def combine_checks(checks: list[DataCheck], version: str) -> DataCheck:
    """One check for a data directory and the overlays a selection plays: the first that is not locked (what to
    fix), else the directory's own with the combined ``version`` and a digest over every part's digest."""
    for check in checks:
        if not check.ok:
            return check
    if len(checks) == 1:
        return checks[0]
    both = digest(*(c.digest for c in checks), sep="\n")
    return checks[0].model_copy(update={"version": version, "digest": both, "locked_version": version,
                                        "locked_digest": both})


def write_lock(root: Path | str, version: str) -> DataCheck:
    """Lock the directory's files as ``version``; a ValueError for changed files under a version locked before."""
    check = check_data(root, version)
    if check.state is DataState.CHANGED:
        raise ValueError(check.message())
    write_atomic(Path(root) / LOCK_FILE, f"{_LOCK_HEADER}version: {version!r}\ndigest: {check.digest}\n")
    return check_data(root, version)
