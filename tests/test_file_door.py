"""Every file the project reads or writes passes through ``zoo/files.py``.

The rule: outside that module, no code opens, reads or writes a path itself.
It is read from the source (Python's own parser), so a new door that opens a
file on its own fails here, naming the line and the module to use instead.
The few calls the rule lets through are :data:`ALLOWED`, each with why.
``python -m tests.test_file_door`` prints the count of direct accesses.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("zoo", "native", "workers", "equivalence", "harness", "examples")
DOOR = "zoo/files.py"

# Calls of a module's function that open, read or write a path.
FUNCTIONS = {
    ("os", "open"), ("os", "fdopen"), ("io", "open"), ("gzip", "open"),
    ("bz2", "open"), ("lzma", "open"), ("tarfile", "open"), ("json", "load"),
    ("json", "dump"), ("tomllib", "load"), ("pickle", "load"), ("pickle", "dump"),
    ("np", "load"), ("np", "save"), ("np", "savez"), ("np", "savez_compressed"),
    ("np", "fromfile"), ("np", "loadtxt"), ("np", "genfromtxt"), ("np", "savetxt"),
    ("zipfile", "ZipFile"), ("shutil", "copy"), ("shutil", "copy2"),
    ("shutil", "copyfile"), ("shutil", "move"), ("shutil", "copytree"),
    ("tempfile", "mkstemp"), ("tempfile", "NamedTemporaryFile"),
}  # fmt: skip
# Methods that do, whatever they are called on (a Path, a model, a figure).
METHODS = {
    "open", "read_text", "write_text", "read_bytes", "write_bytes", "savefig",
    "save", "save_weights", "load_weights", "tofile", "symlink_to",
    "hardlink_to", "touch",
}  # fmt: skip
# Plain names called.
NAMES = {"open", "load_model", "ZipFile"}

# (file, call) -> why it stays.
ALLOWED = {
    ("zoo/keras_import.py", "keras.saving.load_model"): "Keras opens the private "
    "copy zoo.files.keras_copy rebuilt from the members it read within limits",
    ("workers/serve.py", "os.fdopen"): "the protocol's channel: a copy of "
    "the worker's stdout descriptor, no path",
    ("zoo/arrays.py", "zf.open"): "writes one array into a member of the "
    "archive zoo.files.zip_writer is making, no path",
}


def _called(node: ast.Call) -> str | None:
    """The dotted name of a call the rule forbids, else None."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id if func.id in NAMES else None
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value
    parts = [func.attr]
    while isinstance(owner, ast.Attribute):
        parts.append(owner.attr)
        owner = owner.value
    if isinstance(owner, ast.Name):
        parts.append(owner.id)
    dotted = ".".join(reversed(parts))
    if isinstance(owner, ast.Name) and owner.id == "files" and len(parts) == 2:
        return None  # the door itself: zoo.files.read_text(...)
    if isinstance(owner, ast.Name) and (owner.id, func.attr) in FUNCTIONS:
        return dotted
    if func.attr in NAMES - {"open"} or func.attr in METHODS:
        return dotted
    return None


def accesses() -> Iterator[tuple[str, int, str]]:
    """Every direct file access outside the door: (file, line, call)."""
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            relative = source.relative_to(ROOT).as_posix()
            if relative == DOOR:
                continue
            tree = ast.parse(source.read_text(encoding="utf-8"), relative)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and (called := _called(node)):
                    yield relative, node.lineno, called


def test_no_file_is_opened_outside_the_door() -> None:
    found = [
        f"{file}:{line}: {call}(...)"
        for file, line, call in accesses()
        if (file, call) not in ALLOWED
    ]
    assert not found, (
        f"{len(found)} direct file accesses outside {DOOR}; read and write "
        f"through zoo.files instead (or add the call to ALLOWED in {__file__} "
        "with why):\n" + "\n".join(found)
    )


def test_every_allowed_exception_is_still_there() -> None:
    seen = {(file, call) for file, _, call in accesses()}
    stale = [f"{file}: {call}" for file, call in ALLOWED if (file, call) not in seen]
    assert not stale, f"ALLOWED in {__file__} names calls no longer made: {stale}"


@pytest.mark.parametrize(
    ("code", "caught"),
    [
        ("open('x')", True),
        ("Path('x').read_text()", True),
        ("p.write_bytes(b'')", True),
        ("json.load(f)", True),
        ("np.load('x.npz')", True),
        ("model.save('x.keras')", True),
        ("fig.savefig('x.png')", True),
        ("zipfile.ZipFile('x')", True),
        ("keras.saving.load_model('x')", True),
        ("files.read_text(p)", False),
        ("files.write_text(p, text)", False),
        ("self.files.write_text(p)", True),
        ("json.loads(text)", False),
        ("files.write_figure(p, fig, 120)", False),
    ],
)
def test_the_rule_sees_a_direct_access(code: str, caught: bool) -> None:
    call = ast.parse(code).body[0]
    assert isinstance(call, ast.Expr)
    assert isinstance(call.value, ast.Call)
    assert (_called(call.value) is not None) is caught


if __name__ == "__main__":
    found = list(accesses())
    for file, line, call in found:
        print(f"{file}:{line}: {call}")
    print(f"{len(found)} direct file accesses outside {DOOR}", file=sys.stderr)
