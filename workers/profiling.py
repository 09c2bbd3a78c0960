"""How much of a unit of work runs inside operator kernels, by each framework's
own profiler.

``profile(framework, block, blocks)`` calls ``block`` once unprofiled (tracing,
compilation, allocation), then ``blocks`` times with the framework's profiler
running, timed as one region by ``perf_counter``: that is ``wall_s``.  The
profiler's operator times over the same region are ``kernel_s``; the rest of
the wall clock went to Python, dispatch and the framework's own bookkeeping.
``block`` must wait for its work (read a value back, ``block_until_ready``,
``waitall``), as the timing loops' closures do (``workers.timing``).

What counts as kernel time differs by framework, because each profiler sees
different events:

* **torch** (``torch.autograd.profiler``, without Kineto): the self CPU time of every
  operator event (``aten::mm``, ``aten::relu`` ...), reported in microseconds.
  Self time leaves out the operators an operator calls (``aten::matmul``
  calling ``aten::mm``), so nothing is counted twice; ``record_function``
  ranges are the caller's annotations, not operators, and are left out.  A
  composite operator's self time is its own dispatch work, which the profiler
  cannot tell from computing.  On a GPU this is launch time, not kernel time.
* **jax** (``jax.profiler.trace``, parsed with ``jax.profiler.ProfileData``):
  XLA:CPU runs a compiled program as a sequence of thunks, one per HLO
  instruction left after fusion, and traces each one on the thread that ran
  it (a PjRt client thread, or the Python thread for small programs), with
  an ``hlo_op`` stat naming the instruction.  Those events of the
  ``/host:CPU`` plane are the kernels, named by the instruction with its
  instance suffix dropped (``dot.12`` -> ``dot``).  Fusions hide what they
  fused: XLA:CPU runs matrix products in YNNPACK fusions, ``ynn_fusion``.
  Control-flow thunks (``while``) contain the thunks of their bodies; a
  nested thunk owns its time, the enclosing one keeps only the rest.
* **tensorflow** (``tf.profiler.experimental``, the XSpace it writes parsed
  with ``jax.profiler.ProfileData``, installed alongside): the graph
  executor traces every op kernel it runs as ``node_name:OpType`` on the
  thread that ran it; kernels are named by op type (``_MklMatMul``, ``Relu``)
  since node names differ between programs.  Ops of a ``tf.function`` are
  seen this way; an XLA-compiled one (``jit_compile=True``) shows its XLA:CPU
  thunks, read as for jax (the HLO instructions are named after the graph's
  nodes, so ``MatMul_1.3`` -> ``MatMul``), and its function-call event, whose
  own time (the launch) is not a kernel.  An eager op runs as a single-op function whose
  kernel TensorFlow does not trace, so the nearest event, the whole kernel
  run (``KernelAndDeviceFunc::Run`` under an ``EagerExecute`` of that op),
  stands in for it: an upper bound, and the result's note says so.  At the
  default host tracer level (``ProfilerOptions`` are not applied by this
  TensorFlow version) the executor does not trace ops it deems cheap
  (``Shape``, ``Identity``); their time counts as outside kernels.
* **mxnet** (``mx.profiler`` with aggregate statistics): the total time of
  every entry of the ``operator`` domain, as the engine's worker threads ran
  them (milliseconds, per the dump's own unit), except the engine's
  bookkeeping entries (``DeleteVariable`` frees an array, ``WaitForVar``
  wakes a waiting caller).

For jax and tensorflow, kernel events on several threads at once would count
the same wall time more than once: there the time with ``k`` kernels running
is split evenly among them, so ``kernel_s`` is the time with any kernel
running, and the note says how much ran concurrently.  Profilers whose totals
are summed (torch, mxnet) may exceed the wall clock with concurrent
operators; ``kernel_s`` is then clipped to ``wall_s`` and the note says so.

Framework-free at import (standard library only): every framework, and
``jax.profiler`` for the XSpace files, is imported inside the function that
profiles with it, so every worker environment can import this module.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class OpTime:
    """One operator's kernel time and number of runs over all profiled blocks."""

    name: str
    seconds: float
    calls: int


@dataclass(frozen=True)
class Profiled:
    """Wall-clock time of the profiled blocks and the part inside kernels."""

    wall_s: float
    kernel_s: float
    ops: list[OpTime]
    profiler: str
    note: str | None = None


