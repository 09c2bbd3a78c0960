"""The timing loops every path is measured with, inside its worker.

Callers hand in closures that do the work *and wait for it* (a value read back,
``block_until_ready``, ``synchronize``): a loop here never measures dispatch
alone as long as that contract holds.  Each loop returns its task's typed
answer (``workers.messages``).

Counts: a *run* is ``steps`` training steps timed as one region; one process
times ``runs`` of them after ``warmup_runs`` untimed ones.  Fresh processes
(*repeats*) are the orchestrator's business.

``time_paired`` alternates blocks of a Keras path and its native path in one
process, which goes first drawn at random for every block.

Around every timed region, outside it, ``getrusage`` of the whole process
(every thread): user and system CPU seconds, page faults and context switches
per step or mini-batch (``USAGE``), so that a record says how much of its wall
time was the process' own work, the kernel's, or waiting; and ``ready_s``,
the time the timing thread itself spent ready to run but waiting for a CPU
(Linux' schedstat): a helper thread of the framework, or any other process,
holding the CPU the computation needs (docs/methodology.md, "Helper threads").

Framework-free except the self-check's reference timers, which import their
framework lazily.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import resource
import time
from collections.abc import Callable, Sequence

from workers.messages import (
    InferAnswer,
    PairedAnswer,
    SelfcheckAnswer,
    TrainAnswer,
)
from zoo import files

# The clock every loop here reads.  Tests put a fake one in its place
# (``monkeypatch.setattr(workers.timing, "clock", fake)``) whose time moves only
# when their stand-in work says so, and assert on exact results.
clock: Callable[[], float] = time.perf_counter

# getrusage's fields a record keeps: CPU seconds in user and kernel mode, minor
# and major page faults, voluntary (waiting) and involuntary (preempted)
# context switches.
USAGE = {
    "user_s": "ru_utime",
    "sys_s": "ru_stime",
    "minflt": "ru_minflt",
    "majflt": "ru_majflt",
    "nvcsw": "ru_nvcsw",
    "nivcsw": "ru_nivcsw",
}


# Where Linux keeps this thread's scheduler times: nanoseconds on a CPU, then
# nanoseconds runnable but waiting for one, then the number of time slices.
SCHEDSTAT = "/proc/thread-self/schedstat"


def ready_wait_s() -> float:
    """Seconds the calling thread has spent ready to run but waiting for a
    CPU since it started; NaN where the kernel does not say."""
    try:
        return int(files.read_text(SCHEDSTAT, 4096).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return math.nan


def _rusage() -> tuple[float, ...]:
    got = resource.getrusage(resource.RUSAGE_SELF)
    return (*(float(getattr(got, name)) for name in USAGE.values()), ready_wait_s())


def _usage_per(before: tuple[float, ...], units: int) -> dict[str, float]:
    """The process' use since ``before`` (``_rusage()``), per step or
    mini-batch of the ``units`` the region held, the timing thread's wait
    for a CPU (``ready_s``, left out where the kernel does not say), and
    ``units`` itself (a region's own length is then its time per unit times
    ``units``: what bounds how exactly its CPU time is known)."""
    after = _rusage()
    keys = (*USAGE, "ready_s")
    out = {key: (a - b) / units for key, a, b in zip(keys, after, before, strict=True)}
    if not math.isfinite(out["ready_s"]):
        del out["ready_s"]
    out["units"] = float(units)
    return out


def time_training(
    run: Callable[[int], None], steps: int, runs: int, warmup_runs: int = 0
) -> TrainAnswer:
    """First step alone (compilation, tracing, allocation), ``warmup_runs``
    untimed runs of ``steps`` steps, then ``runs`` timed runs of ``steps``
    steady-state steps each, as seconds per step."""
    start = clock()
    run(1)
    first = clock() - start
    for _ in range(warmup_runs):
        run(steps)
    per_step, usage = [], []
    for _ in range(runs):
        before = _rusage()
        start = clock()
        run(steps)
        per_step.append((clock() - start) / steps)
        usage.append(_usage_per(before, steps))
    return TrainAnswer(first_step_s=first, step_s=per_step, usage=usage)


def time_training_interleaved(
    variants: Sequence[Callable[[int], None]], steps: int, runs: int
) -> list[TrainAnswer]:
    """``time_training`` for several variants of one step, their runs taken in
    turn (A, B, A, B ...) so that drift on a shared machine hits all alike."""
    first: list[float] = []
    per_step: list[list[float]] = [[] for _ in variants]
    usage: list[list[dict[str, float]]] = [[] for _ in variants]
    for run in variants:
        start = clock()
        run(1)
        first.append(clock() - start)
    for _ in range(runs):
        for times, used, run in zip(per_step, usage, variants, strict=True):
            before = _rusage()
            start = clock()
            run(steps)
            times.append((clock() - start) / steps)
            used.append(_usage_per(before, steps))
    return [
        TrainAnswer(first_step_s=f, step_s=s, usage=u)
        for f, s, u in zip(first, per_step, usage, strict=True)
    ]


def time_inference(
    run: Callable[[], None], batches_per_round: int, window_s: float, warmup_rounds: int
) -> InferAnswer:
    """Rounds over the resident batches until ``window_s`` has passed (at least
    one round), after the first round alone (compiling, tracing, allocating:
    ``first_round_s``) and ``warmup_rounds`` untimed rounds."""
    start = clock()
    run()
    first = clock() - start
    start = clock()
    for _ in range(warmup_rounds):
        run()
    warmup = clock() - start
    rounds: list[float] = []
    before = _rusage()
    window_start = clock()
    while True:
        start = clock()
        run()
        rounds.append(clock() - start)
        if clock() - window_start >= window_s:
            break
    elapsed = clock() - window_start
    # one reading over the whole window, so no round pays for a system call
    usage = _usage_per(before, len(rounds) * batches_per_round)
    return InferAnswer(
        first_round_s=first,
        warmup_s=warmup,
        round_s=rounds,
        batches_per_round=batches_per_round,
        batches_per_s=len(rounds) * batches_per_round / elapsed,
        usage=[usage],
    )


def time_latency(run: Callable[[], None], samples: int, warmup: int = 1) -> list[float]:
    """``samples`` timings of ``run`` (one mini-batch, finished on return),
    after ``warmup`` untimed calls."""
    if samples < 1:
        raise ValueError("latency needs at least one sample")
    for _ in range(warmup):
        run()
    times = []
    for _ in range(samples):
        start = clock()
        run()
        times.append(clock() - start)
    return times


def with_latency(
    answer: InferAnswer, run: Callable[[], None], samples: int
) -> InferAnswer:
    """``answer`` with ``samples`` latencies of single mini-batches and their
    50th, 90th and 99th percentiles (nearest rank: the value of an actual
    call, never an interpolation)."""
    times = time_latency(run, samples)
    ordered = sorted(times)
    return dataclasses.replace(
        answer,
        latency_s=times,
        latency_p50_s=_nearest_rank(ordered, 50),
        latency_p90_s=_nearest_rank(ordered, 90),
        latency_p99_s=_nearest_rank(ordered, 99),
    )


def _nearest_rank(ordered: list[float], q: int) -> float:
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# --- the self-check: the harness' loop against the framework's own timer ------


def timer_overhead_s(iterations: int = 100_000) -> float:
    """Seconds one timed region costs beyond its work (the minimum over five
    batches of ``iterations``, so interruptions do not count)."""

    def nothing() -> None:
        return None

    best = float("inf")
    for _ in range(5):
        start = clock()
        for _ in range(iterations):
            t0 = clock()
            nothing()
            _ = clock() - t0
        best = min(best, (clock() - start) / iterations)
    return best


def _reference_torch(direct: Callable[[int], None], steps: int) -> float:
    import torch
    from torch.utils import benchmark

    # Timer runs single-threaded unless told otherwise; the harness does not.
    timer = benchmark.Timer(
        stmt="direct(1)",
        globals={"direct": direct},
        num_threads=torch.get_num_threads(),
    )
    return float(timer.blocked_autorange(min_run_time=0.5).median)


def _reference_jax(direct: Callable[[int], None], steps: int) -> float:
    # ``direct(n)`` dispatches n steps and ends in ``jax.block_until_ready``.
    start = clock()
    direct(steps)
    return (clock() - start) / steps


REFERENCES = {"torch": _reference_torch, "jax": _reference_jax}
TIMERS = {
    "torch": "torch.utils.benchmark.Timer.blocked_autorange",
    "jax": "explicit loop ending in block_until_ready",
}


def time_against_reference(
    run: Callable[[int], None],
    direct: Callable[[int], None],
    framework: str,
    steps: int,
    pairs: int,
) -> SelfcheckAnswer:
    """Seconds per step by the harness (``run``, its training closure) and by
    the framework's reference timer around ``direct`` (the framework's own
    train step called in a plain loop, no harness code), in ``pairs``
    adjacent pairs, which of the two goes first alternating; and the timer's
    own overhead."""
    if framework not in REFERENCES:
        raise ValueError(
            f"no reference timer for {framework}; known: {', '.join(REFERENCES)}"
        )
    # Both warm up alike (XLA on CPU keeps speeding up for a few steps after
    # compiling).
    for _ in range(3):
        run(steps)
        direct(steps)
    reference_timer = REFERENCES[framework]
    harness, reference = [], []
    for i in range(pairs):
        if i % 2:
            reference.append(reference_timer(direct, steps))
        harness += time_training(run, steps, 1).step_s
        if not i % 2:
            reference.append(reference_timer(direct, steps))
    return SelfcheckAnswer(
        harness_s=harness,
        reference_s=reference,
        reference_timer=TIMERS[framework],
        timer_overhead_s=timer_overhead_s(),
    )


# --- paired blocks: a Keras path and its native path in one process -------------


PHASES = ("train", "infer")


def _check_paired(
    phase: str,
    *,
    steps: int,
    batches_per_round: int,
    window_s: float,
    min_blocks: int,
    max_blocks: int,
    warmup_runs: int,
    slowdown: float,
) -> None:
    """ValueError in one sentence for settings ``time_paired`` cannot honour."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; known phases: {', '.join(PHASES)}")
    if steps < 1 or batches_per_round < 1:
        raise ValueError(
            f"a block needs at least one step and one batch, got steps={steps} "
            f"and batches_per_round={batches_per_round}"
        )
    if not 1 <= min_blocks <= max_blocks:
        raise ValueError(
            f"blocks must satisfy 1 <= min_blocks <= max_blocks, got "
            f"min_blocks={min_blocks} and max_blocks={max_blocks}"
        )
    if warmup_runs < 0 or not window_s >= 0:
        raise ValueError(
            f"warmup_runs and window_s must not be negative, got {warmup_runs} "
            f"and {window_s}"
        )
    if not (math.isfinite(slowdown) and slowdown >= 1.0):
        raise ValueError(f"slowdown must be a finite factor >= 1, got {slowdown}")


