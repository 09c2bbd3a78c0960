"""A worker: one path in one process, serving requests from the orchestrator.

Run as ``python -m workers.serve PATH_ID [--partner PATH_ID]...
[--deterministic]`` under the interpreter of the path's framework
(``workers.launch`` starts it).  With ``--partner`` one process serves two
paths of one framework, a Keras path and its native path, so that a
``Paired`` request can alternate timed blocks of both
(``workers.timing.time_paired``); with several partners, a ``Levels``
request interleaves blocks of all of them and a ``Profile`` request profiles
those it names, in alternation (``harness explain``).  Every other request goes to the
first path.  The protocol is JSON Lines: one request per line on stdin
(``workers.messages``), one reply per line on the original stdout.  Anything
the frameworks print goes to stderr instead, so it can never corrupt the
protocol.  Arrays travel as ``.npz`` files (``allow_pickle=False``) whose
paths the messages name.

The first line a worker writes is ``{"status": "ready", "platform": {...}}``
(with ``"partner_platform": {...}`` for the first partner and
``"partner_platforms": [...]`` for each of several; all hold
``cpu_affinity``, the CPUs the process may run on, ``allocator``, its
glibc allocator settings, and ``skipped_imports``, the libraries it left out:
:data:`UNUSED_IMPORTS`), or
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
import random
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from workers import launch, numerics, protocol, runs, timing
from workers import messages as m
from workers.paths import PathInfo, get_path
from workers.protocol import NativeOnly, Runner
from zoo import files, packing, user_models
from zoo.arrays import digest, load_npz, save_npz
from zoo.models import get_spec
from zoo.specs import ModelSpec, without_noise
from zoo.weights import check_weights

Data = dict[str, np.ndarray]
Weights = dict[str, np.ndarray]


def load_runner(path: PathInfo) -> Runner:
    """The runner of ``path``; this imports its framework."""
    if path.api == "keras":
        from workers.keras_runner import KerasRunner

        return KerasRunner(path.framework, path.level, path.mode)
    from workers.native_runner import NativeRunner

    # A mode path's framework runs in its mode (``native.load_framework``);
    # a default path as its ``common`` module always has.
    return NativeRunner(path.native_framework, path.mode if path.mode_path else None)


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
    (``native.faults.TIMED_FAULTS``, for any path), which only the timed
    closures take (``Tasks``), so it is not applied here.  A ``Converge``
    request's ``learning_rate``, when set, replaces the workload's."""
    spec = get_spec(request.model)
    if isinstance(request, m.Converge) and request.learning_rate is not None:
        workload = dataclasses.replace(
            spec.workload, learning_rate=request.learning_rate
        )
        spec = dataclasses.replace(spec, workload=workload)
    weights = load_npz(Path(request.weights))
    verify("weights", request.weights, weights, request.weights_digest)
    check_weights(spec, weights)
    if not request.fault:
        return spec, weights, None
    from native import faults

    if request.fault in faults.TIMED_FAULTS:  # any path's timed closures
        return spec, weights, request.fault
    if path.api != "native":
        raise ValueError(f"faults are injected into native paths, not {path.id}")
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
    primary: Served, partners: list[Served], task: str
) -> tuple[Runner, Runner]:
    """The Keras runner and the native runner of a paired worker."""
    if len(partners) != 1:
        raise ValueError(
            f"task {task!r} needs a worker started with one partner path "
            f"(python -m workers.serve {primary.path.id} --partner PATH_ID)"
        )
    partner = partners[0]
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
    closure timed is the closure checked.  ``partners``: the other paths a
    worker serves (``paired``: one; ``levels``, ``profile``: any).
    ``timed_fault``: a deliberate fault of the timed closures alone
    (``native.faults.TIMED_FAULTS``)."""

    def __init__(
        self,
        runner: Runner,
        spec: ModelSpec,
        weights: Weights,
        primary: Served | None = None,
        partners: list[Served] | None = None,
        *,
        timed_fault: str | None = None,
    ) -> None:
        self.runner, self.spec, self.weights = runner, spec, weights
        self.primary, self.partners = primary, list(partners or [])
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

    def _trainer(
        self, xs: np.ndarray, ys: np.ndarray, checked: bool = False
    ) -> protocol.Trainer:
        """The training closure every timing task times; ``checked``: the same
        closure with every dropout at rate 0, as the trajectory it is held
        against was computed (the only difference from the timed one)."""
        spec, weights, xs = self._built_from("trainer", xs)
        return self.runner.trainer(
            without_noise(spec) if checked else spec, weights, xs, ys
        )

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
        # Several outputs: each judged on its own too (``logits:<layer>``),
        # so a small output's error does not hide in a larger one's norm.
        if self.spec.several_outputs:
            arrays.update(
                (f"logits:{name}", a)
                for name, a in packing.per_output(self.spec, logits).items()
            )
            arrays.update(
                (f"loss:{name}", np.asarray(value))
                for name, value in self.runner.output_losses(
                    self.spec, logits, data["y"][i]
                ).items()
            )
        arrays.update({f"grad:{name}": g for name, g in grads.items()})
        save_npz(request.out, arrays)
        return m.ArraysAnswer(arrays=request.out)

    def activations(self, request: m.Activations, data: Data) -> m.Answer:
        taps, error = self.runner.activations(self.spec, self.weights, data["x"][0])
        save_npz(request.out, taps)
        return m.ArraysAnswer(arrays=request.out, error=error)

    def trajectory(self, request: m.Trajectory, data: Data) -> m.Answer:
        # Random drops cannot agree between paths: compared at rate 0.
        session = self.runner.session(without_noise(self.spec), self.weights)
        arrays = runs.trajectory(
            session, data["x"], data["y"], skip=self.spec.noise_trained()
        )
        save_npz(request.out, arrays)
        return m.ArraysAnswer(arrays=request.out)

    def timed_outputs(self, request: m.TimedOutputs, data: Data) -> m.Answer:
        xs, ys = data["x"], data["y"]
        train = self._trainer(xs, ys, checked=True)
        train(request.steps)
        trained = train.finish()
        predict = self._predictor(xs)
        predict()
        arrays = {f"param:{name}": a for name, a in trained.params.items()}
        arrays["logits"] = per_batch(predict.outputs(), xs.shape[:2])
        save_npz(request.out, arrays)
        return m.ArraysAnswer(arrays=request.out)

    def accuracy(self, request: m.Accuracy, data: Data) -> m.Answer:
        session = self.runner.session(without_noise(self.spec), self.weights)
        curve = runs.accuracy(
            session, data["train_x"], data["train_y"], data["test_x"], data["test_y"]
        )
        return m.AccuracyAnswer(accuracy=curve)

    def converge(self, request: m.Converge, data: Data) -> m.Answer:
        return runs.converge(
            self._trainer(data["x"], data["y"]),
            len(data["x"]),
            lambda weights: self.runner.predictor(self.spec, weights, data["test_x"]),
            data["test_y"],
            request.epochs,
            stop_at=request.stop_at,
        )

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
        keras, native = _keras_and_native(self.primary, self.partners, request.TASK)
        xs = data["x"]
        keras_run = self._closure(keras, request.phase, data)
        native_run = self._closure(native, request.phase, data)
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

    def _served(self) -> list[Served]:
        assert self.primary is not None
        return [self.primary, *self.partners]

    def _closure(
        self, runner: Runner, phase: str, data: Data
    ) -> protocol.Trainer | protocol.Predictor:
        """``runner``'s timed closure of ``phase`` on the request's model."""
        if phase == "train":
            return runner.trainer(self.spec, self.weights, data["x"], data["y"])
        if phase == "infer":
            return runner.predictor(self.spec, self.weights, data["x"])
        raise ValueError(f"unknown phase {phase!r}; known phases: train, infer")

    def levels(self, request: m.Levels, data: Data) -> m.Answer:
        served = self._served()
        runs = [self._closure(s.runner, request.phase, data) for s in served]
        measured = timing.time_interleaved(
            runs,
            request.phase,
            steps=request.steps,
            batches_per_round=len(data["x"]),
            window_s=request.window_s,
            min_blocks=request.min_blocks,
            max_blocks=request.max_blocks,
            warmup_runs=request.warmup_runs,
            seed=request.seed,
        )
        # After all timing, never inside it: did any side diverge?
        nonfinite: list[str | None] = []
        final_loss: list[float | None] = []
        for run in runs:
            if isinstance(run, protocol.Trainer):
                check = run.finish()
                nonfinite.append(check.nonfinite)
                final_loss.append(check.final_loss)
            else:
                nonfinite.append(run.nonfinite())
                final_loss.append(None)
        return m.LevelsAnswer(
            paths=[s.path.id for s in served],
            first_s=measured.first_s,
            blocks_s=measured.blocks_s,
            orders=measured.orders,
            usage=measured.usage,
            nonfinite=nonfinite,
            final_loss=final_loss,
        )

    def count(self, request: m.Count, data: Data) -> m.Answer:
        from workers import counting

        served = self._served()
        ids = [s.path.id for s in served]
        if request.extra_path is not None and request.extra_path not in ids:
            raise ValueError(
                f"extra work is added to a served path ({', '.join(ids)}), not "
                f"{request.extra_path!r:.80}"
            )
        if not 1.0 <= request.extra_factor <= 2.0:  # NaN fails too
            raise ValueError(
                f"extra work takes a factor from 1 to 2, not {request.extra_factor}"
            )
        runs = [self._closure(s.runner, request.phase, data) for s in served]
        answer = counting.count_blocks(
            runs,
            ids,
            request.phase,
            steps=request.steps,
            batches_per_round=len(data["x"]),
            blocks=request.blocks,
            warmup_runs=request.warmup_runs,
            seed=request.seed,
            tag=request.tag,
            extra=[
                request.extra_factor if i == request.extra_path else 1.0 for i in ids
            ],
        )
        # After all counting, never inside it: did any side diverge?
        nonfinite = [
            run.finish().nonfinite
            if isinstance(run, protocol.Trainer)
            else run.nonfinite()
            for run in runs
        ]
        return dataclasses.replace(answer, nonfinite=nonfinite)

    def profile(self, request: m.Profile, data: Data) -> m.Answer:
        from workers import profiling

        by_id = {s.path.id: s for s in self._served()}
        unknown = [t for t in request.targets if t not in by_id]
        if unknown or not request.targets or request.rounds < 1:
            raise ValueError(
                f"a profile request names served paths ({', '.join(by_id)}) and at "
                f"least one round, not {request.targets!r:.80} and {request.rounds}"
            )
        blocks, per_block = [], 0
        for target in request.targets:
            run = self._closure(by_id[target].runner, request.phase, data)
            first, block, per_block = timing.blocks_of(
                run, request.phase, request.steps, len(data["x"])
            )
            first()
            for _ in range(request.warmup_runs):
                block()
            blocks.append(block)
        # The environment's framework (MXNet's hybrid path is "mxnet" too).
        framework = by_id[request.targets[0]].path.framework
        rng = random.Random(request.seed)
        found: list[list[profiling.Profiled | None]] = []
        for _ in range(request.rounds):
            row: list[profiling.Profiled | None] = [None] * len(blocks)
            for k in rng.sample(range(len(blocks)), len(blocks)):
                row[k] = profiling.profile(framework, blocks[k], 1)
            found.append(row)
        return _profile_answer(request, found, per_block)


def _profile_answer(
    request: m.Profile, found: list[list[Any]], per_block: int
) -> m.ProfileAnswer:
    """The answer of ``Tasks.profile`` from its ``Profiled`` results
    (``found[round][path]``), per step or mini-batch of a block."""
    rounds = len(found)
    ops: list[tuple[list[str], list[float], list[float]]] = []
    for k in range(len(request.targets)):
        seconds: dict[str, float] = {}
        calls: dict[str, float] = {}
        for row in found:
            for op in row[k].ops:
                seconds[op.name] = seconds.get(op.name, 0.0) + op.seconds
                calls[op.name] = calls.get(op.name, 0.0) + op.calls
        names = sorted(seconds, key=lambda n: -seconds[n])
        units = per_block * rounds
        ops.append(
            (
                names,
                [seconds[n] / units for n in names],
                [calls[n] / units for n in names],
            )
        )
    return m.ProfileAnswer(
        paths=list(request.targets),
        profiler=found[0][0].profiler,
        wall_s=[[r.wall_s / per_block for r in row] for row in found],
        kernel_s=[[r.kernel_s / per_block for r in row] for row in found],
        op_names=[o[0] for o in ops],
        op_s=[o[1] for o in ops],
        op_calls=[o[2] for o in ops],
        notes=[found[0][k].note for k in range(len(request.targets))],
    )


def handle(
    runner: Runner,
    request: m.Task,
    path: PathInfo,
    partners: list[Served] | None = None,
) -> m.Answer:
    """Run one request on ``runner`` (the worker's path, ``path``); its typed
    answer.  ``partners``: the other paths the worker serves, which only
    ``Paired``, ``Levels`` and ``Profile`` requests use, and operator
    requests (``workers.operators``), which name the served path they run."""
    partners = list(partners or [])
    if isinstance(request, m.ImportModel):
        return import_model(request, path)
    if isinstance(request, m.OpRequest | m.OpTime | m.OpPeak):
        from workers import operators

        return operators.handle(request, [path, *(s.path for s in partners)])
    assert isinstance(request, m.Request)
    if isinstance(request, m.Paired):
        primary = Served(path, runner)
        _keras_and_native(primary, partners, request.TASK)  # refused before loading
    if isinstance(request, m.Paired | m.Levels | m.Profile | m.Count) and request.fault:
        raise ValueError(
            f"a {request.TASK} request times paths on the weights the gate "
            f"checked and takes no fault"
        )
    spec, weights, timed_fault = _model(request, path)
    data = load_npz(request.data)
    verify("data", request.data, data, request.data_digest)
    served = Served(path, runner)
    tasks = Tasks(runner, spec, weights, served, partners, timed_fault=timed_fault)
    task: Callable[[Any, Data], m.Answer] = getattr(tasks, request.TASK)
    return task(request, data)


def import_model(request: m.ImportModel, path: PathInfo) -> m.ImportAnswer:
    """A user's Keras file read in this Keras worker (``zoo.keras_import``:
    the architecture checked before Keras loads it, ``safe_mode`` on), and
    the reading judged by the model Keras loaded (``workers.reader_check``)."""
    if path.api != "keras":
        raise ValueError(f"a Keras file is read in a Keras worker, not {path.id}")
    import keras

    from workers import reader_check
    from zoo import keras_import
    from zoo.user_models import spec_from_document

    file = Path(request.file)
    document, weights, original, loss = keras_import.load(file, request.seq_len)
    spec = spec_from_document("user model", document)
    reader_check.judge(keras, original, spec, weights, loss)
    save_npz(Path(request.out), weights)
    return m.ImportAnswer(document=json.dumps(document), weights=request.out)


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


# A file every worker appends one JSON line to for each request it is sent,
# when set: the paths that serve it, its task, model and fault, and whether
# this worker is a reference implementation (``HARNESS_NATIVE_DTYPE``) rather
# than a path.  The test suite's table of what it exercised, through every
# worker its commands start too (``tests/touched.py``).
REQUEST_LOG_ENV = "HARNESS_REQUEST_LOG"


def log_request(request: m.Task, path: PathInfo, partners: list[Served]) -> None:
    """Append ``request`` to ``$HARNESS_REQUEST_LOG``, where that is set, in
    one ``write`` to a file opened for appending (lines of several workers
    never interleave)."""
    log = os.environ.get(REQUEST_LOG_ENV)
    if not log:
        return
    named = getattr(request, "path", None)
    if isinstance(named, str):  # an operator request names the path it runs
        served = [named]
    elif isinstance(request, m.Paired | m.Levels | m.Profile | m.Count):
        served = [path.id, *(s.path.id for s in partners)]
    else:
        served = [path.id]
    line = {
        "paths": served,
        "task": request.TASK,
        "model": getattr(request, "model", None),
        "fault": getattr(request, "fault", None),
        "reference": os.environ.get("HARNESS_NATIVE_DTYPE"),
        # where a user's model is kept (zoo.user_models), to read its layers back
        "store": str(user_models.store().absolute()),
    }
    fd = files.open_append(Path(log))
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


USAGE = (
    "usage: python -m workers.serve PATH_ID [--partner PATH_ID]... [--deterministic]"
)


def _arguments(argv: list[str]) -> tuple[str, list[str], bool] | None:
    """``(path_id, partner_ids, deterministic)`` from the command line, or
    ``None`` when it does not follow ``USAGE``."""
    if not argv or argv[0].startswith("-"):
        return None
    path_id, rest = argv[0], argv[1:]
    partners: list[str] = []
    deterministic = False
    while rest:
        if rest[0] == "--deterministic" and not deterministic:
            deterministic, rest = True, rest[1:]
        elif rest[0] == "--partner" and len(rest) > 1:
            partners.append(rest[1])
            rest = rest[2:]
        else:
            return None
    return path_id, partners, deterministic


def load_runners(path: PathInfo, partners: list[PathInfo]) -> list[Runner]:
    """The runners of a worker's path and of its partners, in that order.
    Keras runners are loaded first: Keras refuses to start once anything has
    imported it before it could choose the backend."""
    ids = [path.id, *(p.id for p in partners)]
    for partner in partners:
        if partner.framework != path.framework or ids.count(partner.id) > 1:
            raise ValueError(
                f"a worker's partner must be another path of its framework "
                f"({path.framework}), not {partner.id}"
            )
    served = [path, *partners]
    runners: dict[str, Runner] = {}
    for info in sorted(served, key=lambda p: p.api != "keras"):
        runners[info.id] = load_runner(info)
    return [runners[info.id] for info in served]


# Libraries Keras and TensorFlow import at start-up wherever they are
# installed, for integrations no worker uses: scikit-learn wrappers, pandas
# inputs, matplotlib image galleries, and JAX (through TFLite and Orbax
# checkpoints) in a worker of another framework.  Each maps to the framework
# whose workers do need it (None: none).  Keras guards each import and goes
# on without it; a worker leaves them out and starts seconds sooner (Keras
# on PyTorch: some 8 s to 4 s on a 2-core EPYC, docs/testing.md).  Nothing a
# worker computes or times touches them.  TensorFlow is never on this list:
# Keras asks ``"tensorflow" in sys.modules`` before importing it.
UNUSED_IMPORTS: dict[str, str | None] = {
    "sklearn": None,
    "pandas": None,
    "matplotlib": None,
    "jax": "jax",
}


def skip_unused_imports(framework: str) -> list[str]:
    """Make each of :data:`UNUSED_IMPORTS` that ``framework``'s workers do
    not need fail to import (a ``None`` in ``sys.modules``, which Python
    documents as "not found"), before any framework is imported; the names
    skipped, for the worker's platform record."""
    skipped = []
    for name, needed_by in UNUSED_IMPORTS.items():
        if needed_by != framework and name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]
            skipped.append(name)
    return skipped


