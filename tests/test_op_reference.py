"""The float64 operator reference (``equivalence.op_reference``) checked
against what does not share its code: central finite differences for every
vector-Jacobian product, each forward pass written from its definition
element by element (direct loops for the convolutions, the pools, the
embedding, layer and batch normalization and attention, Keras' gate orders
for the LSTM and GRU cells, Adam's formula), and the operator table's own
shapes.
Each comparison is also fed a deliberately wrong implementation, to show it
can fail.  Framework-free."""

from __future__ import annotations

import math
import tracemalloc
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from equivalence import op_reference as ref
from harness.ops.measure import OPS_PROFILES
from tests.conftest import draws
from zoo.operators import (
    ADAM,
    INTEGER_ROLES,
    OPERATORS,
    Case,
    make_operands,
    model_cases,
    timed_cases,
)
from zoo.specs import MODELS, VARIANTS

Arrays = dict[str, np.ndarray]
Forward = Callable[..., dict[str, np.ndarray]]
Backward = Callable[..., tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]

WITH_BACKWARD = tuple(name for name, op in OPERATORS.items() if op.has_backward)
# A central difference in float64 with this step (along a unit direction) is
# off by about step**2 * (third derivative), near 1e-10 relative, plus the
# rounding of the two objectives it subtracts, a few 1e-16 of their magnitude
# each, over the step (ROUNDING leaves room for sums of a few hundred terms);
# a wrong gradient is off by its own order.
FD_STEP = 1e-5
FD_TOLERANCE = 1e-6
ROUNDING = 1e-13
# float32 against float64: a few float32 roundings (about 1e-7 each; Adam's
# 1 - float32(0.999) is 1.3e-5 off), or, where a short sum nearly cancels (a
# one-unit LSTM's new state, a one-filter bias gradient), this many times what
# rounding the operands alone to float32 moves the float64 result by.
PRECISION_TOLERANCE = 3e-5
ROUNDING_MULTIPLE = 30.0


SEQUENCE_OPERATORS = (
    "conv1d",
    "global_avg_pool",
    "layer_norm",
    "embedding",
    "attention",
)


@st.composite
def sequence_dims(draw: st.DrawFn, op: str) -> tuple[int, ...]:
    """Small dims of the transformer's operators (``cases``' rules)."""
    small = st.integers(1, 4)
    channels = st.integers(1, 5)
    batch = st.integers(1, 2)
    if op == "conv1d":
        same = draw(st.integers(0, 1))
        # "same" pads the odd one after: even widths included
        k = draw(st.integers(1, 4))
        least = 1 if same else k
        t = draw(st.integers(least, least + 4))
        return (draw(batch), t, draw(channels), draw(channels), k, same)
    if op == "global_avg_pool":
        return (draw(batch), draw(st.integers(1, 5)), draw(channels))
    if op == "layer_norm":
        return (draw(small), draw(st.integers(1, 6)))
    if op == "embedding":
        return (draw(batch), draw(small), draw(st.integers(1, 6)), draw(channels))
    return (draw(batch), draw(small), draw(st.integers(1, 3)), draw(small))


@st.composite
def cases(draw: st.DrawFn, op: str) -> Case:
    """A small case of ``op``: batch 1 included, odd spatial sizes (cropped
    by the pools), channels never a multiple of 8.  The tests draw per
    operator (parametrized), so that every run meets each of them."""
    if op in SEQUENCE_OPERATORS:
        return Case(op, draw(sequence_dims(op)), "drawn")
    small = st.integers(1, 4)
    channels = st.integers(1, 5)
    batch = st.integers(1, 2)
    if op in ("matmul", "dense"):
        dims: tuple[int, ...] = (draw(small), draw(small), draw(small))
    elif op == "conv2d":
        same = draw(st.integers(0, 1))
        # "same" pads kernel // 2 each side, so odd kernels only
        k = draw(st.sampled_from((1, 3, 5)) if same else st.integers(1, 4))
        least = 1 if same else k
        h, w = draw(st.integers(least, least + 3)), draw(st.integers(least, least + 3))
        dims = (draw(batch), h, w, draw(channels), draw(channels), k, same)
    elif op in ("avg_pool", "max_pool"):
        size = draw(st.sampled_from((2, 3)))
        side = st.integers(size, 2 * size + 1)
        dims = (draw(batch), draw(side), draw(side), draw(channels), size)
    elif op in ("relu", "sigmoid", "tanh", "gelu"):
        dims = (draw(small), draw(st.integers(1, 5)))
    elif op in ("lstm_cell", "gru_cell"):
        dims = (draw(st.integers(1, 3)), draw(small), draw(st.integers(1, 3)))
    elif op == "softmax_cross_entropy":
        dims = (draw(small), draw(st.integers(1, 5)))
    elif op == "batch_norm":
        # one row and two included: the reference stays exact and finite
        dims = (draw(st.integers(1, 6)), draw(channels))
    else:
        dims = (draw(st.integers(1, 6)), draw(st.integers(1, 12)))
    return Case(op, dims, "drawn")


def _float64(arrays: Mapping[str, np.ndarray]) -> Arrays:
    return {
        k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()
    }


def _relative(a: np.ndarray, b: np.ndarray, floor: float = 0.0) -> float:
    """Normwise relative error of ``a`` against ``b`` (0 when both are 0),
    relative to at least ``floor``."""
    scale = max(float(np.linalg.norm(a)), float(np.linalg.norm(b)), floor)
    return float(np.linalg.norm(a - b)) / scale if scale else 0.0


# --- the comparisons, each taking the implementation it judges ---------------------


