"""The reader judged by the model Keras loads (``workers.reader_check``):
a correct reading passes, and a deliberately wrong reader is caught on
every parameter of every layer kind, the sentence naming the layer.

Keras runs in a subprocess (``KERAS_BACKEND=torch``, the reader's worker):
each named spec is saved as a user would save it, with weights drawn from
a seed (no parameter is all zeros or ones, so every misreading shows), read
back by ``zoo.keras_import.load``, judged as read, then judged once per
parameter with that one parameter misread: its last axis rolled by one (a
swapped gate block, shifted channels), or, for a square kernel, transposed;
once with the loss misread (probabilities where the file says logits), and
once, for a model with dropout, with every dropout left out (the same in
inference: caught in the training step's pass).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import keras_on_torch

SCRIPT = """
import dataclasses, json, sys
from pathlib import Path
import keras
import numpy as np
from workers import reader_check
from zoo import keras_import
from zoo.keras_models import build, set_weights
from zoo.specs import without_noise
from zoo.models import get_spec
from zoo.user_models import spec_from_document
from zoo.weights import make_weights

def misread(a):
    if a.ndim == 2 and a.shape[0] == a.shape[1]:
        return np.ascontiguousarray(a.T)  # a transposed kernel
    return np.roll(a, 1, axis=-1 if a.shape[-1] > 1 else 0)

def nested():
    # a functional base used as a layer (transfer learning)
    image, inner = keras.Input((8, 8, 3)), keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(4, 3, name="c")(inner)
    h = keras.layers.Conv2D(4, 3, padding="same", name="c2")(h)
    base = keras.Model(inner, h, name="base")
    x = keras.layers.GlobalAveragePooling2D(name="gap")(base(image))
    model = keras.Model(image, keras.layers.Dense(3, name="out")(x))
    rng = np.random.default_rng(5)  # no bias of zeros: every misreading shows
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, size=v.shape).astype("float32"))
    return model

found = {}
for name in sys.argv[2:]:
    if name == "nested":
        model = nested()
    else:
        spec = get_spec(name)
        model = build(spec)
        set_weights(model, spec, make_weights(spec, 5))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    path = Path(sys.argv[1]) / f"{name}.keras"
    model.save(path)
    document, weights, original, loss = keras_import.load(path)
    read = spec_from_document("user model", document)
    reader_check.judge(keras, original, read, weights, loss)  # read right: passes
    for p in read.params:
        wrong = {**weights, p.name: misread(weights[p.name])}
        if np.array_equal(wrong[p.name], weights[p.name]):
            found[p.name] = "unchanged"
            continue
        try:
            reader_check.judge(keras, original, read, wrong, loss)
            found[p.name] = "missed"
        except ValueError as exc:
            found[p.name] = str(exc)
    if read.noisy:  # a reader that leaves every dropout out
        try:
            reader_check.judge(keras, original, without_noise(read), weights, loss)
            found["dropout"] = "missed"
        except ValueError as exc:
            found["dropout"] = str(exc)
# the loss misread: probabilities where the file says logits
wrong_loss = dataclasses.replace(read.workload, from_logits=False)
try:
    reader_check.judge(
        keras, original, dataclasses.replace(read, workload=wrong_loss), weights, loss
    )
    found["loss"] = "missed"
except ValueError as exc:
    found["loss"] = str(exc)
print(json.dumps(found))
"""
# Every parameter kind: the LeNet's conv2d and dense (after a flatten), the
# tiny Transformer's embedding, conv1d, attention and layer normalization,
# the GRU's three, the batch normalization's four, the LSTM's three.
# Issue 62's kinds (kinds-cnn, kinds-seq: a transposed, a depthwise and a
# separable convolution, PReLU, Normalization, bidirectional and simple
# recurrent layers), and a model nested in the model.
SPECS = (
    "lenet",
    "conv1d-gru",
    "transformer-tiny",
    "bn-dropout-cnn",
    "stacked-lstm",
    "kinds-cnn",
    "kinds-seq",
    "nested",
)


def _judged(tmp_path: Path, names: tuple[str, ...]) -> dict[str, str]:
    done = keras_on_torch(["-c", SCRIPT, str(tmp_path), *names], tmp_path, 900)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_wrong_reader_is_caught_on_every_parameter(tmp_path: Path) -> None:
    found = _judged(tmp_path, SPECS)
    assert {p.split("/")[0] for p in found} >= {
        "embed",
        "conv1",
        "lstm1",
        "grow",
        "dw",
        "bs",
        "base__c2",
        "dropout",
    }
    print(next(iter(found.values())))
    for param, said in found.items():
        assert said not in ("missed", "unchanged"), param
        assert "the reader misread the file" in said, said
        if param == "loss":
            assert "at the loss" in said
            continue
        if param == "dropout":  # same in inference: parts in a training step
            assert "in a training step" in said, said
            continue
        layer = param.split("/")[0]
        assert f"'{layer}'" in said or f"{layer}/" in said, (param, said)


WEIGHTS_SCRIPT = """
import dataclasses, json, sys
from pathlib import Path
import keras
from workers import reader_check
from zoo import keras_import
from zoo.keras_models import build, set_weights
from zoo.models import get_spec
from zoo.user_models import spec_from_document
from zoo.weights import make_weights

spec = get_spec("wide-deep")
model = build(spec)
set_weights(model, spec, make_weights(spec, 5))
model.compile(
    loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"],
    loss_weights=[1.0, 0.5],
)
path = Path(sys.argv[1]) / "wide_deep.keras"
model.save(path)
document, weights, original, loss = keras_import.load(path)
read = spec_from_document("user model", document)
reader_check.judge(keras, original, read, weights, loss)  # read right: passes
said = {"read": [h.weight for h in read.heads]}
wrong = dataclasses.replace(read.workload, loss_weights=(1.0, 1.0))
try:
    reader_check.judge(
        keras, original, dataclasses.replace(read, workload=wrong), weights, loss
    )
    said["misread"] = "missed"
except ValueError as exc:
    said["misread"] = str(exc)
print(json.dumps(said))
"""


def test_a_misread_loss_weight_is_caught_by_keras_own_compile(tmp_path: Path) -> None:
    """Several outputs: the file's ``loss_weights`` weighed by Keras' own
    CompileLoss, not the tool's reading of them: a reader that took every
    weight as 1 is caught at the loss."""
    done = keras_on_torch(["-c", WEIGHTS_SCRIPT, str(tmp_path)], tmp_path, 600)
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["read"] == [1.0, 0.5]
    assert "the reader misread the file" in said["misread"], said
    assert "at the loss" in said["misread"], said