PROFILERS: tuple[str, ...] = ("torch", "jax", "tensorflow", "mxnet")

# An HLO instruction's instance suffix: ``fusion.3``, ``dot.12``.
_HLO_SUFFIX = re.compile(r"\.\d+$")
# TensorFlow's uniquifying suffix of node names, which its XLA bridge gives to
# the HLO instructions it emits: ``MatMul_1``.
_TF_NODE_SUFFIX = re.compile(r"_\d+$")
# The graph executor's kernel events: ``node/name:OpType``.
_TF_OP_EVENT = re.compile(r"^[^\s:]+:(?P<type>[A-Za-z_]\w*)$")
# Events that run an eager op's kernel, under its ``EagerExecute`` event.
_TF_EAGER_RUNS = frozenset({"KernelAndDeviceFunc::Run", "KernelAndDeviceOp::Run"})
# The MXNet engine's own entries in the ``operator`` domain.
_MXNET_ENGINE_OPS = frozenset({"DeleteVariable", "WaitForVar"})
_SECONDS_PER = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def profile(framework: str, block: Callable[[], object], blocks: int) -> Profiled:
    """Run ``block`` (one unit of work that finishes its work before it returns:
    it already syncs) ``blocks`` times under ``framework``'s own profiler."""
    if framework not in PROFILERS:
        raise ValueError(
            f"unknown framework {framework!r}: the known ones are "
            f"{', '.join(PROFILERS)}"
        )
    if blocks < 1:
        raise ValueError(f"blocks must be at least 1, not {blocks}")
    block()  # warm-up: tracing and compilation stay out of the profile
    return _PROFILE[framework](block, blocks)


def _timed(block: Callable[[], object], blocks: int) -> float:
    start = time.perf_counter()
    for _ in range(blocks):
        block()
    return time.perf_counter() - start


def _result(
    wall_s: float,
    seconds: Mapping[str, float],
    calls: Mapping[str, int],
    profiler: str,
    notes: list[str],
) -> Profiled:
    """The ``Profiled`` of per-operator times, ``kernel_s`` clipped to the wall."""
    ops = sorted(
        (OpTime(name, seconds.get(name, 0.0), count) for name, count in calls.items()),
        key=lambda op: (-op.seconds, op.name),
    )
    kernel_s = sum(op.seconds for op in ops)
    if kernel_s > wall_s:
        notes.append(
            f"the profiler's operator times add up to {kernel_s:.6g} s, more than "
            f"the {wall_s:.6g} s of wall clock (operators ran concurrently); "
            "kernel_s is clipped to the wall clock"
        )
        kernel_s = wall_s
    return Profiled(wall_s, kernel_s, ops, profiler, "; ".join(notes) or None)


# ---------------------------------------------------------------- torch


def _profile_torch(block: Callable[[], object], blocks: int) -> Profiled:
    from torch.autograd import profiler

    # The autograd profiler without Kineto: torch.profiler (Kineto) took
    # 8 GB more with every session profiling Keras' LSTM at batch 64, so a
    # few sessions in one worker ran this 24 GB machine out of memory; this
    # one stays at the first session's peak (8.8 GB there).
    with profiler.profile(use_cpu=True, use_kineto=False) as prof:
        wall_s = _timed(block, blocks)
    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for average in prof.key_averages():
        if average.is_user_annotation:
            continue
        seconds[average.key] = average.self_cpu_time_total * 1e-6  # microseconds
        calls[average.key] = average.count
    return _result(
        wall_s,
        seconds,
        calls,
        "torch.autograd.profiler (self CPU time of operator events)",
        [],
    )


# ---------------------------------------------------------- XSpace files


@dataclass(frozen=True)
class _Event:
    """One traced event of a profiler's XSpace, times in nanoseconds."""

    name: str
    start_ns: float
    end_ns: float
    stats: dict[str, Any]


@dataclass(frozen=True)
class _Span:
    """A kernel's run on one thread, times in nanoseconds."""

    name: str
    start_ns: float
    end_ns: float
    thread: int


