"""The run behind docs/results/per_position.md's triage of keras.io's U-Net
on Keras on TensorFlow: in the check's first training-mode pass (the file's
weights, the first of the check's ten mini-batches: seed 0, batch 16;
the targets are drawn after every input, so the count matters), how many
pixels
put their true class below Keras' clip (1e-7), and Keras on TensorFlow's
loss there against Keras' formula (clipped) and the exact one, in float64.

    python docs/results/shapes/unet_clipped_pixels.py

builds the gallery's `unet_segmentation` as `nox -s gallery` does, reads
it through the tool's door and prints one line of JSON.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

from workers.launch import PROJECT_ROOT
from zoo import keras_import
from zoo.data import make_batches
from zoo.keras_models import build, set_weights
from zoo.losses import EPSILON
from zoo.user_models import spec_from_document


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [sys.executable, "examples/gallery.py", scratch, "unet_segmentation"],
            cwd=PROJECT_ROOT,
            check=True,
            capture_output=True,
        )
        document, weights, _, _ = keras_import.load(
            Path(scratch) / "unet_segmentation.keras"
        )
    spec = spec_from_document("unet_segmentation", document)
    x, y = make_batches(spec, seed=0, batch_size=16, count=10)
    model = build(spec)
    set_weights(model, spec, weights)
    out = model(x[0], training=True)
    tensorflow = float(keras.losses.SparseCategoricalCrossentropy()(y[0], out))
    p = np.asarray(out, np.float64)
    true = np.take_along_axis(p, y[0][..., None].astype(np.int64), -1)[..., 0]
    clipped = float(-np.log(np.clip(true, EPSILON, 1 - EPSILON)).mean())
    print(
        json.dumps(
            {
                "below_clip": int((true < EPSILON).sum()),
                "pixels": int(true.size),
                "keras_tensorflow": tensorflow,
                "clipped": clipped,
                "exact": float(-np.log(true).mean()),
                "keras_tensorflow_off": abs(tensorflow - clipped) / clipped,
            }
        )
    )


if __name__ == "__main__":
    main()
