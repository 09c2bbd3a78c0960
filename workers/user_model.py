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
import stat
import sys
import tempfile
from pathlib import Path

from workers.launch import Worker
from workers.messages import ImportAnswer, ImportModel
from zoo import files
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
    "zoo/packing.py",
    "zoo/specs.py",
    "workers/reader_check.py",
    *sorted(f"zoo/kinds/{p.name}" for p in (_ROOT / "zoo" / "kinds").glob("*.py")),
)


def _reader_version() -> str:
    digest = hashlib.sha256()
    for name in READING_CODE:
        digest.update(name.encode() + b"\0" + files.read_bytes(_ROOT / name))
    return digest.hexdigest()[:12]


READER = _reader_version()
SUFFIXES = (".keras", ".toml")
# The largest model file read (``zoo.keras_import.MAX_BYTES``) and [model] table.
MAX_FILE_BYTES = 4 << 30
MAX_TOML_BYTES = 16 << 20
# The folder of a stored entry that marks each file it was stored from.
SOURCES = "sources"


def _sha256(file: Path) -> str:
    """The digest of ``file``'s content, read only when it is a regular
    file (a FIFO is opened without blocking and refused unread)."""
    try:
        with files.opened(file, MAX_FILE_BYTES, follow=True) as stream:
            digest = hashlib.sha256()
            while chunk := stream.read(files.CHUNK):
                digest.update(chunk)
    except files.Refused as exc:
        mode = file.stat().st_mode
        if not stat.S_ISREG(mode):
            _check_kind(file, mode)
        raise ValueError(str(exc)) from None
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
    index = folder / "files"
    if index.is_symlink() or (index.exists() and not index.is_dir()):
        raise ValueError(
            f"{index} is a link or not a folder; the model store writes through "
            "no link: remove it"
        )
    return index


def _remembered(remembered: Path) -> str | None:
    """The stored name a remembered file holds, read without following a
    link; ``None`` when there is none (or it is not a plain stored name)."""
    try:
        text = files.read_bytes(remembered, 256).decode("ascii", "replace").strip()
    except OSError:  # missing, a link, no regular file, too long
        return None
    return text or None


def _from_this_file(folder: Path, name: str, remembered: Path) -> bool:
    """Whether the stored model ``name`` was stored from the file (and
    reader) ``remembered`` names: its entry keeps a mark of each
    (``sources/<sha256>.r<READER>``), so an index edited to name another
    stored model is caught, not run under this file's name."""
    try:
        with files.opened(folder / name / SOURCES / remembered.name, 0):
            return True
    except OSError:
        return False


def _remember(remembered: Path, name: str) -> None:
    """Write ``name`` to ``remembered`` and the mark of this file in the
    entry (``_from_this_file``), each through a temporary name in its folder
    and a rename (never through a link)."""
    store_folder = remembered.parent.parent
    _files_folder(store_folder)
    sources = files.folder(store_folder / name / SOURCES)
    files.write_text(sources / remembered.name, "")
    files.write_text(files.folder(remembered.parent) / remembered.name, name + "\n")


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
    index = _files_folder(folder)
    try:
        length = f"-L{seq_len}" if seq_len else ""
        remembered = index / f"{_sha256(file)}{length}.r{READER}"
    except FileNotFoundError:
        raise ValueError(f"{file}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{file} cannot be read ({exc.strerror})") from None
    name = _remembered(remembered)
    spec = None
    if name is not None and not _from_this_file(folder, name, remembered):
        print(
            f"warning: {remembered} names stored model {name}, which was not "
            f"stored from {file}: the file is read again",
            file=sys.stderr,
        )
        name = None
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
        table = files.read_toml(file, MAX_TOML_BYTES, follow=True)
    except files.Refused as exc:
        why = str(exc).removeprefix(f"{file} ")
        raise ValueError(f"{file} is not a TOML file ({why})") from None
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
        document = files.parse_json(reply.answer.document, f"{file}'s reading")
        weights = load_npz(out)
    try:
        return register(file.name, document, weights, folder)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
