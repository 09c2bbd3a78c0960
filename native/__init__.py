"""The reference models written by hand with each framework's low-level operators.

Each framework package (``native.torch``, later ``native.jax`` ...) has the same
files: ``common.py`` with what every model of that framework shares (loading
weights, the loss, gradients, the hand-written optimizers, synchronization)
and one module per architecture (``ffn.py``, ``lenet.py``, ``vgg16.py``,
``lstm.py``) holding that model's forward pass.  Both surfaces are described
by the Protocols in ``native.protocol``.

Importing this package imports no framework; ``load`` does, lazily.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from native.protocol import Apply, Framework
    from zoo.specs import ModelSpec

FRAMEWORKS = ("jax", "tensorflow", "torch", "mxnet", "mxnet-hybrid")
# A framework id names its package (before any "-") and the module in it that
# meets native.protocol.Framework: "mxnet-hybrid" is native/mxnet/hybrid.py.
_MODULES = {"mxnet-hybrid": "native.mxnet.hybrid"}
# Frameworks with an idiomatic fast training step (``idiomatic.py``) for
# ``python -m harness floors``.
IDIOMATIC = ("jax", "tensorflow", "torch")


def load_framework(framework: str) -> Framework:
    """Import ``native.<framework>.common`` (this imports the framework itself)."""
    if framework not in FRAMEWORKS:
        raise ValueError(
            f"unknown native framework {framework!r}; known: {', '.join(FRAMEWORKS)}"
        )
    module = _MODULES.get(framework, f"native.{framework}.common")
    return cast("Framework", importlib.import_module(module))


def load_apply(framework: str, spec: ModelSpec) -> Apply:
    """The forward pass of ``spec`` in ``framework``, as ``apply(params, x)``.

    A variant (such as ``vgg-rysia``), or a spec changed by a deliberate fault,
    reuses its family's module with its own spec.
    """
    load_framework(framework)
    package = framework.split("-", maxsplit=1)[0]
    module: Any = importlib.import_module(f"native.{package}.{spec.module}")
    if spec.layers == module.SPEC.layers:  # the workload does not shape apply
        return cast("Apply", module.apply)
    return cast("Apply", functools.partial(module.apply, spec=spec))
