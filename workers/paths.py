"""The registry of paths: which framework runs each, and with which interpreter.

Framework-free.  Each framework may live in its own environment: its
interpreter is ``$HARNESS_PYTHON_<FRAMEWORK>`` when that is set (for example
``HARNESS_PYTHON_MXNET=.nox/mxnet-env/bin/python``), else this process' own.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class PathInfo:
    id: str
    framework: str  # also names the environment its worker runs in
    api: str  # "keras" (Keras 3 on this backend) or "native" (low-level operators)
    native: str = ""  # the native.load_framework id, when not the framework's

    @property
    def native_framework(self) -> str:
        return self.native or self.framework


PATHS: dict[str, PathInfo] = {
    p.id: p
    for p in (
        PathInfo("keras-jax", "jax", "keras"),
        PathInfo("keras-tensorflow", "tensorflow", "keras"),
        PathInfo("keras-torch", "torch", "keras"),
        PathInfo("native-jax", "jax", "native"),
        PathInfo("native-tensorflow", "tensorflow", "native"),
        PathInfo("native-torch", "torch", "native"),
        PathInfo("native-mxnet", "mxnet", "native"),
        PathInfo("native-mxnet-hybrid", "mxnet", "native", "mxnet-hybrid"),
    )
}
PHASES = ("train", "infer")
# Frameworks that live in an environment of their own and may not install on
# every machine; a path of theirs that cannot start is skipped, not failed.
OPTIONAL_FRAMEWORKS = ("mxnet",)


def get_path(path_id: str) -> PathInfo:
    if path_id not in PATHS:
        raise ValueError(f"unknown path {path_id!r}; known paths: {', '.join(PATHS)}")
    return PATHS[path_id]


def parse_list(
    text: str | None, known: tuple[str, ...] | list[str], what: str
) -> list[str]:
    """Split a comma-separated selection and check every item against ``known``.

    ``None`` or ``all`` selects everything.
    """
    if text is None or text == "all":
        return list(known)
    items = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in items if t not in known]
    if unknown or not items:
        raise ValueError(
            f"unknown {what} {', '.join(unknown) or repr(text)}; "
            f"known {what}s: {', '.join(known)}"
        )
    return items


def interpreter(framework: str) -> str:
    """The Python executable of the environment that holds ``framework``."""
    return os.environ.get(f"HARNESS_PYTHON_{framework.upper()}") or sys.executable