def fd_mismatch(
    case: Case,
    seed: int,
    backward: Backward = ref.backward,
    forward: Forward = ref.forward,
    directions: int = 2,
) -> float:
    """How far ``backward``'s gradient is from a central finite difference
    of ``L = sum_k <forward_k, cotangent_k>`` along random unit directions
    of each differentiated operand, as a share of what is allowed (at most
    1 passes): ``FD_TOLERANCE`` of ``|grad|``, plus the difference's own
    rounding, ``ROUNDING / FD_STEP`` of ``L``'s magnitude (which matters
    only for a gradient far smaller than ``L``, a saturated sigmoid's)."""
    operator, attributes = case.operator, case.operator.attributes(case.named)
    operands, cotangents = make_operands(case, seed)
    x, cot = _float64(operands), _float64(cotangents)
    _, grads = backward(case.op, x, attributes, cot, np.float64)

    def objective(arrays: Arrays) -> tuple[float, float]:
        """``L`` and its magnitude, ``sum_k sum |forward_k * cotangent_k|``."""
        results = forward(case.op, arrays, attributes, np.float64)
        terms = [results[k] * cot[k] for k in cot]
        return sum(float(t.sum()) for t in terms), sum(
            float(np.abs(t).sum()) for t in terms
        )

    rounding = ROUNDING * objective(x)[1] / FD_STEP
    rng = np.random.default_rng(seed + 1)
    worst = 0.0
    for name in operator.wrt:
        for _ in range(directions):
            d = rng.standard_normal(x[name].shape)
            d /= np.linalg.norm(d)
            plus = objective({**x, name: x[name] + FD_STEP * d})[0]
            minus = objective({**x, name: x[name] - FD_STEP * d})[0]
            numeric = (plus - minus) / (2 * FD_STEP)
            analytic = float(np.sum(grads[name] * d))
            allowed = FD_TOLERANCE * float(np.linalg.norm(grads[name])) + rounding
            error = abs(numeric - analytic)
            # a relu of negative values: a zero gradient, and L exactly 0
            worst = max(worst, error / allowed if error else 0.0)
    return worst


def conv_by_loops(x: np.ndarray, w: np.ndarray, b: np.ndarray, same: int) -> np.ndarray:
    """The convolution as its definition: each output pixel a sum over the
    kernel's offsets of the input pixel there (zero outside the input)."""
    n, h, width, _ = x.shape
    k, f = w.shape[0], w.shape[3]
    pad = k // 2 if same else 0
    ho, wo = (h, width) if same else (h - k + 1, width - k + 1)
    y = np.zeros((n, ho, wo, f))
    for image in range(n):
        for i in range(ho):
            for j in range(wo):
                for out in range(f):
                    total = float(b[out])
                    for a in range(k):
                        for c in range(k):
                            r, s = i + a - pad, j + c - pad
                            if 0 <= r < h and 0 <= s < width:
                                total += float(x[image, r, s] @ w[a, c, :, out])
                    y[image, i, j, out] = total
    return y


def conv1d_by_loops(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, same: int
) -> np.ndarray:
    """The 1-D convolution as its definition, with Keras' "same" padding:
    ``(k - 1) // 2`` zeros before, the rest after."""
    n, t, _ = x.shape
    k, f = w.shape[0], w.shape[2]
    before = (k - 1) // 2 if same else 0
    steps = t if same else t - k + 1
    y = np.zeros((n, steps, f))
    for sample in range(n):
        for i in range(steps):
            for out in range(f):
                total = float(b[out])
                for a in range(k):
                    r = i + a - before
                    if 0 <= r < t:
                        total += float(x[sample, r] @ w[a, :, out])
                y[sample, i, out] = total
    return y


def layer_norm_by_loops(a: Arrays, epsilon: float) -> np.ndarray:
    """Each row's mean and biased variance as sums, then the affine map."""
    x = a["x"]
    y = np.zeros_like(x)
    for i, row in enumerate(x):
        mean = math.fsum(row) / len(row)
        var = math.fsum((v - mean) ** 2 for v in row) / len(row)
        for j, v in enumerate(row):
            normed = (v - mean) / math.sqrt(var + epsilon)
            y[i, j] = normed * a["gamma"][j] + a["beta"][j]
    return y


def batch_norm_by_loops(a: Arrays, epsilon: float) -> np.ndarray:
    """Each column's (channel's) mean and biased variance over the rows (the
    batch) as sums, then the affine map."""
    x = a["x"]
    rows, channels = x.shape
    y = np.zeros_like(x)
    for j in range(channels):
        column = [float(v) for v in x[:, j]]
        mean = math.fsum(column) / rows
        var = math.fsum((v - mean) ** 2 for v in column) / rows
        for i, v in enumerate(column):
            normed = (v - mean) / math.sqrt(var + epsilon)
            y[i, j] = normed * a["gamma"][j] + a["beta"][j]
    return y


def attention_by_loops(a: Arrays) -> np.ndarray:
    """Each query's weights over the keys of its head, as exponentials of
    scaled dot products over their sum, then the weighted sum of values."""
    q, k, v = a["q"], a["k"], a["v"]
    n, t, heads, dim = q.shape
    y = np.zeros_like(q)
    for sample in range(n):
        for head in range(heads):
            for i in range(t):
                scores = [
                    float(q[sample, i, head] @ k[sample, j, head]) / math.sqrt(dim)
                    for j in range(t)
                ]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = math.fsum(e)
                for j in range(t):
                    y[sample, i, head] += e[j] / total * v[sample, j, head]
    return y


def gru_by_loops(a: Arrays) -> np.ndarray:
    """One GRU step unit by unit, Keras' gate blocks z, r, h, the reset gate
    applied after the recurrent product (``reset_after``)."""
    n, units = a["h"].shape
    h_new = np.zeros((n, units))
    for row in range(n):
        for j in range(units):
            xs, hs = [], []
            for q in range(3):
                col = q * units + j
                xs.append(float(a["x"][row] @ a["kernel"][:, col] + a["bias"][0, col]))
                hs.append(
                    float(
                        a["h"][row] @ a["recurrent_kernel"][:, col] + a["bias"][1, col]
                    )
                )
            z, r = _sigmoid(xs[0] + hs[0]), _sigmoid(xs[1] + hs[1])
            candidate = math.tanh(xs[2] + r * hs[2])
            h_new[row, j] = z * a["h"][row, j] + (1 - z) * candidate
    return h_new


