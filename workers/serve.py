"""A worker: one path in one process, serving requests from the orchestrator.

Run as ``python -m workers.serve PATH_ID [--partner PATH_ID]
[--deterministic]`` under the interpreter of the path's framework
(``workers.launch`` starts it).  With ``--partner`` one process serves two
paths of one framework, a Keras path and its native path, so that a
``Paired`` request can alternate timed blocks of both
(``workers.timing.time_paired``); every other request goes to the first
path.  The protocol is JSON Lines: one request per line on stdin
(``workers.messages``), one reply per line on the original stdout.  Anything
the frameworks print goes to stderr instead, so it can never corrupt the
protocol.  Arrays travel as ``.npz`` files (``allow_pickle=False``) whose
paths the messages name.

The first line a worker writes is ``{"status": "ready", "platform": {...}}``
(with ``"partner_platform": {...}`` for a partner; both hold
``cpu_affinity``, the CPUs the process may run on), or
``{"status": "unavailable", "error": ...}`` if its framework cannot be
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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from workers import messages as m
from workers import numerics, protocol, runs, timing
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


def _model(request: m.Request, path: PathInfo) -> tuple[ModelSpec, Weights, str | None]:
    """The spec and weights a request runs with (the file's arrays checked
    against the request's digest as loaded), its deliberate fault (if it
    names one, for native paths only) applied, and the name of a timed fault
    (``native.faults.TIMED_FAULTS``), which only the timed closures take
    (``Tasks``), so it is not applied here."""
    spec = get_spec(request.model)
    weights = load_npz(Path(request.weights))
    verify("weights", request.weights, weights, request.weights_digest)
    check_weights(spec, weights)
    if not request.fault:
        return spec, weights, None
    if path.api != "native":
        raise ValueError(f"faults are injected into native paths, not {path.id}")
    from native import faults

    if request.fault in faults.TIMED_FAULTS:
        return spec, weights, request.fault
    spec, weights = faults.inject(spec, weights, request.fault)
    return spec, weights, None


def _native(runner: Runner, task: str) -> NativeOnly:
    if not isinstance(runner, NativeOnly):
        raise ValueError(f"task {task!r} is for native paths only")
    return runner


@dataclass(frozen=True)
class Served:
    """A path and its runner, as one worker serves it."""

    path: PathInfo
    runner: Runner


def _keras_and_native(
    primary: Served, partner: Served | None, task: str
) -> tuple[Runner, Runner]:
    """The Keras runner and the native runner of a paired worker."""
    if partner is None:
        raise ValueError(
            f"task {task!r} needs a worker started with a partner path "
            f"(python -m workers.serve {primary.path.id} --partner PATH_ID)"
        )
    by_api = {s.path.api: s.runner for s in (primary, partner)}
    if set(by_api) != {"keras", "native"}:
        raise ValueError(
            f"task {task!r} needs a Keras path and a native path, not "
            f"{primary.path.id} and {partner.path.id}"
        )
    return by_api["keras"], by_api["native"]


class Tasks:
    """One method per request type: the runner's closures, run and answered.

    The timing tasks build their closures with ``_trainer`` and
    ``_predictor`` (``runner.trainer``, ``runner.predictor``), and so does
    ``timed_outputs``, whose results the gate compares with what the
    equivalence checks computed through ``evaluate`` and ``session``: the
    closure timed is the closure checked.  ``partner``: the second path a
    paired worker serves (``paired`` only).  ``timed_fault``: a deliberate
    fault of the timed closures alone (``native.faults.TIMED_FAULTS``)."""

    def __init__(
        self,
        runner: Runner,
        spec: ModelSpec,
        weights: Weights,
        primary: Served | None = None,
        partner: Served | None = None,
        *,
        timed_fault: str | None = None,
    ) -> None:
        self.runner, self.spec, self.weights = runner, spec, weights
        self.primary, self.partner = primary, partner
        self.timed_fault = timed_fault

    def _built_from(
        self, closure: str, xs: np.ndarray
    ) -> tuple[ModelSpec, Weights, np.ndarray]:
        """What ``closure`` is built from: the request's model and data, with
        a timed fault of that closure applied (none: as they are)."""
        if self.timed_fault is None:
            return self.spec, self.weights, xs
        from native import faults

        spec, weights, xs = faults.inject_timed(
            self.spec, self.weights, xs, self.timed_fault, closure
        )
        return spec, dict(weights), xs

    def _trainer(self, xs: np.ndarray, ys: np.ndarray) -> protocol.Trainer:
        """The training closure every timing task times."""
        spec, weights, xs = self._built_from("trainer", xs)
        return self.runner.trainer(spec, weights, xs, ys)

    def _predictor(self, xs: np.ndarray) -> protocol.Predictor:
        """The inference closure every timing task times."""
        spec, weights, xs = self._built_from("predictor", xs)
        return self.runner.predictor(spec, weights, xs)

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

    def timed_outputs(self, request: m.TimedOutputs, data: Data) -> m.Answer:
        xs, ys = data["x"], data["y"]
        train = self._trainer(xs, ys)
        train(request.steps)
        trained = train.finish()
        predict = self._predictor(xs)
        predict()
        arrays = {f"param:{name}": a for name, a in trained.params.items()}
        arrays["logits"] = per_batch(predict.outputs(), xs.shape[:2])
        save_npz(request.out, arrays)
        return m.ArraysAnswer(arrays=request.out)

    def accuracy(self, request: m.Accuracy, data: Data) -> m.Answer:
        session = self.runner.session(self.spec, self.weights)
        curve = runs.accuracy(
            session, data["train_x"], data["train_y"], data["test_x"], data["test_y"]
        )
        return m.AccuracyAnswer(accuracy=curve)

    def train(self, request: m.Train, data: Data) -> m.Answer:
        run = self._trainer(data["x"], data["y"])
        answer = timing.time_training(
            run, request.steps, request.runs, request.warmup_runs
        )
        # After the timed runs, never inside them: did training diverge?
        check = run.finish()
        return dataclasses.replace(
            answer, final_loss=check.final_loss, nonfinite=check.nonfinite
        )

    def infer(self, request: m.Infer, data: Data) -> m.Answer:
        run_round = self._predictor(data["x"])
        answer = timing.time_inference(
            run_round, len(data["x"]), request.window_s, request.warmup_rounds
        )
        if request.latency_samples:
            # One mini-batch per call, each finished before the next starts.
            run_one = self._predictor(data["x"][:1])
            answer = timing.with_latency(answer, run_one, request.latency_samples)
        # After all timing: the outputs of the last timed round, checked.
        return dataclasses.replace(answer, nonfinite=run_round.nonfinite())

    def floor(self, request: m.Floor, data: Data) -> m.Answer:
        native = _native(self.runner, request.TASK)
        xs, ys = data["x"], data["y"]
        path, idiomatic = timing.time_training_interleaved(
            [
                self._trainer(xs, ys),
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
            self._trainer(xs, ys),
            native.direct_trainer(self.spec, self.weights, xs, ys),
            self.runner.framework,
            request.steps,
            request.pairs,
        )

    def paired(self, request: m.Paired, data: Data) -> m.Answer:
        assert self.primary is not None
        keras, native = _keras_and_native(self.primary, self.partner, request.TASK)
        spec, weights, xs = self.spec, self.weights, data["x"]
        keras_run: protocol.Trainer | protocol.Predictor
        native_run: protocol.Trainer | protocol.Predictor
        if request.phase == "train":
            ys = data["y"]
            keras_run = keras.trainer(spec, weights, xs, ys)
            native_run = native.trainer(spec, weights, xs, ys)
        elif request.phase == "infer":
            keras_run = keras.predictor(spec, weights, xs)
            native_run = native.predictor(spec, weights, xs)
        else:
            raise ValueError(
                f"unknown phase {request.phase!r}; known phases: train, infer"
            )
        answer = timing.time_paired(
            keras_run,
            native_run,
            request.phase,
            steps=request.steps,
            batches_per_round=len(xs),
            window_s=request.window_s,
            min_blocks=request.min_blocks,
            max_blocks=request.max_blocks,
            warmup_runs=request.warmup_runs,
            seed=request.seed,
            slowdown=request.slowdown,
        )
        # After all timing, never inside it: did either side diverge?
        if isinstance(keras_run, protocol.Trainer):
            assert isinstance(native_run, protocol.Trainer)
            k, n = keras_run.finish(), native_run.finish()
            return dataclasses.replace(
                answer,
                keras_final_loss=k.final_loss,
                native_final_loss=n.final_loss,
                keras_nonfinite=k.nonfinite,
                native_nonfinite=n.nonfinite,
            )
        assert isinstance(native_run, protocol.Predictor)
        return dataclasses.replace(
            answer,
            keras_nonfinite=keras_run.nonfinite(),
            native_nonfinite=native_run.nonfinite(),
        )


def handle(
    runner: Runner,
    request: m.Request,
    path: PathInfo,
    partner: Served | None = None,
) -> m.Answer:
    """Run one request on ``runner`` (the worker's path, ``path``); its typed
    answer.  ``partner``: the second path of a paired worker, which only
    ``Paired`` requests use."""
    if isinstance(request, m.Paired):
        primary = Served(path, runner)
        _keras_and_native(primary, partner, request.TASK)  # refused before loading
        if request.fault:
            raise ValueError(
                "a paired request times both paths on the same weights and takes "
                "no fault"
            )
    spec, weights, timed_fault = _model(request, path)
    data = load_npz(request.data)
    verify("data", request.data, data, request.data_digest)
    served = Served(path, runner)
    tasks = Tasks(runner, spec, weights, served, partner, timed_fault=timed_fault)
    task: Callable[[Any, Data], m.Answer] = getattr(tasks, request.TASK)
    return task(request, data)


def per_batch(outputs: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """A predictor's outputs (one array per mini-batch, or one for all of
    them, as Keras' ``predict`` gives) as ``(batches, batch, classes)``, for
    ``shape`` ``(batches, batch)`` of the inputs it ran on."""
    stacked = np.concatenate([np.asarray(o) for o in outputs], axis=0)
    batches, batch = shape
    if stacked.shape[0] != batches * batch:
        raise ValueError(
            f"the predictor gave {stacked.shape[0]} outputs for {batches} "
            f"mini-batches of {batch}"
        )
    return stacked.reshape(batches, batch, *stacked.shape[1:])


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


USAGE = "usage: python -m workers.serve PATH_ID [--partner PATH_ID] [--deterministic]"


def _arguments(argv: list[str]) -> tuple[str, str | None, bool] | None:
    """``(path_id, partner_id, deterministic)`` from the command line, or
    ``None`` when it does not follow ``USAGE``."""
    if not argv or argv[0].startswith("-"):
        return None
    path_id, rest = argv[0], argv[1:]
    partner, deterministic = None, False
    while rest:
        if rest[0] == "--deterministic" and not deterministic:
            deterministic, rest = True, rest[1:]
        elif rest[0] == "--partner" and partner is None and len(rest) > 1:
            partner, rest = rest[1], rest[2:]
        else:
            return None
    return path_id, partner, deterministic


def load_runners(
    path: PathInfo, partner: PathInfo | None
) -> tuple[Runner, Runner | None]:
    """The runners of a worker's path and of its partner (``None``: none).
    The Keras runner is loaded first: it refuses to start once anything has
    imported Keras before it could choose the backend."""
    if partner is None:
        return load_runner(path), None
    if partner.framework != path.framework or partner.id == path.id:
        raise ValueError(
            f"a worker's partner must be another path of its framework "
            f"({path.framework}), not {partner.id}"
        )
    if partner.api == "keras":
        partner_runner = load_runner(partner)
        return load_runner(path), partner_runner
    runner = load_runner(path)
    return runner, load_runner(partner)


def cpu_affinity() -> list[int]:
    """The CPUs this process may run on, sorted (all of them where the
    platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def main(argv: list[str]) -> int:
    arguments = _arguments(argv)
    if arguments is None:
        print(USAGE, file=sys.stderr)
        return 2
    path_id, partner_id, deterministic = arguments
    # Keep the real stdout for the protocol; send fd 1 (library prints) to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        path = get_path(path_id)
        partner_path = None if partner_id is None else get_path(partner_id)
        pinned = numerics.pin_environment(path.framework, deterministic)
        runner, partner_runner = load_runners(path, partner_path)
        pinned.update(numerics.pin_framework(path.framework, deterministic))
        affinity = cpu_affinity()
        platform = {**runner.describe(), "numerics": pinned, "cpu_affinity": affinity}
        hello: dict[str, Any] = {"status": "ready", "platform": platform}
        partner = None
        if partner_path is not None and partner_runner is not None:
            partner = Served(partner_path, partner_runner)
            hello["partner_platform"] = {
                **partner_runner.describe(),
                "numerics": pinned,
                "cpu_affinity": affinity,
            }
    except Exception as exc:  # any import or start-up failure ends this worker
        _send(
            channel, {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
        )
        return 1
    _send(channel, hello)
    for line in sys.stdin:
        try:
            answer = handle(
                runner, m.decode_request(json.loads(line)), path, partner=partner
            )
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
