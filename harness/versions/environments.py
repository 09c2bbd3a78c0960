"""One virtual environment per combination of releases, built with pip and
kept between runs.

An environment lives in ``.nox/release-envs/<slug>`` of the checkout and holds the
project (editable, with the harness' libraries) and the combination's
frameworks (``harness.versions.matrix``).  A file in it,
``harness-versions.json``, says what was installed; it is written last, so an
environment whose build was cut off is built again, and one whose pins changed
(the project's or the matrix') is removed and built again.  pip reuses its
cache, so a rebuild downloads nothing it has seen.

The combination that equals the project's own pins needs no environment of
its own when the interpreter running this already has exactly those
releases: it is used as it is.

An environment pip cannot build is *unavailable*: its reason is pip's last
error line, and the other combinations go on.  Before building, pip is asked
whether each release the combination varies exists at all (``pip download
--no-deps``, into the cache the build then reads), so a release that does not
exist costs seconds, not a 3 GB environment; a build that fails is removed,
never left half-built for the next run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.core import jsonl, validated
from harness.core.gate import library_versions
from harness.versions.matrix import (
    AXES,
    PROJECT_EXTRAS,
    Combination,
    project_requirements,
)
from workers.launch import PROJECT_ROOT
from zoo import files

STAMP = "harness-versions.json"
# The most a stamp may hold: what was asked of pip and its notes, a few
# kilobytes.
STAMP_BYTES = 1024 * 1024
BUILT_UNDER = Path(".nox") / "release-envs"  # beside, not in, nox's own "versions"
PIP_TIMEOUT_S = 3600.0  # a cold cache downloads some 1.5 GB


@dataclass
class Environment:
    """A combination's interpreter, or the reason it has none."""

    combination: Combination
    python: str | None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)


def installed_releases(python: str) -> dict[str, str | None]:
    """The release of each axis' first distribution installed for ``python``
    (``None`` where missing, or for an interpreter that does not run), as
    the gate reads them (``harness.core.gate.library_versions``)."""
    found = library_versions(python)
    return {axis: found.get(dists[0]) for axis, dists in AXES.items()}


def _wanted(combination: Combination, root: Path) -> dict[str, object]:
    """What the stamp of a finished build of ``combination`` holds."""
    return {
        "requirements": combination.requirements(root),
        "keras": combination.keras_requirement(root),
        "extras": PROJECT_EXTRAS,
        "python": sys.version.split()[0],
    }


def pip_error(done: subprocess.CompletedProcess[str]) -> str:
    """pip's reason for failing, in one line."""
    lines = [ln.strip() for ln in (done.stderr or done.stdout or "").splitlines()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    shown = (errors or [ln for ln in lines if ln] or ["pip failed"])[0]
    return shown.removeprefix("ERROR: ")[:300]


def _conflicts(done: subprocess.CompletedProcess[str]) -> list[str]:
    """pip's lines saying what an installed package asks for and did not get."""
    return [
        ln.strip()
        for ln in (done.stderr or "").splitlines()
        if "which is incompatible" in ln
    ]


def prepare(
    combination: Combination,
    root: Path = PROJECT_ROOT,
    log: Callable[[str], None] = print,
) -> Environment:
    """The interpreter of ``combination``'s environment, built or reused."""
    if installed_releases(sys.executable) == combination.release:
        return Environment(combination, sys.executable)
    home = root / BUILT_UNDER / combination.slug
    python = home / "bin" / "python"
    wanted = _wanted(combination, root)
    kept = read_stamp(home / STAMP, _Stamp)
    if python.exists() and kept is not None and kept["wanted"] == wanted:
        return Environment(combination, str(python), notes=kept["notes"])
    for requirement in varied_requirements(combination, root):
        found = _download(requirement)
        if found.returncode != 0:
            return Environment(combination, None, f"pip: {pip_error(found)}")
    if home.exists():
        why = "changed" if kept is not None else "was not finished"
        log(f"{combination.label}: its environment {why}; building it again")
        shutil.rmtree(home)
    log(f"{combination.label}: building {home.relative_to(root)} with pip")
    built = _build(combination, root, home, wanted)
    if built.python is None:
        shutil.rmtree(home, ignore_errors=True)  # nothing half-built stays
    return built


class _Stamp(validated.Schema):
    """What a finished build's stamp holds (:func:`_build`)."""

    wanted: dict[str, Any]
    notes: list[str] = Field(default_factory=list)


def read_stamp(
    path: Path, schema: type[validated.Schema], what: str = "environment"
) -> dict[str, Any] | None:
    """The stamp at ``path`` when it holds what ``schema`` asks for; None
    when there is none, and when it cannot be read (a link, a FIFO, too
    large, not JSON, a field of the wrong type), said once on stderr: a
    damaged stamp is a build not finished, and the ``what`` it stamps
    (an environment, an overlay) is built again."""
    try:
        found = files.read_object(path, STAMP_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:  # files.Refused: a link, a FIFO, not JSON ...
        jsonl.warn(f"warning: {exc}; its {what} is built again")
        return None
    if not validated.fits(schema, found):
        jsonl.warn(
            f"warning: {path} is not a stamp this code wrote (a damaged or "
            f"edited file); its {what} is built again"
        )
        return None
    return schema.model_validate(found, strict=False).model_dump()


def varied_requirements(combination: Combination, root: Path) -> list[str]:
    """The requirements of ``combination`` that are not the project's own
    pins: the releases to ask pip about before building."""
    pinned = set(project_requirements(root))
    keras = combination.keras_requirement(root)
    varied = [r for r in combination.requirements(root) if r not in pinned]
    return varied + ([keras] if keras else [])


def _download(requirement: str) -> subprocess.CompletedProcess[str]:
    """``pip download --no-deps`` of ``requirement`` into a folder thrown
    away after (pip's cache keeps it for the build): whether it exists."""
    with tempfile.TemporaryDirectory(prefix="harness-release-") as folder:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
        return run_pip([*pip, "--dest", folder, requirement])


def _venv(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "venv", str(home)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pip([str(python), "-m", "pip", "install", "--quiet", *args])


def run_pip(command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` (a pip), its output kept; a pip that does not finish in
    :data:`PIP_TIMEOUT_S` fails with a line saying so."""
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        said = f"ERROR: pip did not finish in {PIP_TIMEOUT_S:.0f} s"
        return subprocess.CompletedProcess(command, 1, "", said)


def _build(
    combination: Combination, root: Path, home: Path, wanted: dict[str, object]
) -> Environment:
    venv = _venv(home)
    if venv.returncode != 0:
        reason = f"cannot create a virtual environment: {pip_error(venv)}"
        return Environment(combination, None, reason)
    python = home / "bin" / "python"
    first = _pip(
        python, "-e", f"{root}[{PROJECT_EXTRAS}]", *combination.requirements(root)
    )
    if first.returncode != 0:
        return Environment(combination, None, f"pip: {pip_error(first)}")
    notes: list[str] = []
    keras = combination.keras_requirement(root)
    if keras is not None:
        second = _pip(python, keras)
        if second.returncode != 0:
            return Environment(combination, None, f"pip: {pip_error(second)}")
        notes = [f"installed anyway: {line}" for line in _conflicts(second)]
    found = installed_releases(str(python))
    if found != combination.release:
        reason = f"pip installed {found}, not {combination.release}"
        return Environment(combination, None, reason)
    files.write_json(home / STAMP, {"wanted": wanted, "notes": notes})
    # absolute, not resolved: the venv's python is a symlink to the base one
    return Environment(combination, str(python.absolute()), notes=notes)