def _order(rng: random.Random, sides: int) -> list[int]:
    """The order the sides of one block go in, drawn at random."""
    if sides == 2:  # one draw, as the paired protocol has always drawn it
        return [0, 1] if rng.random() < 0.5 else [1, 0]
    order = list(range(sides))
    rng.shuffle(order)
    return order


def _timed(block: Callable[[], object], stretch: float = 1.0) -> float:
    """Seconds ``block`` takes (it finishes its work before returning), and
    with ``stretch`` above 1 that many times as long: a busy wait after the
    work, inside the same timed region."""
    start = clock()
    block()
    if stretch > 1.0:
        until = start + stretch * (clock() - start)
        while clock() < until:
            pass
    return clock() - start


def blocks_of(
    run: Callable[..., object], phase: str, steps: int, batches_per_round: int
) -> tuple[Callable[[], object], Callable[[], object], int]:
    """A timed closure's first step (``run(1)``) or first round (``run()``),
    one block (``run(steps)``, or ``steps`` rounds), and how many steps or
    mini-batches a block holds."""
    if phase == "train":
        return functools.partial(run, 1), functools.partial(run, steps), steps

    def rounds() -> None:
        for _ in range(steps):
            run()

    return run, rounds, steps * batches_per_round


@dataclasses.dataclass(frozen=True)
class Interleaved:
    """What ``time_interleaved`` measured, per side in the order given:
    ``first_s`` the first step or round alone; ``blocks_s[i][k]`` block
    ``i`` of side ``k`` (per step or per mini-batch); ``orders[i]`` the
    order the sides of block ``i`` ran in; ``usage[i][k]`` the process'
    ``getrusage`` over block ``i`` of side ``k``, per step or mini-batch."""

    first_s: list[float]
    blocks_s: list[list[float]]
    orders: list[list[int]]
    usage: list[list[dict[str, float]]]


