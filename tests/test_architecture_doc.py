"""The module map (``docs/architecture.md``) names every module of the project.

The modules: every ``.py`` file under ``zoo/``, ``native/``, ``workers/``,
``equivalence/`` and ``harness/`` but the layer kinds' modules (``harness
kinds`` lists those from the registry), the blueprints as one entry
``harness/blueprints/*.toml``, and ``noxfile.py``.  An ``__init__.py`` is left
out unless it defines a function or a class (``native/__init__.py`` and
``zoo/datasets/__init__.py`` do; the others hold a docstring and re-exports).

The rule: a module counts as named when its path relative to a directory that
a Markdown heading names in backticks (`` ### `harness/core/` ``) appears, as
a whole path, in the text between that heading and the next heading:
``harness/core/peak.py`` as ``peak.py`` under `` `harness/core/` ``, or as
``core/peak.py`` under `` `harness/` ``.  "Whole" means not the tail or the
start of a longer name: ``operators.py`` inside ``keras_operators.py`` or
``zoo/operators.py`` does not count.  A file at the repository root
(``noxfile.py``) counts anywhere in the document.  Framework-free.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("zoo", "native", "workers", "equivalence", "harness")
BLUEPRINTS = "harness/blueprints/*.toml"
ROOT_FILES = ("noxfile.py",)

_HEADING = re.compile(r"^#{1,6}\s")
_HEADING_DIR = re.compile(r"`([^`\s]+/)`")


def _defines_something(init: Path) -> bool:
    """Whether an ``__init__.py`` defines a function or class at top level."""
    tree = ast.parse(init.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(node, kinds) for node in tree.body)


def project_modules(root: Path = ROOT) -> list[str]:
    """Every module the map must name, as paths relative to ``root``: a
    layer kind's module aside (``python -m harness kinds`` lists those, from
    the registry, with their files)."""
    from zoo.kinds import MODULE_FILES

    kinds = set(MODULE_FILES.values())
    modules = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.name == "__init__.py" and not _defines_something(path):
                continue
            relative = path.relative_to(root).as_posix()
            if relative not in kinds:
                modules.append(relative)
    if any((root / "harness" / "blueprints").glob("*.toml")):
        modules.append(BLUEPRINTS)
    modules.extend(name for name in ROOT_FILES if (root / name).is_file())
    return modules


def sections(doc: str) -> list[tuple[list[str], str]]:
    """Each heading's directories (``harness/core/``) and its text up to the
    next heading; lines inside code fences are never headings."""
    found: list[tuple[list[str], list[str]]] = [([], [])]
    fenced = False
    for line in doc.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and _HEADING.match(line):
            found.append((_HEADING_DIR.findall(line), []))
        else:
            found[-1][1].append(line)
    return [(dirs, "\n".join(lines)) for dirs, lines in found]


def _names(text: str, relative: str) -> bool:
    """Whether ``relative`` appears in ``text`` as a whole path."""
    pattern = r"(?<![\w./-])" + re.escape(relative) + r"(?![\w-])"
    return re.search(pattern, text) is not None


def unmentioned(doc: str, modules: Iterable[str]) -> list[str]:
    """The modules ``doc`` does not name, by the rule of this file's docstring."""
    parts = sections(doc)
    missing = []
    for module in modules:
        if "/" not in module:  # a file at the root: anywhere
            named = _names(doc, module)
        else:
            named = any(
                module.startswith(directory)
                and _names(text, module.removeprefix(directory))
                for dirs, text in parts
                for directory in dirs
            )
        if not named:
            missing.append(module)
    return missing


def test_the_map_names_every_module() -> None:
    modules = project_modules()
    assert "harness/core/gate.py" in modules  # the listing itself works
    assert "native/__init__.py" in modules
    assert "harness/__init__.py" not in modules
    missing = unmentioned(DOC.read_text(encoding="utf-8"), modules)
    assert not missing, (
        f"{DOC.relative_to(ROOT)} does not name {len(missing)} module(s): "
        + ", ".join(missing)
        + " (give each a line under its package's heading)"
    )


def test_a_module_left_out_or_misplaced_is_named() -> None:
    doc = DOC.read_text(encoding="utf-8")
    modules = project_modules()
    line = (
        "- `peak.py`: this machine's float32 matmul peak: the best of NumPy's "
        "BLAS and each framework's own product, each probed in a process of its "
        "own\n"
    )
    assert line in doc
    assert unmentioned(doc.replace(line, ""), modules) == ["harness/core/peak.py"]
    # named, but under another package's heading: still missing
    wrong = (
        "### `harness/bench/`\n\n- `run.py`: harness run\n- `peak.py`: BLAS\n\n"
        "### `harness/core/`\n\n- `gate.py`: verdicts\n\n"
        "### `native/`\n\n- `mxnet/hybrid.py`: hybridized\n"
    )
    assert unmentioned(
        wrong,
        [
            "harness/bench/run.py",
            "harness/core/gate.py",
            "harness/core/peak.py",
            "native/mxnet/hybrid.py",
            "native/mxnet/ops.py",
            "noxfile.py",
        ],
    ) == ["harness/core/peak.py", "native/mxnet/ops.py", "noxfile.py"]
