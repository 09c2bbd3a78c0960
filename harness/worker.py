"""A worker: one path in one process, serving requests from the orchestrator.

Run as ``python -m harness.worker PATH_ID`` under the interpreter of the path's
framework.  The protocol is JSON Lines: one request per line on stdin, one
response per line on the original stdout.  Anything the frameworks print goes
to stderr instead, so it can never corrupt the protocol.  Arrays travel as
``.npz`` files (``allow_pickle=False``) whose paths the requests name.

The first line a worker writes is ``{"status": "ready", "platform": {...}}``,
or ``{"status": "unavailable", "error": ...}`` if its framework cannot be
imported.  Each request then gets ``{"status": "ok", "result": {...}}`` or
``{"status": "error", "error": ..., "traceback": ...}``.

This module must run on NumPy 1.23 and without Keras (the MXNet environment).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import IO, Any

from equivalence import runs
from harness import numerics
from harness.paths import get_path
from harness.timing import (
    time_inference,
    time_latency,
    time_training,
    time_training_interleaved,
)
from zoo.arrays import load_npz, save_npz
from zoo.specs import get_spec
from zoo.weights import load_weights


def load_runner(path_id: str) -> Any:
    path = get_path(path_id)
    if path.api == "keras":
        from zoo.keras_path import KerasRunner

        return KerasRunner(path.framework)
    from native.runner import NativeRunner

    return NativeRunner(path.native_framework)


def _model(request: dict[str, Any], path_id: str) -> tuple[Any, dict[str, Any]]:
    """The spec and weights a request runs with, its deliberate fault (if it
    names one, for native paths only) applied."""
    spec = get_spec(request["model"])
    weights = load_weights(spec, request["weights"])
    fault = request.get("fault")
    if fault:
        path = get_path(path_id)
        if path.api != "native":
            raise ValueError(f"faults are injected into native paths, not {path.id}")
        from native import faults

        # Registers the framework's faulty optimizers under their fault names.
        importlib.import_module(f"native.{path.framework}.faults")
        spec, weights = faults.inject(spec, weights, fault)
    return spec, weights


Data = dict[str, Any]


def _evaluate(runner: Any, spec: Any, weights: Data, data: Data, request: Data) -> Data:
    i = request.get("batch_index", 0)
    logits, loss, grads = runner.evaluate(spec, weights, data["x"][i], data["y"][i])
    arrays = {"logits": logits, "loss": loss}
    arrays.update({f"grad:{name}": g for name, g in grads.items()})
    save_npz(request["out"], arrays)
    return {"arrays": request["out"]}


def _activations(
    runner: Any, spec: Any, weights: Data, data: Data, request: Data
) -> Data:
    taps, error = runner.activations(spec, weights, data["x"][0])
    save_npz(request["out"], taps)
    return {"arrays": request["out"], "error": error}


def _trajectory(
    runner: Any, spec: Any, weights: Data, data: Data, request: Data
) -> Data:
    session = runner.session(spec, weights)
    save_npz(request["out"], runs.trajectory(session, data["x"], data["y"]))
    return {"arrays": request["out"]}


def _accuracy(runner: Any, spec: Any, weights: Data, data: Data, request: Data) -> Data:
    session = runner.session(spec, weights)
    curve = runs.accuracy(
        session, data["train_x"], data["train_y"], data["test_x"], data["test_y"]
    )
    return {"accuracy": curve}


def _train(runner: Any, spec: Any, weights: Data, data: Data, request: Data) -> Data:
    run = runner.trainer(spec, weights, data["x"], data["y"])
    return time_training(
        run, request["steps"], request["repeats"], request.get("warmup_repeats", 0)
    )


def _floor(runner: Any, spec: Any, weights: Data, data: Data, request: Data) -> Data:
    both = {
        "path": runner.trainer(spec, weights, data["x"], data["y"]),
        "idiomatic": runner.idiomatic_trainer(spec, weights, data["x"], data["y"]),
    }
    return time_training_interleaved(both, request["steps"], request["repeats"])


def _infer(runner: Any, spec: Any, weights: Data, data: Data, request: Data) -> Data:
    run_round = runner.predictor(spec, weights, data["x"])
    result = time_inference(
        run_round, len(data["x"]), request["window_s"], request["warmup_rounds"]
    )
    if request.get("latency_samples"):
        # One mini-batch per call, each finished before the next starts.
        run_one = runner.predictor(spec, weights, data["x"][:1])
        result |= time_latency(run_one, request["latency_samples"])
    return result


def _selfcheck(
    runner: Any, spec: Any, weights: Data, data: Data, request: Data
) -> Data:
    from harness.selfcheck import measure

    run = runner.trainer(spec, weights, data["x"], data["y"])
    return measure(run, runner.direct_trainer(spec, weights, data), runner.framework)


TASKS = {
    "evaluate": _evaluate,
    "activations": _activations,
    "trajectory": _trajectory,
    "accuracy": _accuracy,
    "train": _train,
    "floor": _floor,
    "infer": _infer,
    "selfcheck": _selfcheck,
}


def handle(runner: Any, request: Data, path_id: str) -> Data:
    task = request["task"]
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}")
    spec, weights = _model(request, path_id)
    return TASKS[task](runner, spec, weights, load_npz(request["data"]), request)


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[1:] not in ([], ["--deterministic"]):
        print(
            "usage: python -m harness.worker PATH_ID [--deterministic]", file=sys.stderr
        )
        return 2
    path_id, deterministic = argv[0], argv[1:] == ["--deterministic"]
    # Keep the real stdout for the protocol; send fd 1 (library prints) to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        framework = get_path(path_id).framework
        pinned = numerics.pin_environment(framework, deterministic)
        runner = load_runner(path_id)
        pinned.update(numerics.pin_framework(framework, deterministic))
        platform = {**runner.describe(), "numerics": pinned}
    except Exception as exc:  # any import or start-up failure ends this worker
        _send(
            channel, {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
        )
        return 1
    _send(channel, {"status": "ready", "platform": platform})
    for line in sys.stdin:
        try:
            result = handle(runner, json.loads(line), path_id)
        except Exception as exc:
            _send(
                channel,
                {
                    "status": "error",
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(),
                },
            )
        else:
            _send(channel, {"status": "ok", "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
