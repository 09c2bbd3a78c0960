"""A reproducer a Keras maintainer can run: Keras and the backend only, no
project code.

The model travels as Keras' own JSON config, made once here by a child
process that builds the project's Keras model (``zoo.keras_models``; this
orchestrator imports no framework); the script rebuilds it with
``keras.models.model_from_json``, compiles it as the harness' Keras path
does (the spec's optimizer, sparse cross-entropy on logits), warms up once
and times ``fit`` (training) or ``predict`` (inference) over fixed random
data, printing one JSON line: the Keras version, the backend and seconds
per step.  With ``--calls`` it counts instead the calls of every Keras
Python function in one loop (cProfile's call counts are deterministic),
the Python-level trace of a change in the interpreter's instructions.
"""

from __future__ import annotations

import json
import os
import subprocess

from harness.versions.overlay import Overlay
from harness.versions.signals import Cell
from workers.launch import PROJECT_ROOT

STEPS = 20  # mini-batches per timed loop
REPEATS = 7  # timed loops; the median is printed

_CONFIG = """
import json, sys
from zoo.models import get_spec
from zoo.keras_models import build
spec = get_spec(sys.argv[1])
if not spec.one_to_one:
    sys.exit("a bisect reproducer times a model of one input and one output")
model = build(spec)
w = spec.workload
print(json.dumps({
    "config": model.to_json(),
    "input_shape": list(spec.input_shape),
    "tokens": bool(spec.tokens),
    "classes": spec.classes,
    "batch": w.batch_size,
    "optimizer": w.optimizer,
    "learning_rate": w.learning_rate,
}))
"""

_SCRIPT = '''"""{model} {phase} on Keras' {backend} backend: seconds per step, with
Keras and {backend} only.  Made by zoo-bench's `harness bisect`.

    python {name}            # one JSON line: keras version, seconds per step
    python {name} --calls    # calls per Keras function in one loop (cProfile)
"""

import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "{backend}")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread, as zoo-bench times

import numpy as np  # noqa: E402
import keras  # noqa: E402

SETTINGS = json.loads(r"""{settings}""")
PHASE = "{phase}"
STEPS, REPEATS = {steps}, {repeats}

model = keras.models.model_from_json(SETTINGS["config"])
batch = SETTINGS["batch"]
rng = np.random.default_rng(0)
shape = (batch * STEPS, *SETTINGS["input_shape"])
x = (
    rng.integers(0, 50, shape).astype("int32")
    if SETTINGS["tokens"]
    else rng.standard_normal(shape).astype("float32")
)
y = rng.integers(0, SETTINGS["classes"], batch * STEPS)
optimizer = (
    keras.optimizers.SGD(SETTINGS["learning_rate"])
    if SETTINGS["optimizer"] == "sgd"
    else keras.optimizers.Adam(SETTINGS["learning_rate"])
)
model.compile(
    optimizer=optimizer,
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)


def loop():
    if PHASE == "train":
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    else:
        model.predict(x, batch_size=batch, verbose=0)


loop()  # compilation, tracing, allocation: not timed
if "--calls" in sys.argv:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    loop()
    profiler.disable()
    root = os.path.dirname(keras.__file__)
    calls = {{}}
    for (file, line, name), (_, n, *_rest) in pstats.Stats(profiler).stats.items():
        if file.startswith(root):
            calls[f"{{os.path.relpath(file, root)}}:{{name}}"] = n
    print(json.dumps({{"keras": keras.__version__, "calls": calls}}))
else:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        loop()
        times.append((time.perf_counter() - start) / STEPS)
    print(
        json.dumps(
            {{
                "keras": keras.__version__,
                "backend": keras.backend.backend(),
                "seconds_per_step": statistics.median(times),
                "each": times,
            }}
        )
    )
'''


def settings(cell: Cell, overlay: Overlay) -> dict[str, object]:
    """The model's Keras config and workload, from a child process with
    the Keras of ``overlay``: give the older release's, whose config the
    newer one reads back (3.10.0 cannot read 3.15.1's initializers)."""
    env = {**overlay.environment(), "KERAS_BACKEND": cell.framework}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(PROJECT_ROOT)])
    done = subprocess.run(
        [overlay.python, "-c", _CONFIG, cell.model],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=PROJECT_ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise ValueError(
            f"cannot write {cell.model}'s Keras config: {done.stderr.strip()[-300:]}"
        )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def script(cell: Cell, overlay: Overlay) -> str:
    """The reproducer's source for ``cell``, its model written by the Keras
    of ``overlay`` (:func:`settings`)."""
    return _SCRIPT.format(
        model=cell.model,
        phase=cell.phase,
        backend=cell.framework,
        name=f"reproduce-{cell.name}.py",
        settings=json.dumps(settings(cell, overlay)),
        steps=STEPS,
        repeats=REPEATS,
    )
