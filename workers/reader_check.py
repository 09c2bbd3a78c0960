"""The original model as the judge of the reader (in a Keras worker).

Every path, Keras' too, is built from what ``zoo.keras_import`` made of a
user's ``.keras`` file: the spec and its canonical weights.  A reader that
misreads the file (two gate blocks of a GRU swapped, a kernel transposed,
a layer normalization's gamma and beta exchanged) would make every path
agree on the wrong model.  So, right after reading, the model as Keras
loaded it from the file and the model rebuilt from the spec
(``zoo.keras_models``) run the same batch in this worker, float32, and must
agree: every layer's output in order (``ModelSpec.tapped_layers``: a
misread layer is named; a layer of a model nested in the model is run
inside it, on what that model takes), the outputs, the loss (the tool's, from
``zoo.losses``, against the one Keras itself deserializes from the file's
compile config) and every parameter's gradient, in inference and then in a
training step's pass (each dropout of the rebuilt model drawing the mask
the original's draws: a reader that leaves dropouts out is caught; batch
normalization on the batch's statistics).  Else ``judge`` raises a
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

from workers.keras_runner import (
    _with_penalty,
    fed,
    listed,
    loss_function,
    targeted,
)
from zoo.data import make_batches
from zoo.keras_import import NESTED
from zoo.specs import ModelSpec

TOLERANCE = 1e-5  # normwise relative error, float32
# What Keras on PyTorch raises when it cannot take a loss's gradient at all
# (``equivalence.keras_known``: a sparse cross-entropy from probabilities on
# an image output); the reader then judges the forward losses only.
CANNOT_TRAIN = "grad_input must be contiguous"
BATCH = 4
SEED = 0  # the random generators' start for the training step's pass


def _error(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = max(float(np.linalg.norm(b)), 1e-30)
    return float(np.linalg.norm(a - b)) / scale


def _outputs(
    keras: Any, model: Any, names: tuple[str, ...], x: np.ndarray
) -> list[np.ndarray]:
    """The outputs of layers ``names`` of ``model`` on ``x``: a layer by
    name, or an operation of the graph (``x + y`` is saved as keras.ops'
    Add, which is no layer), or ``<model>__<layer>``, a layer of a model
    nested in ``model`` (``zoo.keras_import`` inlines one so), run on what
    the nested model takes."""
    operations = getattr(model, "operations", None) or model.layers
    found = {operation.name: operation for operation in operations}
    values: dict[str, np.ndarray] = {}
    own = [n for n in names if n in found]
    if own:
        probe = keras.Model(model.inputs, [found[n].output for n in own])
        values.update(zip(own, listed(probe.predict_on_batch(x)), strict=True))
    nested: dict[str, list[str]] = {}
    for n in names:
        if n not in found:
            outer, _, rest = n.partition(NESTED)
            nested.setdefault(outer, []).append(rest)
    for outer, inner in nested.items():
        # What the nested model was called on in this graph (its ``input``
        # is its own graph's): the tensors of its one call.
        called_on = found[outer]._inbound_nodes[0].input_tensors
        taken = keras.Model(model.inputs, called_on[0]).predict_on_batch(x)
        inner_values = _outputs(keras, found[outer], tuple(inner), taken)
        values.update(
            (f"{outer}{NESTED}{n}", v) for n, v in zip(inner, inner_values, strict=True)
        )
    return [values[n] for n in names]


def judge(
    keras: Any,
    original: Any,
    spec: ModelSpec,
    weights: Mapping[str, np.ndarray],
    compiled_loss: Any = None,
) -> None:
    """A ValueError in one sentence unless the model rebuilt from ``spec``
    and ``weights`` computes what ``original`` (the model as Keras loaded
    the file) computes; ``compiled_loss``: the file's compile config's loss
    and loss weights (``zoo.keras_import.compiled_loss``), which Keras
    itself deserializes and weighs, else the tool's loss is taken as read."""
    from zoo.keras_models import build, set_weights

    rebuilt = build(spec, input_shape=spec.input_shape)
    set_weights(rebuilt, spec, weights)
    xs, ys = make_batches(spec, seed=0, batch_size=BATCH, count=1)
    x, y = fed(spec, xs[0]), targeted(spec, ys[0])  # several: lists
    names = spec.tapped_layers()
    for name, mine, theirs in zip(
        names,
        _outputs(keras, rebuilt, names, x),
        _outputs(keras, original, names, x),
        strict=True,
    ):
        error = _error(mine, theirs)
        if not error <= TOLERANCE:
            _differs(f"the output of layer {name!r}", error)
    ours = loss_function(keras, spec)
    # several outputs in a dict are judged in the spec's order, by name (a
    # Sequential model, one output, is not built yet: it has neither)
    output_names: list[str] = []
    if spec.several_outputs:
        output_names = (
            [h.layer for h in spec.heads]
            if isinstance(original.output, dict)
            else list(original.output_names)
        )
    theirs_loss = (
        _their_loss(keras, spec, compiled_loss, output_names) if compiled_loss else ours
    )
    # Inference first, then a training step's pass (dropout drawing the same
    # masks in both, batch normalization on the batch's statistics): a
    # reader that left out a dropout, or misread its rate, agrees in
    # inference and parts here.
    _judge_gradients(keras, (rebuilt, ours), (original, theirs_loss), spec, (x, y))
    if not spec.trains_differently:  # a training pass is the inference one
        return
    # A training pass moves the moving statistics: the file's model is left
    # as it was loaded.
    kept = [keras.ops.convert_to_numpy(v) for v in original.non_trainable_variables]
    try:
        _share_seeds(original, rebuilt)
        _judge_gradients(
            keras, (rebuilt, ours), (original, theirs_loss), spec, (x, y), training=True
        )
    finally:
        for v, value in zip(original.non_trainable_variables, kept, strict=True):
            v.assign(value)


