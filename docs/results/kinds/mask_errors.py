"""How far each path's layers that draw masks inside their blocks (a
recurrent layer's ``dropout`` and ``recurrent_dropout``, an attention's
``dropout``), computed with the masks they drew, are from the float64
recomputation with those masks (``workers.masks``): the check's tolerance
is set to 0 so that its sentence reports the first layer's distance
(docs/results/kinds.md).

``python docs/results/kinds/mask_errors.py TABLE torch jax tensorflow``
(native paths; ``TABLE`` a ``[model]`` file of this folder, as
``recurrent_state_dropout.toml``), ``KERAS_BACKEND=torch python
docs/results/kinds/mask_errors.py TABLE keras-torch`` (a Keras path; one
backend per process), ``mxnet mxnet-hybrid`` from the MXNet environment.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

from workers import masks
from zoo.data import make_batches
from zoo.user_models import spec_from_document
from zoo.weights import make_weights


def runner_of(path: str) -> Any:
    if path.startswith("keras-"):
        from workers.keras_runner import KerasRunner

        return KerasRunner(path.removeprefix("keras-"))
    from workers.native_runner import NativeRunner

    return NativeRunner(path)


def main(table: str, paths: list[str]) -> None:
    masks.MASK_TOLERANCE = 0.0  # every distance is reported
    text = Path(__file__).with_name(table).read_text()
    spec = spec_from_document("masks", tomllib.loads(text)["model"])
    weights, (x, y) = make_weights(spec, 0), make_batches(spec, 0, 8, 1)
    for path in paths:
        try:
            runner_of(path).evaluate(spec, weights, x[0], y[0])
        except ValueError as exc:
            print(path, exc)
        else:
            print(path, "no distance reported")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["torch"])
