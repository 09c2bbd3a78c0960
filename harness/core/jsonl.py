"""JSON Lines files: appended one whole line at a time, read with one policy.

Every file a command writes as it measures (``run-*.jsonl`` and
``floors-*.jsonl`` through ``harness.core.records``, an explain run's
``explain.jsonl``, an ops run's ``gate.jsonl`` and ``records.jsonl``) is
written by :func:`append` and read by :func:`read` (or :func:`objects`).

Writing.  :func:`append` writes one value as one line and ``fsync``\\ s it, so
a crash can lose the line being written but never corrupt earlier ones.  A
write that stores only part of the line (disk full, a quota, a file size
limit) or fails is undone (the file is cut back to its length before) and
raises :class:`WriteError` naming the file.  Ctrl-C cannot tear a line either:
SIGINT and SIGTERM wait until the line is written or undone.  Processes that
append to one file at once (the cluster tasks of one run) take turns
(``fcntl.lockf``, which NFS honours), and a line is never glued onto the torn
line a crash left: it starts on a line of its own.

Reading, one policy for every file:

- a line that is not JSON and is the *last* line, without its newline, is a
  write a crash cut short: it is skipped and :attr:`Lines.torn` names it
  (:meth:`Lines.warning`: one line on stderr naming the file and the line);
- a line that is not JSON elsewhere is such a torn line of an earlier crash,
  which the next append closed: it is skipped without a word (what
  ``records.scan`` always did);
- a line of JSON the parser cannot take (nested beyond its recursion limit, a
  number of thousands of digits) is skipped and named in
  :attr:`Lines.unreadable`, for the caller to count with the lines it cannot
  use (``records.Scan.skipped``; :func:`objects`: lines that are no object);
- a line longer than :data:`MAX_LINE_BYTES` (8 MiB) is skipped unparsed and
  named in :attr:`Lines.unreadable` (no record comes near it: a paired run's
  is tens of kilobytes, one of 100,000 timed steps about 2 MB);
- blank lines are skipped.

Only a regular file of at most :data:`MAX_FILE_BYTES` (256 MiB) is read
(``zoo.files.opened``, the project's one door for files): a FIFO, a device
such as ``/dev/zero``, a folder, a link or a larger file is refused in one
sentence (``zoo.files.Refused``) before a byte is read, and the file is
opened non-blocking, so that a FIFO cannot hang the reader.

A reader takes a shared lock while it reads, so a line another process is
appending at that moment is never seen half written.  A file that is not
UTF-8 text raises :class:`UnicodeDecodeError` (a ValueError).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zoo import files

SHOWN = 5  # skipped line numbers a warning names
# The largest file read (its records are held in memory at once) and the
# longest line parsed: a record of a run of 100,000 steps is about 2 MB.
MAX_FILE_BYTES = files.MAX_BYTES
MAX_LINE_BYTES = 8 * 1024 * 1024


class WriteError(OSError):
    """A line could not be written whole (disk full, quota, a read-only or
    vanished folder); the file holds every line written before it."""


def append(
    path: Path, value: Any, *, sort_keys: bool = False, noun: str = "line"
) -> None:
    """Append ``value`` as one JSON line and ``fsync`` it (see the module
    docstring); ``noun`` names a line in the error, e.g. ``record``.

    Raises :class:`WriteError` naming the file when the line cannot be
    written whole; the file is then as it was."""
    line = json.dumps(value, sort_keys=sort_keys) + "\n"
    with _signals_held():
        try:
            files.folder(path.parent, follow=True)
            fd = files.open_append(path)
        except OSError as exc:
            raise WriteError(
                f"cannot write {noun}s to {path}: {exc.strerror or exc}"
            ) from None
        try:
            # Several writers may share one file (``harness run-cell`` tasks
            # of a cluster on one shared folder): a POSIX lock, which NFS
            # honours, makes each line whole and the torn-line check true.
            fcntl.lockf(fd, fcntl.LOCK_EX)
            if _ends_torn(path):
                line = "\n" + line  # a crash left half a line: never glue onto it
            _write_whole(fd, path, line.encode(), noun)
        finally:
            os.close(fd)  # releases the lock


def _write_whole(fd: int, path: Path, data: bytes, noun: str) -> None:
    """Write ``data`` at the end of ``fd`` and fsync it, or leave the file as
    it was and raise WriteError."""
    start = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(data):
            count = os.write(fd, data[written:])
            if count <= 0:
                raise OSError(errno.ENOSPC, "no space left on device")
            written += count
        os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        reason = exc.strerror or str(exc)
        raise WriteError(
            f"could not write a {noun} to {path} ({reason}; {written} of "
            f"{len(data)} bytes written, then undone)"
        ) from None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the body runs (main thread only);
    a signal that arrives meanwhile is delivered when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _ends_torn(path: Path) -> bool:
    try:
        with files.opened(path) as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:  # missing, empty or too large a file (append refuses it)
        return False


@dataclass(frozen=True)
class Lines:
    """What a JSON Lines file holds: every JSON value with its line number
    (from 1), and the lines skipped that a reader should hear of."""

    path: Path
    values: list[tuple[int, Any]]
    unreadable: tuple[int, ...] = ()  # JSON beyond the parser's limits
    torn: int | None = None  # the last line, cut short by a crash mid-write

    def warning(self) -> str | None:
        """One line naming the torn last line; None when the file ends whole."""
        if self.torn is None:
            return None
        return (
            f"warning: skipped line {self.torn} of {self.path}, the last: it was "
            "cut short (a write that did not finish, e.g. a crash)"
        )


# A file the door refuses (no regular file, a link, too large): one sentence.
UnreadableFileError = files.Refused
claim = files.claim
open_regular = files.opened


def read(path: Path) -> Lines:
    """Every JSON value of ``path``, by the policy of the module docstring.

    Raises :class:`UnreadableFileError` for a file that is no regular file or
    is too large, OSError for a file that cannot be read (FileNotFoundError...) and
    UnicodeDecodeError for one that is not UTF-8 text."""
    text = _read_locked(path).decode("utf-8")
    lines = text.splitlines()
    ended = bool(lines) and text.splitlines(keepends=True)[-1] != lines[-1]
    values: list[tuple[int, Any]] = []
    unreadable: list[int] = []
    torn = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:  # its characters: at least as many bytes
            unreadable.append(number)
            continue
        try:
            values.append((number, json.loads(line)))
        except json.JSONDecodeError:
            if number == len(lines) and not ended:
                torn = number
        except (ValueError, RecursionError):  # a 5000-digit number, deep nesting
            unreadable.append(number)
    return Lines(path, values, tuple(unreadable), torn)


def _read_locked(path: Path) -> bytes:
    """The bytes of ``path``, read under a shared lock: a writer holding the
    lock (:func:`append`) finishes its line first; at most
    :data:`MAX_FILE_BYTES` (:func:`open_regular`)."""
    with files.opened(path, MAX_FILE_BYTES) as f:
        # Closing the file releases this process's locks on it, so a thread
        # of this process must not read a file another of its threads is
        # appending to (none does: every writer here is the main thread).
        with contextlib.suppress(OSError):  # a file system without locks
            fcntl.lockf(f.fileno(), fcntl.LOCK_SH)
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # it grew since it was measured
        raise UnreadableFileError(
            f"{path} grew past the {MAX_FILE_BYTES} bytes a file read here may "
            "have: it is not read"
        )
    return data


def skipped_warning(path: Path, skipped: Sequence[int], noun: tuple[str, str]) -> str:
    """One line naming the lines of ``path`` skipped as JSON but not what they
    should be: ``noun`` is its singular and plural (``("a record", "records")``)."""
    n = len(skipped)
    lines = ", ".join(str(i) for i in skipped[:SHOWN])
    more = ", ..." if n > SHOWN else ""
    if n == 1:
        return (
            f"warning: skipped 1 line of {path} that is JSON but not {noun[0]} "
            f"(line {lines})"
        )
    return (
        f"warning: skipped {n} lines of {path} that are JSON but not {noun[1]} "
        f"(lines {lines}{more})"
    )


_said: set[str] = set()


def warn(text: str) -> None:
    """Print ``text`` on stderr, unless this process already printed it (a
    file read again says nothing new)."""
    if text not in _said:
        _said.add(text)
        print(text, file=sys.stderr)


def objects(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, by the module's policy; the torn last
    line, and lines that are no object, are named on stderr (once each).

    Raises OSError for a file that cannot be read and UnicodeDecodeError for
    one that is not UTF-8 text."""
    found = read(path)
    kept = [value for _, value in found.values if isinstance(value, dict)]
    skipped = sorted(
        [*found.unreadable, *(n for n, v in found.values if not isinstance(v, dict))]
    )
    if skipped:
        warn(skipped_warning(path, skipped, ("an object", "objects")))
    if found.warning():
        warn(str(found.warning()))
    return kept
