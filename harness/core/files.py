"""Writing a file of a report folder: never through a link, never half.

Every file a report writes (``report.md``, ``report.html``, each plot PNG,
``versions.md``) is written by :func:`replace` (or :func:`write_text`): into
a new file of a random name in the target's folder, created exclusively
(``O_EXCL | O_NOFOLLOW``, so no link of that name is followed), then renamed
over the target with :func:`os.replace`.  A rename replaces the directory
entry itself: a symbolic link planted at ``report.md`` (or a hard link to a
file elsewhere) is replaced by a regular file, and what it pointed to is left
as it was.  A reader never sees a half-written file, and a write that fails
leaves the target as it was and no temporary file behind.

:func:`file_name` makes a name from a record (a model, a machine, an
operator) fit to be one part of a file name: no separator, no ``..``.

Framework-free.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

# The longest part of a file name made from a record's name.
NAME_CHARS = 64


@contextlib.contextmanager
def replace(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; when the block
    ends without an exception the file is flushed, ``fsync``\\ ed and renamed
    over ``path`` (see the module docstring), else it is removed and
    ``path`` is left as it was.  The new file's mode is ``0o666`` less the
    umask, as for any new file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temporary, flags, 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(path)  # the entry itself: a link there is replaced
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` by :func:`replace`; ``path``."""
    with replace(path) as handle:
        handle.write(text.encode("utf-8"))
    return path


def file_name(name: str) -> str:
    """``name`` fit to be part of a file name: each character other than an
    ASCII letter, digit, ``.``, ``_`` or ``-`` becomes ``_``, a run of dots
    ``..`` becomes ``__``, at most :data:`NAME_CHARS` characters."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).replace("..", "__")
    return safe[:NAME_CHARS] or "_"
