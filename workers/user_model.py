"""``--model FILE``: a user's model, named and kept in the store
(``zoo.user_models``), from the orchestrator's side of the process boundary.

- a ``.keras`` file is read in a Keras worker (``KERAS_READER``; the
  orchestrator imports no framework and never opens it), which checks the
  architecture before Keras loads anything and loads with ``safe_mode`` on
  (``zoo.keras_import``); the file's weights become the model's canonical
  weights;
- a ``.toml`` file holds a ``[model]`` table (``zoo.user_models`` describes
  its fields); its weights are drawn from a seed like the reference models'.

A file read once is remembered by its content digest and the reader's
version (``<store>/files/<sha256>.r<READER>``), so the next command with the
same file starts no worker; a changed file is read again and is a new model,
and so is every file after the reading code changes (``READER``: a digest
of ``READING_CODE``, the files that read one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import tempfile
import tomllib
from pathlib import Path

from workers.launch import Worker
from workers.messages import ImportAnswer, ImportModel
from zoo.arrays import load_npz
from zoo.user_models import find, register, store, training_of, use_store

# Keras on PyTorch starts fastest of the Keras paths (docs/testing.md).
KERAS_READER = "keras-torch"
READ_TIMEOUT_S = 600.0
# The code that reads a file into a model: its digest is the reader's
# version in what the store remembers, so a file read by other reading code
# (a kind read differently, a new default loss) is read again, and no one
# has to remember to raise a number.
_ROOT = Path(__file__).resolve().parent.parent
READING_CODE = (
    "zoo/keras_import.py",
    "zoo/user_models.py",
    "zoo/losses.py",
    "zoo/specs.py",
    "workers/reader_check.py",
    *sorted(f"zoo/kinds/{p.name}" for p in (_ROOT / "zoo" / "kinds").glob("*.py")),
)


def _reader_version() -> str:
    digest = hashlib.sha256()
    for name in READING_CODE:
        digest.update(name.encode() + b"\0" + (_ROOT / name).read_bytes())
    return digest.hexdigest()[:12]


READER = _reader_version()
SUFFIXES = (".keras", ".toml")


def _sha256(file: Path) -> str:
    """The digest of ``file``'s content, read only when it is a regular
    file (a FIFO is opened without blocking and refused unread)."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as stream:
        _check_kind(file, os.fstat(stream.fileno()).st_mode)
        digest = hashlib.sha256()
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _check_kind(file: Path, mode: int) -> None:
    """Refuse, in one sentence, a path that is not a regular file."""
    if stat.S_ISDIR(mode):
        raise ValueError(f"{file} is a folder, not a model file")
    if not stat.S_ISREG(mode):
        what = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "special"
        )
        raise ValueError(f"{file} is not a regular file ({what}); give a model file")


def _files_folder(folder: Path) -> Path:
    """``<store>/files``, refused when it is a link (the store writes
    through no link)."""
    files = folder / "files"
    if files.is_symlink() or (files.exists() and not files.is_dir()):
        raise ValueError(
            f"{files} is a link or not a folder; the model store writes through "
            "no link: remove it"
        )
    return files


def _remembered(remembered: Path) -> str | None:
    """The stored name a remembered file holds, read without following a
    link; ``None`` when there is none (or it is not a plain stored name)."""
    try:
        fd = os.open(remembered, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        text = stream.read(256).decode("ascii", "replace").strip()
    return text or None


def _remember(remembered: Path, name: str) -> None:
    """Write ``name`` to ``remembered`` through a temporary name in its
    folder and a rename (never through a link)."""
    remembered.parent.mkdir(parents=True, exist_ok=True)
    _files_folder(remembered.parent.parent)
    fd, scratch = tempfile.mkstemp(prefix=f".{remembered.name}.", dir=remembered.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(name + "\n")
        Path(scratch).replace(remembered)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def model_from_file(file: Path, folder: Path | None = None, seq_len: int = 0) -> str:
    """The name of the model in ``file`` (kept in ``folder``, which becomes
    this process' store and its workers'); a ValueError in one sentence
    when the file cannot be a model.  ``seq_len``: the steps a Keras file's
    free-length sequence input is read with (``zoo.keras_import.FREE_LENGTH``
    when 0)."""
    folder = use_store(folder) if folder is not None else store().absolute()
    try:
        mode: int | None = file.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ValueError(f"{file} cannot be read ({exc.strerror})") from None
    if mode is not None:
        _check_kind(file, mode)
    if file.suffix not in SUFFIXES:
        raise ValueError(
            f"{file}: --model takes a Keras file (.keras) or a [model] table (.toml)"
        )
    if mode is None:
        raise ValueError(f"{file}: no such file")
    if seq_len and file.suffix == ".toml":
        raise ValueError(
            f"{file}: --seq-len is for a Keras file's free-length input; a "
            "[model] table gives its length in input_shape"
        )
    files = _files_folder(folder)
    try:
        length = f"-L{seq_len}" if seq_len else ""
        remembered = files / f"{_sha256(file)}{length}.r{READER}"
    except FileNotFoundError:
        raise ValueError(f"{file}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{file} cannot be read ({exc.strerror})") from None
    name = _remembered(remembered)
    spec = None
    if name is not None:
        # a damaged entry: the file is read again and replaces it
        with contextlib.suppress(ValueError):
            spec = find(name, folder)
    if spec is None or name is None:
        name = (
            _read_toml(file, folder)
            if file.suffix == ".toml"
            else _read_keras(file, folder, seq_len)
        )
        _remember(remembered, name)
        spec = find(name, folder)
    # Said before any check: what is checked and timed is the file's own step.
    if spec is not None:
        print(f"{file}: {name}, trained with {training_of(spec)}", file=sys.stderr)
    return name


def _read_toml(file: Path, folder: Path) -> str:
    try:
        table = tomllib.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{file} is not a TOML file ({exc})") from None
    except RecursionError:
        raise ValueError(f"{file} is not a TOML file: it nests too deeply") from None
    except ValueError:  # an integer of more than 4300 digits
        raise ValueError(f"{file} is not a TOML file: a number is too long") from None
    if "model" not in table:
        raise ValueError(f"{file} has no [model] table")
    try:
        return register(file.name, table["model"], None, folder)
    except RecursionError:
        raise ValueError(f"{file}: [model] nests too deeply") from None
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None


def _read_keras(file: Path, folder: Path, seq_len: int = 0) -> str:
    with tempfile.TemporaryDirectory(prefix="zoo-import-") as scratch:
        out = Path(scratch) / "weights.npz"
        request = ImportModel(file=str(file.absolute()), out=str(out), seq_len=seq_len)
        with Worker(KERAS_READER) as worker:
            reply = worker.call(request, READ_TIMEOUT_S)
        if not isinstance(reply.answer, ImportAnswer):
            why = (reply.error or reply.status).removeprefix("ValueError: ")
            raise ValueError(why if str(file.absolute()) in why else f"{file}: {why}")
        document = json.loads(reply.answer.document)
        weights = load_npz(out)
    try:
        return register(file.name, document, weights, folder)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
