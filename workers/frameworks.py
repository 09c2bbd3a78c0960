"""The registry of frameworks: one entry per framework, and what a new one
still lacks.

Every list of frameworks elsewhere is derived from :data:`FRAMEWORKS`: the
distributions whose versions enter the gate's verdict key
(:func:`distributions`), the Keras backends, the frameworks that live in an
environment of their own (``workers.paths.OPTIONAL_FRAMEWORKS`` and
``NOX_ENVIRONMENTS``), the frameworks ``harness explain`` and ``harness ops``
run.  What cannot be derived, the code that runs a framework, is named by
``workers.completeness``: every place a registered framework has no entry
in yet, which ``harness.core.gate.verify`` refuses to start without
(``docs/extending.md``).

Framework-free, like the rest of the registry (``workers.paths``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    # The installed distributions whose versions could change a result: the
    # gate keys its cached verdicts on them, so upgrading one checks again.
    distributions: tuple[str, ...]
    # Whether Keras 3 runs on it (a ``keras-<name>`` path).
    keras_backend: bool = False
    # The environment noxfile.py builds for it, relative to the checkout,
    # when it cannot share the main one; such a framework may be missing on
    # a machine, and its paths are then reported unavailable, not failed.
    environment: Path | None = None


FRAMEWORKS: dict[str, FrameworkInfo] = {
    f.name: f
    for f in (
        FrameworkInfo("jax", ("jax", "jaxlib"), keras_backend=True),
        FrameworkInfo(
            "tensorflow", ("tensorflow-cpu", "tensorflow"), keras_backend=True
        ),
        FrameworkInfo("torch", ("torch",), keras_backend=True),
        FrameworkInfo("mxnet", ("mxnet",), environment=Path(".nox") / "mxnet-env"),
    )
}
# What every environment's results depend on besides its frameworks.
SHARED_DISTRIBUTIONS = ("numpy", "keras")


def distributions() -> tuple[str, ...]:
    """Every distribution a verdict depends on, each once."""
    names = [*SHARED_DISTRIBUTIONS]
    for info in FRAMEWORKS.values():
        names += [d for d in info.distributions if d not in names]
    return tuple(names)


def keras_backends() -> tuple[str, ...]:
    return tuple(name for name, info in FRAMEWORKS.items() if info.keras_backend)
