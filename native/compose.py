"""One way to compose a model: walk its spec, one framework's blocks at a time.

Every model, the four reference models and any model a user brings
(``zoo.user_models``), is a sequence of layers (``zoo.specs``), and every
framework's ``ops.py`` offers one block per layer kind with one signature,
``block(h, params, spec, name)``, and one function per activation,
``activation(h)`` (``native.protocol.Ops``).  ``apply`` walks the layers in
order: the block, then the layer's activation, then ``tap(name, h)`` (every
layer but ``flatten``: ``ModelSpec.tapped_layers``).  A layer takes the
previous layer's output, or the outputs of the earlier layers (or the
model's input, ``INPUT``) its ``inputs`` names (a merge such as a residual
``add`` is handed the tuple of them); a sloped activation (``SLOPED``:
``leaky_relu``, ``elu``) is handed its number too.  So a Transformer's
blocks are walked and tapped layer by layer like any other model.  The walk
is plain Python over a spec that does not change, so under ``jax.jit``,
``tf.function``, ``torch.compile`` or a hybridized MXNet block it traces to
the same program a hand-unrolled forward pass gives.

The kinds that compute differently in a training step (``zoo.specs.TRAINING_KINDS``),
which ``training=True`` asks for (``train_forward``): a ``batch_norm``
normalizes with the batch's statistics (``ops.batch_norm_train``) and writes
its new moving statistics, Keras' ``moving * momentum + batch * (1 -
momentum)``, into ``updates``; a ``normalization`` writes its adapted
mean and variance there unchanged (state, never trained); a kind that draws
noise (``Kind.noise``: a dropout, Gaussian noise) draws it
(``ops.<kind>(h, spec, name, rng, index)``, with ``rng`` where the framework's
randomness is explicit: a JAX key).  In inference a batch normalization uses
its moving statistics and a noise kind is the identity, as at an amount of 0
in training.  A frozen layer (Keras'
``trainable=False``, ``Layer.trainable``) computes in a training step as in
inference, and every parameter of it goes into ``updates`` as itself: held,
so no framework takes its gradient or steps it (a framework skips setting a
parameter to itself).  A layer that draws noise also taps its
input, as ``<name>/input``, for the check that it drew as it must
(``workers.protocol.check_noise``); a layer whose cells draw masks
(``Kind.masks``: a recurrent layer's ``dropout`` and
``recurrent_dropout``) taps each of them too (``ops.dropout_mask``), for
``workers.masks``.

Framework-free: the framework comes in with ``ops``.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any

from native.protocol import Masked, Tap, Tensor, no_tap
from zoo.kinds import KINDS
from zoo.specs import (
    INPUT,
    SLOPED,
    Layer,
    ModelSpec,
    draws_noise,
    input_of,
    layer_shapes,
    mask_width,
    masks_of,
)

# A perturbed reference run (``equivalence.reference``, perturbations): with
# ``HARNESS_NATIVE_PERTURB`` set to a seed in a float64 worker's environment,
# two things move at float32's rounding scale, each by its own draw:
# - every layer's output, before its activation, is multiplied by ``1 + d``,
#   ``d`` uniform per element in ``[-PERTURBATION, PERTURBATION]``
#   (float32's unit roundoff; ``ops.perturb``); its backward pass multiplies
#   the gradient there by the same ``1 + d``, so forward and backward values
#   both round;
# - every parameter's gradient is multiplied by ``1 + d`` per element, its
#   value left as it is (``ops.perturb_gradient``), ``d`` uniform in ``[-s,
#   s]``, ``s`` the unit roundoff times the square root of the number of
#   positions its layer sums that gradient over (batch times steps or pixels):
#   a float32 sum of that many terms errs as its square root in
#   probabilistic rounding analysis (Higham and Mary, 2019), and TensorFlow's
#   kernels sum a batch normalization's beta gradient so (issue 74: 6e-6 off
#   over 4,096 positions, where PyTorch's and JAX's are 1e-7), which no
#   perturbation of single values reproduces: independent draws cancel in a
#   sum, a sum's rounding accumulates;
# - a normalization's statistics (a batch normalization's batch mean and
#   variance in training, a layer normalization's) are each multiplied by
#   ``1 + d``, ``d`` as a gradient's over the positions they average
#   (``moved_statistics``), before they normalize: ``h - mean`` is exactly 0
#   in float64 wherever it averages one value (a batch of 1, one feature),
#   and float32 leaves a residue of its rounding there (Keras' ``h * inv +
#   (beta - mean * inv)``: two rounded products), which Adam turns into a
#   step of full size on gamma; a multiplied value stays exactly 0 (issue
#   74's campaign, findings cc6fc63f29, 111472bdaf and 67d7eec925);
# - a paired loss' rows get their terms' rounding bound added
#   (``loss_rows``: ``zoo.losses.PAIRED``'s comment).
PERTURB_ENV = "HARNESS_NATIVE_PERTURB"
PERTURB_SEED = int(os.environ.get(PERTURB_ENV, "0") or "0")
PERTURBATION = 2.0**-24
STATISTICS_INDEX = 1_000_000  # the statistics' draws, apart from the others'
MASK_INDEX = 3_000_000  # a cell's masks' draws, each apart (times its number)


def apply(
    ops: Any,
    params: Any,
    x: Tensor,
    spec: ModelSpec,
    tap: Tap = no_tap,
    *,
    training: bool = False,
    updates: dict[str, Tensor] | None = None,
    rng: Any = None,
) -> Tensor:
    """The model's outputs (logits) for input batch ``x`` in ``ops``'
    framework and layout; with ``training``, as a training step computes
    them (see the module docstring).  A model with several inputs takes
    the tuple of them in its order (``ModelSpec.input_names``), and one
    with several outputs gives the tuple of them (``ModelSpec.heads``)."""
    several = isinstance(x, tuple)
    h = x[0] if several else x
    outputs: dict[str, Tensor] = (
        dict(zip(spec.input_names, x, strict=True)) if several else {INPUT: x}
    )
    positions = _positions(spec, h) if PERTURB_SEED else {}
    if PERTURB_SEED:
        params = _gradients_perturbed(ops, params, spec, positions)
    for index, layer in enumerate(spec.layers):
        if KINDS[layer.kind].takes != 1:  # a merge: the tuple of its inputs
            h = tuple(outputs[name] for name in layer.inputs)
        elif layer.inputs:
            h = outputs[layer.inputs[0]]
        if training and draws_noise(layer):
            h = _drawn(ops, spec, layer, h, tap=tap, rng=rng, index=index)
        if KINDS[layer.kind].noise is not None:
            pass  # drawn above in training; the identity otherwise
        elif training:
            h = _training_block(
                ops, params, spec, h, layer.name, updates=updates, positions=positions
            )
        else:
            h = getattr(ops, layer.kind)(h, params, spec, layer.name)
        if PERTURB_SEED:
            h = ops.perturb(h, PERTURBATION, PERTURB_SEED, index)
        if layer.activation is not None:
            h = _activation(ops, h, spec, layer)
        if layer.kind != "flatten":  # see ModelSpec.tapped_layers
            h = tap(layer.name, h)
        outputs[layer.name] = h
    if spec.several_outputs:
        return tuple(
            ops.outputs(outputs[head.layer], len(head.shape)) for head in spec.heads
        )
    return ops.outputs(h, len(spec.heads[0].shape))


def _drawn(
    ops: Any,
    spec: ModelSpec,
    layer: Layer,
    h: Tensor,
    *,
    tap: Tap,
    rng: Any,
    index: int,
) -> Tensor:
    """``layer``'s noise drawn on ``h`` in a training step, its input tapped
    for the check of its draws: a noise kind's output, or for a layer whose
    cells draw masks its input with them (``_masked``)."""
    h = tap(f"{layer.name}/input", h)
    if masks_of(layer):
        return _masked(ops, spec, layer, h, tap=tap, rng=rng, index=index)
    return getattr(ops, layer.kind)(h, spec, layer.name, rng, index)


def _masked(
    ops: Any,
    spec: ModelSpec,
    layer: Layer,
    h: Tensor,
    *,
    tap: Tap,
    rng: Any,
    index: int,
) -> Masked | tuple[Masked, ...]:
    """The masks ``layer``'s cells draw in a training step
    (``zoo.specs.masks_of``), each tapped, with the sequence ``h`` as
    its block takes them: a ``Masked``, or one per copy (a Bidirectional's
    directions)."""
    given = _example_shape(h) or input_of(spec, layer.name)
    by_copy: dict[str, dict[str, Tensor]] = {}
    for number, mask in enumerate(masks_of(layer)):
        size = (mask.count, mask_width(layer, mask, given))
        drawn = ops.dropout_mask(
            h, size, mask.rate, rng, index + (number + 1) * MASK_INDEX
        )
        by_copy.setdefault(mask.copy, {})[mask.side] = tap(mask.tap, drawn)
    masked = tuple(
        Masked(h, sides.get("input"), sides.get("state"), sides.get("scores"))
        for sides in by_copy.values()
    )
    return masked if len(masked) > 1 else masked[0]


def _example_shape(h: Tensor) -> tuple[int, ...] | None:
    """The shape of one example of ``h`` where the framework knows it (an
    array's, a traced tensor's: a sequence model is checked at other lengths
    than its spec's), else ``None`` (an MXNet symbol, compiled for the
    spec at the input's shape: ``native.mxnet.hybrid``)."""
    try:
        return tuple(int(side) for side in h.shape[1:])
    except (AttributeError, TypeError):
        return None


def loss_rows(
    rows_of: Any, terms_of: Any, name: str, outputs: Tensor, targets: Tensor
) -> Tensor:
    """A paired loss' rows (``zoo.losses.PAIRED``) of one framework's
    ``rows_of(name, outputs, targets)``; in a perturbed run plus the unit
    roundoff times ``terms_of``, the magnitudes of the terms each row sums
    (``zoo.losses.PAIRED``'s comment)."""
    rows = rows_of(name, outputs, targets)
    if not PERTURB_SEED:
        return rows
    return rows + PERTURBATION * terms_of(name, outputs, targets)


def _gradients_perturbed(
    ops: Any, params: Any, spec: ModelSpec, positions: dict[str, int]
) -> dict[str, Tensor]:
    """``params`` (a mapping by name, as every reference implementation
    passes them) with every parameter's gradient perturbed
    (``PERTURB_SEED``; the comment above), by its layer's positions."""
    moved = dict(params)
    for number, name in enumerate(sorted(moved)):
        layer = name.split("/", maxsplit=1)[0]
        scale = PERTURBATION * math.sqrt(positions.get(layer, 1))
        moved[name] = ops.perturb_gradient(
            moved[name], scale, PERTURB_SEED, len(spec.layers) + number
        )
    return moved


def _activation(ops: Any, h: Tensor, spec: ModelSpec, layer: Layer) -> Tensor:
    """``layer``'s activation of its output ``h`` (in the timed step: no
    search of the spec's layers here)."""
    if layer.activation in SLOPED:  # its number: its own or Keras' default
        return getattr(ops, layer.activation)(h, layer.activation_slope)
    if layer.activation == "softmax":  # over the channels, images' too
        return ops.softmax(h, layer.name in _images(spec))
    return getattr(ops, str(layer.activation))(h)


def activation_function(ops: Any, name: str | None) -> Any:
    """The function ``h -> activation(h)`` of activation ``name`` in the
    framework's ``ops`` module, as a recurrent cell applies its own
    (``Kind.inner_activation``): a sloped one with Keras' default number, a
    softmax over the state's units, the identity for linear (``None``)."""
    if name is None:
        return _identity
    if name in SLOPED:
        return functools.partial(getattr(ops, name), slope=SLOPED[name])
    if name == "softmax":
        return functools.partial(ops.softmax, image=False)
    return getattr(ops, name)


def _identity(h: Tensor) -> Tensor:
    return h


def moved_statistics(
    perturb: Any,
    spec: ModelSpec,
    name: str,
    statistics: tuple[Tensor, ...],
    positions: int,
) -> tuple[Tensor, ...]:
    """Layer ``name``'s normalization statistics (its mean and variance),
    each times ``1 + d`` in a perturbed run, ``d`` by ``perturb`` (the
    framework's ``ops.perturb``) at the unit roundoff times the square root
    of the ``positions`` they average (the comment above); as they are
    otherwise.  A reference's layer normalization calls it too."""
    if not PERTURB_SEED:
        return statistics
    scale = PERTURBATION * math.sqrt(positions)
    index = STATISTICS_INDEX + 2 * [layer.name for layer in spec.layers].index(name)
    return tuple(
        perturb(value, scale, PERTURB_SEED, index + number)
        for number, value in enumerate(statistics)
    )


@functools.cache
def _held(spec: ModelSpec) -> dict[str, tuple[str, ...]]:
    """Each frozen layer's parameters by layer name (``Param.frozen``)."""
    held: dict[str, tuple[str, ...]] = {}
    for p in spec.params:
        if p.frozen:
            held[p.layer] = (*held.get(p.layer, ()), p.name)
    return held


@functools.cache
def _images(spec: ModelSpec) -> frozenset[str]:
    """The layers whose output is an image (rows, columns, channels): where
    a softmax is over the channels, not the framework's last axis."""
    names = (layer.name for layer in spec.layers)
    return frozenset(
        name
        for name, (_, out) in zip(names, layer_shapes(spec), strict=True)
        if len(out) == 3  # rows, columns, channels
    )


def _positions(spec: ModelSpec, x: Tensor) -> dict[str, int]:
    """Each layer's positions per channel for a batch like ``x``: the batch
    times the steps or pixels of its input or its output, the more."""
    # x is in the framework's layout (NCHW images for PyTorch): only its
    # batch and size per sample are read; a free length is the one that varies
    batch, size = int(x.shape[0]), math.prod(int(n) for n in x.shape[1:])
    shape = spec.input_shape
    if size != math.prod(shape):
        shape = (size // math.prod(shape[1:]), *shape[1:])
    shapes = layer_shapes(spec, shape)
    return {
        layer.name: batch * max(math.prod(given[:-1]), math.prod(out[:-1]))
        for layer, (given, out) in zip(spec.layers, shapes, strict=True)
    }


def _training_block(
    ops: Any,
    params: Any,
    spec: ModelSpec,
    h: Tensor,
    name: str,
    *,
    updates: dict[str, Tensor] | None,
    positions: dict[str, int],
) -> Tensor:
    """Layer ``name`` as a training step computes it; the state it sets goes
    into ``updates``.  ``positions``: each layer's, in a perturbed run."""
    layer = spec.layer(name)
    if not layer.trainable:
        # Frozen (Keras' trainable=False): computed as in inference (a batch
        # normalization with its moving statistics), its parameters held:
        # set to themselves, so no gradient is taken.
        h = getattr(ops, layer.kind)(h, params, spec, name)
        if updates is not None:
            updates.update({n: params[n] for n in _held(spec).get(name, ())})
        return h
    if layer.kind == "batch_norm":
        given = h
        h, mean, variance = ops.batch_norm_train(h, params, spec, name)
        if PERTURB_SEED:  # the statistics as float32 rounds them (above)
            mean, variance = moved_statistics(
                ops.perturb, spec, name, (mean, variance), positions.get(name, 1)
            )
            moved = {f"{name}/moving_mean": mean, f"{name}/moving_variance": variance}
            h = ops.batch_norm(given, {**params, **moved}, spec, name)
        if updates is not None:
            keep = layer.options.momentum
            for stat, batch in (("moving_mean", mean), ("moving_variance", variance)):
                moving = params[f"{name}/{stat}"]
                updates[f"{name}/{stat}"] = moving * keep + batch * (1 - keep)
        return h
    h = getattr(ops, layer.kind)(h, params, spec, name)
    if layer.kind == "normalization" and updates is not None:
        # adapted statistics: state no step changes (set, not trained)
        for stat in ("mean", "variance"):
            updates[f"{name}/{stat}"] = params[f"{name}/{stat}"]
    return h


def train_forward(
    apply: Any, params: Any, x: Tensor, rng: Any = None
) -> tuple[Tensor, dict[str, Tensor]]:
    """``apply`` (a bound pass of ``native.load_apply``) as a training step
    runs it: the logits, and the new value of every state parameter by name
    (a batch normalization's moving statistics, a frozen layer's parameters
    as they are; none for other models)."""
    updates: dict[str, Tensor] = {}
    logits = apply(params, x, training=True, updates=updates, rng=rng)
    return logits, updates
