"""Faults written into one framework's native code, as an edit to its file
would put them there, for the checks to catch (issue 65).

A fault of ``native.faults`` enters a path through what it reads: its
weights or its model description.  These enter the code: each replaces a
function of a native module with a wrong one.  ``install`` writes a
``sitecustomize`` module into a folder and puts that folder on
``PYTHONPATH``, so every worker process started afterwards runs it at
start-up; it edits the module when (and only when) a process imports it.  So
every worker of that framework gets the edit (its path, its modes, its
float64 and float32 reference runs), exactly as a change to the file would,
and no other worker does.  Nothing in the project's own code knows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from native.faults import Location


@dataclass(frozen=True)
class SourceEdit:
    """A wrong function for ``module``: ``source`` runs in the module's
    namespace once it has loaded (it may read what it replaces, as
    ``_original``); ``implementation`` is the reference implementation it
    edits, ``model`` a model it shows on, and ``target`` where localization
    must point (``None``: the edit makes the evaluation raise, and that
    error is the finding)."""

    module: str
    source: str
    implementation: str
    model: str
    target: Location | None


EDITS: dict[str, SourceEdit] = {
    # A global average pool that divides by one position too few.
    "global-pool-divisor": SourceEdit(
        "native.tensorflow.ops",
        """
def global_avg_pool(h, params, spec, name):
    axes = list(range(1, len(h.shape) - 1))
    count = 1
    for axis in axes:
        count *= h.shape[axis]
    return tf.reduce_sum(h, axis=axes) / (count - 1)
""",
        "native-tensorflow",
        "gap-cnn",
        Location("forward", "pool"),
    ),
    # A batch normalization whose moving variance takes the unbiased
    # estimate of the batch's variance (Bessel's correction, as PyTorch's
    # BatchNorm does), while it normalizes with the biased one, as it should.
    "unbiased-moving-variance": SourceEdit(
        "native.tensorflow.ops",
        """
_original = batch_norm_train

def batch_norm_train(h, params, spec, name):
    normalized, mean, variance = _original(h, params, spec, name)
    count = 1
    for size in h.shape[:-1]:
        count *= size
    return normalized, mean, variance * (count / (count - 1))
""",
        "native-tensorflow",
        "bn-dropout-cnn",
        Location("update", "conv_norm"),
    ),
    # A dropout that forgets to scale what it keeps by 1 / (1 - rate): the
    # dropout check stops the evaluation.
    "dropout-unscaled": SourceEdit(
        "native.tensorflow.ops",
        """
_original = dropout

def dropout(h, rate, rng, index):
    return _original(h, rate, rng, index) * (1 - rate)
""",
        "native-tensorflow",
        "bn-dropout-cnn",
        None,
    ),
}

_SITECUSTOMIZE = '''"""A source edit for a test (tests/source_edits.py): {name}."""

import importlib.abc
import importlib.machinery
import sys

MODULE = {module!r}
SOURCE = {source!r}


class Edit(importlib.abc.MetaPathFinder):
    """Loads MODULE as usual, then runs SOURCE in its namespace."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            exec(SOURCE, module.__dict__)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Edit())
'''


def install(name: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> SourceEdit:
    """Make every worker started from now on (until ``monkeypatch`` undoes
    it) run with the edit ``name`` of ``EDITS``; returns it."""
    edit = EDITS[name]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(name=name, module=edit.module, source=edit.source)
    )
    paths = [str(folder), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    return edit