def time_interleaved(
    runs: Sequence[Callable[..., object]],
    phase: str,
    *,
    steps: int,
    batches_per_round: int,
    window_s: float,
    min_blocks: int,
    max_blocks: int,
    warmup_runs: int,
    seed: int,
    stretch: Sequence[float] | None = None,
) -> Interleaved:
    """Blocks of several closures of one model and phase, interleaved in one
    process: the protocol of ``time_paired`` for any number of sides (the
    levels of ``harness explain``).  A block of every side, in an order
    drawn anew each time, then the next, until at least ``min_blocks`` of
    every side are done and they have taken ``window_s`` seconds together,
    or ``max_blocks`` are done.  ``stretch[k]`` above 1 stretches side
    ``k``'s timed blocks (not its first step) by that factor.  One side
    alone is timed in the same blocks (an operator MXNet alone runs)."""
    factors = list(stretch or [1.0] * len(runs))
    if not runs or len(factors) != len(runs):
        raise ValueError(
            f"interleaving needs one or more sides and one stretch per side, got "
            f"{len(runs)} sides and {len(factors)} stretches"
        )
    for factor in factors:
        _check_paired(
            phase,
            steps=steps,
            batches_per_round=batches_per_round,
            window_s=window_s,
            min_blocks=min_blocks,
            max_blocks=max_blocks,
            warmup_runs=warmup_runs,
            slowdown=factor,
        )
    rng = random.Random(seed)
    made = [blocks_of(run, phase, steps, batches_per_round) for run in runs]
    per_block = made[0][2]

    first = [0.0] * len(runs)
    for k in _order(rng, len(runs)):
        first[k] = _timed(made[k][0])
    blocks = [block for _, block, _ in made]
    for _ in range(warmup_runs):
        for k in _order(rng, len(runs)):
            blocks[k]()
    times: list[list[float]] = []
    orders: list[list[int]] = []
    usage: list[list[dict[str, float]]] = []
    total = 0.0
    while len(times) < max_blocks and (len(times) < min_blocks or total < window_s):
        order = _order(rng, len(runs))
        row = [0.0] * len(runs)
        used: list[dict[str, float]] = [{} for _ in runs]
        for k in order:
            before = _rusage()
            row[k] = _timed(blocks[k], factors[k])
            used[k] = _usage_per(before, per_block)
        total += sum(row)
        times.append([t / per_block for t in row])
        orders.append(order)
        usage.append(used)
    return Interleaved(first_s=first, blocks_s=times, orders=orders, usage=usage)


