"""How far each path's recurrent layer, computed with the masks its cells
drew (``recurrent_dropout``), is from the float64 recomputation with those
masks (``workers.masks``): the check's tolerance is set to 0 so that its
sentence reports the distance (docs/results/kinds.md).

``python docs/results/kinds/cell_errors.py torch jax tensorflow`` (native
paths), ``KERAS_BACKEND=torch python docs/results/kinds/cell_errors.py
keras-torch`` (a Keras path; one backend per process), ``mxnet
mxnet-hybrid`` from the MXNet environment.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

from workers import cells
from zoo.data import make_batches
from zoo.user_models import spec_from_document
from zoo.weights import make_weights

TABLE = Path(__file__).with_name("recurrent_state_dropout.toml")


def runner_of(path: str) -> Any:
    if path.startswith("keras-"):
        from workers.keras_runner import KerasRunner

        return KerasRunner(path.removeprefix("keras-"))
    from workers.native_runner import NativeRunner

    return NativeRunner(path)


def main(paths: list[str]) -> None:
    cells.MASK_TOLERANCE = 0.0  # every distance is reported
    spec = spec_from_document("cells", tomllib.loads(TABLE.read_text())["model"])
    weights, (x, y) = make_weights(spec, 0), make_batches(spec, 0, 8, 1)
    for path in paths:
        try:
            runner_of(path).evaluate(spec, weights, x[0], y[0])
        except ValueError as exc:
            print(path, exc)
        else:
            print(path, "no distance reported")


if __name__ == "__main__":
    main(sys.argv[1:] or ["torch"])