def _judge_gradients(
    keras: Any,
    mine: tuple[Any, Any],
    theirs: tuple[Any, Any],
    spec: ModelSpec,
    batch: tuple[np.ndarray, np.ndarray],
    *,
    training: bool = False,
) -> None:
    """The loss and every trained parameter's gradient of the rebuilt model
    (``mine``: the model and its loss) against the original's."""
    from workers.keras_runner import _GRADS
    from zoo.keras_models import variable

    (rebuilt, ours), (original, theirs_loss) = mine, theirs
    x, y = batch
    where = " in a training step" if training else ""
    backend = _GRADS[keras.backend.backend()]

    def grads_of(model: Any, loss_fn: Any) -> Any:
        if training:
            # A dropout without a seed of its own draws from the backend's
            # global generator on PyTorch: the same start for both models.
            keras.utils.set_random_seed(SEED)
        return backend(model, loss_fn, x, y, training=training)

    try:
        _, loss, grads = grads_of(rebuilt, ours)
    except RuntimeError as exc:
        if CANNOT_TRAIN not in str(exc):
            raise
        # Keras on PyTorch takes no gradient of this loss at all (a sparse
        # cross-entropy from probabilities on an image output: docs/findings/
        # nll_loss_channels_last.py); the forward losses are still judged,
        # and the keras-torch path's checks name the bug.
        _judge_forward_loss(mine, theirs, spec, batch, where)
        return
    # several outputs in a dict (keras.io's functional guide): the same
    # layers and variables with the outputs listed in the spec's order
    theirs_model = original
    if spec.several_outputs and isinstance(original.output, dict):
        theirs_model = keras.Model(
            original.inputs, [original.output[h.layer] for h in spec.heads]
        )
    _, their_loss, their_grads = grads_of(theirs_model, theirs_loss)
    error = _error(loss, their_loss)
    if not error <= TOLERANCE:
        _differs(f"the loss ({spec.workload.loss} as read){where}", error)
    mine_by = dict(
        zip((id(v) for v in rebuilt.trainable_variables), grads, strict=True)
    )
    theirs_by = dict(
        zip((id(v) for v in theirs_model.trainable_variables), their_grads, strict=True)
    )
    convert = keras.ops.convert_to_numpy
    for p in spec.params:
        theirs_v = variable(original, p)
        if not p.trainable or id(theirs_v) not in theirs_by:
            continue  # a layer frozen in the file (the tool trains it)
        mine_g = convert(mine_by[id(variable(rebuilt, p))])
        theirs_g = convert(theirs_by[id(theirs_v)])
        error = _error(mine_g, theirs_g)
        if not error <= TOLERANCE:
            _differs(f"the gradient of {p.name}{where}", error)