def _host_lines(logdir: str) -> tuple[list[list[_Event]], list[str]]:
    """The events of every thread of the ``/host:CPU`` plane of the one XSpace
    under ``logdir``, and the names of the device planes, which are not read."""
    from jax.profiler import ProfileData

    files = sorted(Path(logdir).rglob("*.xplane.pb"))
    if len(files) != 1:
        raise RuntimeError(f"expected one .xplane.pb under {logdir}, found {files}")
    data = ProfileData.from_file(str(files[0]))
    lines: list[list[_Event]] = []
    devices: list[str] = []
    for plane in data.planes:
        if plane.name.startswith("/device:"):
            devices.append(plane.name)
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            lines.append(
                [
                    _Event(e.name, e.start_ns, e.end_ns, dict(e.stats))
                    for e in line.events
                ]
            )
    return lines, devices


def _nested(events: Sequence[_Event]) -> Iterator[tuple[_Event, list[_Event]]]:
    """Every event of one thread with the events enclosing it, outermost first."""
    enclosing: list[_Event] = []
    for event in sorted(events, key=lambda e: (e.start_ns, -e.end_ns)):
        while enclosing and enclosing[-1].end_ns <= event.start_ns:
            enclosing.pop()
        yield event, list(enclosing)
        if event.end_ns > event.start_ns:
            enclosing.append(event)


