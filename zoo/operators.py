"""The operators the four models are made of, as cases a benchmark can run.

Framework-free (NumPy 1.23-safe): the MXNet worker reads it too.  An
``Operator`` says what its operands and results are for given integer
``dims`` (their shapes, canonical layout: images ``(N, H, W, C)``,
sequences ``(N, T, C)``, convolution kernels ``(kh, kw, in, out)`` and
``(k, in, out)``, dense kernels ``(in, out)``, attention heads ``(N, T,
heads, key_dim)``, LSTM gates in Keras' ``i, f, c, o`` order, GRU gates in
its ``z, r, h``), which operands the backward pass
differentiates, how much work one call does, and which keyword attributes
(a convolution's padding, a pool's window, a layer or batch normalization's
epsilon, Adam's step) its implementations take.  A ``Case`` is one operator
at one set of dims, labelled where it comes from (``square-2048``,
``vgg16-block3_conv1``).

Every implementation module (``zoo.keras_operators`` through ``keras.ops``;
``native.<framework>.operators`` through the framework's own operators)
offers one function per operator, named as the operator, called as
``fn(*operands, **attributes)`` with the operands in the order ``inputs``
lists them, already in the module's ``LAYOUT``, a layout family of
``native.layout`` (``keras``, canonical, or ``oihw``: see ``Operand``),
returning the results
in the order ``outputs`` lists them (one tensor, or a tuple of several).

The backward pass of a call differentiates the scalar ``sum_k <result_k,
cotangent_k>`` with respect to the ``wrt`` operands; a timed backward call is
the forward pass and that gradient together.

``make_operands`` builds a case's operands from a seed and a value scale
with NumPy, so the orchestrator's float64 reference and every worker compute
on the same float32 numbers; ``timed_cases`` lists the cases a benchmark
profile times: square GEMMs, element-wise sweeps (batch normalization's
too), and the models' own shapes at a chosen batch size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from zoo.kinds import KINDS
from zoo.kinds.global_pool import over_features
from zoo.specs import LAYER_NORM_EPSILON, MODELS, Layer, ModelSpec, layer_shapes

Dims = dict[str, int]
Shape = tuple[int, ...]
Attributes = dict[str, int | float | str]

# Adam's constants: Keras' defaults, as every hand-written optimizer here.
ADAM = {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7}
# Deliberate operator faults, which the checks must catch (applied by
# ``workers.operators`` to the native paths only).
FAULTS = {
    "gemm-transposed": "matmul and dense get w transposed: x @ w.T, the right "
    "shape for a square w and wrong numbers",
    "conv-padding": "conv2d and conv1d pad 'valid' where 'same' is asked and "
    "'same' where 'valid' is",
    "inputs-bfloat16": "every float operand rounded to bfloat16 before the "
    "operator runs",
    "layer-norm-epsilon": "layer_norm takes PyTorch's default epsilon 1e-5 where "
    "Keras' 1e-3 is asked",
    "batch-norm-unbiased-variance": "batch_norm divides by the unbiased (Bessel-"
    "corrected) variance, PyTorch's running_var's, where Keras' biased one is "
    "asked (given as gamma * sqrt((n - 1) / n) and epsilon * (n - 1) / n: the "
    "same y and gradients of x and beta; gamma's is the scaled gamma's)",
    "attention-unscaled": "attention leaves out the 1/sqrt(key_dim) scale of its "
    "scores (the queries arrive multiplied by sqrt(key_dim))",
    "gru-gate-order": "gru_cell reads its gate blocks in PyTorch's r, z, h order "
    "where Keras' z, r, h are given",
}
ROLES = (
    "plain",
    "image",
    "conv_kernel",
    "conv1d_kernel",
    "dense_kernel",
    "heads",
    "labels",
    "ids",
)
# Roles of integer operands: never differentiated, never counted as memory
# traffic in float32 words, drawn uniformly over their range.
INTEGER_ROLES = ("labels", "ids")
# The fewest rows a batch normalization case takes its statistics over: over
# one its result is beta whatever x is (float64's gradients of x and gamma
# exactly 0, and PyTorch refuses it); over two, x's gradient carries a factor
# epsilon / (var + epsilon), a cancellation that rounding swamps at scale.
BATCH_NORM_MIN_ROWS = 3


@dataclass(frozen=True)
class Operand:
    """One operand or result: its name, canonical shape and role.  In an
    ``oihw`` module, ``image`` operands are ``(N, C, H, W)``, ``conv_kernel``
    ones ``(out, in, kh, kw)``, ``conv1d_kernel`` ones ``(out, in, k)``,
    ``dense_kernel`` ones ``(out, in)`` and ``heads`` ones (attention's
    queries, keys and values, canonically ``(N, T, heads, key_dim)``)
    ``(N, heads, T, key_dim)`` (``native.layout``'s ``oihw`` family);
    ``plain`` operands keep their shape everywhere (sequences ``(N, T, C)``
    included); ``labels`` are integer class indices and ``ids`` integer
    token ids (``INTEGER_ROLES``: never differentiated)."""

    name: str
    shape: Shape
    role: str = "plain"


@dataclass(frozen=True)
class Operator:
    """One operator: its dims (names of the integers that size a case), and
    for given dims its operands, results, attributes and work."""

    name: str
    dims: tuple[str, ...]
    summary: str
    inputs: Callable[[Dims], tuple[Operand, ...]]
    outputs: Callable[[Dims], tuple[Operand, ...]]
    wrt: tuple[str, ...]  # operands the backward pass differentiates; () = none
    flops: Callable[[Dims], float]  # one forward call's floating-point operations
    attributes: Callable[[Dims], Attributes] = lambda d: {}
    # Whether FLOPs measure its work (compute-bound at large sizes); for the
    # rest (element-wise, pooling, the loss, Adam) memory traffic does, and
    # the report gives elements per second instead of a share of the peak.
    compute_bound: bool = False
    # Whether ``flops`` counts the direct algorithm's operations where faster
    # algorithms do fewer (a 3x3 convolution by Winograd's: about 2.25 times
    # fewer multiplications), so a share of the peak above 1 is no error.
    nominal_flops: bool = False

    def elements(self, dims: Dims) -> int:
        """Elements of every float operand and result: the memory one call
        touches at least once, in float32 words."""
        operands = (*self.inputs(dims), *self.outputs(dims))
        return sum(math.prod(o.shape) for o in operands if o.role not in INTEGER_ROLES)

    @property
    def has_backward(self) -> bool:
        return bool(self.wrt)

    def call_flops(self, dims: Dims, direction: str) -> float:
        """FLOPs of one timed call: the forward pass, or forward and backward
        (``backward``: about three times the forward for the products, as a
        gradient costs two more of them)."""
        if direction not in DIRECTIONS:
            raise ValueError(
                f"unknown direction {direction!r}; known: {', '.join(DIRECTIONS)}"
            )
        forward = self.flops(dims)
        return forward if direction == "forward" else 3.0 * forward


DIRECTIONS = ("forward", "backward")


def _conv_side(side: int, kernel: int, same: int) -> int:
    return side if same else side - kernel + 1


def _conv_out(d: Dims) -> Shape:
    return (
        d["n"],
        _conv_side(d["h"], d["k"], d["same"]),
        _conv_side(d["w"], d["k"], d["same"]),
        d["f"],
    )


def _conv1d_out(d: Dims) -> Shape:
    return (d["n"], _conv_side(d["t"], d["k"], d["same"]), d["f"])


def _pool_out(d: Dims) -> Shape:
    return (d["n"], d["h"] // d["size"], d["w"] // d["size"], d["c"])


def _pool(name: str, summary: str) -> Operator:
    return Operator(
        name,
        ("n", "h", "w", "c", "size"),
        summary,
        lambda d: (Operand("x", (d["n"], d["h"], d["w"], d["c"]), "image"),),
        lambda d: (Operand("y", _pool_out(d), "image"),),
        ("x",),
        lambda d: float(math.prod(_pool_out(d)) * d["size"] ** 2),
        lambda d: {"size": d["size"]},
    )


def _elementwise(name: str, summary: str, flops_per_element: int) -> Operator:
    return Operator(
        name,
        ("rows", "cols"),
        summary,
        lambda d: (Operand("x", (d["rows"], d["cols"])),),
        lambda d: (Operand("y", (d["rows"], d["cols"])),),
        ("x",),
        lambda d: float(flops_per_element * d["rows"] * d["cols"]),
    )


def _lstm_inputs(d: Dims) -> tuple[Operand, ...]:
    n, i, u = d["n"], d["i"], d["u"]
    return (
        Operand("x", (n, i)),
        Operand("h", (n, u)),
        Operand("c", (n, u)),
        Operand("kernel", (i, 4 * u)),
        Operand("recurrent_kernel", (u, 4 * u)),
        Operand("bias", (4 * u,)),
    )


def _gru_inputs(d: Dims) -> tuple[Operand, ...]:
    n, i, u = d["n"], d["i"], d["u"]
    return (
        Operand("x", (n, i)),
        Operand("h", (n, u)),
        Operand("kernel", (i, 3 * u)),
        Operand("recurrent_kernel", (u, 3 * u)),
        Operand("bias", (2, 3 * u)),
    )


def _heads(name: str, d: Dims) -> Operand:
    return Operand(name, (d["n"], d["t"], d["heads"], d["key_dim"]), "heads")


def _adam_operands(d: Dims) -> tuple[Operand, ...]:
    return tuple(Operand(name, (d["elements"],)) for name in ("p", "g", "m", "v"))


OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            "matmul",
            ("m", "k", "n"),
            "x @ w, (m, k) @ (k, n): the GEMM",
            lambda d: (Operand("x", (d["m"], d["k"])), Operand("w", (d["k"], d["n"]))),
            lambda d: (Operand("y", (d["m"], d["n"])),),
            ("x", "w"),
            lambda d: 2.0 * d["m"] * d["k"] * d["n"],
            compute_bound=True,
        ),
        Operator(
            "dense",
            ("m", "k", "n"),
            "x @ w + b: a dense layer without its activation",
            lambda d: (
                Operand("x", (d["m"], d["k"])),
                Operand("w", (d["k"], d["n"]), "dense_kernel"),
                Operand("b", (d["n"],)),
            ),
            lambda d: (Operand("y", (d["m"], d["n"])),),
            ("x", "w", "b"),
            lambda d: 2.0 * d["m"] * d["k"] * d["n"] + d["m"] * d["n"],
            compute_bound=True,
        ),
        Operator(
            "conv2d",
            ("n", "h", "w", "c", "f", "k", "same"),
            "stride-1 k x k convolution plus bias, padding same or valid",
            lambda d: (
                Operand("x", (d["n"], d["h"], d["w"], d["c"]), "image"),
                Operand("w", (d["k"], d["k"], d["c"], d["f"]), "conv_kernel"),
                Operand("b", (d["f"],)),
            ),
            lambda d: (Operand("y", _conv_out(d), "image"),),
            ("x", "w", "b"),
            lambda d: float(math.prod(_conv_out(d)) * (2 * d["k"] ** 2 * d["c"] + 1)),
            lambda d: {"padding": "same" if d["same"] else "valid"},
            compute_bound=True,
            nominal_flops=True,
        ),
        Operator(
            "conv1d",
            ("n", "t", "c", "f", "k", "same"),
            "stride-1 width-k convolution over a sequence plus bias, padding "
            "same or valid",
            lambda d: (
                Operand("x", (d["n"], d["t"], d["c"])),
                Operand("w", (d["k"], d["c"], d["f"]), "conv1d_kernel"),
                Operand("b", (d["f"],)),
            ),
            lambda d: (Operand("y", _conv1d_out(d)),),
            ("x", "w", "b"),
            lambda d: float(math.prod(_conv1d_out(d)) * (2 * d["k"] * d["c"] + 1)),
            lambda d: {"padding": "same" if d["same"] else "valid"},
            compute_bound=True,
        ),
        _pool("avg_pool", "size x size average pooling, stride size, no padding"),
        _pool("max_pool", "size x size max pooling, stride size, no padding"),
        Operator(
            "global_avg_pool",
            ("n", "t", "c"),
            "the mean over a sequence's steps, (n, t, c) to (n, c)",
            lambda d: (Operand("x", (d["n"], d["t"], d["c"])),),
            lambda d: (Operand("y", (d["n"], d["c"])),),
            ("x",),
            lambda d: float(d["n"] * d["t"] * d["c"]),
        ),
        _elementwise("relu", "max(x, 0)", 1),
        _elementwise("sigmoid", "1 / (1 + exp(-x))", 4),
        _elementwise("tanh", "tanh(x)", 4),
        # erf as a rational approximation: about 20 operations
        _elementwise("gelu", "x / 2 * (1 + erf(x / sqrt(2))): the exact GELU", 24),
        Operator(
            "layer_norm",
            ("rows", "cols"),
            "(x - mean) / sqrt(var + epsilon) * gamma + beta over each row "
            "(biased variance, Keras' epsilon 1e-3)",
            lambda d: (
                Operand("x", (d["rows"], d["cols"])),
                Operand("gamma", (d["cols"],)),
                Operand("beta", (d["cols"],)),
            ),
            lambda d: (Operand("y", (d["rows"], d["cols"])),),
            ("x", "gamma", "beta"),
            # mean 1, variance 3, normalize, scale and shift 4 per element
            lambda d: 8.0 * d["rows"] * d["cols"],
            lambda d: {"epsilon": LAYER_NORM_EPSILON},
        ),
        Operator(
            "batch_norm",
            ("rows", "channels"),
            "a training step's batch normalization over the rows of each channel "
            "(a layer's input as (batch * positions, channels)): x * inv + (beta - "
            "mean * inv), inv = gamma / sqrt(var + epsilon), the batch's mean and "
            "biased variance (Keras' epsilon 1e-3)",
            lambda d: (
                Operand("x", (d["rows"], d["channels"])),
                Operand("gamma", (d["channels"],)),
                Operand("beta", (d["channels"],)),
            ),
            lambda d: (Operand("y", (d["rows"], d["channels"])),),
            ("x", "gamma", "beta"),
            # mean 1, variance 3, x * inv + shift 2 per element (inv and the
            # shift once per channel)
            lambda d: 6.0 * d["rows"] * d["channels"],
            # Keras' BatchNormalization epsilon is its LayerNormalization's
            lambda d: {"epsilon": LAYER_NORM_EPSILON},
        ),
        Operator(
            "embedding",
            ("n", "t", "vocab", "dim"),
            "table[ids]: token ids (n, t) in [0, vocab) to rows of a (vocab, "
            "dim) table",
            lambda d: (
                Operand("ids", (d["n"], d["t"]), "ids"),
                Operand("table", (d["vocab"], d["dim"])),
            ),
            lambda d: (Operand("y", (d["n"], d["t"], d["dim"])),),
            ("table",),
            # a gather does no arithmetic: one per element copied, as many as
            # its gradient's scatter-add adds
            lambda d: float(d["n"] * d["t"] * d["dim"]),
        ),
        Operator(
            "attention",
            ("n", "t", "heads", "key_dim"),
            "softmax(q k^T / sqrt(key_dim)) v per head: Keras "
            "MultiHeadAttention's core on its projected queries, keys, values",
            lambda d: tuple(_heads(name, d) for name in ("q", "k", "v")),
            lambda d: (_heads("y", d),),
            ("q", "k", "v"),
            # two (t, key_dim) x (key_dim, t) products per head, the softmax
            lambda d: (4.0 * d["key_dim"] + 5.0) * d["n"] * d["heads"] * d["t"] ** 2,
            compute_bound=True,
        ),
        Operator(
            "lstm_cell",
            ("n", "i", "u"),
            "one LSTM step: gates i, f, c, o from x @ kernel + h @ recurrent + bias",
            _lstm_inputs,
            lambda d: (
                Operand("h_new", (d["n"], d["u"])),
                Operand("c_new", (d["n"], d["u"])),
            ),
            ("x", "h", "c", "kernel", "recurrent_kernel", "bias"),
            lambda d: (
                2.0 * d["n"] * (d["i"] + d["u"]) * 4 * d["u"] + 12.0 * d["n"] * d["u"]
            ),
            compute_bound=True,
        ),
        Operator(
            "gru_cell",
            ("n", "i", "u"),
            "one GRU step (Keras' reset_after): gates z, r, h from x @ kernel + "
            "bias[0] and h @ recurrent + bias[1]",
            _gru_inputs,
            lambda d: (Operand("h_new", (d["n"], d["u"])),),
            ("x", "h", "kernel", "recurrent_kernel", "bias"),
            lambda d: (
                2.0 * d["n"] * (d["i"] + d["u"]) * 3 * d["u"] + 26.0 * d["n"] * d["u"]
            ),
            compute_bound=True,
        ),
        Operator(
            "softmax_cross_entropy",
            ("n", "classes"),
            "mean over the batch of -log softmax(logits)[label]",
            lambda d: (
                Operand("logits", (d["n"], d["classes"])),
                Operand("labels", (d["n"],), "labels"),
            ),
            lambda d: (Operand("loss", ()),),
            ("logits",),
            lambda d: 5.0 * d["n"] * d["classes"],
        ),
        Operator(
            "adam",
            ("elements", "step"),
            "one Adam update of a parameter (Keras' formula and defaults)",
            _adam_operands,
            lambda d: tuple(
                Operand(name, (d["elements"],)) for name in ("p_new", "m_new", "v_new")
            ),
            (),
            lambda d: 12.0 * d["elements"],
            lambda d: {"step": d["step"]},
        ),
    )
}


def get_operator(name: str) -> Operator:
    """The operator called ``name``, or a ValueError listing the known ones."""
    if name not in OPERATORS:
        raise ValueError(
            f"unknown operator {name!r}; known operators: {', '.join(OPERATORS)}"
        )
    return OPERATORS[name]


@dataclass(frozen=True)
class Case:
    """One operator at one set of dims (values in ``Operator.dims`` order)."""

    op: str
    dims: tuple[int, ...]
    label: str

    @property
    def operator(self) -> Operator:
        return get_operator(self.op)

    @property
    def named(self) -> Dims:
        """The dims by name; a ValueError when they do not fit the operator."""
        operator = self.operator
        if len(self.dims) != len(operator.dims):
            raise ValueError(
                f"{self.op} takes dims {', '.join(operator.dims)}, not {self.dims}"
            )
        named = dict(zip(operator.dims, self.dims, strict=True))
        check_dims(self.op, named)
        return named

    @property
    def id(self) -> str:
        return f"{self.op}/{self.label}"


def check_dims(op: str, d: Dims) -> None:
    """A ValueError in one sentence when ``d`` cannot size ``op``."""
    if any(v < 0 for v in d.values()) or any(d[k] < 1 for k in d if k not in ("same",)):
        raise ValueError(f"{op} needs positive dims, not {d}")
    if op == "conv2d" and (d["same"] not in (0, 1) or min(_conv_out(d)[1:3]) < 1):
        raise ValueError(f"conv2d: a {d['k']}x{d['k']} kernel does not fit {d}")
    if op == "conv1d" and (d["same"] not in (0, 1) or _conv1d_out(d)[1] < 1):
        raise ValueError(f"conv1d: a kernel of width {d['k']} does not fit {d}")
    if op in ("avg_pool", "max_pool") and min(d["h"], d["w"]) < d["size"]:
        raise ValueError(f"{op}: a {d['size']}x{d['size']} window does not fit {d}")


# --- operands ---------------------------------------------------------------------


def make_operands(
    case: Case, seed: int, scale: float = 1.0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(operands, cotangents)`` of a case, float32 (labels and ids int32),
    from ``seed``: standard normal values times ``scale``; Adam's second
    moment ``v`` is non-negative (``scale**2`` times a chi-square) and its
    first ``m`` a tenth of the gradient's size; attention's queries and keys
    at most unit scale; labels uniform over the classes, token ids over the
    vocabulary.
    One standard normal cotangent per result (empty when the operator has no
    backward pass)."""
    operator, d = case.operator, case.named
    rng = np.random.default_rng(seed)
    operands: dict[str, np.ndarray] = {}
    for o in operator.inputs(d):
        if o.role in INTEGER_ROLES:
            top = d["classes"] if o.role == "labels" else d["vocab"]
            operands[o.name] = rng.integers(0, top, o.shape).astype(np.int32)
            continue
        # Attention's queries and keys at most at unit scale: a larger one
        # only saturates the softmax into one-hot weights, where float64's
        # gradients of q and k are exactly 0 and a float32 softmax that
        # rounds its 1 to 1 - 2**-24 (TensorFlow's) leaves rounding-sized
        # ones, which no relative error can weigh.
        saturates = operator.name == "attention" and o.name in ("q", "k")
        values = rng.standard_normal(o.shape) * (
            min(scale, 1.0) if saturates else scale
        )
        if operator.name == "adam" and o.name == "v":
            values = values * values
        elif operator.name == "adam" and o.name == "m":
            values = values / 10
        operands[o.name] = np.asarray(values, dtype=np.float32)
    cotangents = (
        {
            o.name: np.asarray(rng.standard_normal(o.shape), dtype=np.float32)
            for o in operator.outputs(d)
        }
        if operator.has_backward
        else {}
    )
    return operands, cotangents


# --- the cases a profile times ----------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """What a benchmark profile times: square GEMM sides, element counts
    (element-wise operators, batch normalization and Adam), batch sizes for
    the LSTM cell and the loss, and the batch at which the models' own shapes
    run."""

    gemm: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096)
    elements: tuple[int, ...] = (2**6, 2**10, 2**14, 2**18, 2**22)
    batches: tuple[int, ...] = (1, 16, 256)
    model_batch: int = 32
    models: tuple[str, ...] = ("ffn", "lenet", "vgg16", "lstm")


def _rows_cols(elements: int) -> tuple[int, int]:
    cols = min(elements, 1024)
    return max(1, elements // cols), cols


def _rows_channels(elements: int) -> tuple[int, int]:
    """A batch normalization of about ``elements``: as many rows as channels,
    up to 256 channels (a convolution's), then more rows."""
    channels = min(256, max(1, math.isqrt(elements)))
    return max(1, elements // channels), channels


def model_cases(spec: ModelSpec, batch: int) -> Iterator[Case]:
    """The model's layers as operator cases at ``batch``, at the shapes
    ``zoo.specs.layer_shapes`` gives them: dense layers (on a sequence, one
    row per step: ``batch * T`` rows), convolutions, pools, the LSTM's and
    GRU's cell, embeddings, layer normalizations (a row per step), batch
    normalizations (a row per sample and position, over at least three),
    attention (its four projections as dense cases, then its core), GELU
    activations, the mean over a sequence, and the loss.  Layers no
    operator expresses are left out: strided, dilated or causal convolutions,
    pools whose
    stride is not their window or that pad, 1-D pools, adds, flatten,
    dropout."""
    for layer, (shape, out) in zip(spec.layers, layer_shapes(spec), strict=True):
        label = f"{spec.name}-{layer.name}"
        yield from _layer_cases(layer, shape, batch, label)
        if layer.activation == "gelu":
            # relu, sigmoid and tanh are timed over the element sweep alone;
            # the costlier GELU at the shapes it runs at too
            yield Case("gelu", (batch * math.prod(out[:-1]), out[-1]), label)
    yield Case("softmax_cross_entropy", (batch, spec.classes), f"{spec.name}-loss")


def _layer_cases(layer: Layer, shape: Shape, batch: int, label: str) -> Iterator[Case]:
    """The operator cases of one layer whose input is ``shape`` (no batch)."""
    rows = batch * math.prod(shape[:-1])  # a sequence's steps are rows
    kind, o = layer.kind, layer.options
    same = int(getattr(o, "padding", None) == "same")
    stride_1 = (
        (
            getattr(o, "stride", 0) == 1
            and getattr(o, "dilation_rate", 1) == 1
            and o.padding in ("valid", "same")
            and not layer.mistake
        )
        if hasattr(o, "padding")
        else False
    )
    if kind == "dense":
        yield Case("dense", (rows, shape[-1], o.units), label)
    elif kind == "conv2d" and stride_1:
        h, w, c = shape
        yield Case("conv2d", (batch, h, w, c, o.filters, o.kernel_size, same), label)
    elif kind == "conv1d" and stride_1:
        t, c = shape
        yield Case("conv1d", (batch, t, c, o.filters, o.kernel_size, same), label)
    elif kind in ("avg_pool", "max_pool") and (
        o.stride == o.pool_size and o.padding == "valid"
    ):
        h, w, c = shape
        yield Case(kind, (batch, h, w, c, o.pool_size), label)
    elif kind in ("lstm", "gru"):
        yield Case(f"{kind}_cell", (batch, shape[-1], o.units), label)
    elif kind == "embedding":
        (t,) = shape
        yield Case("embedding", (batch, t, o.input_dim, o.output_dim), label)
    elif kind == "layer_norm":
        yield Case("layer_norm", (rows, shape[-1]), label)
    elif kind == "batch_norm" and rows >= BATCH_NORM_MIN_ROWS:
        # a training step's: (N, H, W, C) images as (N * H * W, C) rows
        yield Case("batch_norm", (rows, shape[-1]), label)
    elif kind == "global_avg_pool" and len(shape) == 2 and not over_features(layer):
        t, c = shape
        yield Case("global_avg_pool", (batch, t, c), label)
    elif kind == "attention":
        t, features = shape
        width = o.num_heads * o.key_dim
        # the query, key and value projections, then the output's
        yield Case("dense", (rows, features, width), f"{label}-projection")
        yield Case("attention", (batch, t, o.num_heads, o.key_dim), label)
        yield Case("dense", (rows, width, features), f"{label}-output")
    elif KINDS[kind].noise is not None:
        # Nothing: a random draw has no float64 reference to judge it
        # against.  Every evaluation checks it on its own instead
        # (``workers.protocol.check_noise``).
        return


def _adam_sizes(models: tuple[str, ...]) -> list[int]:
    """The models' parameter sizes, the largest of each factor-of-4 band (so
    a few sizes cover six decades)."""
    sizes = {math.prod(p.shape) for name in models for p in MODELS[name].params}
    bands: dict[int, int] = {}
    for size in sizes:
        band = int(math.log(size, 4))
        bands[band] = max(bands.get(band, 0), size)
    return sorted(bands.values())


def timed_cases(sweep: Sweep, ops: tuple[str, ...] | None = None) -> list[Case]:
    """Every case of ``sweep`` (only ``ops``' when given), deduplicated by
    operator and dims (the first label wins), in operator order."""
    found: list[Case] = [Case("matmul", (n, n, n), f"square-{n}") for n in sweep.gemm]
    for op in ("relu", "sigmoid", "tanh", "gelu"):
        found += [Case(op, _rows_cols(e), f"elements-{e}") for e in sweep.elements]
    # no profile's models has a batch normalization: it is timed over the
    # element sweep (and at a model's own shapes where one has it)
    found += [
        Case("batch_norm", _rows_channels(e), f"elements-{e}")
        for e in sweep.elements
        if _rows_channels(e)[0] >= BATCH_NORM_MIN_ROWS
    ]
    for name in sweep.models:
        found += list(model_cases(MODELS[name], sweep.model_batch))
    lstm = MODELS["lstm"]
    features, units = lstm.input_shape[1], lstm.layers[0].options.units
    # the GRU cell at the LSTM's shapes: the two recurrent cells side by side
    found += [
        Case(cell, (b, features, units), f"batch-{b}")
        for cell in ("lstm_cell", "gru_cell")
        for b in sweep.batches
    ]
    found += [
        Case("softmax_cross_entropy", (b, 10), f"batch-{b}") for b in sweep.batches
    ]
    found += [
        Case("adam", (size, 10), f"elements-{size}")
        for size in _adam_sizes(sweep.models)
    ]
    seen: set[tuple[str, tuple[int, ...]]] = set()
    unique = []
    for case in found:
        if (case.op, case.dims) not in seen and (ops is None or case.op in ops):
            seen.add((case.op, case.dims))
            unique.append(case)
    order = list(OPERATORS)
    return sorted(unique, key=lambda c: order.index(c.op))
