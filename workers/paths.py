"""The registry of paths: which framework runs each, in which execution mode,
and with which interpreter.

A path id names an API and a framework (``keras-torch``, ``native-jax``) and,
after ``@``, an execution mode other than the framework's default
(``keras-torch@compile``, ``native-tensorflow@xla``): ``PATHS`` are the
default modes the benchmark has always timed, ``MODE_PATHS`` every other
mode (``MODES``), each a path of its own that the gate checks before it is
timed.

Framework-free.  Each framework may live in its own environment: its
interpreter is ``$HARNESS_PYTHON_<FRAMEWORK>`` when that is set (for example
``HARNESS_PYTHON_MXNET=.nox/mxnet-env/bin/python``), else the environment nox
builds for it in this checkout when there is one (``NOX_ENVIRONMENTS``: so
``python -m equivalence`` run from ``.nox/bench`` finds MXNet as ``nox -s
bench`` does), else this process' own.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from native import MODES as NATIVE_MODES
from workers.frameworks import FRAMEWORKS, keras_backends


@dataclass(frozen=True)
class PathInfo:
    id: str
    framework: str  # also names the environment its worker runs in
    api: str  # "keras" (Keras 3 on this backend) or "native" (low-level operators)
    native: str = ""  # the native.load_framework id, when not the framework's
    # A Keras path's level (``LEVELS``): what its timed closures hand Keras.
    level: str = "fit"
    # The execution mode (``MODES``); ``mode_path`` says whether the id names it.
    mode: str = ""

    @property
    def native_framework(self) -> str:
        return self.native or self.framework

    @property
    def base(self) -> str:
        """The id without its mode: the path of the same API and framework
        in the default mode (``keras-torch`` for ``keras-torch@compile``)."""
        return self.id.split("@", maxsplit=1)[0]

    @property
    def mode_path(self) -> bool:
        """Whether this is a mode other than the default (``@`` in its id)."""
        return "@" in self.id


# Execution modes by API and framework, the default first: the mode of the
# path without "@".  The native ones are ``native.MODES`` (each framework's
# ``native/<fw>/modes.py`` says what it compiles); Keras' are what
# ``Model.compile`` is told (``workers.keras_runner.COMPILE``): the defaults
# leave Keras' own jit_compile="auto", which resolves to them on a machine
# without a GPU (the records hold what it resolved to,
# ``platform.keras_jit_compile``); "xla" and "compile" are jit_compile=True
# (XLA; torch.compile with inductor); "spe" runs ``STEPS_PER_EXECUTION``
# steps per jitted call.  MXNet's two modes are two paths of old,
# ``native-mxnet`` and ``native-mxnet-hybrid``.
KERAS_MODES = {
    "jax": ("jit", "spe"),
    "tensorflow": ("graph", "xla"),
    "torch": ("eager", "compile"),
}
MODES: dict[tuple[str, str], tuple[str, ...]] = {
    **{("keras", f): modes for f, modes in KERAS_MODES.items()},
    **{("native", f): modes for f, modes in NATIVE_MODES.items()},
}
STEPS_PER_EXECUTION = 8  # Keras on JAX, mode "spe"


def default_mode(api: str, framework: str) -> str:
    return MODES[api, framework][0]


PATHS: dict[str, PathInfo] = {
    p.id: p
    for p in (
        PathInfo("keras-jax", "jax", "keras", mode="jit"),
        PathInfo("keras-tensorflow", "tensorflow", "keras", mode="graph"),
        PathInfo("keras-torch", "torch", "keras", mode="eager"),
        PathInfo("native-jax", "jax", "native", mode="jit"),
        PathInfo("native-tensorflow", "tensorflow", "native", mode="graph"),
        PathInfo("native-torch", "torch", "native", mode="eager"),
        PathInfo("native-mxnet", "mxnet", "native", mode="imperative"),
        PathInfo(
            "native-mxnet-hybrid", "mxnet", "native", "mxnet-hybrid", mode="hybrid"
        ),
    )
}
# Every other mode of a path (MXNet's are both in ``PATHS``).
MODE_PATHS: dict[str, PathInfo] = {
    f"{api}-{framework}@{mode}": PathInfo(
        f"{api}-{framework}@{mode}", framework, api, mode=mode
    )
    for (api, framework), modes in MODES.items()
    if framework != "mxnet"
    for mode in modes[1:]
}
# The paths ``python -m harness ops`` runs operators on: Keras on each
# backend and each framework's own operators (MXNet's hybridized path is a
# compiled whole block; one operator is not one, so it is not among them).
OPERATOR_PATHS = tuple(p for p in PATHS if p != "native-mxnet-hybrid")
# The levels of ``python -m harness explain``: one Keras model on one backend,
# its timed closures handing Keras ever less of the work, down to the native
# path.  ``fit`` is every ``keras-*`` path of ``PATHS``.
LEVELS = {
    "fit": "fit / predict on NumPy arrays",
    "resident": "fit / predict on tensors already in the backend",
    "step": "Keras' own train_step / predict_step in a plain loop, no fit",
}
# The level paths: Keras paths like any other (checked by the gate, then
# timed), which only ``harness explain`` runs.
LEVEL_PATHS: dict[str, PathInfo] = {
    p.id: p
    for p in (
        PathInfo(
            f"keras-{framework}-{level}",
            framework,
            "keras",
            level=level,
            mode=default_mode("keras", framework),
        )
        for framework in keras_backends()
        for level in ("resident", "step")
    )
}
PHASES = ("train", "infer")
# Frameworks that live in an environment of their own and may not install on
# every machine; a path of theirs that cannot start is skipped, not failed.
OPTIONAL_FRAMEWORKS = tuple(
    name for name, info in FRAMEWORKS.items() if info.environment is not None
)


def get_path(path_id: str) -> PathInfo:
    """The path ``path_id`` names, of ``PATHS``, ``MODE_PATHS`` or
    ``LEVEL_PATHS``."""
    found = PATHS.get(path_id) or MODE_PATHS.get(path_id) or LEVEL_PATHS.get(path_id)
    if found is None:
        raise ValueError(
            f"unknown path {path_id[:80]!r}; known paths: "
            + ", ".join([*PATHS, *MODE_PATHS])
        )
    return found


def levels_of(framework: str) -> list[str]:
    """The paths ``harness explain`` times for ``framework``, top level
    first: Keras ``fit``, ``resident``, ``step``, then the native path; for a
    framework Keras does not run on (MXNet), its native paths, which
    ``harness explain`` only profiles."""
    keras = f"keras-{framework}"
    if keras not in PATHS:
        return [p.id for p in PATHS.values() if p.framework == framework]
    return [
        keras,
        *(p.id for p in LEVEL_PATHS.values() if p.framework == framework),
        f"native-{framework}",
    ]


# The most characters of known names an unknown name's sentence lists (the
# models grow by a variant per layer kind); the rest are counted.
LISTED_CHARS = 200


def _listed(known: tuple[str, ...] | list[str]) -> str:
    """``known`` joined by commas, the names past ``LISTED_CHARS`` counted:
    ``a, b, c and 12 more``."""
    shown: list[str] = []
    for name in known:
        if shown and len(", ".join([*shown, name])) > LISTED_CHARS:
            return f"{', '.join(shown)} and {len(known) - len(shown)} more"
        shown.append(name)
    return ", ".join(shown)


def parse_list(
    text: str | None, known: tuple[str, ...] | list[str], what: str
) -> list[str]:
    """Split a comma-separated selection and check every item against ``known``.

    ``None`` or ``all`` selects everything.  Raises ValueError, in one sentence
    quoting at most 80 characters of the input, for an unknown name, an empty
    selection or a name given twice."""
    if text is None or text == "all":
        return list(known)
    items = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in items if t not in known]
    if unknown or not items:
        shown = ", ".join(unknown) or repr(text)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ValueError(f"unknown {what} {shown}; known {what}s: {_listed(known)}")
    twice = sorted({t for t in items if items.count(t) > 1})
    if twice:
        raise ValueError(
            f"{what} {', '.join(twice)} given twice; name each {what} once"
        )
    return items


def integer(text: str) -> int:
    """An argparse ``type``: an integer, or a one-line error quoting at most
    80 characters of the text."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an integer: {text[:80]!r}" + ("..." if len(text) > 80 else "")
        ) from None


def number(text: str) -> float:
    """An argparse ``type``: a number, as ``integer``."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a number: {text[:80]!r}" + ("..." if len(text) > 80 else "")
        ) from None


# The environments noxfile.py builds for frameworks that cannot share the main
# one, relative to the checkout.
NOX_ENVIRONMENTS = {
    name: info.environment
    for name, info in FRAMEWORKS.items()
    if info.environment is not None
}
_CHECKOUT = Path(__file__).resolve().parents[1]


def interpreter(framework: str) -> str:
    """The Python executable of the environment that holds ``framework``."""
    configured = os.environ.get(f"HARNESS_PYTHON_{framework.upper()}")
    if configured:
        return configured
    if framework in NOX_ENVIRONMENTS:
        # absolute, not resolved: the venv's python is a symlink to the base one
        built = _CHECKOUT / NOX_ENVIRONMENTS[framework] / "bin" / "python"
        if built.exists():
            return str(built)
    return sys.executable
