"""Finding 08de0aec85 (docs/results/kinds.md): the loss each of three
training steps reports on one native path, from the case's weights and
batches (seed 3, batch 1), as the equivalence check's session steps it.

``python docs/results/losses/finding_08de0aec85.py torch`` (``mxnet`` from
the MXNet environment); ``HARNESS_NATIVE_DTYPE=float64`` for the float64
run, with ``HARNESS_NATIVE_PERTURB=1`` for the perturbed one.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from workers.native_runner import NativeRunner
from zoo.data import make_batches
from zoo.user_models import spec_from_document
from zoo.weights import make_weights

# The finding's model as a [model] table, read as the tool reads one.
TABLE = Path(__file__).with_name("kl_cancelling.toml")
SEED, STEPS = 3, 3


def main(framework: str) -> None:
    spec = spec_from_document(
        "finding-08de0aec85", tomllib.loads(TABLE.read_text())["model"]
    )
    x, y = make_batches(spec, SEED, 1, STEPS)
    session = NativeRunner(framework).session(spec, make_weights(spec, SEED))
    print(framework, [repr(session.step(x[i], y[i])) for i in range(STEPS)])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch")
