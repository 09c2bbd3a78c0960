"""The one door for files: every byte the project reads from a file it did
not write in the same call, and every file it writes, passes through here.

Reading (:func:`opened`, :func:`read_bytes`, :func:`read_text`,
:func:`read_json`, :func:`read_toml`, :func:`open_zip`, :func:`member`):

- only a regular file is read: a FIFO, a device (``/dev/zero``), a socket
  or a folder is refused in one sentence (:class:`Refused`) before a byte
  is read, and the file is opened non-blocking, so a FIFO cannot hang;
- a link is never followed (``O_NOFOLLOW``) unless the caller says
  ``follow=True``, which only a path the user named on the command line
  does (the user chose it; a file found inside a folder never is);
- its size is checked against a limit before a byte is read, and a file
  that grows past it meanwhile is refused too; a zip member (a ``.keras``
  file's ``config.json``, an ``.npz`` array) is inflated a chunk at a time
  and refused once it passes its own limit, whatever the archive's
  directory declares;
- text must be UTF-8, JSON must parse (no number of thousands of digits,
  no nesting beyond the parser), and each refusal is one sentence naming
  the file.  What the fields mean is the caller's to check (a schema).

Writing (:func:`replace`, :func:`write_bytes`, :func:`write_text`,
:func:`write_json`, :func:`write_with`, :func:`write_figure`,
:func:`open_append`, :func:`claim`): a new file of a random name in the
target's folder, created exclusively (``O_EXCL | O_NOFOLLOW``), is filled,
``fsync``\\ ed and renamed over the target (:func:`os.replace`): a link
planted at the target is replaced, never followed, a reader never sees half
a file, and a write that fails leaves the target as it was.  A folder is
made by :func:`folder`, which refuses a link where the folder should be.

Names: a name that comes from data (a finding's id, a model's name) and
becomes part of a path is either checked to be one plain name
(:func:`plain`, :func:`inside`: refused otherwise) or made into one
(:func:`file_name`).

``tests/test_file_door.py`` fails when code elsewhere opens, reads or
writes a path itself, naming this module.  The standard library only
(NumPy 1.23's environment and the orchestrator both import it).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import stat
import time
import tomllib
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

# The default limit of a file read whole (a timing run's records are held
# in memory at once: a run of 100,000 steps writes about 2 MB per record).
MAX_BYTES = 256 * 1024 * 1024
# The longest part of a file name made from a record's name.
NAME_CHARS = 64
# How much is read or inflated at a time.
CHUNK = 1 << 20

StrPath = str | os.PathLike[str]


class Refused(OSError, ValueError):  # noqa: N818 (what it says: refused)
    """A file the door does not read (no regular file, a link, too large,
    not what it should hold), or a name it does not write; its message is
    one sentence naming the file.  An OSError and a ValueError, so that
    every caller's handling of either takes it."""


