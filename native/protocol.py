"""The surface every native framework package offers.

A model is never written out per framework: ``native.compose`` walks its
spec over the framework's ``ops.py``, which offers a ``Block`` below per
layer kind, ``block(h, params, spec, name)``, reading what it needs from
the spec (a convolution's strides and padding, an LSTM's
``return_sequences``, the static operator attributes MXNet needs), and
what ``Ops`` lists: one function per activation and the few members of
another signature.  ``native.load_apply`` binds a spec into
``apply(params, x, tap=no_tap) -> logits``.  ``tap(name, h)`` is called with
the output of every layer in ``spec.tapped_layers()``, in order, and returns
``h``; the default does nothing, so compiled passes are unchanged, and the
runner passes a recording tap to localize a divergence.

What must differ per framework lives once in ``native/<fw>/common.py``, which
meets ``Framework`` below: loading arrays, feeding data, the loss and its
gradients, the hand-written optimizers and waiting for the device.  What is
the same for every framework (canonical <-> framework layouts, exporting
parameters, the activation tap, the evaluation that the equivalence checks
compare) lives once in ``workers/native_runner.py``.  ``tests/native`` checks
that every module meets these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import numpy as np

from zoo.losses import Heads, Objective
from zoo.specs import ModelSpec, Workload

Params = Any  # the framework's own container of parameter tensors
Tensor = Any
Apply = Callable[..., Tensor]  # apply(params, x, tap=no_tap) -> logits, spec bound
Tap = Callable[[str, Tensor], Tensor]
# params, slots (an optimizer's per-parameter state by Keras' slot name),
# u_product (Nadam's one number, else None), step, workload: in this order
TrainState = Any


class Masked(NamedTuple):
    """A block's input in a training step whose layer draws masks inside it
    (``Kind.masks``, drawn by ``native.compose``), each ``(count, N,
    width)`` and the same at every step of the ``sequence`` ``(N, T, F)``:

    - a recurrent cell's (``zoo.kinds.recurrent.cell_masks``) on the step's
      input (``inputs``; ``None`` without ``dropout``) and on the state
      before the step (``states``; ``None`` without ``recurrent_dropout``),
      one per gate or one for every gate: gate ``g``'s product takes its
      own, or the one, ``(x * inputs[g]) W_g``, ``(h * states[g]) U_g``, as
      Keras' cell computes;
    - an attention's on its weights after the softmax (``scores``), one
      per head of ``T * T``: head ``k``'s weights of example ``n`` times
      ``scores[k, n]`` read as ``(T, T)``, as Keras' ``MultiHeadAttention``
      drops them (``score_masks``)."""

    sequence: Tensor
    inputs: Tensor | None
    states: Tensor | None
    scores: Tensor | None = None


def unmasked(h: Tensor) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """A recurrent block's input as ``(sequence, input masks, state
    masks)``: a ``Masked``'s, or ``h`` with none."""
    if isinstance(h, Masked):
        return h.sequence, h.inputs, h.states
    return h, None, None


def score_masks(h: Tensor) -> tuple[Tensor, Tensor | None]:
    """An attention block's input as ``(sequence, masks of its weights)``:
    a ``Masked``'s, or ``h`` with none."""
    if isinstance(h, Masked):
        return h.sequence, h.scores
    return h, None


def no_tap(name: str, h: Tensor) -> Tensor:
    """The default tap: records nothing."""
    return h


class Block(Protocol):
    """A layer kind's block in a framework's ``ops.py``: a function named as
    the kind (``zoo.kinds.KINDS``), ``block(h, params, spec, name)``.  It
    takes the layer's input (the tuple of its inputs for a kind that takes
    several), the parameters by canonical name, the spec and the layer's
    name, reads the layer's options from ``spec.layer(name)``, and returns
    the layer's output before its activation, in the framework's layout
    (``LAYOUT`` of its ``common``).  What it computes is the kind's module's
    docstring (``zoo/kinds/<module>.py``).  Every kind has one, derived from
    the registry: no list here names them (``blocks``)."""

    def __call__(self, h: Tensor, params: Params, spec: ModelSpec, name: str) -> Tensor:
        """The layer's output."""


