"""FLOP counts of the models, derived from their specs, never measured.

Standard library only, so every environment (the MXNet one included) can import
it.  The counts walk ``spec.layers`` with the shapes ``zoo.specs.layer_shapes``
works out, the same the parameters and every path follow.

Conventions
-----------
- A multiply-add counts as **2 FLOPs**, so a matmul of ``(m, k) @ (k, n)`` is
  ``2*m*k*n``.  Divide by two for MACs.
- dense: ``2*in*out`` + ``out`` (bias) + the activation, per output
  position (once for features, ``T`` times on a sequence).
- conv2d: ``2*k*k*cin*cout*Hout*Wout`` + ``cout*Hout*Wout`` (bias) + the
  activation.
- activations, per output element: ReLU, tanh and sigmoid 1 op each (as the
  LSTM's gates below), softmax 3 (exponential, sum, division); linear 0.
- avg_pool, max_pool: one op per element a window reads (a compare or an
  add; the average's division is folded in), ``k*k`` per output whatever
  the padding.  flatten: 0.
- lstm, per time step: ``2*F*4u`` (input projection) + ``2*u*4u`` (recurrent
  projection) + ``4u`` (bias) + ``9u`` gate work: 3 sigmoids (i, f, o),
  2 tanh (candidate, cell), 3 multiplications (f*c, i*g, o*tanh(c)) and 1 add
  (the new cell), one op each.  Adding the two projections is not counted
  apart: under the 2-FLOPs-per-MAC rule it is the extra adds of one matmul over
  the concatenated ``[x, h]``.  Times ``T`` steps, whether the next layer
  takes the last hidden state or every one (``return_sequences``).
- gelu, per output element: 5 (``x / sqrt(2)``, erf, ``+ 1``, times ``x``,
  times 1/2).
- conv1d: ``2*k*cin*cout*Tout`` + ``cout*Tout`` (bias) + the activation;
  avg_pool1d, max_pool1d: ``k`` per output; global_avg_pool: one add per
  input element and one division per output; embedding: 0 (a gather).
- gru, per time step: ``2*F*3u + 2*u*3u`` (projections) + ``6u`` (the input
  and the recurrent bias) + ``11u`` gate work (``GRU_GATE_FLOPS_PER_UNIT``).
- layer_norm: 7 per element (``LAYER_NORM_FLOPS_PER_ELEMENT``); batch_norm:
  2 per element as inference computes it (a training step's batch statistics,
  4 more, are left out); dropout: 0 (its training mask is left out too).
- attention over ``T`` steps of width ``F``, ``w = heads*key_dim``: the four
  projections ``3*2*T*F*w + 2*T*w*F`` and the two products of every query
  with every key ``2*2*T*T*w`` count as matmul; their biases, the query's
  scaling and the softmax (3 per score, ``heads*T*T`` scores) as elementwise.
  add: one per output element for each input after the first.
- The kinds users' models brought count by the rule in their module
  (``zoo.kinds``: ``Kind.flops``): rearrangements (reshape, permute,
  padding, cropping, upsampling, concatenate) 0; a merge one op per output
  element for each input after the first (an average one more); the new
  activations per ``zoo.kinds.base.ACTIVATION_FLOPS``; a layer without a
  bias no bias term.
- Forward is per sample times the batch size.
- Backward is 2x forward for the matmul and conv terms (one product for the
  gradient with respect to the inputs, one for the weights; the usual
  convention, kept even for the first layer, whose input gradient is not
  needed) and 1x forward for the elementwise terms (bias sums, ReLU masks,
  pool routing, LSTM gates).  Elementwise work is under 1% of every model here,
  so that choice does not move the totals.
- Loss: per output and sample, forward and backward together, the model's
  loss's ``zoo.losses.Loss.flops_per_output`` (softmax cross-entropy over
  logits 5, as before; a squared error 3).
- A frozen layer (Keras' ``trainable=False``) computes no weight gradient,
  and no input gradient when no layer before it trains: its backward is
  1x its forward matmul (its elementwise backward kept), or none at all
  (``_untaken_backward``).
- Optimizer, once per step whatever the batch: ``zoo.optimizers.Optimizer.
  flops_per_param`` per trained parameter (plain SGD 2: scale, subtract; Adam
  12: two moment updates, bias corrections, square root, division, update).

Per-sample counts of the reference models (forward is ``forward_flops(spec, 1)``;
train is ``train_flops(spec, b) / b`` at the workload's batch size ``b``,
optimizer included, so it sits near 3x forward):

=====  =============  =================  =========  =========
model  forward GFLOP  train GFLOP        batch      optimizer
=====  =============  =================  =========  =========
ffn    0.000219       0.000658           128        sgd
lenet  0.000479       0.001425           200        adam
vgg16  0.628132       1.885145           128        adam
lstm   0.045985       0.137546           128        adam
trans  0.029328       0.087237           32         adam
=====  =============  =================  =========  =========

(``trans``: the transformer, 128 tokens.)

VGG16 here is the CIFAR-10 variant (32x32x3, 13 'same' 3x3 convolutions,
512-512-10 head): 313,725,952 MACs, i.e. ~0.31 GMAC or ~0.63 GFLOP per sample.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zoo.kinds import KINDS, gru, lstm, normalization
from zoo.kinds.base import ACTIVATION_FLOPS
from zoo.losses import LOSSES
from zoo.optimizers import OPTIMIZERS
from zoo.specs import ModelSpec, layer_inputs, output_positions

# FLOPs per parameter for one update; see the module docstring.
OPTIMIZER_FLOPS_PER_PARAM = {n: o.flops_per_param for n, o in OPTIMIZERS.items()}
# Each kind's own constants live with its rule in its module (``zoo.kinds``).
LSTM_GATE_FLOPS_PER_UNIT = lstm.GATE_FLOPS_PER_UNIT
GRU_GATE_FLOPS_PER_UNIT = gru.GATE_FLOPS_PER_UNIT
LAYER_NORM_FLOPS_PER_ELEMENT = normalization.LAYER_NORM_FLOPS_PER_ELEMENT
BATCH_NORM_FLOPS_PER_ELEMENT = normalization.BATCH_NORM_FLOPS_PER_ELEMENT
PHASES = ("train", "infer")


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs of one layer for one sample, split by how backward scales.

    ``matmul`` is the multiply-add work (dense, conv, LSTM projections), whose
    backward costs twice as much; ``elementwise`` is everything else (bias,
    activation, pooling, LSTM gates), whose backward costs about the same.
    """

    name: str
    kind: str
    matmul: int
    elementwise: int

    @property
    def total(self) -> int:
        return self.matmul + self.elementwise


