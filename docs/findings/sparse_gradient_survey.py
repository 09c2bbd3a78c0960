"""Every Keras optimizer on an embedding whose token repeats in the batch:
the measurement behind sparse-gradient-optimizers.md.

Run as ``python docs/findings/sparse_gradient_survey.py`` (the main
environment: Keras and its three backends).  For each optimizer, in a fresh
process per backend, a 3 x 1 embedding table (zeros) is trained for
``STEPS`` steps on the ids ``[[0, 0]]`` (token 0 twice, so its row's
gradient is the sum of two occurrences) with the loss ``-sum(y * outputs)``
for each of ``CASES``: ``y = [1, 3]`` (the occurrences' gradients -1 and
-3, unequal so that a maximum over occurrences shows; the row's -4) and
``y = [1, -3]`` (-1 and 3 of opposite signs, so that a maximum of their
magnitudes, 3, is not the row's, 2), and row 0 is printed.  The expected
value is float64 NumPy with the row's dense gradient, for the optimizers
whose formulas the tool writes out (``zoo/optimizers.py``); for the rest,
Keras on JAX (whose embedding gradient is dense).  Keras on
TensorFlow is also run on the same table as a bias-free ``Dense`` over
one-hot rows (its gradient dense): the same backend and optimizer, without
the sparse path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

STEPS = 3
RATE = 0.1
# The targets of the two occurrences of token 0, by case: their gradients are
# minus these, the row's their sum.
CASES = {"same sign": (1.0, 3.0), "opposite signs": (1.0, -3.0)}
OPTIMIZERS = {
    "SGD": {},
    "SGD(momentum=0.9)": {"momentum": 0.9},
    "SGD(momentum=0.9, nesterov=True)": {"momentum": 0.9, "nesterov": True},
    # a clip of SGD's gradient (found by issue 80's campaigns: SGD with
    # clipvalue failed on TensorFlow at an embedding's update)
    "SGD(clipvalue=1.5)": {"clipvalue": 1.5},
    "SGD(clipnorm=2)": {"clipnorm": 2.0},
    "SGD(global_clipnorm=2)": {"global_clipnorm": 2.0},
    "Adam": {},
    "Adam(amsgrad=True)": {"amsgrad": True},
    "AdamW": {},
    "Nadam": {},
    "Adamax": {},
    "Adagrad": {},
    "Adadelta": {},
    "RMSprop": {},
    "RMSprop(centered=True)": {"centered": True},
    "Ftrl": {},
    "Lamb": {},
    "Lion": {},
    "Adafactor": {},
}

CHILD = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = sys.argv[1]
import keras, numpy as np
name, options = sys.argv[2], json.loads(sys.argv[3])
steps, rate, dense = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6] == "dense"
targets = json.loads(sys.argv[7])
cls = getattr(keras.optimizers, name.split("(")[0])
zeros = "zeros"
if dense:  # the same table as a Dense kernel over one-hot rows
    table = keras.layers.Dense(1, use_bias=False, kernel_initializer=zeros)
    model = keras.Sequential([keras.Input((2, 3)), table])
    x = np.eye(3, dtype="float32")[[[0, 0]]]
else:
    table = keras.layers.Embedding(3, 1, embeddings_initializer=zeros)
    model = keras.Sequential([keras.Input((2,), dtype="int32"), table])
    x = np.array([[0, 0]], np.int32)
loss = lambda y, p: -keras.ops.sum(y * p)  # noqa: E731
model.compile(cls(learning_rate=rate, **options), loss=loss)
y = np.array([[[targets[0]], [targets[1]]]], np.float32)
for _ in range(steps):
    model.train_on_batch(x, y)
print(json.dumps(float(np.asarray(model.get_weights()[0]).reshape(-1)[0])))
"""


def run(
    backend: str, name: str, targets: tuple[float, float], dense: bool = False
) -> float | str:
    options = json.dumps(OPTIMIZERS[name])
    form = "dense" if dense else "sparse"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            backend,
            name,
            options,
            str(STEPS),
            str(RATE),
            form,
            json.dumps(targets),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if done.returncode:
        return "fails: " + (done.stderr.strip().splitlines() or ["?"])[-1][:80]
    return float(done.stdout.strip().splitlines()[-1])


