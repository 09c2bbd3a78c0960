"""Typed requests and answers: everything that crosses the process boundary.

One frozen dataclass per worker task for the request and one for its answer;
the orchestrator (``workers.launch``) and the worker (``workers.serve``) both
use them, so a field has one name and one type on both sides.  On the wire a
request is one JSON object, ``{"task": <TASK>, <fields>}``; an answer is the
JSON object of its fields (fields that are ``None`` are left out).  Arrays
never travel inside JSON: they are ``.npz`` files whose paths the messages
name.

The words for counts: ``steps`` optimizer steps make one timed *run*; a worker
process times ``runs`` runs after ``warmup_runs`` untimed ones.  *Repeats*
are fresh worker processes, chosen by the orchestrator (``harness.bench.run``);
no request carries them.  A *block* (``Paired``) is one timed region of one
side of a Keras/native pair served by one process.

Standard library only: the MXNet worker (NumPy 1.23, no Keras) imports it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class Task:
    """Base of every request: its task name on the wire and its answer type."""

    TASK: ClassVar[str]
    ANSWER: ClassVar[type[Answer]]


@dataclass(frozen=True, kw_only=True)
class Request(Task):
    """What every model task needs: the model, the canonical weights file, the
    batches file (``x``/``y`` arrays of mini-batches), and a deliberate fault
    to inject (``native.faults``; native paths only).

    ``weights_digest`` and ``data_digest``, when set, are the content digests
    (``zoo.arrays.digest``) of the arrays the gate verified; the worker
    refuses to run on files that hold anything else (the weights are checked
    as loaded, before any fault is injected)."""

    model: str
    weights: str
    data: str
    fault: str | None = None
    weights_digest: str | None = None
    data_digest: str | None = None


@dataclass(frozen=True, kw_only=True)
class Answer:
    """Base of every task's answer."""


# --- equivalence tasks ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ArraysAnswer(Answer):
    arrays: str  # the .npz file the worker wrote
    error: str | None = None  # why a forward pass stopped part-way


@dataclass(frozen=True, kw_only=True)
class Evaluate(Request):
    """Logits, loss and canonical gradients of mini-batch ``batch_index``,
    written to ``out`` as ``logits``, ``loss`` and ``grad:<name>``."""

    TASK = "evaluate"
    ANSWER = ArraysAnswer
    out: str
    batch_index: int = 0


@dataclass(frozen=True, kw_only=True)
class Activations(Request):
    """Every tapped layer's output on the first mini-batch, written to ``out``."""

    TASK = "activations"
    ANSWER = ArraysAnswer
    out: str


@dataclass(frozen=True, kw_only=True)
class Trajectory(Request):
    """One optimizer step per mini-batch; the losses and the parameters after
    every step (``workers.runs.trajectory``), written to ``out``."""

    TASK = "trajectory"
    ANSWER = ArraysAnswer
    out: str


@dataclass(frozen=True, kw_only=True)
class TimedOutputs(Request):
    """What the closures the timing tasks time compute, for the gate to hold
    against what the checks computed (``harness.core.gate``).  The ``Trainer`` that
    ``train`` times runs ``steps`` steps over the first mini-batches
    (``run(steps)``); the ``Predictor`` that ``infer`` times, built from the
    untrained weights, runs one round over every mini-batch.  Written to
    ``out``: ``param:<name>`` (the trained parameters, canonical layout) and
    ``logits`` (``(batches, batch, classes)``, the round's outputs per
    mini-batch)."""

    TASK = "timed_outputs"
    ANSWER = ArraysAnswer
    out: str
    steps: int


@dataclass(frozen=True, kw_only=True)
class AccuracyAnswer(Answer):
    accuracy: list[float]  # test accuracy after every epoch


@dataclass(frozen=True, kw_only=True)
class Accuracy(Request):
    """Train on ``train_x``/``train_y`` epoch by epoch, test after each."""

    TASK = "accuracy"
    ANSWER = AccuracyAnswer


@dataclass(frozen=True, kw_only=True)
class ConvergeAnswer(Answer):
    """One entry per epoch trained: ``train_s``, the wall seconds of the
    epoch's timed training closure (the first epoch's includes compilation);
    ``accuracy`` and ``test_loss`` (mean cross-entropy) on the test split
    after it; ``train_loss``, the loss of the epoch's last mini-batch at the
    parameters it left.  ``nonfinite``: why training stopped early, when a
    loss or parameter became NaN or inf."""

    train_s: list[float]
    accuracy: list[float]
    test_loss: list[float | None]
    train_loss: list[float | None]
    nonfinite: str | None = None