def layer_flops(
    spec: ModelSpec, input_shape: tuple[int, ...] | None = None
) -> tuple[LayerFlops, ...]:
    """Per-sample forward FLOPs of every layer of ``spec``, in order.

    ``input_shape`` (without batch) overrides ``spec.input_shape``, e.g. a
    shorter sequence for the LSTM.
    """
    counts: list[LayerFlops] = []
    for layer, (given, out) in zip(
        spec.layers, layer_inputs(spec, input_shape), strict=True
    ):
        activation = ACTIVATION_FLOPS[layer.activation] * math.prod(out)
        matmul, elementwise = KINDS[layer.kind].flops(layer, given, out)
        counts.append(
            LayerFlops(layer.name, layer.kind, matmul, elementwise + activation)
        )
    return tuple(counts)


def _check_batch(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, not {batch_size}.")


def forward_flops(
    spec: ModelSpec, batch_size: int, input_shape: tuple[int, ...] | None = None
) -> int:
    """FLOPs of one forward pass over ``batch_size`` samples, logits out."""
    _check_batch(batch_size)
    return batch_size * sum(c.total for c in layer_flops(spec, input_shape))


def optimizer_flops(spec: ModelSpec) -> int:
    """FLOPs of one update of every parameter by the workload's optimizer."""
    optimizer = spec.workload.optimizer
    if optimizer not in OPTIMIZER_FLOPS_PER_PARAM:
        raise ValueError(
            f"{spec.name} uses optimizer {optimizer!r}, which harness.core.flops "
            f"cannot count; known: {', '.join(OPTIMIZER_FLOPS_PER_PARAM)}."
        )
    # A batch normalization's moving statistics are set, not trained.
    params = sum(math.prod(p.shape) for p in spec.params if p.trainable)
    return OPTIMIZER_FLOPS_PER_PARAM[optimizer] * params


def train_flops(
    spec: ModelSpec, batch_size: int, input_shape: tuple[int, ...] | None = None
) -> int:
    """FLOPs of one training step on ``batch_size`` samples: forward, loss,
    backward and one optimizer update (conventions in the module docstring)."""
    _check_batch(batch_size)
    layers = layer_flops(spec, input_shape)
    matmul = sum(c.matmul for c in layers)
    elementwise = sum(c.elementwise for c in layers)
    forward_and_backward = 3 * matmul + 2 * elementwise
    for count, untaken in zip(layers, _untaken_backward(spec), strict=True):
        # no backward at all (2): its elementwise backward goes too
        forward_and_backward -= untaken * count.matmul + (untaken == 2) * (
            count.elementwise
        )
    # every position's row of outputs (a per-step model's steps) has its
    # loss, and every output of a model with several its own
    if not spec.several_outputs:
        positions = math.prod(output_positions(spec, input_shape))
        loss = LOSSES[spec.workload.loss].flops_per_output * spec.classes * positions
    else:
        loss = sum(
            LOSSES[h.objective.loss].flops_per_output * math.prod(h.shape)
            for h in spec.heads
        )
    return batch_size * (forward_and_backward + loss) + optimizer_flops(spec)


def _untaken_backward(spec: ModelSpec) -> list[int]:
    """Per layer, the backward products a training step does not compute:
    a frozen layer's (Keras' ``trainable=False``) weight gradient, and its
    input gradient too when no layer before it trains, so that nothing
    needs it (a transfer model's base takes no backward pass at all); 0 for
    every other layer, counted by the convention above."""
    trained = {p.layer for p in spec.params if p.trainable}
    reaches: dict[str, bool] = {}  # whether a trained layer is at or before it
    untaken = []
    for layer in spec.layers:
        before = any(reaches.get(source, False) for source in spec.sources(layer.name))
        reaches[layer.name] = before or layer.name in trained
        untaken.append(0 if layer.trainable else (1 if before else 2))
    return untaken


def step_flops(spec: ModelSpec, phase: str, batch_size: int) -> int:
    """FLOPs of one timed step: an optimizer step for ``train``, one forward
    mini-batch for ``infer``."""
    if phase == "train":
        return train_flops(spec, batch_size)
    if phase == "infer":
        return forward_flops(spec, batch_size)
    raise ValueError(f"unknown phase {phase!r}; use one of: {', '.join(PHASES)}.")
