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

import json
import os
import sys
import traceback
from typing import IO, Any

from harness.paths import get_path
from harness.timing import time_inference, time_training, time_training_interleaved
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


def _weights(request: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    spec = get_spec(request["model"])
    weights = load_weights(spec, request["weights"])
    if request.get("fault"):
        from native.layout import inject_fault

        weights = inject_fault(spec, weights, request["fault"])
    return spec, weights


def handle(runner: Any, request: dict[str, Any]) -> dict[str, Any]:
    spec, weights = _weights(request)
    data = load_npz(request["data"])
    task = request["task"]
    if task == "evaluate":
        i = request.get("batch_index", 0)
        logits, loss, grads = runner.evaluate(spec, weights, data["x"][i], data["y"][i])
        arrays = {"logits": logits, "loss": loss}
        arrays.update({f"grad:{name}": g for name, g in grads.items()})
        save_npz(request["out"], arrays)
        return {"arrays": request["out"]}
    if task == "train":
        run = runner.trainer(spec, weights, data["x"], data["y"])
        return time_training(
            run,
            request["steps"],
            request["repeats"],
            request.get("warmup_repeats", 0),
        )
    if task == "floor":
        runs = {
            "path": runner.trainer(spec, weights, data["x"], data["y"]),
            "idiomatic": runner.idiomatic_trainer(spec, weights, data["x"], data["y"]),
        }
        return time_training_interleaved(runs, request["steps"], request["repeats"])
    if task == "infer":
        run_round = runner.predictor(spec, weights, data["x"])
        return time_inference(
            run_round, len(data["x"]), request["window_s"], request["warmup_rounds"]
        )
    raise ValueError(
        f"unknown task {task!r}; known tasks: evaluate, train, floor, infer"
    )


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.worker PATH_ID", file=sys.stderr)
        return 2
    # Keep the real stdout for the protocol; send fd 1 (library prints) to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        runner = load_runner(argv[0])
        platform = runner.describe()
    except Exception as exc:  # any import or start-up failure ends this worker
        _send(
            channel, {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
        )
        return 1
    _send(channel, {"status": "ready", "platform": platform})
    for line in sys.stdin:
        try:
            result = handle(runner, json.loads(line))
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