@dataclass(frozen=True, kw_only=True)
class Converge(Request):
    """Train epoch by epoch with the closure the timing times (the
    ``Trainer`` over the resident mini-batches ``x``/``y``, one epoch each
    call) and test after each epoch with the ``Predictor`` on ``test_x``
    (``(batches, batch, *input)``, the last batch filled up) against
    ``test_y`` (one label per real test sample): ``workers.runs.converge``.
    Stops after ``epochs``, or at the first epoch whose accuracy reaches
    ``stop_at`` when set.  ``learning_rate``, when set, replaces the model's
    (its workload's optimizer is otherwise the one the gate checked)."""

    TASK = "converge"
    ANSWER = ConvergeAnswer
    epochs: int
    stop_at: float | None = None
    learning_rate: float | None = None


# --- timing tasks ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TrainAnswer(Answer):
    """Checked after the timing, never inside it: ``final_loss``, the mean
    cross-entropy of the last mini-batch trained at the parameters the last
    timed run left (``None`` when it is not finite: JSON has no NaN), and
    ``nonfinite``, ``None`` when the loss and every parameter are finite,
    else one sentence saying which are not."""

    first_step_s: float  # the first step alone: compilation, tracing, allocation
    step_s: list[float]  # seconds per step, one entry per timed run
    # per timed run: getrusage per step (workers.timing.USAGE)
    usage: list[dict[str, float]] | None = None
    final_loss: float | None = None
    nonfinite: str | None = None


@dataclass(frozen=True, kw_only=True)
class Train(Request):
    """Time ``runs`` runs of ``steps`` training steps after the first step and
    ``warmup_runs`` untimed runs (``workers.timing.time_training``)."""

    TASK = "train"
    ANSWER = TrainAnswer
    steps: int
    runs: int = 1
    warmup_runs: int = 0


@dataclass(frozen=True, kw_only=True)
class InferAnswer(Answer):
    """``nonfinite``: ``None`` when the outputs of the last timed round are all
    finite, else one sentence saying how many of how many are NaN or inf
    (checked after the timing)."""

    first_round_s: float  # the first round alone: compilation, tracing, allocation
    warmup_s: float  # the warm-up rounds after it
    round_s: list[float]  # seconds per round over every resident batch
    batches_per_round: int
    batches_per_s: float
    # getrusage per mini-batch over the timed window (one entry)
    usage: list[dict[str, float]] | None = None
    # single mini-batches, when the request asked for latency samples
    latency_s: list[float] | None = None
    latency_p50_s: float | None = None
    latency_p90_s: float | None = None
    latency_p99_s: float | None = None
    nonfinite: str | None = None


@dataclass(frozen=True, kw_only=True)
class Infer(Request):
    """Inference rounds over the resident batches for ``window_s`` seconds,
    after ``warmup_rounds``; then ``latency_samples`` single mini-batches."""

    TASK = "infer"
    ANSWER = InferAnswer
    window_s: float
    warmup_rounds: int
    latency_samples: int = 0


@dataclass(frozen=True, kw_only=True)
class FloorAnswer(Answer):
    path: TrainAnswer  # the native path's step
    idiomatic: TrainAnswer  # the framework's idiomatic fast step


@dataclass(frozen=True, kw_only=True)
class Floor(Request):
    """The native step and the idiomatic step, their timed runs interleaved."""

    TASK = "floor"
    ANSWER = FloorAnswer
    steps: int
    runs: int


@dataclass(frozen=True, kw_only=True)
class SelfcheckAnswer(Answer):
    harness_s: list[float]  # seconds per step by the harness' loop
    reference_s: list[float]  # by the framework's reference timer, paired
    reference_timer: str
    timer_overhead_s: float  # one timed region's own cost


@dataclass(frozen=True, kw_only=True)
class Selfcheck(Request):
    """``pairs`` adjacent timings of ``steps`` steps, harness and reference
    timer in turn (``workers.timing.time_against_reference``)."""

    TASK = "selfcheck"
    ANSWER = SelfcheckAnswer
    steps: int
    pairs: int