def pool_by_loops(x: np.ndarray, size: int, reduce: Callable[..., Any]) -> np.ndarray:
    n, h, w, c = x.shape
    y = np.zeros((n, h // size, w // size, c))
    for i in range(h // size):
        for j in range(w // size):
            window = x[:, i * size : (i + 1) * size, j * size : (j + 1) * size, :]
            y[:, i, j, :] = reduce(window, axis=(1, 2))
    return y


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def lstm_by_loops(a: Arrays) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step unit by unit, Keras' gate blocks in order i, f, c, o."""
    n, units = a["h"].shape
    h_new, c_new = np.zeros((n, units)), np.zeros((n, units))
    for row in range(n):
        for j in range(units):
            z = [
                float(
                    a["x"][row] @ a["kernel"][:, q * units + j]
                    + a["h"][row] @ a["recurrent_kernel"][:, q * units + j]
                    + a["bias"][q * units + j]
                )
                for q in range(4)
            ]
            i, f, g, o = _sigmoid(z[0]), _sigmoid(z[1]), math.tanh(z[2]), _sigmoid(z[3])
            c_new[row, j] = f * a["c"][row, j] + i * g
            h_new[row, j] = o * math.tanh(c_new[row, j])
    return h_new, c_new


def sequence_by_definition(case: Case, a: Arrays) -> dict[str, np.ndarray]:
    """``by_definition`` of the transformer's operators (but the 1-D
    convolution), batch normalization and the recurrent cells."""
    if case.op == "global_avg_pool":
        x = a["x"]
        return {
            "y": np.array(
                [
                    [math.fsum(x[i, :, c]) / x.shape[1] for c in range(x.shape[2])]
                    for i in range(len(x))
                ]
            )
        }
    if case.op in ("layer_norm", "batch_norm"):
        epsilon = case.operator.attributes(case.named)["epsilon"]
        assert isinstance(epsilon, float)
        by_loops = (
            layer_norm_by_loops if case.op == "layer_norm" else batch_norm_by_loops
        )
        return {"y": by_loops(a, epsilon)}
    if case.op == "embedding":
        ids, table = a["ids"], a["table"]
        rows = [[table[int(i)] for i in sample] for sample in ids]
        return {"y": np.array(rows).reshape(*ids.shape, table.shape[1])}
    if case.op == "attention":
        return {"y": attention_by_loops(a)}
    if case.op == "lstm_cell":
        h_new, c_new = lstm_by_loops(a)
        return {"h_new": h_new, "c_new": c_new}
    return {"h_new": gru_by_loops(a)}


def by_definition(case: Case, a: Arrays) -> dict[str, np.ndarray]:
    """The operator's results written from its definition, element by
    element in Python floats where the reference uses whole-array code."""
    d = case.named
    if case.op in ("conv2d", "conv1d"):
        by_loops = conv_by_loops if case.op == "conv2d" else conv1d_by_loops
        return {"y": by_loops(a["x"], a["w"], a["b"], d["same"])}
    if case.op in (*SEQUENCE_OPERATORS, "batch_norm") or case.op.endswith("_cell"):
        return sequence_by_definition(case, a)
    if case.op in ("avg_pool", "max_pool"):
        reduce = np.mean if case.op == "avg_pool" else np.max
        return {"y": pool_by_loops(a["x"], d["size"], reduce)}
    if case.op in ("matmul", "dense"):
        x, w = a["x"], a["w"]
        y = np.array(
            [
                [math.fsum(x[i] * w[:, j]) for j in range(w.shape[1])]
                for i in range(len(x))
            ]
        )
        return {"y": y + a["b"] if case.op == "dense" else y}
    if case.op in ("relu", "sigmoid", "tanh", "gelu"):
        scalar = {
            "relu": lambda v: max(v, 0.0),
            "sigmoid": _sigmoid,
            "tanh": math.tanh,
            "gelu": lambda v: v / 2 * (1 + math.erf(v / math.sqrt(2))),
        }
        return {"y": np.vectorize(scalar[case.op])(a["x"])}
    if case.op == "softmax_cross_entropy":
        losses = [
            math.log(math.fsum(math.exp(v) for v in row)) - row[label]
            for row, label in zip(a["logits"], a["labels"], strict=True)
        ]
        return {"loss": np.array(math.fsum(losses) / len(losses))}
    raise AssertionError(f"no definition written for {case.op}")


def definition_mismatch(case: Case, seed: int, forward: Forward = ref.forward) -> float:
    """``forward``'s float64 results against ``by_definition``, the worst
    normwise error (inf for a shape that differs), relative to at least
    1e-3: one class makes the loss exactly 0, where the definition's
    ``log(exp(l)) - l`` leaves a rounding."""
    operands, _ = make_operands(case, seed)
    x = _float64(operands)
    got = forward(case.op, x, case.operator.attributes(case.named), np.float64)
    expected = by_definition(case, x)
    return max(
        _relative(got[k], v, 1e-3) if got[k].shape == v.shape else math.inf
        for k, v in expected.items()
    )


def _rounding_noise(
    case: Case, x64: Arrays, cot64: Arrays, wide: Arrays, seed: int
) -> Arrays:
    """Per quantity, how far the float64 results (and gradients) move when
    every float operand and cotangent moves by float32's unit roundoff in a
    random direction (the largest of three draws): what a float32
    computation cannot avoid however it is written, large where the result
    nearly cancels."""
    attributes = case.operator.attributes(case.named)
    rng = np.random.default_rng(seed)
    unit = 2.0**-24
    noise: dict[str, float] = dict.fromkeys(wide, 0.0)
    for _ in range(3):
        moved = {
            k: v * (1 + unit * rng.choice([-1.0, 1.0], v.shape))
            if v.dtype.kind == "f"
            else v
            for k, v in x64.items()
        }
        again = dict(ref.forward(case.op, moved, attributes, np.float64))
        if case.operator.has_backward:
            shifted = {
                k: v * (1 + unit * rng.choice([-1.0, 1.0], v.shape))
                for k, v in cot64.items()
            }
            _, grads = ref.backward(case.op, moved, attributes, shifted, np.float64)
            again.update({f"d{k}": v for k, v in grads.items()})
        for k, v in again.items():
            noise[k] = max(noise[k], float(np.linalg.norm(v - wide[k])))
    return {k: np.asarray(v) for k, v in noise.items()}


def precision_gap(
    case: Case, seed: int, forward: Forward = ref.forward, scale: float = 1.0
) -> float:
    """How far a float32 computation (``forward``'s results, and the
    gradients when the operator has them) is from float64, as a share of
    what it is allowed: ``PRECISION_TOLERANCE`` of the result's norm (Adam's
    ``p_new``: or of ``p``'s), or
    ``ROUNDING_MULTIPLE`` times its rounding noise, whichever is larger; at
    most 1 passes.  Quantities float32 cannot hold (a float64 norm below
    float32's smallest normal number, like a sigmoid's gradient at 1e3,
    about 1e-95) are left out, and so are gradients smaller than float32's
    rounding of the cotangents they come from: there every activation is
    saturated, and the derivative taken from the value (``s * (1 - s)``,
    ``1 - t**2``, as autodiff takes it) rounds to 0 in float32."""
    attributes = case.operator.attributes(case.named)
    operands, cotangents = make_operands(case, seed, scale)
    x64, cot64 = _float64(operands), _float64(cotangents)
    wide = dict(ref.forward(case.op, x64, attributes, np.float64))
    narrow = dict(forward(case.op, operands, attributes, np.float32))
    if case.operator.has_backward:
        _, g32 = ref.backward(case.op, operands, attributes, cotangents, np.float32)
        _, g64 = ref.backward(case.op, x64, attributes, cot64, np.float64)
        narrow.update({f"d{k}": v for k, v in g32.items()})
        wide.update({f"d{k}": v for k, v in g64.items()})
    noise = _rounding_noise(case, x64, cot64, wide, seed)
    tiny = float(np.finfo(np.float32).tiny)
    saturated = float(np.finfo(np.float32).eps) * max(
        [float(np.linalg.norm(c)) for c in cot64.values()] or [0.0]
    )
    shares = [0.0]
    for k, b in wide.items():
        size = float(np.linalg.norm(b))
        if size < tiny or (k.startswith("d") and size < saturated):
            continue
        if k == "p_new":
            # p minus an update that can be as large as p (scale 1e-3, where p
            # is about the learning rate): the float32 betas' rounding is a
            # share of the update, so of p, not of what is left
            size = max(size, float(np.linalg.norm(x64["p"])))
        allowed = max(PRECISION_TOLERANCE * size, ROUNDING_MULTIPLE * float(noise[k]))
        shares.append(float(np.linalg.norm(narrow[k] - b)) / allowed)
    return max(shares)


def shape_problems(case: Case, forward: Forward = ref.forward) -> list[str]:
    """Every way ``forward``'s and ``backward``'s arrays differ from the
    operator table: names, shapes, dtypes."""
    operator, d = case.operator, case.named
    attributes = operator.attributes(d)
    operands, cotangents = make_operands(case, 0)
    problems = []
    for dtype in (np.float32, np.float64):
        results = forward(case.op, operands, attributes, dtype)
        expected = {o.name: o.shape for o in operator.outputs(d)}
        if list(results) != list(expected):
            problems.append(f"results {list(results)}, expected {list(expected)}")
        for name, shape in expected.items():
            got = results.get(name)
            if got is None or got.shape != shape or got.dtype != dtype:
                problems.append(f"{name}: {got!r:.60} is not {dtype.__name__}{shape}")
        if operator.has_backward:
            again, grads = ref.backward(
                case.op, operands, attributes, cotangents, dtype
            )
            if {k: v.shape for k, v in again.items()} != expected:
                problems.append("backward's results differ in shape")
            for name in operator.wrt:
                g = grads.get(name)
                if g is None or g.shape != operands[name].shape or g.dtype != dtype:
                    problems.append(f"gradient of {name}: {g!r:.60}")
            if set(grads) != set(operator.wrt):
                problems.append(f"gradients of {sorted(grads)}")
    return problems


def adam_by_hand(
    p: float, g: float, m: float, v: float, t: int
) -> tuple[float, float, float]:
    """Keras' Adam on one element, in Python floats."""
    lr, b1, b2, eps = (
        ADAM[k] for k in ("learning_rate", "beta_1", "beta_2", "epsilon")
    )
    m_new = m + (g - m) * (1 - b1)
    v_new = v + (g * g - v) * (1 - b2)
    alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
    return p - m_new * alpha / (math.sqrt(v_new) + eps), m_new, v_new


def adam_mismatch(case: Case, seed: int, forward: Forward = ref.forward) -> float:
    """``forward``'s float64 Adam against ``adam_by_hand``, the worst
    relative difference of any element of ``p_new - p``, ``m_new``, ``v_new``
    (the parameter's change, since it is all the update does to ``p``)."""
    operands, _ = make_operands(case, seed)
    x = _float64(operands)
    step = case.named["step"]
    out = forward("adam", x, {"step": step}, np.float64)
    worst = 0.0
    for e in range(x["p"].size):
        p0, g0, m0, v0 = (float(x[k][e]) for k in "pgmv")
        p, m, v = adam_by_hand(p0, g0, m0, v0, step)
        pairs = [
            (out["p_new"][e] - x["p"][e], p - x["p"][e]),
            (out["m_new"][e], m),
            (out["v_new"][e], v),
        ]
        for got, want in pairs:
            worst = max(worst, abs(got - want) / max(abs(want), 1e-300))
    return worst


# --- the reference against them ---------------------------------------------------


def kink_distance(case: Case, seed: int) -> float:
    """How far the operands are from a point where the operator is not
    differentiable: relu's smallest ``|x|``, max_pool's smallest gap
    between a window's largest two values (inf for smooth operators).  A
    finite difference that steps across such a point measures nothing."""
    x = make_operands(case, seed)[0].get("x")
    if case.op == "relu" and x is not None:
        return float(np.abs(x).min())
    if case.op == "max_pool" and x is not None:
        s = case.named["size"]
        ranked = []
        for i in range(x.shape[1] // s):
            for j in range(x.shape[2] // s):
                window = x[:, i * s : (i + 1) * s, j * s : (j + 1) * s, :]
                ranked.append(np.sort(window.reshape(x.shape[0], -1, x.shape[3]), 1))
        return float(min((r[:, -1] - r[:, -2]).min() for r in ranked))
    return math.inf


SEEDS = st.integers(0, 2**16)


@pytest.mark.parametrize("op", WITH_BACKWARD)
@given(data=st.data(), seed=SEEDS)
@settings(max_examples=draws(25))
def test_vjp_agrees_with_finite_differences(
    op: str, data: st.DataObject, seed: int
) -> None:
    case = data.draw(cases(op))
    # steps move each value by at most FD_STEP: keep well clear of any kink
    assume(kink_distance(case, seed) > 1e-3)
    assert fd_mismatch(case, seed) <= 1


@pytest.mark.parametrize("op", [op for op in OPERATORS if op != "adam"])
@given(data=st.data(), seed=SEEDS)
@settings(max_examples=draws(12))
def test_forward_agrees_with_its_definition(
    op: str, data: st.DataObject, seed: int
) -> None:
    """Adam's definition is ``adam_by_hand``, below."""
    assert definition_mismatch(data.draw(cases(op)), seed) < 1e-12


@pytest.mark.parametrize("op", list(OPERATORS))
@given(data=st.data(), seed=SEEDS, scale=st.sampled_from([1e-3, 1.0, 1e3]))
@settings(max_examples=draws(15))
def test_float32_agrees_with_float64(
    op: str, data: st.DataObject, seed: int, scale: float
) -> None:
    assert precision_gap(data.draw(cases(op)), seed, scale=scale) <= 1


@pytest.mark.parametrize("op", list(OPERATORS))
@given(data=st.data())
@settings(max_examples=draws(8))
def test_shapes_names_and_dtypes_follow_the_operator_table(
    op: str, data: st.DataObject
) -> None:
    assert shape_problems(data.draw(cases(op))) == []


@pytest.mark.parametrize("step", [1, 7])
@pytest.mark.parametrize("seed", [0, 1])
def test_adam_matches_its_formula(step: int, seed: int) -> None:
    assert adam_mismatch(Case("adam", (6, step), "formula"), seed) < 1e-12


def test_adam_first_step_moves_each_parameter_by_the_learning_rate() -> None:
    """With empty moments, step 1 is ``-lr * sign(g)`` (up to
    ``epsilon / (|g| sqrt(1 - beta_2))``, 3e-5 here):
    the bias correction at work, which a wrong power of a beta would break."""
    g = np.array([2.0, -0.5, 0.1, -3.0])
    p = np.array([1.0, 2.0, -1.0, 0.0])
    zero = np.zeros(4)
    for dtype in (np.float32, np.float64):
        out = ref.forward(
            "adam", {"p": p, "g": g, "m": zero, "v": zero}, {"step": 1}, dtype
        )
        assert out["p_new"].dtype == dtype
        np.testing.assert_allclose(
            out["p_new"] - p.astype(dtype),
            -ADAM["learning_rate"] * np.sign(g),
            rtol=1e-4,
        )


def test_adam_beta_powers_are_taken_in_float32_for_float32() -> None:
    """Keras raises ``float32(beta)`` to the step in float32.  ``p = 0``
    leaves ``p_new`` the bare update, so the 6e-6 that float64 powers would
    change it by is resolved (at ``p = 1`` it would round away)."""
    ones = np.ones(1, np.float32)
    zero = np.zeros(1, np.float32)
    operands = {"p": zero, "g": ones, "m": zero, "v": zero}
    out = ref.forward("adam", operands, {"step": 7}, np.float32)
    one, t = np.float32(1), np.float32(7)
    lr, b1, b2, eps = (
        np.float32(ADAM[k]) for k in ("learning_rate", "beta_1", "beta_2", "epsilon")
    )
    m, v = out["m_new"][0], out["v_new"][0]

    def update(alpha: np.float32) -> np.float32:
        return np.float32(-(m * alpha / (np.sqrt(v) + eps)))

    in_float32 = lr * np.sqrt(one - b2**t) / (one - b1**t)
    in_float64 = np.float32(
        ADAM["learning_rate"]
        * math.sqrt(1 - ADAM["beta_2"] ** 7)
        / (1 - ADAM["beta_1"] ** 7)
    )
    assert out["p_new"][0] == update(in_float32)
    assert out["p_new"][0] != update(in_float64)


@pytest.mark.parametrize("op", list(OPERATORS))
def test_operands_are_left_untouched(op: str) -> None:
    """float64 operands reach the computation uncopied: it must not write
    into them."""
    case = _fixed(op)
    attributes = case.operator.attributes(case.named)
    operands, cotangents = make_operands(case, 0)
    x, cot = _float64(operands), _float64(cotangents)
    kept = {k: v.copy() for k, v in {**x, **cot}.items()}
    ref.forward(op, x, attributes, np.float64)
    if case.operator.has_backward:
        ref.backward(op, x, attributes, cot, np.float64)
    for k, v in {**x, **cot}.items():
        np.testing.assert_array_equal(v, kept[k])


def test_max_pool_routes_a_tie_to_the_first_maximum() -> None:
    x = np.zeros((1, 3, 3, 1))
    x[0, 1, 0, 0] = x[0, 1, 1, 0] = 5.0  # a tie in the first window's second row
    y, grads = ref.backward(
        "max_pool", {"x": x}, {"size": 2}, {"y": np.ones((1, 1, 1, 1))}, np.float64
    )
    assert y["y"].item() == 5.0
    expected = np.zeros_like(x)
    expected[0, 1, 0, 0] = 1.0
    np.testing.assert_array_equal(grads["x"], expected)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("op", list(OPERATORS))
def test_no_warnings_and_finite_at_every_scale(op: str, scale: float) -> None:
    """Overflow, division by zero and invalid operations raise here; the
    stable formulations never meet them, in either dtype."""
    case = _fixed(op)
    attributes = case.operator.attributes(case.named)
    operands, cotangents = make_operands(case, 3, scale)
    with (
        warnings.catch_warnings(),
        np.errstate(over="raise", divide="raise", invalid="raise"),
    ):
        warnings.simplefilter("error")
        for dtype in (np.float32, np.float64):
            arrays = dict(ref.forward(op, operands, attributes, dtype))
            if case.operator.has_backward:
                results, grads = ref.backward(
                    op, operands, attributes, cotangents, dtype
                )
                arrays.update(results)
                arrays.update({f"d{k}": v for k, v in grads.items()})
            for name, a in arrays.items():
                assert np.isfinite(a).all(), name
    assert precision_gap(case, 3, scale=scale) <= 1


def test_sigmoid_and_tanh_saturate_without_overflow() -> None:
    x = np.array([[-1e3, -50.0, -1.0, 0.0, 1.0, 50.0, 1e3]])
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise"):
        warnings.simplefilter("error")
        for dtype in (np.float32, np.float64):
            s = ref.forward("sigmoid", {"x": x}, {}, dtype)["y"][0]
            t = ref.forward("tanh", {"x": x}, {}, dtype)["y"][0]
            assert (s[0], s[3], s[-1]) == (0.0, 0.5, 1.0)
            assert (t[0], t[3], t[-1]) == (-1.0, 0.0, 1.0)
            _, grads = ref.backward(
                "sigmoid", {"x": x}, {}, {"y": np.ones_like(x)}, dtype
            )
            assert (grads["x"][0, 0], grads["x"][0, 3]) == (0.0, 0.25)


def test_the_loss_survives_huge_logits() -> None:
    logits = np.array([[1e3, -1e3, 0.0], [-1e3, -1e3, -1e3]])
    labels = np.array([1, 2])
    with np.errstate(over="raise", invalid="raise"):
        loss = ref.forward(
            "softmax_cross_entropy",
            {"logits": logits, "labels": labels},
            {},
            np.float64,
        )["loss"]
    assert loss.shape == ()
    assert loss.item() == pytest.approx((2e3 + math.log(3)) / 2)


def test_an_unknown_operator_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"matmul.*adam"):
        ref.forward("conv3d", {}, {}, np.float64)


def test_adam_has_no_backward_and_bad_attributes_are_refused() -> None:
    case = Case("adam", (3, 1), "x")
    operands, _ = make_operands(case, 0)
    with pytest.raises(ValueError, match="no backward"):
        ref.backward("adam", operands, {"step": 1}, {}, np.float64)
    with pytest.raises(ValueError, match="step"):
        ref.forward("adam", operands, {"step": 0}, np.float64)
    conv = Case("conv2d", (1, 3, 3, 1, 1, 3, 1), "x")
    operands, _ = make_operands(conv, 0)
    with pytest.raises(ValueError, match="padding"):
        ref.forward("conv2d", operands, {"padding": "full"}, np.float64)


def test_the_convolution_builds_no_im2col() -> None:
    """Peak memory of a 5x5 convolution's backward pass stays within a few
    copies of its input (6 measured): an im2col of the batch would take 25."""
    case = Case("conv2d", (8, 24, 24, 16, 16, 5, 1), "memory")
    operands, cotangents = make_operands(case, 0)
    x64, cot64 = _float64(operands), _float64(cotangents)
    attributes = case.operator.attributes(case.named)
    tracemalloc.start()
    try:
        ref.backward("conv2d", x64, attributes, cot64, np.float64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * x64["x"].nbytes


# --- and each comparison against a wrong implementation ---------------------------


def _fixed(op: str) -> Case:
    """One small case per operator, big enough to tell a transposition."""
    dims = {
        "matmul": (3, 4, 5),
        "dense": (3, 4, 5),
        "conv2d": (2, 5, 4, 3, 2, 3, 1),
        "avg_pool": (2, 5, 7, 3, 2),
        "max_pool": (2, 5, 7, 3, 3),
        "relu": (3, 4),
        "sigmoid": (3, 4),
        "tanh": (3, 4),
        "lstm_cell": (2, 3, 4),
        "softmax_cross_entropy": (4, 5),
        "adam": (6, 7),
        "conv1d": (2, 7, 3, 4, 2, 1),
        "global_avg_pool": (2, 5, 3),
        "gelu": (3, 4),
        "layer_norm": (3, 5),
        "batch_norm": (5, 3),
        "embedding": (2, 5, 4, 3),
        "attention": (2, 5, 2, 4),
        "gru_cell": (2, 3, 4),
    }
    return Case(op, dims[op], "fixed")


def _with_gradient(
    op: str, name: str, wrong: Callable[[np.ndarray], np.ndarray]
) -> Backward:
    """``ref.backward``, except that ``op``'s gradient of ``name`` goes
    through ``wrong``."""

    def backward(*args: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        results, grads = ref.backward(*args)
        if args[0] == op:
            grads = {**grads, name: wrong(grads[name])}
        return results, grads

    return backward


def _with_operand(
    op: str, name: str, wrong: Callable[[np.ndarray], np.ndarray]
) -> Forward:
    """``ref.forward`` on ``op`` with operand ``name`` passed through ``wrong``."""

    def forward(
        o: str, operands: Mapping[str, np.ndarray], *rest: Any
    ) -> dict[str, np.ndarray]:
        if o == op:
            operands = {**operands, name: wrong(operands[name])}
        return ref.forward(o, operands, *rest)

    return forward


WRONG_GRADIENTS = [
    ("matmul", "w", lambda g: g.T.reshape(g.shape)),
    ("dense", "b", lambda g: 2 * g),
    ("conv2d", "w", lambda g: g[::-1, ::-1]),  # a correlation's gradient, flipped
    ("conv2d", "x", lambda g: g[:, ::-1]),
    ("avg_pool", "x", lambda g: 2 * g),  # divided by the side, not the area
    ("max_pool", "x", lambda g: np.roll(g, 1, axis=2)),
    ("relu", "x", np.abs),
    ("sigmoid", "x", lambda g: 4 * g),
    ("tanh", "x", lambda g: g / 2),
    ("lstm_cell", "kernel", lambda g: np.roll(g, g.shape[1] // 4, axis=1)),  # gates
    ("lstm_cell", "c", lambda g: -g),
    ("softmax_cross_entropy", "logits", lambda g: g * g.shape[0]),  # no batch mean
    ("conv1d", "w", lambda g: g[::-1]),  # a correlation's gradient, flipped
    ("conv1d", "x", lambda g: np.roll(g, 1, axis=1)),  # off by one step
    ("global_avg_pool", "x", lambda g: g * g.shape[1]),  # a sum's, not a mean's
    ("gelu", "x", lambda g: g / 2),
    ("layer_norm", "x", lambda g: g[:, ::-1]),  # features reversed
    ("layer_norm", "gamma", lambda g: g[::-1]),
    ("batch_norm", "x", lambda g: g[::-1]),  # samples reversed
    ("batch_norm", "gamma", lambda g: g[::-1]),
    ("embedding", "table", lambda g: np.roll(g, 1, axis=0)),  # ids off by one
    ("attention", "k", lambda g: g.transpose(0, 2, 1, 3).reshape(g.shape)),
    ("attention", "q", lambda g: 4 * g),  # the scale left out of the gradient
    ("gru_cell", "bias", lambda g: g[::-1]),  # input and recurrent biases swapped
    ("gru_cell", "h", lambda g: -g),
]


@pytest.mark.parametrize(
    ("op", "name", "wrong"),
    WRONG_GRADIENTS,
    ids=[f"{op}-{name}" for op, name, _ in WRONG_GRADIENTS],
)
def test_finite_differences_catch_a_wrong_vjp(op: str, name: str, wrong: Any) -> None:
    assert fd_mismatch(_fixed(op), 5, backward=_with_gradient(op, name, wrong)) > 1e3


def _constant_statistics(
    op: str, operands: Any, attributes: Any, cotangents: Any, dtype: Any
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``ref.backward``, except that batch_norm's gradient of ``x`` takes the
    batch's mean and variance for constants (``gamma * inv * g``, what a
    ``stop_gradient`` on the moments gives)."""
    results, grads = ref.backward(op, operands, attributes, cotangents, dtype)
    if op == "batch_norm":
        x = np.asarray(operands["x"], dtype)
        inv = 1 / np.sqrt(x.var(axis=0) + attributes["epsilon"])
        grads = {**grads, "x": cotangents["y"] * operands["gamma"] * inv}
    return results, grads


def test_finite_differences_catch_batch_statistics_taken_for_constants() -> None:
    case = _fixed("batch_norm")
    assert fd_mismatch(case, 5) <= 1
    assert fd_mismatch(case, 5, backward=_constant_statistics) > 1e3


def _swap_first_gates(kernel: np.ndarray) -> np.ndarray:
    """Gate blocks i and f exchanged: gates read in the order f, i, c, o."""
    units = kernel.shape[-1] // 4
    return np.concatenate(
        [kernel[..., units : 2 * units], kernel[..., :units], kernel[..., 2 * units :]],
        axis=-1,
    )


def _swap_zr(kernel: np.ndarray) -> np.ndarray:
    """GRU gate blocks z and r exchanged: PyTorch's r, z, n order read as
    Keras' z, r, h."""
    units = kernel.shape[-1] // 3
    return np.concatenate(
        [kernel[..., units : 2 * units], kernel[..., :units], kernel[..., 2 * units :]],
        axis=-1,
    )


WRONG_OPERANDS = [
    ("conv2d", "w", lambda w: w.transpose(1, 0, 2, 3)),  # kh and kw swapped
    ("conv2d", "w", lambda w: w[::-1, ::-1]),  # a convolution, not a correlation
    ("avg_pool", "x", lambda x: x.transpose(0, 2, 1, 3).reshape(x.shape)),
    ("max_pool", "x", lambda x: x[:, ::-1]),
    ("matmul", "w", lambda w: w.T.reshape(w.shape)),
    ("dense", "b", lambda b: b[::-1]),
    ("relu", "x", np.abs),
    ("sigmoid", "x", np.negative),
    ("tanh", "x", lambda x: x / 2),
    ("lstm_cell", "kernel", _swap_first_gates),
    ("lstm_cell", "bias", _swap_first_gates),
    ("softmax_cross_entropy", "labels", lambda labels: (labels + 1) % 5),
    ("conv1d", "w", lambda w: w[::-1]),  # a convolution, not a correlation
    ("conv1d", "x", lambda x: x[:, ::-1]),
    ("global_avg_pool", "x", lambda x: x * 2),
    ("gelu", "x", lambda x: x * 1.702),  # a sigmoid's argument, not erf's
    ("layer_norm", "x", lambda x: x.T.reshape(x.shape)),
    ("layer_norm", "gamma", lambda g: g[::-1]),
    ("batch_norm", "x", lambda x: x.T.reshape(x.shape)),  # channels-first read
    ("batch_norm", "gamma", lambda g: g[::-1]),
    ("embedding", "ids", lambda ids: (ids + 1) % 4),
    ("attention", "q", lambda q: q * math.sqrt(q.shape[-1])),  # unscaled
    ("attention", "v", lambda v: v.transpose(0, 2, 1, 3).reshape(v.shape)),
    ("gru_cell", "kernel", _swap_zr),
    ("gru_cell", "bias", lambda b: b[::-1]),  # input and recurrent biases swapped
]


@pytest.mark.parametrize(
    ("op", "name", "wrong"),
    WRONG_OPERANDS,
    ids=[f"{op}-{name}-{i}" for i, (op, name, _) in enumerate(WRONG_OPERANDS)],
)
def test_the_definition_catches_a_wrong_forward(op: str, name: str, wrong: Any) -> None:
    forward = _with_operand(op, name, wrong)
    assert definition_mismatch(_fixed(op), 5, forward=forward) > 1e-2


def _bessel(
    op: str, operands: Any, attributes: Any, dtype: Any
) -> dict[str, np.ndarray]:
    """``ref.forward``, except that batch_norm divides by the unbiased
    (Bessel-corrected) variance, as PyTorch's ``running_var`` takes it."""
    if op != "batch_norm":
        return ref.forward(op, operands, attributes, dtype)
    x = np.asarray(operands["x"], dtype)
    normed = (x - x.mean(axis=0)) / np.sqrt(
        x.var(axis=0, ddof=1) + attributes["epsilon"]
    )
    return {"y": normed * operands["gamma"] + operands["beta"]}


def _over_features(
    op: str, operands: Any, attributes: Any, dtype: Any
) -> dict[str, np.ndarray]:
    """``ref.forward``, except that batch_norm normalizes each row over its
    channels (a layer normalization) instead of each channel over the rows."""
    return ref.forward(
        "layer_norm" if op == "batch_norm" else op, operands, attributes, dtype
    )


@pytest.mark.parametrize("wrong", [_bessel, _over_features])
def test_the_definition_catches_a_wrong_batch_statistic(wrong: Forward) -> None:
    case = _fixed("batch_norm")
    assert definition_mismatch(case, 5) < 1e-12
    assert definition_mismatch(case, 5, forward=wrong) > 1e-2


@pytest.mark.parametrize("op", list(OPERATORS))
def test_the_precision_gap_catches_bfloat16_inputs(op: str) -> None:
    """A computation on its first operand cut to bfloat16's 8 significant
    bits is far outside float32's agreement with float64."""
    case = _fixed(op)
    first = next(
        o.name for o in case.operator.inputs(case.named) if o.role not in INTEGER_ROLES
    )
    half = _with_operand(op, first, _bfloat16)
    assert precision_gap(case, 5, forward=half) > 3


def _bfloat16(a: np.ndarray) -> np.ndarray:
    """float32 values with the low 16 bits of each cleared (bfloat16, truncated)."""
    bits = a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(a.dtype)


def test_shape_check_catches_valid_padding_for_same() -> None:
    def valid(
        op: str, operands: Any, attributes: Any, dtype: Any
    ) -> dict[str, np.ndarray]:
        return ref.forward(op, operands, {**attributes, "padding": "valid"}, dtype)

    assert shape_problems(_fixed("conv2d"), forward=valid)


def test_adam_check_catches_an_off_by_one_step() -> None:
    def late(
        op: str, operands: Any, attributes: Any, dtype: Any
    ) -> dict[str, np.ndarray]:
        return ref.forward(op, operands, {"step": attributes["step"] + 1}, dtype)

    assert adam_mismatch(Case("adam", (6, 1), "formula"), 0, forward=late) > 1e-3
    assert adam_mismatch(Case("adam", (6, 7), "formula"), 0, forward=late) > 1e-3


# --- the cases a profile times -----------------------------------------------------


def test_the_transformers_layers_become_cases_at_its_own_shapes() -> None:
    """Sequences become rows (``batch * T``), attention its projections and
    its core, GELU activations element-wise cases; adds leave none."""
    found = {(c.op, c.dims) for c in model_cases(MODELS["transformer"], 2)}
    assert found == {
        ("embedding", (2, 128, 10_000, 64)),
        ("conv1d", (2, 128, 64, 64, 3, 1)),
        ("gelu", (256, 64)),
        ("dense", (256, 64, 64)),
        ("attention", (2, 128, 4, 16)),
        ("layer_norm", (256, 64)),
        ("dense", (256, 64, 128)),
        ("gelu", (256, 128)),
        ("dense", (256, 128, 64)),
        ("global_avg_pool", (2, 128, 64)),
        ("dense", (2, 64, 2)),
        ("softmax_cross_entropy", (2, 2)),
    }


def test_batch_norms_become_cases_and_dropout_none() -> None:
    """bn-dropout-cnn at batch 4: the image batch norm over ``N * H * W``
    rows of 8 channels, the feature one over ``N`` rows of 16; the dropout
    leaves no case (its random mask has no float64 reference: every
    evaluation checks it with ``workers.protocol.check_dropout``), nor do the
    strided convolution and the pool that pads.  At batch 2 the feature batch
    norm, over two rows, is left out."""
    spec = VARIANTS["bn-dropout-cnn"]
    assert [(c.op, c.dims, c.label) for c in model_cases(spec, 4)] == [
        ("batch_norm", (4 * 14 * 14, 8), "bn-dropout-cnn-conv_norm"),
        ("dense", (4, 7 * 7 * 8, 16), "bn-dropout-cnn-fc"),
        ("batch_norm", (4, 16), "bn-dropout-cnn-fc_norm"),
        ("dense", (4, 16, 10), "bn-dropout-cnn-logits"),
        ("softmax_cross_entropy", (4, 10), "bn-dropout-cnn-loss"),
    ]
    norms = [c.dims for c in model_cases(spec, 2) if c.op == "batch_norm"]
    assert norms == [(2 * 14 * 14, 8)]


@pytest.mark.parametrize("profile", list(OPS_PROFILES))
def test_every_profile_times_batch_norm_over_three_rows_or_more(
    profile: str,
) -> None:
    """No profile's models has a batch normalization: the element sweep
    gives it its cases, each over enough rows for its statistics."""
    found = timed_cases(OPS_PROFILES[profile].sweep, ("batch_norm",))
    assert found
    assert all(c.named["rows"] >= 3 for c in found)


def test_layers_no_operator_expresses_are_left_out() -> None:
    """Strided convolutions and pools that pad are no stride-1 operator's
    cases; the rest of the model still is."""
    ops = [c.op for c in model_cases(VARIANTS["strided-cnn"], 2)]
    assert ops == ["conv2d", "dense", "dense", "softmax_cross_entropy"]


@pytest.mark.parametrize("profile", list(OPS_PROFILES))
def test_every_timed_case_fits_its_operator(profile: str) -> None:
    for case in timed_cases(OPS_PROFILES[profile].sweep):
        case.named  # noqa: B018 (raises for dims that do not fit)
