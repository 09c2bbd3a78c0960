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
and so is every file after the reader changes (version 2: the reading judged
by the model Keras loads, ``workers.reader_check``).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import tomllib
from pathlib import Path

from workers.launch import Worker
from workers.messages import ImportAnswer, ImportModel
from zoo.arrays import load_npz
from zoo.user_models import register, store, use_store

# Keras on PyTorch starts fastest of the Keras paths (docs/testing.md).
KERAS_READER = "keras-torch"
READ_TIMEOUT_S = 600.0
# The reader's version in what the store remembers: raised when reading
# changes, so no file read by an older reader is trusted.
READER = 2
SUFFIXES = (".keras", ".toml")


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def model_from_file(file: Path, folder: Path | None = None) -> str:
    """The name of the model in ``file`` (kept in ``folder``, which becomes
    this process' store and its workers'); a ValueError in one sentence
    when the file cannot be a model."""
    folder = use_store(folder) if folder is not None else store().absolute()
    if file.suffix not in SUFFIXES:
        raise ValueError(
            f"{file}: --model takes a Keras file (.keras) or a [model] table (.toml)"
        )
    if not file.is_file():
        raise ValueError(f"{file}: no such file")
    remembered = folder / "files" / f"{_sha256(file)}.r{READER}"
    if remembered.is_file():
        name = remembered.read_text().strip()
        if (folder / name / "model.json").is_file():
            return name
    name = (
        _read_toml(file, folder)
        if file.suffix == ".toml"
        else _read_keras(file, folder)
    )
    remembered.parent.mkdir(parents=True, exist_ok=True)
    remembered.write_text(name + "\n")
    return name


def _read_toml(file: Path, folder: Path) -> str:
    try:
        table = tomllib.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{file} is not a TOML file ({exc})") from None
    if "model" not in table:
        raise ValueError(f"{file} has no [model] table")
    try:
        return register(file.name, table["model"], None, folder)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None


def _read_keras(file: Path, folder: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="zoo-import-") as scratch:
        out = Path(scratch) / "weights.npz"
        request = ImportModel(file=str(file.absolute()), out=str(out))
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