def _judge_forward_loss(
    mine: tuple[Any, Any],
    theirs: tuple[Any, Any],
    spec: ModelSpec,
    batch: tuple[Any, Any],
    where: str,
) -> None:
    """The loss of the rebuilt model against the original's, forward only."""
    (rebuilt, ours), (original, theirs_loss) = mine, theirs
    x, y = batch
    training = bool(where)
    loss = _with_penalty(rebuilt, ours(y, rebuilt(x, training=training)))
    their = _with_penalty(original, theirs_loss(y, original(x, training=training)))
    error = _error(_numpy(loss), _numpy(their))
    if not error <= TOLERANCE:
        _differs(f"the loss ({spec.workload.loss} as read){where}", error)


def _numpy(value: Any) -> Any:
    """A backend's scalar as NumPy (a torch tensor that needs no grad)."""
    detach = getattr(value, "detach", None)
    return np.asarray(detach().cpu().numpy() if detach else value)


def _seed_generators(model: Any, prefix: str = "") -> dict[str, list[Any]]:
    """Each layer's random seed generators (a dropout's), by the layer's
    name as the spec names it: ``<model>__<layer>`` inside a nested model."""
    found: dict[str, list[Any]] = {}
    for layer in model.layers:
        name = f"{prefix}{layer.name}"
        if hasattr(layer, "layers"):  # a model nested in the model
            found.update(_seed_generators(layer, f"{name}{NESTED}"))
        generators = list(getattr(layer, "_seed_generators", ()))
        if generators:
            found[name] = generators
    return found


def _share_seeds(original: Any, rebuilt: Any) -> None:
    """Each random layer of ``rebuilt`` set to draw what the same-named
    layer of ``original`` draws next: the same dropout masks in both.  A
    layer one model has and the other lacks draws its own, and the pass
    parts there."""
    theirs = _seed_generators(original)
    for name, generators in _seed_generators(rebuilt).items():
        for mine, their in zip(generators, theirs.get(name, ()), strict=False):
            mine.state.assign(their.state.value)
            # PyTorch draws from the generator only for a seeded layer (a
            # file's Dropout(seed=7)), else from its global one
            mine._initial_seed = their._initial_seed


def _their_loss(
    keras: Any, spec: ModelSpec, saved: Mapping[str, Any], names: list[str]
) -> Any:
    """The loss of the file's compile config as Keras deserializes it
    (``saved``: its ``loss`` and ``loss_weights``); for several outputs
    (``names``, the file's output names), Keras' own ``CompileLoss`` of it,
    each output's loss (one for all, a list in their order or a dict by
    name) times its weight as the file gives them, summed: so the tool's
    reading of the weights is judged by Keras' too."""
    if not spec.several_outputs:
        return _keras_reading(keras, saved["loss"])
    from keras.src.trainers.compile_utils import CompileLoss

    loss = saved["loss"]
    if isinstance(loss, dict):
        given: Any = {k: keras.losses.get(v) for k, v in loss.items()}
    elif isinstance(loss, list):
        given = [keras.losses.get(v) for v in loss]
    else:
        given = keras.losses.get(loss)
    compiled = CompileLoss(
        given, loss_weights=saved["loss_weights"], output_names=names
    )
    return lambda ys, outputs: compiled(list(ys), list(outputs))


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