@dataclass(frozen=True, kw_only=True)
class PairedAnswer(Answer):
    """Both sides of a ``Paired`` request; block ``i`` of ``keras_s`` and of
    ``native_s`` were measured back to back, in the order ``keras_first[i]``
    says.  The non-finite checks and final losses are taken after all timing,
    per side, as ``TrainAnswer.final_loss``/``nonfinite`` (train) and
    ``InferAnswer.nonfinite`` (infer) are."""

    keras_first_s: float  # the Keras side's first step (train) or round (infer), alone
    native_first_s: float
    keras_s: list[float]  # per block: seconds per training step or per mini-batch
    native_s: list[float]  # same length
    keras_first: list[bool]  # per block: whether the Keras block ran first
    # per block: getrusage per step or mini-batch (workers.timing.USAGE)
    keras_usage: list[dict[str, float]] | None = None
    native_usage: list[dict[str, float]] | None = None
    keras_nonfinite: str | None = None
    native_nonfinite: str | None = None
    keras_final_loss: float | None = None  # train only
    native_final_loss: float | None = None  # train only


@dataclass(frozen=True, kw_only=True)
class Paired(Request):
    """Keras and native blocks of one model and phase, alternated in one
    process (``workers.timing.time_paired``): served by a worker started with
    a partner path (``python -m workers.serve KERAS_PATH --partner
    NATIVE_PATH``, or the other way round), one Keras and one native path of
    the same framework.

    A *block* is one timed region of one side: ``steps`` optimizer steps
    (train) or ``steps`` rounds over the resident batches (infer).  After
    each side's first step or round alone and ``warmup_runs`` untimed blocks
    of each, blocks are added side by side, which side goes first drawn from
    ``seed`` for every block, until ``window_s`` seconds of blocks (both
    sides') have passed and each side has at least ``min_blocks`` blocks, or
    ``max_blocks`` blocks.  ``slowdown``
    above 1 stretches every timed native block by that factor (a busy wait
    inside its region), so a comparison can be checked against a known
    change."""

    TASK = "paired"
    ANSWER = PairedAnswer
    phase: str  # "train" or "infer"
    steps: int
    window_s: float
    min_blocks: int = 5
    max_blocks: int = 200
    warmup_runs: int = 1
    seed: int = 0
    slowdown: float = 1.0


@dataclass(frozen=True, kw_only=True)
class LevelsAnswer(Answer):
    """Every side of a ``Levels`` request, in the worker's order of paths
    (``paths``): ``blocks_s[i][k]`` is block ``i`` of path ``k`` (seconds per
    step or per mini-batch); the sides of a block ran one after another, in
    the order ``orders[i]`` (indices into ``paths``).  ``nonfinite[k]`` and
    ``final_loss[k]`` (train only) are checked after all timing."""

    paths: list[str]
    first_s: list[float]  # each path's first step (train) or round (infer), alone
    blocks_s: list[list[float]]
    orders: list[list[int]]
    nonfinite: list[str | None]
    final_loss: list[float | None]
    # usage[i][k]: getrusage per step or mini-batch of block i of path k
    usage: list[list[dict[str, float]]] | None = None


@dataclass(frozen=True, kw_only=True)
class Levels(Request):
    """The ``Paired`` protocol for every path a worker serves (started as
    ``python -m workers.serve PATH --partner P2 --partner P3 ...``, all of one
    framework): the levels ``harness explain`` takes apart.  A block of every
    path, in an order drawn from ``seed`` anew for every block, until
    ``window_s`` and ``min_blocks``, or ``max_blocks``."""

    TASK = "levels"
    ANSWER = LevelsAnswer
    phase: str
    steps: int
    window_s: float
    min_blocks: int = 5
    max_blocks: int = 200
    warmup_runs: int = 1
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class ProfileAnswer(Answer):
    """Blocks of several served paths under their framework's own profiler
    (``workers.profiling``), in ``rounds``: a block of every path per
    round, in an order drawn anew each round, so that two paths' kernel
    times pair up as their timings do.  Per round and path (``[r][k]``,
    ``k`` indexing ``paths``), per step (train) or mini-batch (infer): the
    wall time with the profiler running (``wall_s``) and the time inside
    operator kernels (``kernel_s``).  Per path, over all rounds: every
    operator with its kernel time and calls per step (``op_*[k]``, most
    time first)."""

    paths: list[str]
    profiler: str  # which profiler, and what it counts as kernel time
    wall_s: list[list[float]]
    kernel_s: list[list[float]]
    op_names: list[list[str]]
    op_s: list[list[float]]
    op_calls: list[list[float]]
    notes: list[str | None]


@dataclass(frozen=True, kw_only=True)
class Profile(Request):
    """``rounds`` rounds of one block (as ``Levels``: ``steps`` steps or
    rounds over the batches) of every served path in ``targets``, each block
    profiled on its own, after each path's first step and ``warmup_runs``
    untimed blocks."""

    TASK = "profile"
    ANSWER = ProfileAnswer
    targets: list[str]
    phase: str
    steps: int
    rounds: int = 3
    warmup_runs: int = 1
    seed: int = 0