def cpu_affinity() -> list[int]:
    """The CPUs this process may run on, sorted (all of them where the
    platform cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def allocator() -> dict[str, str]:
    """glibc's allocator settings this process started with (the
    orchestrator fixes them: ``workers.launch.ALLOCATOR_ENV``)."""
    return {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}


def main(argv: list[str]) -> int:
    arguments = _arguments(argv)
    if arguments is None:
        print(USAGE, file=sys.stderr)
        return 2
    path_id, partner_ids, deterministic = arguments
    # Keep the real stdout for the protocol; send fd 1 (library prints) to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        path = get_path(path_id)
        partner_paths = [get_path(p) for p in partner_ids]
        modes = {p.mode for p in (path, *partner_paths)}
        deterministic = numerics.deterministic_for(path.framework, modes, deterministic)
        pinned = numerics.pin_environment(path.framework, deterministic)
        skipped = skip_unused_imports(path.framework)
        runner, *partner_runners = load_runners(path, partner_paths)
        pinned.update(numerics.pin_framework(path.framework, deterministic))
        pinned.update(numerics.pin_compiler(path.framework, modes))
        # Every pool is sized for the worker's own CPU by now: where the
        # placement frees helper threads, they may use the other CPUs from here.
        launch.release_helpers()
        affinity = cpu_affinity()

        def platform_of(served: Served) -> dict[str, Any]:
            return {
                **served.runner.describe(),
                "mode": served.path.mode,
                "numerics": pinned,
                "cpu_affinity": affinity,
                "allocator": allocator(),
                "skipped_imports": skipped,
            }

        hello: dict[str, Any] = {
            "status": "ready",
            "platform": platform_of(Served(path, runner)),
        }
        partners = [
            Served(info, r)
            for info, r in zip(partner_paths, partner_runners, strict=True)
        ]
        if partners:
            hello["partner_platform"] = platform_of(partners[0])
        if len(partners) > 1:
            hello["partner_platforms"] = [platform_of(p) for p in partners]
    except Exception as exc:  # any import or start-up failure ends this worker
        _send(
            channel, {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"}
        )
        return 1
    _send(channel, hello)
    for line in sys.stdin:
        try:
            request = m.decode_request(json.loads(line))
            log_request(request, path, partners)
            answer = handle(runner, request, path, partners=partners)
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
