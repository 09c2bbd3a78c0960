"""The reference models written by hand with each framework's low-level operators.

Every framework package (``native.jax``, ``native.tensorflow``,
``native.torch``, ``native.mxnet``) has the same files (``FILES``):

- ``common.py``: what must differ per framework and is the same for all its
  models (loading arrays, feeding data, the loss and its gradients, the
  hand-written SGD and Adam, waiting for the device), meeting
  ``native.protocol.Framework``;
- ``ops.py``: the building blocks with the same signatures everywhere, one
  per layer kind of ``zoo.specs.LAYER_KINDS`` (``dense``, ``conv2d``, ...,
  ``attention``, ``add``) as ``block(h, params, spec, name)`` and one per
  activation (``relu``, ..., ``gelu``) as ``activation(h)``;
- ``operators.py``: every operator of ``zoo.operators`` through the
  framework's own operators, with the conversions, autodiff and wait the
  operator benchmarks use (``python -m harness ops``; the same surface in
  every framework, and ``zoo.keras_operators`` through ``keras.ops``);
  one block per layer kind and one function per activation
  (``native.protocol.Ops``), which ``native.compose`` walks a spec with:
  there is no model module, every model (a user's too) is composed;
- ``modes.py``: the framework's execution modes (``MODES``, default first):
  ``framework(mode)`` gives the surface whose ``loss_and_grads``,
  ``inference`` and ``train_step`` run in that mode (PyTorch eager or
  ``torch.compile``; TensorFlow ``tf.function`` graphs, eager or XLA; JAX one
  ``jax.jit`` per step or one per layer; MXNet imperative or hybridized), with
  everything else ``common``'s; the default mode is ``common`` itself;
- ``idiomatic.py`` where the framework has an idiomatic fast training step for
  ``python -m harness floors`` (``IDIOMATIC``).

MXNet has one extra file, ``hybrid.py``: its compiled mode (a hybridized
``HybridBlock``, mode ``hybrid``) is also a path of its own,
``native-mxnet-hybrid``, and meets ``Framework`` too.  MXNet has no
``idiomatic.py``: its idiomatic fast mode *is* hybridization (the Gluon way
to run a model as one cached graph), and that is already a path of its own
measured beside ``native-mxnet``, so the floors benchmark would only time it
again.

What is the same for every framework (canonical <-> framework layouts, the
parameter export, the activation tap, evaluation) lives once in
``workers/native_runner.py``.

Importing this package imports no framework (``MODES``, ``modes_of`` and
``default_mode`` neither); ``load_framework`` does, lazily.
"""

from __future__ import annotations

import copy
import functools
import importlib
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from zoo.specs import OPTIMIZERS as SPEC_OPTIMIZERS

if TYPE_CHECKING:
    from native.protocol import Apply, Framework
    from zoo.losses import Heads, Objective
    from zoo.specs import ModelSpec

FRAMEWORKS = ("jax", "tensorflow", "torch", "mxnet", "mxnet-hybrid")
# A framework id names its package (before any "-") and the module in it that
# meets native.protocol.Framework: "mxnet-hybrid" is native/mxnet/hybrid.py,
# MXNet's mode "hybrid", the one mode that id runs in.
_MODULES = {"mxnet-hybrid": "native.mxnet.hybrid"}
_FIXED_MODE = {"mxnet-hybrid": "hybrid"}
# Each package's execution modes, default first (the one its common.py runs);
# native/<package>/modes.py builds them, describes each and checks this list.
MODES = {
    "jax": ("jit", "layerjit"),
    "tensorflow": ("graph", "eager", "xla"),
    "torch": ("eager", "compile"),
    "mxnet": ("imperative", "hybrid"),
}
# Frameworks with an idiomatic fast training step (``idiomatic.py``) for
# ``python -m harness floors``.
IDIOMATIC = ("jax", "tensorflow", "torch")
# The files of every framework package; ``idiomatic.py`` and MXNet's
# ``hybrid.py`` come on top, as described above.
FILES = ("__init__.py", "common.py", "modes.py", "ops.py", "operators.py")
# The optimizers every common.py writes out (``Workload.optimizer``): the
# specs' list, which a user's model is checked against too.
OPTIMIZERS = SPEC_OPTIMIZERS


def modes_of(framework: str) -> tuple[str, ...]:
    """The modes ``load_framework(framework, mode)`` takes, default first."""
    if framework not in FRAMEWORKS:
        raise ValueError(
            f"unknown native framework {framework!r}; known: {', '.join(FRAMEWORKS)}"
        )
    fixed = _FIXED_MODE.get(framework)
    return (fixed,) if fixed else MODES[framework]


def default_mode(framework: str) -> str:
    """The mode ``load_framework(framework)`` runs in."""
    return modes_of(framework)[0]