def _attribute(spans: Sequence[_Span]) -> tuple[dict[str, float], float]:
    """Seconds per kernel name, and the seconds when several threads ran one.

    On each thread the innermost running span owns the time; while ``k``
    threads run one each, each of the ``k`` gets ``1/k`` of the time, so the
    seconds add up to the time with any kernel running."""
    points: list[tuple[float, int, float, int]] = []
    for index, span in enumerate(spans):
        if span.end_ns > span.start_ns:
            # At one instant ends (0) come before starts (1), outer starts first.
            points.append((span.start_ns, 1, -span.end_ns, index))
            points.append((span.end_ns, 0, 0.0, index))
    points.sort()
    running: dict[int, list[int]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    concurrent_ns = 0.0
    previous = points[0][0] if points else 0.0
    for instant, is_start, _, index in points:
        owners = [stack[-1] for stack in running.values() if stack]
        if owners and instant > previous:
            share_s = (instant - previous) * 1e-9 / len(owners)
            for owner in owners:
                seconds[spans[owner].name] += share_s
            if len(owners) > 1:
                concurrent_ns += instant - previous
        previous = instant
        stack = running[spans[index].thread]
        if is_start:
            stack.append(index)
        else:
            stack.remove(index)
    return dict(seconds), concurrent_ns * 1e-9


def _hlo_name(event: _Event) -> str | None:
    """The HLO instruction an XLA:CPU thunk event ran, without instance suffix."""
    op = event.stats.get("hlo_op")
    return None if op is None else _HLO_SUFFIX.sub("", str(op))


def _xspace_result(
    wall_s: float,
    spans: list[_Span],
    devices: list[str],
    profiler: str,
    notes: list[str],
) -> Profiled:
    """``Profiled`` of the kernel spans read from an XSpace."""
    seconds, concurrent_s = _attribute(spans)
    if concurrent_s > 0:
        notes.append(
            f"kernels ran on several threads at once for {concurrent_s:.6g} s; "
            "that time is split evenly among them"
        )
    if devices:
        notes.append(
            f"device planes ({', '.join(devices)}) are not read: only host "
            "kernels count"
        )
    calls = Counter(span.name for span in spans)
    return _result(wall_s, seconds, calls, profiler, notes)


# ------------------------------------------------------------------ jax


def _profile_jax(block: Callable[[], object], blocks: int) -> Profiled:
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0  # Python tracing would slow the block
    with tempfile.TemporaryDirectory() as logdir:
        jax.profiler.start_trace(logdir, profiler_options=options)
        try:
            wall_s = _timed(block, blocks)
        finally:
            jax.profiler.stop_trace()
        lines, devices = _host_lines(logdir)
    spans: list[_Span] = []
    thunks_per_run: Counter[object] = Counter()
    for thread, events in enumerate(lines):
        for event in events:
            name = _hlo_name(event)
            if name is not None:
                spans.append(_Span(name, event.start_ns, event.end_ns, thread))
                thunks_per_run[event.stats.get("run_id")] += 1
    notes: list[str] = []
    if thunks_per_run and set(thunks_per_run.values()) == {1}:
        notes.append(
            "XLA:CPU ran every program as a single thunk, so its time is not "
            "split among the operations fused into it"
        )
    if any(span.name == "ynn_fusion" for span in spans):
        notes.append(
            "ynn_fusion is XLA:CPU's YNNPACK fusion: matrix products, possibly "
            "with elementwise work fused in"
        )
    return _xspace_result(
        wall_s,
        spans,
        devices,
        "jax.profiler (XLA:CPU thunk events, innermost)",
        notes,
    )


# ----------------------------------------------------------- tensorflow


def _tf_kernel(event: _Event, enclosing: list[_Event]) -> tuple[str, bool] | None:
    """The kernel name of a TensorFlow host event and whether it stands in for
    an eager op's untraced kernel, or ``None`` when the event is no kernel."""
    hlo = _hlo_name(event)
    if hlo is not None:
        return _TF_NODE_SUFFIX.sub("", hlo), False
    match = _TF_OP_EVENT.match(event.name)
    if match is not None:
        op_type = match["type"]
        # A function called as an op (``__inference_f_21``): its own time is
        # the call's runtime; the kernels it runs have events of their own.
        return None if op_type.startswith("__") else (op_type, False)
    if event.name in _TF_EAGER_RUNS:
        execute = next(
            (e for e in reversed(enclosing) if e.name == "EagerExecute"), None
        )
        if execute is not None and execute.stats.get("is_func") == 0:
            return str(execute.stats.get("eager_op", "eager op")), True
    return None


def _profile_tensorflow(block: Callable[[], object], blocks: int) -> Profiled:
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            wall_s = _timed(block, blocks)
        finally:
            tf.profiler.experimental.stop()
        lines, devices = _host_lines(logdir)
    spans: list[_Span] = []
    eager: Counter[str] = Counter()
    for thread, events in enumerate(lines):
        for event, enclosing in _nested(events):
            kernel = _tf_kernel(event, enclosing)
            if kernel is not None:
                name, stand_in = kernel
                spans.append(_Span(name, event.start_ns, event.end_ns, thread))
                eager[name] += stand_in
    eager_runs = sum(eager.values())
    notes = (
        [
            f"{eager_runs} eager op runs ({', '.join(sorted(+eager))}) have no "
            "kernel event; the whole kernel run of each, single-op function "
            "runtime included, counts as its kernel time"
        ]
        if eager_runs
        else []
    )
    return _xspace_result(
        wall_s,
        spans,
        devices,
        "tf.profiler (op kernel and XLA:CPU thunk events, innermost)",
        notes,
    )


# ---------------------------------------------------------------- mxnet


def _profile_mxnet(block: Callable[[], object], blocks: int) -> Profiled:
    import mxnet as mx

    profiler = "mx.profiler (aggregate operator time)"
    with tempfile.TemporaryDirectory() as logdir:
        mx.profiler.set_config(
            profile_symbolic=True,
            profile_imperative=True,
            profile_memory=False,
            profile_api=False,
            aggregate_stats=True,
            filename=str(Path(logdir) / "profile.json"),
        )
        mx.profiler.dumps(reset=True)  # statistics of any earlier session
        mx.profiler.set_state("run")
        try:
            wall_s = _timed(block, blocks)
        finally:
            mx.profiler.set_state("stop")
        stats = json.loads(mx.profiler.dumps(reset=True, format="json"))
    unit = stats.get("Unit", {}).get("Time", "ms")
    operators = stats.get("Time", {}).get("operator")
    if not operators or unit not in _SECONDS_PER:
        why = (
            "no operator domain"
            if not operators
            else f"times in an unknown unit {unit!r}"
        )
        return Profiled(wall_s, 0.0, [], profiler, f"MXNet's profiler reported {why}")
    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    engine_s = 0.0
    for name, entry in operators.items():
        total_s = float(entry["Total"]) * _SECONDS_PER[unit]
        if name in _MXNET_ENGINE_OPS:
            engine_s += total_s
            continue
        seconds[name], calls[name] = total_s, int(entry["Count"])
    notes = (
        [f"the engine's bookkeeping ({engine_s:.6g} s) is not counted"]
        if engine_s
        else []
    )
    return _result(wall_s, seconds, calls, profiler, notes)


_PROFILE: dict[str, Callable[[Callable[[], object], int], Profiled]] = {
    "torch": _profile_torch,
    "jax": _profile_jax,
    "tensorflow": _profile_tensorflow,
    "mxnet": _profile_mxnet,
}
