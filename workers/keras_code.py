"""A model as a few lines of plain Keras code: the reproducer of a finding
(``harness fuzz --write``), a script that needs Keras and one backend only.

``python -m workers.keras_code MODEL SEED BATCH STEPS EXPECTED OUT`` (run by
``harness.fuzz.report`` in a Keras interpreter, any backend): builds the
model as the Keras paths do (``zoo.keras_models.build``), then writes to
``OUT`` a script that builds it again layer by layer from Keras' own
classes, each with the arguments whose values differ from its class'
defaults (read off the layer's config, so every kind renders the same way
and none is written twice), sets the same weights and mini-batches as
literals, compiles Keras' optimizer and loss as the tool does, trains
``STEPS`` steps with ``train_on_batch``, and prints, per quantity named in
``EXPECTED`` (an ``.npz`` of float64 values: ``logits`` on the first batch,
``grad:<layer>/<parameter>``, the loss' gradient there (each backend's own
gradient code, written out in the script), ``step<t>/<layer>/<parameter>``
after step ``t``, or ``step<t>/loss``, the loss ``train_on_batch`` returns
for step ``t``; or the word ``keras``:
the logits of the model built here, so that the script checks it rebuilds
the same model), its error against them: ``max |keras - float64| / max
|float64|``.  Every layer that draws noise is written at an amount of 0, as
the tool compares trajectories (``zoo.specs.without_noise``), and the
script says so: a reproducer trains deterministically.

Runs where Keras runs (the main environment), never in the MXNet one.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from workers.reproducer_error import error
from zoo import files

# Config keys never written: Keras fills them in, or the weights set below
# make them moot.  A layer's name is kept: the weights are found by it, and
# ``trainable`` when it is False (a frozen layer).
_SKIPPED = {"dtype", "build_config", "compile_config"}
_INITIALIZER = "_initializer"


def _literal(array: np.ndarray) -> str:
    """An array as ``np.array(...)`` text that reads back to the same bits."""
    kind = "int32" if np.issubdtype(array.dtype, np.integer) else str(array.dtype)
    text = np.array2string(
        array,
        separator=", ",
        threshold=sys.maxsize,
        floatmode="unique",
        max_line_width=88,
    )
    return f"np.array({text}, dtype='{kind}')"


def _value(value: Any, keras: Any) -> str:
    """A config value as Python: a nested Keras object by its class."""
    if isinstance(value, dict) and "class_name" in value and "config" in value:
        return _object(value, keras)
    if isinstance(value, list):
        return (
            "("
            + ", ".join(_value(v, keras) for v in value)
            + ("," if len(value) == 1 else "")
            + ")"
        )
    return repr(value)


def _object(serialized: dict[str, Any], keras: Any) -> str:
    """``keras.<module>.<Class>(arguments)`` of a serialized Keras object,
    only the arguments that differ from the class' defaults."""
    module = str(serialized.get("module") or "keras.layers")
    module = "keras.layers" if module.startswith("keras.layers") else module
    cls = getattr(keras, module.removeprefix("keras."), keras.layers)
    cls = getattr(cls, serialized["class_name"])
    arguments = _arguments(cls, serialized["config"], keras)
    return f"{module}.{serialized['class_name']}({arguments})"


def _arguments(cls: Any, config: dict[str, Any], keras: Any) -> str:
    signature = inspect.signature(cls.__init__)
    parts = []
    for key, value in config.items():
        if key in _SKIPPED or key.endswith(_INITIALIZER) or value is None:
            continue
        if key == "trainable" and value is True:
            continue
        parameter = signature.parameters.get(key)
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            default = parameter.default
            same = value == default or (
                isinstance(value, list) and tuple(value) == default
            )
            if same:
                continue
        parts.append(f"{key}={_value(value, keras)}")
    return ", ".join(parts)