def load_framework(framework: str, mode: str | None = None) -> Framework:
    """The surface of ``framework`` in execution ``mode``: for ``None`` (the
    default mode) ``native.<framework>.common`` itself, or
    ``native.mxnet.hybrid`` for ``mxnet-hybrid``; otherwise what
    ``native.<package>.modes.framework(mode)`` builds.  This imports the
    framework itself."""
    modes = modes_of(framework)
    if mode is None:
        module = _MODULES.get(framework, f"native.{framework}.common")
        return cast("Framework", importlib.import_module(module))
    if mode not in modes:
        raise ValueError(
            f"native framework {framework!r} has no mode {mode!r}; "
            f"known: {', '.join(modes)}"
        )
    package = framework.split("-", maxsplit=1)[0]
    modes_module: Any = importlib.import_module(f"native.{package}.modes")
    return cast("Framework", modes_module.framework(mode))


def in_mode(base: Framework, mode: str, **replaced: Callable[..., Any]) -> Framework:
    """``base``'s surface with the functions in ``replaced`` swapped in and
    ``describe()`` naming ``mode``: what every ``modes.py`` hands out for a mode
    other than its default.  Exactly the members of ``Framework``, so nothing
    else of ``base`` leaks into a mode that does not run it."""
    from native.protocol import Framework as Surface

    names = ["LAYOUT", *(m for m in vars(Surface) if not m.startswith("_"))]
    members = {name: replaced.get(name, getattr(base, name)) for name in names}

    def describe() -> dict[str, Any]:
        return {**base.describe(), "mode": mode}

    return cast("Framework", types.SimpleNamespace(**{**members, "describe": describe}))


def load_apply(framework: str, spec: ModelSpec) -> Apply:
    """The forward pass of ``spec`` in ``framework``, as ``apply(params, x,
    tap=no_tap)``: ``native.compose.apply`` over ``native.<package>.ops`` with
    the spec bound.

    The same object for the same forward pass: JAX, TensorFlow and the modes
    that compile cache their compiled functions per ``apply`` object, so a new
    one per call would compile again every time.  Specs that differ only in
    their optimizer or batch share one; another model, another loss
    (``objective_of``) or a spec changed by a deliberate fault gets its own.
    """
    load_framework(framework)
    package = framework.split("-", maxsplit=1)[0]
    return _bound(importlib.import_module(f"native.{package}.ops"), spec)


@functools.cache
def objective_of(apply: Apply) -> Objective | Heads:
    """The loss a pass of ``load_apply`` trains with (its spec's
    ``ModelSpec.objective``: ``Heads`` for several outputs), which every
    ``common.loss`` takes; looked up once per pass, not in every (timed)
    training step."""
    spec: ModelSpec = apply.keywords["spec"]  # type: ignore[attr-defined]
    return spec.objective


@functools.cache
def penalties_of(apply: Apply) -> tuple[tuple[str, float, float], ...]:
    """The weight penalties a pass of ``load_apply`` trains with
    (``ModelSpec.penalties``: parameter name, L1 and L2 factors), which every
    ``common`` adds to its loss as ``l1 * sum(|w|) + l2 * sum(w ** 2)``;
    empty for a model without regularizers, whose loss stays as it was."""
    spec: ModelSpec = apply.keywords["spec"]  # type: ignore[attr-defined]
    return spec.penalties


def frozen_of(apply: Apply) -> frozenset[str]:
    """The parameters of a pass's frozen layers (``ModelSpec.frozen_names``),
    which a training step holds: ``native.compose`` sets each to itself.
    Found once per spec: MXNet's timed step asks every step."""
    return _frozen(apply.keywords["spec"])  # type: ignore[attr-defined]


@functools.cache
def _frozen(spec: ModelSpec) -> frozenset[str]:
    return frozenset(spec.frozen_names())


def at_shape(apply: Apply, shape: tuple[int, ...]) -> Apply:
    """``apply``'s forward pass for inputs of ``shape`` (without the batch):
    ``apply`` itself when its spec has that input shape, else the pass of the
    same spec at that shape.  A traced graph that fixes operator attributes
    from the spec's shapes (MXNet's hybridized one: a 'same' padding depends
    on its input's length) needs it for a sequence of another length."""
    spec: ModelSpec = apply.keywords["spec"]  # type: ignore[attr-defined]
    if spec.input_shape == shape:
        return apply
    ops = apply.args[0]  # type: ignore[attr-defined]
    # The spec's parameters are the same at any sequence length; a copy keeps
    # a deliberately faulty spec's layers as they are (``native.faults``).
    moved = copy.copy(spec)
    object.__setattr__(moved, "input_shape", shape)
    return _bound(ops, moved)


def _bound(ops: Any, spec: ModelSpec) -> Apply:
    """``native.compose.apply`` over ``ops`` with ``spec`` bound, one object
    per (ops, inputs, outputs, layers, parameters, loss: every output's, with
    its weight)."""
    key = (
        ops,
        spec.input_shape,
        spec.more_inputs,
        spec.outputs,
        spec.layers,
        spec.params,
        spec.objective,
    )
    if key not in _PASSES:
        from native import compose

        _PASSES[key] = cast("Apply", functools.partial(compose.apply, ops, spec=spec))
    return _PASSES[key]


# One bound forward pass per (ops, inputs, outputs, layers, parameters, loss).
_PASSES: dict[tuple[Any, ...], Apply] = {}
