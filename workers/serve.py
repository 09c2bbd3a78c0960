"""A worker: one path in one process, serving requests from the orchestrator.

Run as ``python -m workers.serve PATH_ID [--deterministic]`` under the
interpreter of the path's framework (``workers.launch`` starts it).  The
protocol is JSON Lines: one request per line on stdin (``workers.messages``),
one reply per line on the original stdout.  Anything the frameworks print
goes to stderr instead, so it can never corrupt the protocol.  Arrays travel
as ``.npz`` files (``allow_pickle=False``) whose paths the messages name.

The first line a worker writes is ``{"status": "ready", "platform": {...}}``,
or ``{"status": "unavailable", "error": ...}`` if its framework cannot be
imported.  Each request then gets ``{"status": "ok", "result": <answer>}`` or
``{"status": "error", "error": ..., "traceback": ...}``.

A request that carries content digests (``weights_digest``, ``data_digest``)
is refused unless the files hold exactly the arrays the gate verified
(``zoo.arrays.digest``).  Timing tasks check, after their timed region, that
the run left no NaN or inf behind (``TrainAnswer.nonfinite``,
``InferAnswer.nonfinite``).

This module must run on NumPy 1.23 and without Keras (the MXNet environment).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from workers import messages as m
from workers import numerics, runs, timing
from workers.paths import PathInfo, get_path
from workers.protocol import NativeOnly, Runner
from zoo.arrays import digest, load_npz, save_npz
from zoo.specs import ModelSpec, get_spec
from zoo.weights import check_weights

Data = dict[str, np.ndarray]
Weights = dict[str, np.ndarray]


def load_runner(path: PathInfo) -> Runner:
    """The runner of ``path``; this imports its framework."""
    if path.api == "keras":
        from workers.keras_runner import KerasRunner

        return KerasRunner(path.framework)
    from workers.native_runner import NativeRunner

    return NativeRunner(path.native_framework)


def verify(what: str, file: str, arrays: Data, expected: str | None) -> None:
    """Refuse ``arrays`` (loaded from ``file``) unless their content digest is
    ``expected`` (no digest expected: nothing to check)."""
    if expected is None:
        return
    actual = digest(arrays)
    if actual != expected:
        raise ValueError(
            f"{what} file {file} holds other arrays than the gate checked (digest "
            f"{actual[:12]}, expected {expected[:12]}); delete it to have it rebuilt"
        )


def _model(request: m.Request, path: PathInfo) -> tuple[ModelSpec, Weights]:
    """The spec and weights a request runs with (the file's arrays checked
    against the request's digest as loaded), its deliberate fault (if it
    names one, for native paths only) applied."""
    spec = get_spec(request.model)
    weights = load_npz(Path(request.weights))
    verify("weights", request.weights, weights, request.weights_digest)
    check_weights(spec, weights)
    if request.fault:
        if path.api != "native":
            raise ValueError(f"faults are injected into native paths, not {path.id}")
        from native import faults

        spec, weights = faults.inject(spec, weights, request.fault)
    return spec, weights


def _native(runner: Runner, task: str) -> NativeOnly:
    if not isinstance(runner, NativeOnly):
        raise ValueError(f"task {task!r} is for native paths only")
    return runner


class Tasks:
    """One method per request type: the runner's closures, run and answered.

    The closures the timing tasks call (``runner.trainer``,
    ``runner.predictor``) are the very ones the equivalence checks exercise
    through ``evaluate`` and ``session`` on the same runner class."""

    def __init__(self, runner: Runner, spec: ModelSpec, weights: Weights) -> None:
        self.runner, self.spec, self.weights = runner, spec, weights

    def evaluate(self, request: m.Evaluate, data: Data) -> m.Answer:
        i = request.batch_index
        logits, loss, grads = self.runner.evaluate(
            self.spec, self.weights, data["x"][i], data["y"][i]
        )
        arrays = {"logits": logits, "loss": np.asarray(loss)}
        arrays.update({f"grad:{name}": g for name, g in grads.items()})
        save_npz(request.out, arrays)
        return m.ArraysAnswer(arrays=request.out)

    def activations(self, request: m.Activations, data: Data) -> m.Answer:
        taps, error = self.runner.activations(self.spec, self.weights, data["x"][0])
        save_npz(request.out, taps)
        return m.ArraysAnswer(arrays=request.out, error=error)

    def trajectory(self, request: m.Trajectory, data: Data) -> m.Answer:
        session = self.runner.session(self.spec, self.weights)
        save_npz(request.out, runs.trajectory(session, data["x"], data["y"]))
        return m.ArraysAnswer(arrays=request.out)

    def accuracy(self, request: m.Accuracy, data: Data) -> m.Answer:
        session = self.runner.session(self.spec, self.weights)
        curve = runs.accuracy(
            session, data["train_x"], data["train_y"], data["test_x"], data["test_y"]
        )
        return m.AccuracyAnswer(accuracy=curve)

    def train(self, request: m.Train, data: Data) -> m.Answer:
        run = self.runner.trainer(self.spec, self.weights, data["x"], data["y"])
        answer = timing.time_training(
            run, request.steps, request.runs, request.warmup_runs
        )
        # After the timed runs, never inside them: did training diverge?
        check = run.finish()
        return dataclasses.replace(
            answer, final_loss=check.final_loss, nonfinite=check.nonfinite
        )

    def infer(self, request: m.Infer, data: Data) -> m.Answer:
        run_round = self.runner.predictor(self.spec, self.weights, data["x"])
        answer = timing.time_inference(
            run_round, len(data["x"]), request.window_s, request.warmup_rounds
        )
        if request.latency_samples:
            # One mini-batch per call, each finished before the next starts.
            run_one = self.runner.predictor(self.spec, self.weights, data["x"][:1])
            answer = timing.with_latency(answer, run_one, request.latency_samples)
        # After all timing: the outputs of the last timed round, checked.
        return dataclasses.replace(answer, nonfinite=run_round.nonfinite())

    def floor(self, request: m.Floor, data: Data) -> m.Answer:
        native = _native(self.runner, request.TASK)
        xs, ys = data["x"], data["y"]
        path, idiomatic = timing.time_training_interleaved(
            [
                self.runner.trainer(self.spec, self.weights, xs, ys),
                native.idiomatic_trainer(self.spec, self.weights, xs, ys),
            ],
            request.steps,
            request.runs,
        )
        return m.FloorAnswer(path=path, idiomatic=idiomatic)

    def selfcheck(self, request: m.Selfcheck, data: Data) -> m.Answer:
        native = _native(self.runner, request.TASK)
        xs, ys = data["x"], data["y"]
        return timing.time_against_reference(
            self.runner.trainer(self.spec, self.weights, xs, ys),
            native.direct_trainer(self.spec, self.weights, xs, ys),
            self.runner.framework,
            request.steps,
            request.pairs,
        )


def handle(runner: Runner, request: m.Request, path: PathInfo) -> m.Answer:
    """Run one request on ``runner``; its typed answer."""
    spec, weights = _model(request, path)
    data = load_npz(request.data)
    verify("data", request.data, data, request.data_digest)
    task: Callable[[Any, Data], m.Answer] = getattr(
        Tasks(runner, spec, weights), request.TASK
    )
    return task(request, data)


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[1:] not in ([], ["--deterministic"]):
        print(
            "usage: python -m workers.serve PATH_ID [--deterministic]", file=sys.stderr
        )
        return 2
    path_id, deterministic = argv[0], argv[1:] == ["--deterministic"]
    # Keep the real stdout for the protocol; send fd 1 (library prints) to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        path = get_path(path_id)
        pinned = numerics.pin_environment(path.framework, deterministic)
        runner = load_runner(path)
        pinned.update(numerics.pin_framework(path.framework, deterministic))
        platform = {**runner.describe(), "numerics": pinned}
    except Exception as exc:  # any import or start-up failure ends this worker
        _send(
            channel, {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
        )
        return 1
    _send(channel, {"status": "ready", "platform": platform})
    for line in sys.stdin:
        try:
            answer = handle(runner, m.decode_request(json.loads(line)), path)
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
            _send(channel, {"status": "ok", "result": m.encode(answer)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
