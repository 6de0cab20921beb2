"""The spool: runs that could not be posted, kept on disk until a later post succeeds.

A run whose post fails for good (the server unreachable after every retry, or a token
refused) is written to the spool directory as one JSON Lines file of its own, atomically
(a temporary file in the same directory, flushed to disk, then renamed), so a job killed
mid-write leaves either the whole file or nothing, and jobs sharing a machine never write
the same file. :meth:`Spool.flush` posts every file and deletes it once stored; posting
is idempotent (the server answers an identical retry as ``existing``), so a flush that
dies half-way, or two flushes at once, store each run once.

The directory: ``CADENCE_SPOOL_DIR``, else a per-user cache directory
(``$XDG_CACHE_HOME/cadence/spool``, ``~/.cache/cadence/spool``; on macOS
``~/Library/Caches/cadence/spool``; on Windows ``%LOCALAPPDATA%\\cadence\\spool``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cadence_client.errors import CadenceAPIError, ConflictError, ValidationFailed

if TYPE_CHECKING:
    from cadence_client.client import CadenceClient

log = logging.getLogger("cadence_client")

SUFFIX = ".jsonl"
REJECTED = "rejected"  # runs the server refused (422, 409): kept, never re-sent


def default_directory() -> Path:
    """``CADENCE_SPOOL_DIR``, else the per-user cache directory's ``cadence/spool``."""
    configured = os.environ.get("CADENCE_SPOOL_DIR")
    if configured:
        return Path(configured).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    return base / "cadence" / "spool"


@dataclass
class FlushResult:
    """What :meth:`Spool.flush` did: runs stored (``created`` + ``existing``), runs the
    server refused (moved to ``rejected/`` with the reason), files still waiting."""

    created: int = 0
    existing: int = 0
    rejected: list[str] = field(default_factory=list)
    remaining: int = 0
    error: str | None = None

    @property
    def stored(self) -> int:
        return self.created + self.existing


class Spool:
    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()

    def write(self, runs: Sequence[Mapping[str, Any]]) -> Path:
        """Write ``runs`` (JSON-ready payloads) as one new file; returns its path."""
        _private_directory(self.directory)
        text = "".join(
            json.dumps(dict(r), allow_nan=False, ensure_ascii=False, sort_keys=True) + "\n"
            for r in runs
        )
        # Named so that sorting the names sorts the files by when they were written.
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}{SUFFIX}"
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            target = self.directory / name
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def files(self) -> list[Path]:
        """The files waiting to be posted, oldest first (temporary files excluded)."""
        if not self.directory.is_dir():
            return []
        # A symlink placed in the spool is never read (it could name any file the user
        # can read, which a flush would post) nor written through.
        return sorted(
            p
            for p in self.directory.glob(f"*{SUFFIX}")
            if not p.name.startswith(".") and not p.is_symlink() and p.is_file()
        )

    def pending(self) -> list[dict[str, Any]]:
        """Every spooled run, oldest first."""
        return [run for path in self.files() for run in _read(path)]

    def flush(self, client: CadenceClient) -> FlushResult:
        """Post every spooled file, oldest first; a stored file is deleted.

        The server refusing a file's runs (422, 409) moves it to ``rejected/`` beside a
        ``.reason`` file, so one bad run never blocks the others. Any other failure
        (server down, token refused) stops the flush and keeps the rest for next time.
        """
        result = FlushResult()
        files = self.files()
        for index, path in enumerate(files):
            try:
                runs = _read(path)
            except FileNotFoundError:
                continue  # another flush stored it meanwhile
            except ValueError as exc:
                self._reject(path, f"unreadable: {exc}", result)
                continue
            try:
                stored = client.post_runs(runs)
            except (ValidationFailed, ConflictError) as exc:
                self._reject(path, str(exc), result)
                continue
            except CadenceAPIError as exc:  # 401/403 and the like: fixable, keep the file
                result.error, result.remaining = str(exc), len(files) - index
                return result
            except Exception as exc:  # ServiceUnavailable, or a transport problem
                result.error, result.remaining = str(exc), len(files) - index
                return result
            result.created += stored.created
            result.existing += stored.existing
            path.unlink(missing_ok=True)
        return result

    def _reject(self, path: Path, reason: str, result: FlushResult) -> None:
        folder = self.directory / REJECTED
        if folder.is_symlink():
            log.error("cadence: %s is a symlink: not moving %s through it", folder, path)
            return
        _private_directory(folder)
        target = folder / path.name
        try:
            os.replace(path, target)  # replaces a symlink at target, never follows it
        except FileNotFoundError:
            return
        _write_new(target.with_suffix(".reason"), reason + "\n")
        log.error("cadence: spooled runs in %s refused, moved to %s: %s", path, target, reason)
        result.rejected.append(str(target))


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; Windows has no symlinks to fear here


def _private_directory(directory: Path) -> None:
    """Make ``directory`` (and its parents) if missing; one this makes is 0700: the runs
    it holds name pipelines, costs and tags that other users of the machine need not
    read."""
    if directory.is_dir():
        return
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)  # whatever the umask


def _write_new(path: Path, text: str) -> None:
    """Write a new file at ``path``, replacing a file or symlink there, never writing
    through a symlink."""
    path.unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    except OSError as exc:  # a symlink planted between the unlink and the open
        log.error("cadence: not writing %s: %s", path, exc)
        return
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _read(path: Path) -> list[dict[str, Any]]:
    runs = []
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"not a plain file ({exc.strerror})") from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number}: {exc.msg}") from None
            if not isinstance(item, dict):
                raise ValueError(f"line {number}: not a run object")
            runs.append(item)
    return runs