# --- a user's model ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ImportAnswer(Answer):
    """``document``: the model's description (``zoo.user_models``), as JSON
    text; ``weights``: the ``.npz`` of its weights in canonical layout."""

    document: str
    weights: str


@dataclass(frozen=True, kw_only=True)
class ImportModel(Task):
    """Read the user's Keras file ``file`` (``zoo.keras_import``, with
    ``safe_mode`` on; Keras paths only) and write its weights to ``out``."""

    TASK = "import_model"
    ANSWER = ImportAnswer
    file: str
    out: str
    # the steps a free-length sequence input is read with (0: the default)
    seq_len: int = 0


# --- operator tasks (``harness ops``) ------------------------------------------


@dataclass(frozen=True, kw_only=True)
class OpRequest(Task):
    """One case of one operator (``zoo.operators``): its name, its dims in the
    operator's order, the ``.npz`` file of its operands and cotangents
    (``operand:<name>``, ``cotangent:<name>``, canonical layout), and a
    deliberate fault of the operator paths (``workers.operators.FAULTS``)."""

    op: str
    dims: list[int]
    operands: str
    fault: str | None = None


@dataclass(frozen=True, kw_only=True)
class OpCheck(OpRequest):
    """One served path's results of the case, and its gradients when the
    operator has a backward pass, written to ``out`` as ``result:<name>``
    and ``grad:<operand>`` (canonical layout)."""

    TASK = "op_check"
    ANSWER = ArraysAnswer
    path: str
    out: str


@dataclass(frozen=True, kw_only=True)
class OpPreparedAnswer(Answer):
    """``first_s``: each path's first call alone (tracing, compiling,
    allocating); ``token`` names the closures kept for ``OpTime``."""

    arrays: str
    paths: list[str]
    first_s: list[float]
    token: str


@dataclass(frozen=True, kw_only=True)
class OpPrepare(OpRequest):
    """The timed closures of the case in ``direction`` (``forward``, or
    ``backward``: forward and gradients in one call) for every path in
    ``paths`` (all served by this worker): each built, called once, and its
    results written to ``out`` as ``<path>/result:<name>`` and
    ``<path>/grad:<operand>`` (canonical layout), so the orchestrator checks
    what the very closures compute before ``OpTime`` times them.  The worker
    keeps only the closures of its latest ``OpPrepare``."""

    TASK = "op_prepare"
    ANSWER = OpPreparedAnswer
    paths: list[str]
    direction: str
    out: str


@dataclass(frozen=True, kw_only=True)
class OpTimeAnswer(Answer):
    """``blocks_s[i][k]``: block ``i`` of path ``k`` (``paths``), seconds per
    call; the sides of a block ran in the order ``orders[i]``;
    ``calls_per_block`` calls each, after the sync of the last one."""

    paths: list[str]
    calls_per_block: int
    blocks_s: list[list[float]]
    orders: list[list[int]]
    nonfinite: list[str | None]


@dataclass(frozen=True, kw_only=True)
class OpTime(Task):
    """Time the closures the worker's latest ``OpPrepare`` built (``token``),
    interleaved as ``Levels`` times paths: ``warmup_blocks`` untimed blocks
    of each, then blocks of every path in an order drawn from ``seed`` anew
    for every block, until ``window_s`` and ``min_blocks``, or ``max_blocks``.
    A block is as many calls as make about ``block_s`` seconds on the slowest
    path (at least one), each call waited for (``sync``)."""

    TASK = "op_time"
    ANSWER = OpTimeAnswer
    token: str
    window_s: float
    block_s: float = 0.01
    min_blocks: int = 5
    max_blocks: int = 200
    warmup_blocks: int = 1
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class OpPeakAnswer(Answer):
    """FLOP/s of every timed repeat of ``OpPeak``."""

    path: str
    flops_per_s: list[float]


@dataclass(frozen=True, kw_only=True)
class OpPeak(Task):
    """The served ``path``'s own square GEMM of side ``size``, its result
    read back to the host after every call (a wait no framework can skip),
    called back to back for at least ``seconds`` in each of ``repeats``
    repeats after one untimed call: the dense rate this framework reaches
    here, against which ``harness ops`` measures every operator."""

    TASK = "op_peak"
    ANSWER = OpPeakAnswer
    path: str
    size: int = 4096
    seconds: float = 0.5
    repeats: int = 3


# A counting worker's environment: the built client-request library
# (``workers/callgrind_requests.c``) and the folder callgrind dumps into.
CALLGRIND_LIBRARY_ENV = "HARNESS_CALLGRIND_LIB"
CALLGRIND_OUT_ENV = "HARNESS_CALLGRIND_OUT"