class NoiseBlock(Protocol):
    """The block of a kind that draws noise in a training step
    (``zoo.kinds.base.Noise``: a dropout, Gaussian noise), named as the kind,
    ``block(h, spec, name, rng, index)``: called in a training step only, at
    a nonzero amount (inference is the identity, and so is an amount of 0),
    it returns ``h`` with the layer's noise drawn (a dropout's mask, one draw
    shared along its ``shared_axes``; normal noise added or multiplied);
    ``rng`` is the step's randomness where the framework's is explicit
    (JAX's key, TensorFlow's stateless seed), ``index`` the layer's, folded
    in.  Derived from the registry like ``Block`` (``blocks``)."""

    def __call__(
        self, h: Tensor, spec: ModelSpec, name: str, rng: Any, index: int
    ) -> Tensor:
        """The layer's output with its noise drawn."""


class Ops(Protocol):
    """What a framework's ``ops.py`` offers besides a ``Block`` (or a
    ``NoiseBlock``) per kind: the members whose signature is not a block's
    (a kind's training pass, a perturbed reference run's draws) and one
    function per activation.  A kind's name here gives its block this signature in
    place of ``Block``'s."""

    def batch_norm_train(
        self, h: Tensor, params: Params, spec: ModelSpec, name: str
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Training: the same with the batch's mean and (biased) variance over
        every axis but the channels; returns the output and those two
        statistics (no gradient through them), which ``native.compose`` turns
        into the new moving ones."""

    def dropout_mask(
        self, h: Tensor, size: tuple[int, int], rate: float, rng: Any, index: int
    ) -> Tensor:
        """``count`` masks ``(count, N, width)`` (``size``: ``(count,
        width)``) for the batch of sequences ``h`` (``Masked``): each value
        ``1 / (1 - rate)`` with probability ``1 - rate``, else 0; as
        ``NoiseBlock`` draws (``rng``, ``index``)."""

    def outputs(self, h: Tensor, rank: int) -> Tensor:
        """A model's output ``h``, of ``rank`` axes per example (its
        ``zoo.specs.Head``'s shape), in Keras' element order: an image (an
        output per pixel) ``(N, C, H, W) -> (N, H, W, C)`` in a channels-first
        layout, anything else as it is; so the loss, the exported outputs and
        the timed predictions read every layout alike (``native.compose``)."""

    def perturb(self, h: Tensor, scale: float, seed: int, index: int) -> Tensor:
        """``h * (1 + d)`` with ``d`` drawn uniform in ``[-scale, scale]`` per
        element from ``seed`` and the layer's ``index`` (the same draw for the
        same shape every call): a perturbed reference run's rounding stand-in
        (``native.compose``, ``PERTURB_SEED``)."""

    def perturb_gradient(
        self, w: Tensor, scale: float, seed: int, index: int
    ) -> Tensor:
        """``w`` in value, with the gradient that flows into it multiplied by
        the ``1 + d`` that ``perturb`` draws (``native.compose``)."""

    def relu(self, h: Tensor) -> Tensor: ...

    def tanh(self, h: Tensor) -> Tensor: ...

    def sigmoid(self, h: Tensor) -> Tensor: ...

    def softmax(self, h: Tensor, image: bool) -> Tensor:
        """Over Keras' last axis, the channels: axis 1 of ``(N, C, H, W)``
        when ``image`` (the layer's output is one) in a channels-first
        layout, the last axis otherwise."""

    def gelu(self, h: Tensor) -> Tensor:
        """Keras' exact GELU, ``h / 2 * (1 + erf(h / sqrt(2)))``."""

    def elu(self, h: Tensor, slope: float) -> Tensor:
        """``h`` above 0, ``slope * (exp(h) - 1)`` below (Keras' alpha)."""

    def selu(self, h: Tensor) -> Tensor:
        """``SELU_SCALE * elu(h, SELU_ALPHA)`` (``zoo.kinds.base``)."""

    def silu(self, h: Tensor) -> Tensor:
        """``h * sigmoid(h)`` (Keras' swish)."""

    def softplus(self, h: Tensor) -> Tensor:
        """``log(1 + exp(h))``, computed without overflow."""

    def leaky_relu(self, h: Tensor, slope: float) -> Tensor:
        """``h`` at and above 0, ``slope * h`` below."""

    def relu6(self, h: Tensor) -> Tensor:
        """``min(max(h, 0), 6)``."""


def blocks() -> dict[str, Callable[..., Tensor]]:
    """Every member a framework's ``ops.py`` must offer, by name, with the
    function whose parameters it must have: a ``Block`` per registered kind
    (a ``NoiseBlock`` for a kind that draws noise, or the ``Ops`` member of
    the kind's name), and every member of ``Ops``."""
    from zoo.kinds import KINDS

    members = {m: getattr(Ops, m) for m in vars(Ops) if not m.startswith("_")}
    per_kind = {
        name: NoiseBlock.__call__ if kind.noise else Block.__call__
        for name, kind in KINDS.items()
    }
    return {**per_kind, **members}


class Framework(Protocol):
    LAYOUT: str  # a layout family of native.layout

    def init(self, arrays: Mapping[str, np.ndarray]) -> Params:
        """Arrays already in this framework's layout (``native.layout.to_native``)
        -> this framework's parameters, on its device."""

    def arrays(self, params: Params) -> Mapping[str, Tensor]:
        """The parameters as a mapping of canonical name -> tensor (the values,
        with no gradient bookkeeping), for exporting and for the activation tap."""

    def to_input(self, x: np.ndarray) -> Tensor:
        """A canonical-layout input batch -> this framework's layout and device."""

    def to_labels(self, y: np.ndarray) -> Tensor:
        """Targets (int class ids, or float rows: ``zoo.losses.draw_targets``)
        -> this framework's tensor on its device."""

    def loss(self, outputs: Any, y: Any, objective: Objective | Heads) -> Tensor:
        """The mean of ``objective``'s loss over the batch, written out with
        Keras' formulas (``zoo.losses``); for several outputs (``Heads``:
        ``outputs`` and ``y`` tuples) their weighted sum
        (``zoo.losses.total``)."""

    def penalty(
        self,
        params: Mapping[str, Tensor],
        penalties: tuple[tuple[str, float, float], ...],
    ) -> Tensor:
        """The weight penalties ``native.penalties_of`` names (Keras' ``L1L2``:
        ``l1 * sum(|w|) + l2 * sum(w ** 2)`` per parameter, summed) of
        ``params`` by name (what ``arrays`` gives), as ``loss_and_grads``
        adds them to its loss."""

    def loss_and_grads(
        self, apply: Apply, params: Params, x: Tensor, y: Tensor
    ) -> tuple[Tensor, Tensor, Mapping[str, Tensor]]:
        """Outputs, mean loss (``native.objective_of(apply)``) and gradients by
        name in this framework's layout (compiled where the framework compiles)."""

    def inference(self, apply: Apply, params: Params, x: Tensor) -> Tensor:
        """Logits without gradient bookkeeping (may return before they are ready)."""

    def make_train_state(self, params: Params, workload: Workload) -> TrainState:
        """Parameters plus the workload's optimizer state (step 0)."""

    def train_step(
        self, apply: Apply, state: TrainState, x: Tensor, y: Tensor
    ) -> TrainState:
        """One optimizer step with Keras' update formulas; returns the new state."""

    def state_params(self, state: TrainState) -> Params:
        """The current parameters of a train state, as ``loss_and_grads`` takes
        them."""

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """A tensor's values as a NumPy array of its own (waits for them)."""

    def sync(self, value: Any) -> None:
        """Block until every computation producing ``value`` has finished."""

    def describe(self) -> dict[str, Any]:
        """Versions, device, threads and numeric settings, for the records."""