def time_paired(
    keras_run: Callable[..., object],
    native_run: Callable[..., object],
    phase: str,
    *,
    steps: int,
    batches_per_round: int,
    window_s: float,
    min_blocks: int,
    max_blocks: int,
    warmup_runs: int,
    seed: int,
    slowdown: float = 1.0,
) -> PairedAnswer:
    """Keras and native blocks of one model and phase, alternated in one
    process (``workers.messages.Paired``).

    ``keras_run``/``native_run``: the runners' ``Trainer`` (``run(n)``:
    ``n`` steps, finished on return) for ``phase`` ``train``, their
    ``Predictor`` (``run()``: one round over ``batches_per_round`` resident
    batches, finished on return) for ``infer``.  A block is ``run(steps)``,
    or ``steps`` calls of ``run()``; its time is reported per step, or per
    mini-batch (block seconds / (``steps`` * ``batches_per_round``)).

    First each side's first step (``run(1)``) or first round alone, timed, in
    an order drawn at random; then ``warmup_runs`` untimed blocks of each;
    then blocks of both sides, which goes first drawn anew for every block
    (``random.Random(seed)``, so a seed gives the same orders), until at least
    ``min_blocks`` blocks of each side are done and the blocks have taken
    ``window_s`` seconds together, or ``max_blocks`` are done.  ``slowdown``
    above 1 stretches every timed native block (not the first step) by that
    factor with a busy wait inside its timed region."""
    measured = time_interleaved(
        [keras_run, native_run],
        phase,
        steps=steps,
        batches_per_round=batches_per_round,
        window_s=window_s,
        min_blocks=min_blocks,
        max_blocks=max_blocks,
        warmup_runs=warmup_runs,
        seed=seed,
        stretch=[1.0, slowdown],
    )
    return PairedAnswer(
        keras_first_s=measured.first_s[0],
        native_first_s=measured.first_s[1],
        keras_s=[row[0] for row in measured.blocks_s],
        native_s=[row[1] for row in measured.blocks_s],
        keras_first=[order[0] == 0 for order in measured.orders],
        keras_usage=[row[0] for row in measured.usage],
        native_usage=[row[1] for row in measured.usage],
    )