def _call(node: Any, names: dict[int, str]) -> str:
    """The arguments a layer was called with, its tensors by variable name.
    Not ``training``, which Keras records as False when a functional model
    is built and overrides in every call (written out, it reads as dropout
    off in training, which it is not), nor an argument that is None (a
    layer's ``mask``, Keras' default)."""

    def text(argument: Any) -> str:
        if isinstance(argument, list | tuple):
            return "[" + ", ".join(text(a) for a in argument) + "]"
        return names.get(id(argument), repr(argument))

    args = [text(a) for a in node.arguments.args]
    kwargs = [
        f"{k}={text(v)}"
        for k, v in node.arguments.kwargs.items()
        if k != "training" and v is not None
    ]
    return ", ".join(args + kwargs)


def script(  # noqa: PLR0917 (what one script holds)
    model: Any,
    optimizer: str,
    loss: str,
    batches: tuple[Any, Any],
    steps: int,
    expected: dict[str, np.ndarray],
    paths: dict[str, str],
    loss_weights: list[float] | None = None,
    silenced: tuple[str, ...] = (),
) -> str:
    """The reproducer's text (module docstring); ``paths``: each trained
    quantity's Keras variable path.  A model of several inputs or outputs
    (``loss`` then a list, with its ``loss_weights``) gets its mini-batches
    as a list of arrays, one per input and per output (``batches``), its
    outputs packed as the tool packs them (``zoo.packing``) before they are
    compared, and its loss as the weighted sum ``compile`` makes.
    ``silenced``: the layers that draw noise, written at an amount of 0 (as
    the tool compares trajectories: ``zoo.specs.without_noise``), which the
    script's docstring names."""
    x, y = batches
    import keras

    names: dict[int, str] = {}
    lines = [
        '"""Reproducer written by `python -m harness fuzz --write`: run it with',
        "the backend as its argument (jax, tensorflow or torch).  It prints each",
        "quantity's error against float64 (three hand-written float64",
        "implementations that agree); float32 rounding alone stays below 1e-5.",
        *_silenced_note(silenced),
        '"""',
        "",
        "import os",
        "import sys",
        "",
        'backend = sys.argv[1] if len(sys.argv) > 1 else "tensorflow"',
        'os.environ["KERAS_BACKEND"] = backend',
        "import keras  # noqa: E402",
        "import numpy as np  # noqa: E402",
        "",
    ]
    for i, layer in enumerate(model.layers):
        node = layer._inbound_nodes[0]
        if isinstance(layer, keras.layers.InputLayer):
            shape = tuple(layer.batch_shape[1:])
            var = "inputs" if len(model.inputs) == 1 else f"input_{_ident(layer.name)}"
            named = "" if len(model.inputs) == 1 else f", name={layer.name!r}"
            lines.append(
                f"{var} = keras.Input(shape={shape!r}, dtype={layer.dtype!r}{named})"
            )
            for tensor in node.outputs:
                names[id(tensor)] = var
            continue
        var = f"h{i}"
        cls = type(layer)
        lines.append(
            f"{var} = keras.layers.{cls.__name__}"
            f"({_arguments(cls, layer.get_config(), keras)})({_call(node, names)})"
        )
        for tensor in node.outputs:
            names[id(tensor)] = var
    ins = ", ".join(names[id(t)] for t in model.inputs)
    outs = ", ".join(names[id(t)] for t in model.outputs)
    several = len(model.inputs) > 1 or len(model.outputs) > 1
    lines.append(
        f"model = keras.Model([{ins}], [{outs}])"
        if several
        else f"model = keras.Model({ins}, {outs})"
    )
    lines.append("model.set_weights([")
    lines += [f"    {_literal(np.asarray(w))}," for w in model.get_weights()]
    lines.append("])")
    # an adapted layer (Normalization) reads its set statistics only then
    lines += [
        f"model.get_layer({layer.name!r}).finalize_state()"
        for layer in model.layers
        if hasattr(layer, "finalize_state")
    ]
    lines += [
        f"loss_weights = {loss_weights!r}",
        f"model.compile(optimizer={optimizer}, loss={loss}, loss_weights=loss_weights)",
        f"x = {_data(x)}",
        f"y = {_data(y)}",
        "",
        "",
        *inspect.getsource(error).splitlines(),
        *_HELPERS.splitlines(),
    ]
    for quantity, value in expected.items():
        lines.append(f"expected_{_ident(quantity)} = {_literal(value)}")
    lines.append("")
    if "logits" in expected:
        lines.append("logits = packed(model.predict_on_batch(at(x, 0)))")
        lines.append('print("logits: error", error(logits, expected_logits))')
    gradients = [q for q in expected if q.startswith(GRADIENT) and q in paths]
    if gradients:
        lines += _GRADIENTS.splitlines()
        lines.append("grads = gradients(at(x, 0), at(y, 0))")
        lines += [
            f'print("{q}: error", error(grads[{paths[q]!r}], expected_{_ident(q)}))'
            for q in gradients
        ]
    lines += _training(steps, expected, paths)
    return "\n".join(lines) + "\n"


