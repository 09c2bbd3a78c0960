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
    # A 2-D convolution whose kernel is reversed in both axes (a true
    # convolution, as scipy.signal.convolve2d has it, for Keras' correlation).
    "torch-conv-kernel-flipped": SourceEdit(
        "native.torch.ops",
        """
def conv2d(h, params, spec, name):
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], params.get(f"{name}/bias")
    pads = _pads(layer, h)
    both = _symmetric(pads)
    if both is None:
        h, both = F.pad(h, pads), (0, 0)
    return F.conv2d(
        h, kernel.flip(2, 3), bias, stride=layer.options.stride, padding=both
    )
""",
        "native-torch",
        "lenet",
        Location("forward", "conv1"),
    ),
    # An LSTM cell that splits its gates in TensorFlow 1's LSTMBlockCell
    # order i, c, f, o where Keras' kernels hold i, f, c, o.
    "torch-lstm-gate-order": SourceEdit(
        "native.torch.ops",
        """
def _lstm_over(h, weights, units, sequences, backward=False):
    kernel, recurrent, bias = weights

    def step(x_t, state):
        hidden, c = state
        z = F.linear(x_t, kernel, bias) + F.linear(hidden, recurrent)
        i, g, f, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    zeros = h.new_zeros(h.shape[0], units)
    return _recur(h, step, (zeros, zeros), sequences, backward)

_RECURRENCES["lstm"] = _lstm_over
""",
        "native-torch",
        "kinds-seq",
        Location("forward", "lstm"),
    ),
    # A GRU that applies its reset gate before the recurrent product (the
    # reset_after=False formula) to Keras' reset_after=True weights.
    "torch-gru-reset-before": SourceEdit(
        "native.torch.ops",
        """
def _gru_over(h, weights, units, sequences, backward=False):
    kernel, recurrent, bias = weights
    b_in, b_rec = (None, None) if bias is None else (bias[0], bias[1])
    u_z, u_r, u_h = recurrent.chunk(3, dim=0)
    c_z, c_r, c_h = (None, None, None) if b_rec is None else b_rec.chunk(3)

    def step(x_t, state):
        x_z, x_r, x_h = F.linear(x_t, kernel, b_in).chunk(3, dim=1)
        z = torch.sigmoid(x_z + F.linear(state[0], u_z, c_z))
        r = torch.sigmoid(x_r + F.linear(state[0], u_r, c_r))
        candidate = torch.tanh(x_h + F.linear(r * state[0], u_h, c_h))
        return (z * state[0] + (1 - z) * candidate,)

    return _recur(h, step, (h.new_zeros(h.shape[0], units),), sequences, backward)

_RECURRENCES["gru"] = _gru_over
""",
        "native-torch",
        "conv1d-gru",
        Location("forward", "gru1"),
    ),
    # Adam without its bias correction: the step size is the learning rate.
    "torch-adam-no-bias-correction": SourceEdit(
        "native.torch.common",
        """
def _adam(state, grads):
    w = state.workload
    ms, vs = state.slots["momentum"], state.slots["velocity"]
    for name, g in grads.items():
        p, m, v = state.params[name], ms[name], vs[name]
        m.add_(g - m, alpha=1 - w.beta_1)
        v.add_(g * g - v, alpha=1 - w.beta_2)
        p.sub_(m * w.learning_rate / (v.sqrt() + w.epsilon))

_STEPS["adam"] = _STEPS["adamw"] = _adam
""",
        "native-torch",
        "lenet",
        Location("update", "conv1"),
    ),
    # A cross-entropy summed over the batch (reduction="sum") where Keras
    # takes the batch mean.
    "torch-loss-summed": SourceEdit(
        "native.torch.common",
        """
_original = loss

def loss(outputs, y, objective):
    if objective == ("sparse_categorical_crossentropy", True):
        return F.cross_entropy(outputs, y, reduction="sum")
    return _original(outputs, y, objective)
""",
        "native-torch",
        "ffn",
        Location("loss", "loss"),
    ),
    # A dense layer that leaves its bias out.
    "jax-dense-bias-dropped": SourceEdit(
        "native.jax.ops",
        """
def dense(h, params, spec, name):
    return _dense(h, params[f"{name}/kernel"], None)
""",
        "native-jax",
        "ffn",
        Location("forward", "fc1"),
    ),
    # Attention's softmax over the queries (axis -2) instead of the keys.
    "jax-attention-softmax-axis": SourceEdit(
        "native.jax.ops",
        """
@jax.jit
def _attention(h, w):
    def project(part):
        y = jnp.einsum("ntf,fhk->nthk", h, w[f"{part}/kernel"])
        return y + w[f"{part}/bias"] if f"{part}/bias" in w else y

    q, k, v = project("query"), project("key"), project("value")
    q = q / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))
    scores = jnp.einsum("nthk,nshk->nhts", q, k)
    weights = jax.nn.softmax(scores, axis=-2)
    mixed = jnp.einsum("nhts,nshk->nthk", weights, v)
    out = jnp.einsum("nthk,hkf->ntf", mixed, w["attention_output/kernel"])
    return out + w["attention_output/bias"] if "attention_output/bias" in w else out
""",
        "native-jax",
        "transformer-tiny",
        Location("forward", "block1_attention"),
    ),
    # A 'same' max pool padded with zeros (jnp.pad's default), not -inf: a
    # window at the edge whose values are all negative gives 0.
    "jax-max-pool-zero-padded": SourceEdit(
        "native.jax.ops",
        """
@functools.partial(jax.jit, static_argnames=("size", "stride", "pads"))
def _max_pool(h, size, stride, pads):
    window, steps = (1, size, size, 1), (1, stride, stride, 1)
    padded = jnp.pad(h, ((0, 0), *pads, (0, 0)))
    return lax.reduce_window(padded, -jnp.inf, lax.max, window, steps, "VALID")
""",
        "native-jax",
        "strided-cnn",
        Location("forward", "pool1"),
    ),
    # A layer normalization with epsilon outside the square root:
    # (h - mean) / (sqrt(variance) + epsilon).
    "jax-layer-norm-epsilon-outside": SourceEdit(
        "native.jax.ops",
        """
@functools.partial(jax.jit, static_argnames="epsilon")
def _layer_norm(h, gamma, beta, epsilon):
    mean = jnp.mean(h, axis=-1, keepdims=True)
    variance = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    return (h - mean) / (jnp.sqrt(variance) + epsilon) * gamma + beta
""",
        "native-jax",
        "transformer-tiny",
        Location("forward", "block1_norm1"),
    ),
    # An inference batch normalization through tf.nn.batch_normalization
    # with PyTorch's default epsilon 1e-5, not the layer's (Keras' 1e-3).
    "tf-batch-norm-inference-epsilon": SourceEdit(
        "native.tensorflow.ops",
        """
def batch_norm(h, params, spec, name):
    mean, variance = params[f"{name}/moving_mean"], params[f"{name}/moving_variance"]
    beta, gamma = params[f"{name}/beta"], params[f"{name}/gamma"]
    return tf.nn.batch_normalization(h, mean, variance, beta, gamma, 1e-5)
""",
        "native-tensorflow",
        "bn-dropout-cnn",
        Location("forward", "conv_norm"),
    ),
    # A 'same' average pool padded with zeros by hand and run 'valid': the
    # padded cells are counted in the mean.
    "tf-avg-pool-counts-padding": SourceEdit(
        "native.tensorflow.ops",
        """
def avg_pool(h, params, spec, name):
    layer = spec.layer(name)
    o = layer.options
    if o.padding == "same":
        rows, cols = padding_of(layer, h.shape[1]), padding_of(layer, h.shape[2])
        h = tf.pad(h, [[0, 0], list(rows), list(cols), [0, 0]])
    return tf.nn.avg_pool2d(h, o.pool_size, o.stride, "VALID")
""",
        "native-tensorflow",
        "strided-cnn",
        Location("forward", "pool2"),
    ),
    # An ELU written slope * exp(h) - 1 for slope * (exp(h) - 1).
    "tf-elu-parenthesis": SourceEdit(
        "native.tensorflow.ops",
        """
def elu(h, slope):
    return tf.where(h > 0, h, slope * tf.exp(h) - 1)
""",
        "native-tensorflow",
        "kinds-cnn",
        Location("forward", "elu"),
    ),
    # Adam with beta_1 and beta_2 exchanged in the moments' updates.
    "tf-adam-betas-swapped": SourceEdit(
        "native.tensorflow.common",
        """
def _adam(state, grads):
    w = state.workload
    t = tf.cast(state.step + 1, DTYPE)
    alpha = w.learning_rate * tf.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, g in grads.items():
        p = state.params[name]
        m, v = state.slots["momentum"][name], state.slots["velocity"][name]
        m.assign_add((g - m) * (1 - w.beta_2))
        v.assign_add((g * g - v) * (1 - w.beta_1))
        p.assign_sub(m * alpha / (tf.sqrt(v) + w.epsilon))

_STEPS["adam"] = _STEPS["adamw"] = _adam
""",
        "native-tensorflow",
        "lenet",
        Location("update", "conv1"),
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
