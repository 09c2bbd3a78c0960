"""Native TensorFlow's graphs traced with autograph and without are the
same (docs/testing.md, issue 81): for every zoo model (VGG16 narrow for
VGG16 and its kin), the gradient, inference and train-step functions of
``native.tensorflow.common`` traced both ways, each traced function's and
library function's operations counted by type, compared.  Prints one line a
model, ``same`` or ``differ``, and exits 1 on any difference::

    python docs/results/autograph_graphs.py            # every model
    python docs/results/autograph_graphs.py ffn,lstm   # these
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from native.tensorflow import common
from workers.native_runner import NativeRunner
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.specs import MODELS, VARIANTS
from zoo.weights import make_weights

Counts = list[tuple[tuple[str, int], ...]]
FUNCTION = tf.function


def _traced(model: str, autograph: bool) -> Counts:
    """The operation counts of every function ``model``'s evaluation and two
    training steps trace, sorted."""
    made: list[Any] = []

    def function(fn: Callable[..., Any], **options: Any) -> Any:
        made.append(FUNCTION(fn, **{**options, "autograph": autograph}))
        return made[-1]

    common.tf.function = function  # type: ignore[attr-defined]
    for cached in (common.grads_function, common.apply_function, common.step_function):
        cached.cache_clear()
    spec, runner = get_spec(model), NativeRunner("tensorflow")
    weights = make_weights(spec, 0)
    x, y = make_batches(spec, 0, 4, 2)
    runner.evaluate(spec, weights, x[0], y[0])
    trainer = runner.trainer(spec, weights, x, y)
    trainer(2)
    trainer.finish()
    counts = []
    for traced in made:
        for concrete in traced._list_all_concrete_functions():
            graph = concrete.graph.as_graph_def()
            nodes = [graph.node, *(f.node_def for f in graph.library.function)]
            counts += [collections.Counter(n.op for n in ns) for ns in nodes]
    return sorted(tuple(sorted(c.items())) for c in counts)


def main(argv: list[str]) -> int:
    models = (
        argv[0].split(",")
        if argv
        else [m for m in (*MODELS, *VARIANTS) if m not in ("vgg16", "vgg-rysia")]
    )
    differ = 0
    for model in models:
        on, off = _traced(model, True), _traced(model, False)
        ops = sum(n for c in off for _, n in c)
        print(
            f"{model}: {len(off)} functions, {ops} operations, "
            f"{'same' if on == off else 'differ'}"
        )
        differ += on != off
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