@dataclass(frozen=True, kw_only=True)
class CountAnswer(Answer):
    """What ``Count`` counted: callgrind wrote one dump per label, which the
    orchestrator reads (``harness.count.callgrind``).  ``labels[i][k]``:
    block ``i`` of served path ``k`` (``paths``); ``empty``: dumps of an
    empty region, the counter's own instructions; ``loops``: iterations of
    extra work added to each block of each path (``extra_factor``; 0:
    none); ``per_block``: steps or mini-batches in a block."""

    paths: list[str]
    per_block: int
    labels: list[list[str]]
    empty: list[str]
    loops: list[int]
    nonfinite: list[str | None]


@dataclass(frozen=True, kw_only=True)
class Count(Request):
    """Instructions of the closures every served path times, in a worker
    running under callgrind (``workers.counting``): the first step and
    ``warmup_runs`` blocks uncounted, then ``blocks`` blocks of every path
    (``steps`` training steps, or ``steps`` rounds over the resident
    mini-batches), in an order drawn from ``seed``, each counted alone into
    a dump labelled ``<tag> <block> <path>``.  ``extra_path`` gets
    ``extra_factor`` times its own instructions per block: a pure-Python
    loop calibrated in the worker (a known change, for ``report --compare``
    to find)."""

    TASK = "count"
    ANSWER = CountAnswer
    phase: str
    steps: int
    blocks: int = 3
    warmup_runs: int = 1
    seed: int = 0
    tag: str = "count"
    extra_path: str | None = None
    extra_factor: float = 1.0


REQUESTS: dict[str, type[Task]] = {
    r.TASK: r
    for r in (
        Evaluate,
        Activations,
        Trajectory,
        TimedOutputs,
        Accuracy,
        Converge,
        Train,
        Infer,
        Floor,
        Selfcheck,
        Paired,
        Levels,
        Profile,
        Count,
        ImportModel,
        OpCheck,
        OpPrepare,
        OpTime,
        OpPeak,
    )
}


# --- the wire --------------------------------------------------------------------


def encode(message: Task | Answer) -> dict[str, Any]:
    """A message as a JSON-ready dict: a request with its ``task``; fields
    that are ``None`` left out."""
    fields = {k: v for k, v in dataclasses.asdict(message).items() if v is not None}
    if isinstance(message, Task):
        return {"task": message.TASK, **fields}
    return fields


def decode_request(document: Any) -> Task:
    """The request a JSON object describes; ValueError in one sentence for
    anything else."""
    if not isinstance(document, dict) or document.get("task") not in REQUESTS:
        task = document.get("task") if isinstance(document, dict) else document
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(REQUESTS)}")
    fields = {k: v for k, v in document.items() if k != "task"}
    return _build(REQUESTS[document["task"]], fields)


def decode_answer(request: Task, document: Any) -> Answer:
    """The answer to ``request`` that a JSON object describes."""
    return _build(request.ANSWER, document)


_Message = typing.TypeVar("_Message", Task, Answer)


def _build(cls: type[_Message], document: Any) -> _Message:
    """``cls`` from a dict of its fields, nested answers included; unknown,
    missing or wrongly typed fields are a ValueError naming the field."""
    name = cls.TASK if issubclass(cls, Task) else cls.__name__
    if not isinstance(document, dict):
        raise ValueError(f"{name}: expected a JSON object, got {document!r:.80}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(document) - set(known))
    if unknown:
        raise ValueError(f"{name}: unknown field {unknown[0]!r}")
    hints = typing.get_type_hints(cls)
    values = {}
    for key, raw in document.items():
        hint = hints[key]
        value = raw
        if isinstance(hint, type) and issubclass(hint, Answer):
            value = _build(hint, raw)
        elif not _fits(value, hint):
            raise ValueError(f"{name}: field {key!r} has the wrong type: {value!r:.80}")
        values[key] = value
    missing = [
        k
        for k, f in known.items()
        if k not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"{name}: missing field {missing[0]!r}")
    return cls(**values)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type (str, int, float, bool, lists
    and string-keyed objects of those, optionals of those)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin in (list, dict):
        return _fits_container(value, origin, args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _fits_container(value: Any, origin: type, args: tuple[Any, ...]) -> bool:
    """``_fits`` for ``list[T]`` and ``dict[str, T]``."""
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    return isinstance(value, dict) and all(
        isinstance(k, str) and _fits(v, args[1]) for k, v in value.items()
    )