def _training(steps: int, expected: dict[str, Any], paths: dict[str, str]) -> list[str]:
    """The script's training steps: each ``train_on_batch``, the error of the
    loss it returns (``step<t>/loss``, penalties included) and of each
    parameter after it, where ``expected`` has them."""
    lines = ["variables = {v.path: v for v in model.weights}"] if steps else []
    for t in range(1, steps + 1):
        call = f"model.train_on_batch(at(x, {t - 1}), at(y, {t - 1}))"
        loss = f"step{t}/loss"
        if loss in expected:
            lines.append(f"loss = np.ravel(np.asarray({call}, dtype=float))[0]")
            lines.append(
                f'print("{loss}: error", error(loss, expected_{_ident(loss)}))'
            )
        else:
            lines.append(call)
        lines += [
            f'print("{quantity}: error", error(np.asarray('
            f"variables[{paths[quantity]!r}]), expected_{_ident(quantity)}))"
            for quantity in expected
            if quantity.startswith(f"step{t}/") and quantity in paths
        ]
    return lines


GRADIENT = "grad:"
# A reproducer's gradients: of the loss on the first batch at the weights
# set, the forward pass in inference (as the tool's Keras paths take them,
# ``workers.keras_runner``), the model's penalty terms included; one branch
# per backend, Keras having no backend-neutral gradient.
_GRADIENTS = """

def gradients(xb, yb):
    trained = model.trainable_variables
    if backend == "jax":
        import jax

        frozen = [v.value for v in model.non_trainable_variables]

        def loss_of(values):
            out, _, terms = model.stateless_call(values, frozen, xb, return_losses=True)
            return total_loss(yb, out) + sum(terms)

        grads = jax.grad(loss_of)([v.value for v in trained])
    elif backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = total_loss(yb, model(xb)) + sum(model.losses)
        grads = tape.gradient(loss, trained)
    else:
        import torch

        loss = total_loss(yb, model(xb)) + sum(model.losses)
        grads = torch.autograd.grad(loss, [v.value for v in trained])
    convert = keras.ops.convert_to_numpy
    return {v.path: convert(g) for v, g in zip(trained, grads)}

"""


# Every reproducer's other helpers: mini-batch ``t``
# (a list of one per input or output for a model of several); the outputs
# packed as the tool packs several (each flattened after the batch, then
# concatenated); the loss as ``compile`` makes it of a list of losses (each
# output's times its weight, summed).
_HELPERS = """

def at(data, t):
    return [a[t] for a in data] if isinstance(data, list) else data[t]


def packed(outputs):
    if not isinstance(outputs, list | tuple):
        return outputs
    flat = [np.reshape(np.asarray(o), (len(o), -1)) for o in outputs]
    return np.concatenate(flat, axis=-1)


def total_loss(yb, out):
    if not isinstance(model.loss, list):
        return model.loss(yb, out)
    weights = loss_weights or [1.0] * len(out)
    pairs = zip(model.loss, weights, yb, out, strict=True)
    return sum(w * f(t, o) for f, w, t, o in pairs)

"""


def _data(value: Any) -> str:
    """Mini-batches as literals: one array, or a list of one per input (or
    output)."""
    if isinstance(value, list):
        return "[\n" + "".join(f"    {_literal(a)},\n" for a in value) + "]"
    return _literal(value)


def _ident(quantity: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in quantity)


