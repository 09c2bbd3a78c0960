"""The version matrix: which combinations of library releases ``harness
versions`` builds an environment for, and what pip installs in each.

The project's own pins (the ``frameworks`` extra of pyproject.toml) are the
starting point of every combination; a ``[versions]`` table (or the command
line) lists releases of Keras, JAX and TensorFlow, and every listed release
of one is combined with every listed release of the others.  A library not
listed keeps its pin, so one list (the usual case: Keras) varies that library
alone and the native paths, which do not import Keras, run the same code in
every environment.

TensorFlow's wheels name the Keras they were released with (tensorflow-cpu
2.21 asks for keras>=3.12): an older Keras is installed over it afterwards
(``keras_requirement``), and pip's warning about the mismatch is kept as a
note; a Keras that cannot run on that TensorFlow fails at the gate, with
the reason, like any path that cannot run.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from harness.core.profiles import VersionSettings
from workers.launch import PROJECT_ROOT
from zoo import files

# The distributions each axis of [versions] moves (jaxlib follows jax).
AXES: dict[str, tuple[str, ...]] = {
    "keras": ("keras",),
    "jax": ("jax", "jaxlib"),
    "tensorflow": ("tensorflow-cpu",),
}
# What each environment has besides the frameworks: the harness itself.
PROJECT_EXTRAS = "harness"
# The most the project's pyproject.toml may hold (it is a few kilobytes).
PYPROJECT_BYTES = 1024 * 1024
_PINNED = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)")


def project_requirements(root: Path = PROJECT_ROOT) -> list[str]:
    """The ``frameworks`` extra of the project's pyproject.toml, as written."""
    project = files.read_toml(root / "pyproject.toml", PYPROJECT_BYTES)
    extras = project["project"]["optional-dependencies"]
    return [str(r) for r in extras["frameworks"]]


def project_pins(root: Path = PROJECT_ROOT) -> dict[str, str]:
    """Each axis' pinned release in the project (``{"keras": "3.15.1", ...}``)."""
    pinned = {}
    for requirement in project_requirements(root):
        found = _PINNED.match(requirement)
        if found:
            pinned[found.group(1).lower()] = found.group(2)
    return {axis: pinned[dists[0]] for axis, dists in AXES.items()}


@dataclass(frozen=True)
class Combination:
    """One environment's releases: every axis, listed or pinned.  ``varied``
    names the axes the matrix lists (they make its folder's name)."""

    releases: tuple[tuple[str, str], ...]  # (axis, release), in AXES order
    varied: tuple[str, ...]

    @property
    def release(self) -> dict[str, str]:
        return dict(self.releases)

    @property
    def slug(self) -> str:
        """The folder name of its environment and results: ``keras-3.6.0``."""
        shown = self.varied or ("keras",)
        return "_".join(f"{axis}-{self.release[axis]}" for axis in shown)

    @property
    def label(self) -> str:
        """``keras 3.6.0`` (or every varied axis, comma-separated)."""
        shown = self.varied or ("keras",)
        return ", ".join(f"{axis} {self.release[axis]}" for axis in shown)

    def requirements(self, root: Path = PROJECT_ROOT) -> list[str]:
        """What pip installs first: the frameworks extra with every varied
        axis but Keras replaced (Keras stays at its pin here, so that the
        backends resolve as the project's do)."""
        replaced = {
            dist: f"{dist}=={self.release[axis]}"
            for axis, dists in AXES.items()
            if axis != "keras"
            for dist in dists
        }
        out = []
        for requirement in project_requirements(root):
            found = _PINNED.match(requirement)
            name = found.group(1).lower() if found else None
            out.append(replaced.get(name, requirement) if name else requirement)
        return out

    def keras_requirement(self, root: Path = PROJECT_ROOT) -> str | None:
        """``keras==V`` to install over the first step, where V is not the pin."""
        wanted = self.release["keras"]
        return None if wanted == project_pins(root)["keras"] else f"keras=={wanted}"


def combinations(
    settings: VersionSettings, root: Path = PROJECT_ROOT
) -> list[Combination]:
    """Every combination of the listed releases, in the lists' order (the
    first axis slowest); the project's pins alone where nothing is listed."""
    pins = project_pins(root)
    lists = {axis: getattr(settings, axis) for axis in AXES}
    varied = tuple(axis for axis, listed in lists.items() if listed)
    choices = [lists[axis] or (pins[axis],) for axis in AXES]
    return [
        Combination(tuple(zip(AXES, chosen, strict=True)), varied)
        for chosen in itertools.product(*choices)
    ]


def with_releases(
    settings: VersionSettings, given: dict[str, str | None]
) -> VersionSettings:
    """``settings`` with the axes given on the command line (comma-separated
    releases) in place of the profile's.

    Raises ValueError, in one sentence, for a release that is not one."""
    lists = {
        axis: [item.strip() for item in text.split(",") if item.strip()]
        for axis, text in given.items()
        if text is not None
    }
    merged = settings.model_dump() | lists
    try:
        return VersionSettings.model_validate(merged)
    except ValidationError as exc:
        error = exc.errors()[0]
        axis = error["loc"][0]
        raise ValueError(
            f"--{axis} must list distinct releases such as 3.6.0, comma-separated; "
            f"got {given.get(str(axis))!r}"
        ) from None
