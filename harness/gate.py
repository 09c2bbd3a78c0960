"""The gate in front of every timing: a path is timed only once it is shown
to compute what the other paths compute.  It lives with its caller,
``harness.run``, and asks ``equivalence.check`` for the verdicts.

``verify`` returns, per model and path, the verdict of an equivalence check
(``GATE_STEPS`` training steps on small batches, every path against every
other, from the weights the timing uses).  Verdicts are cached in
``<results>/verdicts.json``, each under a key made of everything that could
change the answer:

- the model's spec and the canonical weights' bytes;
- the source of the code that defines the models, runs them and checks them
  (``zoo/``, ``native/``, ``workers/`` with the path registry, the worker loop
  and its numeric settings, ``equivalence/``, and this gate): any edit
  invalidates every verdict, which errs on the safe side;
- the tolerance tables;
- the versions of the libraries in the path's environment, read with
  ``importlib.metadata`` by that environment's interpreter.

A cached verdict whose key still matches is reused; otherwise every path of
the model is checked again (a verdict is a majority vote, so one path alone
cannot be checked).  Framework-free.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from equivalence.check import Case, Checker
from equivalence.compare import TOLERANCES, TRAJECTORY_TOLERANCE
from workers.launch import PROJECT_ROOT
from workers.paths import PATHS, get_path, interpreter
from zoo.specs import get_spec
from zoo.weights import weights_file

GATE_STEPS = 2
GATE_BATCH = 4
CACHE_NAME = "verdicts.json"
CACHE_SCHEMA_VERSION = 1
_SOURCES = ("zoo", "native", "workers", "equivalence", "harness/gate.py")
_DISTRIBUTIONS = (
    "numpy",
    "keras",
    "jax",
    "jaxlib",
    "tensorflow-cpu",
    "tensorflow",
    "torch",
    "mxnet",
)


def sources_digest(root: Path = PROJECT_ROOT) -> str:
    """SHA-256 over the project's model and check sources (path and bytes)."""
    digest = hashlib.sha256()
    for entry in _SOURCES:
        base = root / entry
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for f in files:
            digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def library_versions(python: str) -> dict[str, str | None]:
    """Versions of the libraries that could change results, as installed for
    ``python`` (``None`` where one is not installed)."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "def v(d):\n"
        "    try:\n"
        "        return m.version(d)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{d: v(d) for d in {list(_DISTRIBUTIONS)!r}}}))\n"
    )
    try:
        done = subprocess.run(
            [python, "-c", script], capture_output=True, text=True, check=True
        )
        versions: dict[str, str | None] = json.loads(done.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        return {"error": f"cannot read versions from {python}: {exc}"}
    return {**versions, "python": python}


def verdict_key(
    model: str,
    path: str,
    weights_sha: str,
    sources: str,
    versions: dict[str, str | None],
) -> str:
    document = {
        "model": model,
        "spec": repr(get_spec(model)),
        "path": path,
        "weights": weights_sha,
        "sources": sources,
        "tolerances": [TOLERANCES, TRAJECTORY_TOLERANCE],
        "check": [GATE_STEPS, GATE_BATCH],
        "versions": versions,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _load(cache: Path) -> dict[str, Any]:
    try:
        document: dict[str, Any] = json.loads(cache.read_text())
    except (OSError, ValueError):
        return {}
    if document.get("schema_version") != CACHE_SCHEMA_VERSION:
        return {}
    entries: dict[str, Any] = document.get("verdicts", {})
    return entries


def _save(cache: Path, entries: dict[str, Any]) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    document = {"schema_version": CACHE_SCHEMA_VERSION, "verdicts": entries}
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    tmp.replace(cache)


def verify(
    models: list[str],
    paths: list[str],
    results_dir: Path,
    *,
    weights_seed: int = 0,
    timeout: float = 900.0,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> dict[str, dict[str, str]]:
    """The verdict of every (model, path) in ``paths``: cached where still
    valid, else checked now against every known path."""
    cache_file = results_dir / CACHE_NAME
    entries = _load(cache_file)
    sources = sources_digest()
    versions = {
        python: library_versions(python)
        for python in {interpreter(p.framework) for p in PATHS.values()}
    }
    weights_dir = results_dir / "cache"
    verdicts: dict[str, dict[str, str]] = {}
    checker: Checker | None = None
    try:
        for model in models:
            weights = weights_file(get_spec(model), weights_seed, weights_dir)
            weights_sha = hashlib.sha256(weights.read_bytes()).hexdigest()
            keys = {
                p: verdict_key(
                    model,
                    p,
                    weights_sha,
                    sources,
                    versions[interpreter(get_path(p).framework)],
                )
                for p in PATHS
            }
            if all(keys[p] in entries for p in paths):
                verdicts[model] = {p: entries[keys[p]]["verdict"] for p in paths}
                log(f"equivalence {model}: cached verdicts still valid")
                continue
            log(f"equivalence {model}: checking every path ({GATE_STEPS} steps) ...")
            start = time.perf_counter()
            if checker is None:
                checker = Checker(list(PATHS), cache_dir=weights_dir, timeout=timeout)
            case = Case(model, weights_seed, GATE_BATCH, steps=GATE_STEPS)
            report = checker.check(case)
            for p, verdict in report.verdicts.items():
                entries[keys[p]] = {
                    "model": model,
                    "path": p,
                    "verdict": verdict,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                }
            _save(cache_file, entries)
            verdicts[model] = {p: report.verdicts.get(p, "unchecked") for p in paths}
            log(
                f"equivalence {model}: "
                + ", ".join(f"{p} {v}" for p, v in verdicts[model].items())
                + f" ({time.perf_counter() - start:.0f} s)"
            )
    finally:
        if checker is not None:
            checker.close()
    return verdicts