_KINDS = (
    (stat.S_ISREG, "a file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "no file")


def _open_fd(path: StrPath, flags: int, follow: bool, mode: int = 0o666) -> int:
    """``os.open`` with ``O_NOFOLLOW`` unless ``follow``; a link refused in
    one sentence."""
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(path, flags | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise Refused(f"{path} is a symbolic link: it is not followed") from None
        raise


@contextlib.contextmanager
def opened(
    path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False
) -> Iterator[BinaryIO]:
    """``path`` open for reading in binary, once it is known to be a regular
    file of at most ``limit`` bytes (module docstring).

    Raises :class:`Refused` for anything else, OSError when it cannot be
    opened (FileNotFoundError...)."""
    fd = _open_fd(path, os.O_RDONLY | os.O_NONBLOCK, follow)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise Refused(
                f"{path} is {_kind(found.st_mode)}, not a regular file: it is not read"
            )
        if found.st_size > limit:
            raise Refused(
                f"{path} is {found.st_size:,} bytes, more than the {limit:,} a file "
                "read here may have: it is not read"
            )
        os.set_blocking(fd, True)  # a regular file never blocks
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle


def read_bytes(path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False) -> bytes:
    """The bytes of ``path`` (:func:`opened`), refused when it grew past
    ``limit`` since it was measured."""
    with opened(path, limit, follow=follow) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Refused(
            f"{path} grew past the {limit:,} bytes a file read here may have: "
            "it is not read"
        )
    return data


def read_text(path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False) -> str:
    """``path`` as UTF-8 text (:func:`read_bytes`); :class:`Refused` when it
    is not UTF-8."""
    data = read_bytes(path, limit, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(
            f"{path} is not UTF-8 text (byte {exc.start}): it is not read"
        ) from None


def parse_json(text: str | bytes, where: object) -> Any:
    """``text`` as JSON; :class:`Refused` naming ``where`` when it is not
    JSON, nests beyond the parser or holds a number of thousands of digits."""
    try:
        return json.loads(text)
    except RecursionError:
        raise Refused(f"{where} nests too deeply to be read as JSON") from None
    except ValueError as exc:  # JSONDecodeError, a 5000-digit integer
        raise Refused(f"{where} is not JSON that can be read ({exc})") from None


def read_json(path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False) -> Any:
    """``path``'s JSON value (:func:`read_text`, :func:`parse_json`)."""
    return parse_json(read_text(path, limit, follow=follow), path)


def read_object(
    path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False
) -> dict[str, Any]:
    """``path``'s JSON object (:func:`read_json`); :class:`Refused` when it
    holds another value."""
    value = read_json(path, limit, follow=follow)
    if not isinstance(value, dict):
        raise Refused(f"{path} holds JSON that is not an object: it is not read")
    return value


def read_toml(
    path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False
) -> dict[str, Any]:
    """``path`` as a TOML table (:func:`read_text`); :class:`Refused` naming
    the file and the line when it is not TOML."""
    try:
        return tomllib.loads(read_text(path, limit, follow=follow))
    except tomllib.TOMLDecodeError as exc:
        raise Refused(f"{path} is not TOML ({exc})") from None
    except RecursionError:
        raise Refused(f"{path} nests too deeply to be read as TOML") from None


@contextlib.contextmanager
def open_zip(
    path: StrPath, limit: int = MAX_BYTES, *, follow: bool = False
) -> Iterator[zipfile.ZipFile]:
    """``path`` as a zip archive (:func:`opened`: a regular file of at most
    ``limit`` bytes); :class:`Refused` when it is not a zip archive.  Read
    its members with :func:`member` or :func:`member_bytes`."""
    with opened(path, limit, follow=follow) as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
            raise Refused(f"{path} is not a zip archive ({exc})") from None
        with archive:
            yield archive


_UNPACK_ERRORS = (zipfile.BadZipFile, EOFError, zlib.error, RuntimeError, OSError)


class Bounded:
    """A zip member's stream that raises :class:`Refused` once more than
    ``limit`` bytes have come out of it."""

    def __init__(self, stream: IO[bytes], limit: int, where: str) -> None:
        self._stream, self._left, self._where = stream, limit, where
        self._limit = limit

    def read(self, size: int = -1) -> bytes:
        want = self._left + 1 if size < 0 else min(size, self._left + 1)
        data = bytearray()
        while len(data) < want:
            try:
                chunk = self._stream.read(min(CHUNK, want - len(data)))
            except _UNPACK_ERRORS as exc:
                raise Refused(f"{self._where} cannot be unpacked ({exc})") from None
            if not chunk:
                break
            data += chunk
        if len(data) > self._left:
            raise Refused(
                f"{self._where} inflates to more than {self._limit:,} bytes: "
                "it is not read"
            )
        self._left -= len(data)
        return bytes(data)


@contextlib.contextmanager
def member(
    archive: zipfile.ZipFile, name: str | zipfile.ZipInfo, limit: int, where: str
) -> Iterator[Bounded]:
    """Member ``name`` of ``archive`` as a stream of at most ``limit`` bytes
    inflated (:class:`Refused` past it, whatever its directory entry says;
    and when its declared size is already larger).  Only stored and
    deflated members are read (bzip2 and LZMA inflate a whole read at
    once).  ``where`` names it in errors (``path: name``).  A damaged
    member is a :class:`Refused` naming it."""
    try:
        info = name if isinstance(name, zipfile.ZipInfo) else archive.getinfo(name)
    except KeyError:
        raise Refused(f"{where} is not in the archive") from None
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise Refused(
            f"{where} is compressed with method {info.compress_type}; stored or "
            "deflated members are read"
        )
    if info.file_size > limit:
        raise Refused(
            f"{where} is {info.file_size:,} bytes, more than the {limit:,} it may "
            "have: it is not read"
        )
    if info.compress_size > _most_packed(info):
        raise Refused(
            f"{where} holds {info.compress_size:,} packed bytes, more than its "
            f"declared {info.file_size:,} bytes can take (its directory lies about "
            "what it inflates to): it is not read"
        )
    try:
        stream = archive.open(info)
    except _UNPACK_ERRORS as exc:
        raise Refused(f"{where} cannot be unpacked ({exc})") from None
    with stream:
        yield Bounded(stream, limit, where)


def _most_packed(info: zipfile.ZipInfo) -> int:
    """The most packed bytes ``info``'s declared size can take: the same
    when stored; deflated, what deflate's stored blocks add (5 bytes per
    block of at most 65,535) and some slack.  More means the member inflates
    past what it declares (Python's reader cuts it there, and a reader that
    inflates before cutting, as ``read()`` does, holds it all)."""
    if info.compress_type == zipfile.ZIP_STORED:
        return info.file_size + (12 if info.flag_bits & 0x1 else 0)
    return info.file_size + 5 * (info.file_size // 65_535 + 1) + 64


def member_bytes(
    archive: zipfile.ZipFile, name: str | zipfile.ZipInfo, limit: int, where: str
) -> bytes:
    """Member ``name``'s bytes, at most ``limit`` inflated (:func:`member`);
    its CRC is checked."""
    with member(archive, name, limit, where) as stream:
        return stream.read()


# ----------------------------------------------------------------- names


def plain(name: str, what: str = "a name") -> str:
    """``name`` when it is one plain file name (not empty, no ``/``, no NUL,
    not ``.`` or ``..``, at most 255 bytes); else :class:`Refused` saying
    ``what`` it is (``a finding's id``)."""
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\0" in name
        or len(name.encode("utf-8", "surrogateescape")) > 255
    ):
        raise Refused(
            f"{what} {str(name)[:80]!r} is not one plain file name (a path "
            "part, '..' or a separator): nothing is written under it"
        )
    return name


def inside(folder: Path, name: str, what: str = "a name") -> Path:
    """``folder / name`` when ``name`` is one plain name (:func:`plain`)."""
    return folder / plain(name, what)


def file_name(name: str) -> str:
    """``name`` fit to be part of a file name: each character other than an
    ASCII letter, digit, ``.``, ``_`` or ``-`` becomes ``_``, a run of dots
    ``..`` becomes ``__``, a leading dot ``_`` (no hidden file, never ``.``),
    at most :data:`NAME_CHARS` characters.  A name changed on the way ends
    in ``-`` and 8 hex digits of its digest, so two names never share a
    file (``a/b`` and ``a_b``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).replace("..", "__")
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if safe == name and 0 < len(safe) <= NAME_CHARS:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{safe[: NAME_CHARS - 9] or '_'}-{digest[:8]}"


# ---------------------------------------------------------------- writing


def folder(path: Path, *, follow: bool = False) -> Path:
    """``path`` made a folder (with its parents) unless it is one; a file or
    anything else there is refused in one sentence, and so is a link unless
    ``follow``: a folder the user named (``--results``, ``--plots``, an
    output folder) may be a link to one, a folder the tool names inside
    another never is."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except NotADirectoryError:
        raise Refused(f"{path} cannot be a folder: a part of it is a file") from None
    mode = path.stat().st_mode if follow else path.lstat().st_mode
    if not stat.S_ISDIR(mode):
        raise Refused(
            f"{path} is {_kind(mode)}, not a folder: nothing is written there"
        )
    return path


def _temporary(path: Path, suffix: str = ".tmp") -> tuple[int, Path]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    while True:
        temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(6)}{suffix}")
        try:
            return _open_fd(temporary, flags, follow=False), temporary
        except FileExistsError:
            continue


@contextlib.contextmanager
def replace(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; when the block
    ends without an exception it is flushed, ``fsync``\\ ed and renamed over
    ``path`` (module docstring), else it is removed and ``path`` is left as
    it was.  Its mode is ``0o666`` less the umask, as for any new file."""
    fd, temporary = _temporary(path)
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


@contextlib.contextmanager
def zip_writer(path: Path) -> Iterator[zipfile.ZipFile]:
    """A new zip archive to write ``path`` with, renamed over it when the
    block ends (:func:`replace`)."""
    with replace(path) as raw, zipfile.ZipFile(raw, "w") as archive:
        yield archive


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` by :func:`replace`; ``path``."""
    with replace(path) as handle:
        handle.write(data)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` by :func:`replace`; ``path``."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, value: Any, **dumps: Any) -> Path:
    """Write ``value`` as JSON (``json.dumps(value, **dumps)`` and a newline)
    to ``path`` by :func:`replace`; ``path``."""
    return write_text(path, json.dumps(value, **dumps) + "\n")


def write_with(path: Path, writer: Callable[[Path], object]) -> Path:
    """Let ``writer`` write a new file at a path the door gives it (a new,
    empty file of a random name in ``path``'s folder, with ``path``'s
    suffix: Keras' ``model.save`` wants ``.keras``), then rename it over
    ``path`` as :func:`replace` does; ``path``."""
    fd, temporary = _temporary(path, f".tmp{path.suffix}")
    os.close(fd)
    try:
        writer(temporary)
        made = temporary.lstat()
        if not stat.S_ISREG(made.st_mode):
            raise Refused(f"{path} was not written as a regular file")
        fd = os.open(temporary, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return path


def write_figure(path: Path, figure: Any, dpi: int) -> Path:
    """A Matplotlib ``figure`` saved as a PNG at ``path`` by :func:`replace`."""
    with replace(path) as handle:
        figure.savefig(handle, format="png", dpi=dpi)
    return path


def open_append(path: Path) -> int:
    """A descriptor appending to ``path`` (created when missing, mode
    ``0o644``), never through a link; the caller closes it."""
    fd = _open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, False, 0o644)
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise Refused(f"{path} is {_kind(found.st_mode)}, not a file to append to")
    return fd


def claim(where: Path, prefix: str, suffix: str = "") -> Path:
    """A new run's file (``suffix``, e.g. ``.jsonl``: created empty) or
    folder (no suffix), ``where/<prefix>-<time>-<pid>``, made exclusively
    (``O_EXCL``, ``mkdir``): two runs started in the same second, by two
    processes or by one, never share it (the second of one process gets
    ``-2``, ``-3``, ...)."""
    name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    folder(where)
    for n in range(1, 1000):
        path = where / f"{name}{'' if n == 1 else f'-{n}'}{suffix}"
        try:
            if suffix:
                flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
                os.close(_open_fd(path, flags, False, 0o644))
            else:
                path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{where}: no free name for a new {prefix} run")


def zip_copy(
    dest: Path,
    source: zipfile.ZipFile,
    copied: dict[str, int],
    written: dict[str, bytes],
    where: StrPath,
) -> Path:
    """A new zip archive at ``dest`` (by :func:`replace`) holding ``written``
    (name -> the bytes already read) and each member of ``source`` named in
    ``copied`` (name -> its limit), inflated through :func:`member`, so
    that whoever reads ``dest`` next (Keras reading a user's ``.keras``)
    reads exactly what was checked, each member at its true size.  A member
    of ``copied`` that ``source`` lacks is left out; ``where`` names the
    source in errors."""
    with replace(dest) as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED) as out:
        for name, data in written.items():
            out.writestr(name, data)
        present = set(source.namelist())
        for name, limit in copied.items():
            if name not in present:
                continue
            with (
                member(source, name, limit, f"{where}: {name}") as stream,
                out.open(name, "w", force_zip64=True) as target,
            ):
                while chunk := stream.read(CHUNK):
                    target.write(chunk)
    return dest
