"""The original model as the judge of the reader (in a Keras worker).

Every path, Keras' too, is built from what ``zoo.keras_import`` made of a
user's ``.keras`` file: the spec and its canonical weights.  A reader that
misreads the file (two gate blocks of a GRU swapped, a kernel transposed,
a layer normalization's gamma and beta exchanged) would make every path
agree on the wrong model.  So, right after reading, the model as Keras
loaded it from the file and the model rebuilt from the spec
(``zoo.keras_models``) run the same batch in this worker, float32, and must
agree: every layer's output in order (``ModelSpec.tapped_layers``: a
misread layer is named), the outputs, the loss (the tool's, from
``zoo.losses``, against the one Keras itself deserializes from the file's
compile config) and every parameter's gradient.  Else ``judge`` raises a
ValueError in one sentence naming the first layer that differs, and the
model is neither checked nor timed.

Both models run the same Keras operators on the same backend, so they agree
to the last bit unless the reader is wrong; ``TOLERANCE`` leaves only a
float32 rounding's room.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from zoo.data import make_batches
from zoo.losses import keras_loss
from zoo.specs import ModelSpec

TOLERANCE = 1e-5  # normwise relative error, float32
BATCH = 4


def _error(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = max(float(np.linalg.norm(b)), 1e-30)
    return float(np.linalg.norm(a - b)) / scale


def _outputs(
    keras: Any, model: Any, names: tuple[str, ...], x: np.ndarray
) -> list[np.ndarray]:
    # A layer by name, or an operation of the graph (``x + y`` is saved as
    # keras.ops' Add, which is no layer).
    operations = getattr(model, "operations", None) or model.layers
    found = {operation.name: operation for operation in operations}
    probe = keras.Model(model.inputs, [found[n].output for n in names])
    return [np.asarray(o) for o in probe.predict_on_batch(x)]


def _top_level(model: Any, names: tuple[str, ...]) -> tuple[str, ...]:
    """The ``names`` that are layers (or operations) of ``model`` itself: a
    layer of a model nested in it (``<model>__<layer>``) has its output in
    that model's graph alone; the nested model's output, the loss and every
    gradient judge its layers."""
    operations = getattr(model, "operations", None) or model.layers
    own = {operation.name for operation in operations}
    return tuple(n for n in names if n in own)


def judge(
    keras: Any,
    original: Any,
    spec: ModelSpec,
    weights: Mapping[str, np.ndarray],
    compiled_loss: Any = None,
) -> None:
    """A ValueError in one sentence unless the model rebuilt from ``spec``
    and ``weights`` computes what ``original`` (the model as Keras loaded
    the file) computes; ``compiled_loss``: the file's compile config's loss,
    which Keras itself deserializes, else the tool's loss is taken as read."""
    from workers.keras_runner import _GRADS
    from zoo.keras_models import build, set_weights, variable

    rebuilt = build(spec, input_shape=spec.input_shape)
    set_weights(rebuilt, spec, weights)
    xs, ys = make_batches(spec, seed=0, batch_size=BATCH, count=1)
    x, y = xs[0], ys[0]
    names = _top_level(original, spec.tapped_layers())
    for name, mine, theirs in zip(
        names,
        _outputs(keras, rebuilt, names, x),
        _outputs(keras, original, names, x),
        strict=True,
    ):
        error = _error(mine, theirs)
        if not error <= TOLERANCE:
            _differs(f"the output of layer {name!r}", error)
    ours = keras_loss(keras, spec.workload.objective)
    theirs_loss = _keras_reading(keras, compiled_loss) if compiled_loss else ours
    backend = keras.backend.backend()
    _, loss, grads = _GRADS[backend](rebuilt, ours, x, y)
    _, their_loss, their_grads = _GRADS[backend](original, theirs_loss, x, y)
    error = _error(loss, their_loss)
    if not error <= TOLERANCE:
        _differs(f"the loss ({spec.workload.loss} as read)", error)
    mine_by = dict(
        zip((id(v) for v in rebuilt.trainable_variables), grads, strict=True)
    )
    theirs_by = dict(
        zip((id(v) for v in original.trainable_variables), their_grads, strict=True)
    )
    convert = keras.ops.convert_to_numpy
    for p in spec.params:
        if not p.trainable:
            continue
        mine_g = convert(mine_by[id(variable(rebuilt, p))])
        theirs_g = convert(theirs_by[id(variable(original, p))])
        error = _error(mine_g, theirs_g)
        if not error <= TOLERANCE:
            _differs(f"the gradient of {p.name}", error)


def _keras_reading(keras: Any, saved: Any) -> Any:
    """The loss Keras deserializes from the compile config's ``saved``; a
    loss function (a name) gives one value per example, which Keras' default
    reduction averages over the batch."""
    found = keras.losses.get(saved)
    if isinstance(found, keras.losses.Loss):
        return found
    return lambda y, outputs: keras.ops.mean(found(y, outputs))


def _differs(what: str, error: float) -> None:
    raise ValueError(
        f"the model the tool read from the file differs from the model Keras "
        f"loads from it at {what} (relative error {error:.1e}, allowed "
        f"{TOLERANCE:.0e}): the reader misread the file, so no path is checked "
        "or timed on it"
    )