def numpy_expected(name: str, targets: tuple[float, float]) -> float | None:  # noqa: PLR0912 (one per optimizer)
    """Row 0 after ``STEPS`` steps of the row's gradient ``-sum(targets)``,
    float64, by zoo/optimizers.py's formulas (None: an optimizer the tool
    does not write out)."""
    import numpy as np

    g, w = -sum(targets), 0.0
    o = OPTIMIZERS[name]
    kind = name.split("(", maxsplit=1)[0]
    m = v = vh = a = b = 0.0
    s = 0.1
    u_product = 1.0
    for t in range(1, STEPS + 1):
        if kind == "AdamW":
            w -= w * 0.004 * RATE
        if kind == "SGD":
            mom = o.get("momentum", 0.0)
            if not mom:
                w -= RATE * _clipped(g, o)
            else:
                b = b * mom - RATE * g
                w += b * mom - RATE * g if o.get("nesterov") else b
        elif kind in ("Adam", "AdamW"):
            alpha = RATE * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
            m += (g - m) * 0.1
            v += (g * g - v) * 0.001
            if o.get("amsgrad"):
                vh = max(vh, v)
            w -= m * alpha / (np.sqrt(vh if o.get("amsgrad") else v) + 1e-7)
        elif kind == "Nadam":

            def u(step: int) -> float:
                return 0.9 * (1 - 0.5 * 0.96**step)

            u_product *= u(t)
            m += (g - m) * 0.1
            v += (g * g - v) * 0.001
            m_hat = u(t + 1) * m / (1 - u_product * u(t + 1))
            m_hat += (1 - u(t)) * g / (1 - u_product)
            w -= m_hat * RATE / (np.sqrt(v / (1 - 0.999**t)) + 1e-7)
        elif kind == "Adagrad":
            s += g * g
            w -= RATE * g / np.sqrt(s + 1e-7)
        elif kind == "RMSprop":
            v = 0.9 * v + 0.1 * g * g
            if o.get("centered"):
                a = 0.9 * a + 0.1 * g
                w -= RATE * g / np.sqrt(v - a * a + 1e-7)
            else:
                w -= RATE * g / np.sqrt(v + 1e-7)
        else:
            return None
    return float(w)


def _clipped(g: float, options: dict[str, float | bool]) -> float:
    """The table's gradient (row 0 its only non-zero) as Keras clips it:
    each value to +-``clipvalue``, or the whole to a norm of ``clipnorm``
    (``global_clipnorm``: the one variable's is the global norm)."""
    if "clipvalue" in options:
        v = float(options["clipvalue"])
        return max(-v, min(v, g))
    c = float(options.get("clipnorm", options.get("global_clipnorm", 0.0)))
    return g * c / max(abs(g), c) if c else g


def _cell(value: float | str) -> str:
    return f"{value:.6f}" if isinstance(value, float) else value


def main() -> None:
    for case, targets in CASES.items():
        grads = ", ".join(f"{-t:g}" for t in targets)
        print(
            f"\n{case}: occurrences' gradients {grads}, the row's {-sum(targets):g}\n"
        )
        print(
            "| optimizer | expected (float64) | TensorFlow | TF, dense gradient "
            "| JAX | PyTorch | TensorFlow wrong |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        for name in OPTIMIZERS:
            print(row(name, targets), flush=True)


def row(name: str, targets: tuple[float, float]) -> str:
    """One optimizer's line of the table for ``targets``."""
    tf = run("tensorflow", name, targets)
    tf_dense = run("tensorflow", name, targets, dense=True)
    jax, torch = run("jax", name, targets), run("torch", name, targets)
    expected: float | str | None = numpy_expected(name, targets)
    source = "NumPy"
    if expected is None:
        expected, source = jax, "JAX"
    wrong = (
        isinstance(tf, float)
        and isinstance(expected, float)
        and abs(tf - expected) > 1e-4 * abs(expected)  # relative
    )
    cells = [_cell(v) for v in (tf, tf_dense, jax, torch)]
    return (
        f"| {name} | {_cell(expected)} ({source}) | {' | '.join(cells)} "
        f"| {'**yes**' if wrong else 'no'} |"
    )


if __name__ == "__main__":
    main()
