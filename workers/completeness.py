"""What a registered framework still lacks: every place a framework of
``workers.frameworks.FRAMEWORKS`` has no entry in yet, each named with its
file (``docs/extending.md``), which ``harness.core.gate.verify`` refuses to
start without.

Apart from the registry (``workers.frameworks``) and the paths built from it
(``workers.paths``), which it reads, so that neither imports the other back.
Framework-free.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import native
from workers import paths
from workers.frameworks import FRAMEWORKS, FrameworkInfo
from zoo import files

_CHECKOUT = Path(__file__).resolve().parents[1]


def missing_pieces(name: str, checkout: Path = _CHECKOUT) -> list[str]:
    """Every place the registered framework ``name`` has no entry in yet,
    each as "file: what is missing"; empty when it is complete.  The
    project files (pyproject.toml, noxfile.py) are read only where this
    runs from a checkout."""
    # The worker-side tables (numeric pinning, profilers) are read from
    # their source, not imported: their modules import frameworks inside
    # functions, which the orchestrator's import contract does not allow
    # even there.
    info = FRAMEWORKS[name]
    missing = []
    if name not in native.FRAMEWORKS or name not in native.MODES:
        missing.append("native/__init__.py: FRAMEWORKS and MODES")
    package = checkout / "native" / name
    if importlib.util.find_spec(f"native.{name}") is None:
        missing.append(f"native/{name}/: the native models ({', '.join(native.FILES)})")
    elif package.is_dir():
        absent = [f for f in native.FILES if not (package / f).exists()]
        if absent:
            missing.append(f"native/{name}/: {', '.join(absent)}")
    if f"native-{name}" not in paths.PATHS:
        missing.append(f"workers/paths.py: PATHS has no native-{name}")
    if info.keras_backend and f"keras-{name}" not in paths.PATHS:
        missing.append(f"workers/paths.py: PATHS has no keras-{name}")
    if info.keras_backend and name not in paths.KERAS_MODES:
        missing.append("workers/paths.py: KERAS_MODES")
    workers = checkout / "workers"
    if name not in _keys(workers / "numerics.py", "_PIN"):
        missing.append("workers/numerics.py: _PIN (its numeric settings)")
    if name not in _keys(workers / "profiling.py", "_PROFILE"):
        missing.append("workers/profiling.py: _PROFILE (its profiler)")
    missing += _missing_install(info, checkout)
    return missing


def _keys(source: Path, table: str) -> set[str]:
    """The string keys of the dict literal assigned to ``table`` at the top
    level of ``source``."""
    found = _dict_keys(files.read_text(source), table)
    if found is None:
        raise LookupError(f"{source} has no dict literal {table}")
    return set(found)


@functools.lru_cache(maxsize=32)
def _dict_keys(text: str, table: str) -> frozenset[str] | None:
    """``_keys`` of a source text, parsed once per text: CPython 3.11's
    ``ast.parse`` is not safe in two threads at once (``SystemError: AST
    constructor recursion depth mismatch``), and a process that has checked
    once need not parse again."""
    for node in ast.parse(text).body:
        targets: list[ast.expr]
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == table for t in targets)
        if named and isinstance(value, ast.Dict):
            return frozenset(
                k.value
                for k in value.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
    return None


def _missing_install(info: FrameworkInfo, checkout: Path) -> list[str]:
    """Where the project's install does not name the framework's first
    distribution: pyproject.toml's ``frameworks`` extra, or noxfile.py for
    a framework with an environment of its own."""
    project, nox = checkout / "pyproject.toml", checkout / "noxfile.py"
    if not (project.exists() and nox.exists()):
        return []  # installed, not a checkout: nothing to read
    wanted = f'"{info.distributions[0]}=='
    if info.environment is None:
        if wanted not in files.read_text(project):
            return [f"pyproject.toml: {info.distributions[0]} in [frameworks]"]
    elif wanted not in (text := files.read_text(nox)) or (
        info.environment.name not in text
    ):
        return [f"noxfile.py: {info.distributions[0]} and {info.environment}"]
    return []


def incomplete() -> str | None:
    """One sentence naming, for every registered framework that is not
    complete, every place still missing; ``None`` when all are."""
    gaps = {name: missing_pieces(name) for name in FRAMEWORKS}
    said = [f"{name} ({'; '.join(where)})" for name, where in gaps.items() if where]
    if not said:
        return None
    return (
        "a registered framework is not complete, so nothing is checked or "
        f"timed: {', '.join(said)}; see docs/extending.md"
    )