def _own_values(
    keras: Any, model: Any, spec: Any, batch: tuple[np.ndarray, np.ndarray]
) -> dict[str, np.ndarray]:
    """What the tool's Keras path computes for the built model on ``batch``
    (``workers.keras_runner``): its logits and every trained parameter's
    gradient, by the reproducer's names."""
    from workers.keras_runner import _GRADS, fed, loss_function, targeted
    from zoo import packing
    from zoo.keras_models import variable

    x, y = batch
    loss = loss_function(keras, spec)
    logits, _, grads = _GRADS[keras.backend.backend()](
        model, loss, fed(spec, x), targeted(spec, y)
    )
    by_variable = dict(
        zip((id(v) for v in model.trainable_variables), grads, strict=True)
    )
    values = {
        "logits": np.asarray(packing.outputs(spec, logits, np.asarray), np.float64)
    }
    for p in spec.params:
        if p.trainable:
            g = by_variable[id(variable(model, p))]
            values[GRADIENT + p.name] = np.asarray(
                keras.ops.convert_to_numpy(g), np.float64
            )
    return values


def _silenced_note(silenced: tuple[str, ...]) -> list[str]:
    """The docstring's lines naming the layers written at an amount of 0."""
    if not silenced:
        return []
    return [
        "",
        f"Layers that draw noise ({', '.join(silenced)}) are written at an amount",
        "of 0, as the tool compares training trajectories: random draws cannot",
        "agree between backends (each path's own draws are checked apart), and",
        "at 0 the script is deterministic.",
    ]


def _loss(objective: Any) -> str:
    """Keras' loss object for ``objective`` as code."""
    from zoo.losses import LOSSES, keras_arguments

    given = ", ".join(f"{k}={v!r}" for k, v in keras_arguments(objective).items())
    return f"keras.losses.{LOSSES[objective.loss].keras_class}({given})"


def main(argv: list[str]) -> int:
    name, seed, batch, steps, expected_file, out = argv
    import keras

    from zoo.arrays import load_npz
    from zoo.data import make_batches
    from zoo.keras_models import build, set_weights, variable
    from zoo.models import get_spec
    from zoo.optimizers import get_optimizer, keras_arguments
    from zoo.packing import split_inputs, split_targets
    from zoo.specs import without_noise
    from zoo.weights import make_weights

    drawn = get_spec(name)
    spec = without_noise(drawn)  # what the expected values were computed on
    silenced = tuple(
        a.name for a, b in zip(drawn.layers, spec.layers, strict=True) if a != b
    )
    x, y = make_batches(spec, int(seed), int(batch), max(int(steps), 1))
    model = build(spec)
    set_weights(model, spec, make_weights(spec, int(seed)))
    w = spec.workload
    arguments = ", ".join(
        f"{k}={v!r}" for k, v in keras_arguments(w).items() if v is not None
    )
    optimizer = (
        f"keras.optimizers.{get_optimizer(w.optimizer).keras_class}({arguments})"
    )
    loss = ", ".join(_loss(h.objective) for h in spec.heads)
    weights = [h.weight for h in spec.heads] if spec.several_outputs else None
    if spec.several_outputs:
        loss = f"[{loss}]"
    if expected_file == "keras":  # the built model's own values: a self-check
        expected = _own_values(keras, model, spec, (x[0], y[0]))
    else:
        expected = load_npz(Path(expected_file))
    names = {p.name for p in spec.params}
    paths = {
        quantity: variable(model, spec.param(quantity.split("/", 1)[1])).path
        for quantity in expected
        if quantity.startswith("step")
        and "/" in quantity
        and quantity.split("/", 1)[1] in names
    }
    paths.update(
        (quantity, variable(model, spec.param(quantity.removeprefix(GRADIENT))).path)
        for quantity in expected
        if quantity.startswith(GRADIENT) and quantity.removeprefix(GRADIENT) in names
    )
    xs = list(split_inputs(spec, x)) if spec.more_inputs else x
    ys = list(split_targets(spec, y)) if spec.several_outputs else y
    text = script(
        model,
        optimizer,
        loss,
        (xs, ys),
        int(steps),
        expected,
        paths,
        weights,
        silenced,
    )
    files.write_text(Path(out), text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("KERAS_BACKEND", "jax")
    sys.exit(main(sys.argv[1:]))
