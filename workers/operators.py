"""Operator tasks inside a worker: one operator case, checked, then timed.

A worker serving ``keras-<b>`` and ``native-<b>`` runs an operator of
``zoo.operators`` two ways: through ``keras.ops`` (``zoo.keras_operators``)
and through the framework's own operators (``native.<b>.operators``).  Both
get their operands as the framework's tensors, made before any timing, in
their module's ``LAYOUT``; both differentiate with the framework's autodiff
(``native.<b>.operators.backward``), so the two closures differ only in the
operator calls.

- ``op_check`` (``messages.OpCheck``): one path's results and gradients of
  one case, for the equivalence checks against the float64 reference.
- ``op_prepare`` builds the timed closures of one case for several paths,
  calls each once and writes what it computed, so the orchestrator checks
  the very closures it then times (``op_time``), in the same process.
- ``op_time`` times the prepared closures in interleaved blocks
  (``workers.timing.time_interleaved``): one call is the operator (forward,
  or forward and backward), waited for (``sync``); a block is as many calls
  as fill about ``block_s`` on the slowest path.

``zoo.operators.FAULTS``: deliberate operator faults that the checks must
catch, injected here into the native paths a request names (a Keras path is
never faulted).  Imports
frameworks lazily; NumPy 1.23-safe (the MXNet worker serves it too).
"""

from __future__ import annotations

import functools
import importlib
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from native.layout import operand_to_canonical, operand_to_native
from workers import messages as m
from workers import timing
from workers.paths import OPERATOR_PATHS, PathInfo
from zoo.arrays import load_npz, save_npz
from zoo.operators import DIRECTIONS, FAULTS, Attributes, Case


def modules(path: PathInfo) -> tuple[ModuleType, ModuleType]:
    """``(implementation, support)`` of an operator path: the module whose
    functions compute the operators, and the framework's operator module
    that converts, differentiates and waits."""
    if path.id not in OPERATOR_PATHS:
        raise ValueError(
            f"{path.id} is not an operator path; known: {', '.join(OPERATOR_PATHS)}"
        )
    support = importlib.import_module(f"native.{path.framework}.operators")
    if path.api == "keras":
        return importlib.import_module("zoo.keras_operators"), support
    return support, support


# --- faults ----------------------------------------------------------------------


def _bfloat16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even)."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def _swap_z_r(a: np.ndarray) -> np.ndarray:
    """GRU gate blocks z and r exchanged along the last axis."""
    z, r, h = np.split(a, 3, axis=-1)
    return np.ascontiguousarray(np.concatenate([r, z, h], axis=-1))


def faulted(
    fault: str | None,
    case: Case,
    operands: dict[str, np.ndarray],
    attributes: Attributes,
) -> tuple[dict[str, np.ndarray], Attributes]:
    """The operands and attributes a path computes with under ``fault``."""
    if fault is None:
        return operands, attributes
    if fault not in FAULTS:
        raise ValueError(
            f"unknown operator fault {fault!r}; known: {', '.join(FAULTS)}"
        )
    operands, attributes = dict(operands), dict(attributes)
    if fault == "gemm-transposed" and case.op in ("matmul", "dense"):
        operands["w"] = np.ascontiguousarray(operands["w"].T)
    elif fault == "conv-padding" and case.op in ("conv2d", "conv1d"):
        attributes["padding"] = "valid" if attributes["padding"] == "same" else "same"
    elif fault == "layer-norm-epsilon" and case.op == "layer_norm":
        attributes["epsilon"] = 1e-5
    elif fault == "batch-norm-unbiased-variance" and case.op == "batch_norm":
        # gamma (x - mean) / sqrt(var n / (n - 1) + eps), the unbiased
        # variance's, is the biased normalization with gamma sqrt((n - 1) / n)
        # and eps (n - 1) / n: the same y, and so the same gradients of x and
        # beta (gamma's is the scaled gamma's)
        kept = (case.named["rows"] - 1) / case.named["rows"]
        operands["gamma"] = operands["gamma"] * np.float32(math.sqrt(kept))
        attributes["epsilon"] = float(attributes["epsilon"]) * kept
    elif fault == "attention-unscaled" and case.op == "attention":
        # softmax((q sqrt(d)) k^T / sqrt(d)) is the unscaled softmax(q k^T)
        scale = np.float32(math.sqrt(case.named["key_dim"]))
        operands["q"] = operands["q"] * scale
    elif fault == "gru-gate-order" and case.op == "gru_cell":
        for name in ("kernel", "recurrent_kernel", "bias"):
            operands[name] = _swap_z_r(operands[name])
    elif fault == "inputs-bfloat16":
        operands = {
            k: _bfloat16(a) if a.dtype == np.float32 else a for k, a in operands.items()
        }
    return operands, attributes


# --- closures ----------------------------------------------------------------------


@dataclass
class Closure:
    """One path's timed call of one case: ``call()`` runs the operator (and
    its gradients, backward), waits, and returns ``(results, grads)`` as
    framework tensors; ``arrays`` turns them into canonical NumPy arrays."""

    path: str
    call: Callable[[], tuple[list[Any], list[Any]]]
    arrays: Callable[[tuple[list[Any], list[Any]]], dict[str, np.ndarray]]


def build(
    path: PathInfo,
    case: Case,
    direction: str,
    operands: dict[str, np.ndarray],
    cotangents: dict[str, np.ndarray],
    *,
    fault: str | None = None,
) -> Closure:
    """``path``'s closure for ``case`` in ``direction``, its operands already
    converted to the framework's tensors."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; known: forward, backward")
    implementation, support = modules(path)
    operator, dims = case.operator, case.named
    if direction == "backward" and not operator.has_backward:
        raise ValueError(f"{case.op} has no backward pass")
    operands, attributes = faulted(
        fault if path.api == "native" else None,
        case,
        operands,
        dict(operator.attributes(dims)),
    )
    layout = implementation.LAYOUT
    inputs, outputs = operator.inputs(dims), operator.outputs(dims)
    tensors = [
        support.to_tensor(operand_to_native(operands[o.name], o.role, layout))
        for o in inputs
    ]
    fn = functools.partial(getattr(implementation, operator.name), **attributes)
    # the operands the call differentiates (none: a forward call)
    wrt = [i for i, o in enumerate(inputs) if o.name in operator.wrt]
    differentiated = wrt if direction == "backward" else []

    def forward() -> tuple[list[Any], list[Any]]:
        out = fn(*tensors)
        results = list(out) if isinstance(out, tuple | list) else [out]
        support.sync(results)
        return results, []

    call = forward
    if direction == "backward":
        step = support.backward(
            fn,
            tensors,
            wrt,
            [
                support.to_tensor(operand_to_native(cotangents[o.name], o.role, layout))
                for o in outputs
            ],
        )

        def both() -> tuple[list[Any], list[Any]]:
            results, grads = step()
            support.sync([*results, *grads])
            return list(results), list(grads)

        call = both

    def arrays(done: tuple[list[Any], list[Any]]) -> dict[str, np.ndarray]:
        results, grads = done
        # reshaped: MXNet has no 0-d arrays and returns the loss as (1,)
        found = {
            f"result:{o.name}": operand_to_canonical(
                support.to_numpy(t), o.role, layout
            ).reshape(o.shape)
            for o, t in zip(outputs, results, strict=True)
        }
        found.update(
            {
                f"grad:{inputs[i].name}": operand_to_canonical(
                    support.to_numpy(g), inputs[i].role, layout
                )
                for i, g in zip(differentiated, grads, strict=True)
            }
        )
        return found

    return Closure(path.id, call, arrays)


def _case(
    request: m.OpRequest,
) -> tuple[Case, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The request's case, operands and cotangents."""
    case = Case(request.op, tuple(request.dims), "request")
    case.named  # noqa: B018 (raises for dims that do not fit the operator)
    stored = load_npz(request.operands)
    operands = {
        o.name: stored[f"operand:{o.name}"] for o in case.operator.inputs(case.named)
    }
    cotangents = {
        o.name: stored[f"cotangent:{o.name}"]
        for o in case.operator.outputs(case.named)
        if f"cotangent:{o.name}" in stored
    }
    return case, operands, cotangents


# --- tasks -------------------------------------------------------------------------


@dataclass
class _Prepared:
    token: str
    closures: list[Closure]


_latest: list[_Prepared] = []  # the closures of the latest op_prepare only


def check(request: m.OpCheck, served: dict[str, PathInfo]) -> m.ArraysAnswer:
    case, operands, cotangents = _case(request)
    direction = "backward" if case.operator.has_backward else "forward"
    closure = build(
        _served(served, request.path),
        case,
        direction,
        operands,
        cotangents,
        fault=request.fault,
    )
    save_npz(request.out, closure.arrays(closure.call()))
    return m.ArraysAnswer(arrays=request.out)


def prepare(request: m.OpPrepare, served: dict[str, PathInfo]) -> m.OpPreparedAnswer:
    case, operands, cotangents = _case(request)
    _latest.clear()  # free the previous case's tensors before making these
    closures = [
        build(
            _served(served, p),
            case,
            request.direction,
            operands,
            cotangents,
            fault=request.fault,
        )
        for p in request.paths
    ]
    first, arrays = [], {}
    for closure in closures:
        start = time.perf_counter()
        done = closure.call()
        first.append(time.perf_counter() - start)
        arrays.update(
            {f"{closure.path}/{k}": a for k, a in closure.arrays(done).items()}
        )
    save_npz(request.out, arrays)
    token = uuid.uuid4().hex
    _latest.append(_Prepared(token, closures))
    return m.OpPreparedAnswer(
        arrays=request.out, paths=list(request.paths), first_s=first, token=token
    )


def time_prepared(request: m.OpTime) -> m.OpTimeAnswer:
    if not _latest or _latest[0].token != request.token:
        raise ValueError(
            "op_time names closures this worker's latest op_prepare did not build"
        )
    prepared = _latest[0]
    calls = [c.call for c in prepared.closures]
    per_call = []
    for call in calls:  # one more untimed call each, to size the blocks
        start = time.perf_counter()
        call()
        per_call.append(time.perf_counter() - start)
    block = max(1, math.ceil(request.block_s / max(*per_call, 1e-9)))

    def calls_of(call: Callable[[], object]) -> Callable[[int], None]:
        def run(blocks: int) -> None:
            for _ in range(blocks * block):
                call()

        return run

    measured = timing.time_interleaved(
        [calls_of(c) for c in calls],
        "train",
        steps=1,
        batches_per_round=1,
        window_s=request.window_s,
        min_blocks=request.min_blocks,
        max_blocks=request.max_blocks,
        warmup_runs=request.warmup_blocks,
        seed=request.seed,
    )
    # After all timing: did the last call of each leave anything non-finite?
    nonfinite = [_nonfinite(c.arrays(c.call())) for c in prepared.closures]
    return m.OpTimeAnswer(
        paths=[c.path for c in prepared.closures],
        calls_per_block=block,
        blocks_s=[[t / block for t in row] for row in measured.blocks_s],
        orders=measured.orders,
        nonfinite=nonfinite,
    )


def peak(request: m.OpPeak, served: dict[str, PathInfo]) -> m.OpPeakAnswer:
    """``OpPeak``: the path's square GEMM, each call's result read back."""
    n = request.size
    case = Case("matmul", (n, n, n), f"square-{n}")
    rng = np.random.default_rng(0)
    operands = {
        name: rng.standard_normal((n, n), dtype=np.float32) for name in ("x", "w")
    }
    closure = build(_served(served, request.path), case, "forward", operands, {})
    closure.arrays(closure.call())  # untimed: allocation, thread pools
    rates = []
    for _ in range(request.repeats):
        calls, start = 0, time.perf_counter()
        while True:
            closure.arrays(closure.call())  # the copy to the host waits for it
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= request.seconds:
                break
        rates.append(case.operator.flops(case.named) * calls / elapsed)
    return m.OpPeakAnswer(path=request.path, flops_per_s=rates)


def _nonfinite(arrays: dict[str, np.ndarray]) -> str | None:
    bad = [k for k, a in arrays.items() if not np.isfinite(a).all()]
    return f"non-finite values in {', '.join(bad)}" if bad else None


def _served(served: dict[str, PathInfo], path: str) -> PathInfo:
    if path not in served:
        raise ValueError(
            f"this worker serves {', '.join(served)}, not {path}; start it with "
            f"that path or --partner {path}"
        )
    return served[path]


def handle(request: m.Task, served: Sequence[PathInfo]) -> m.Answer:
    """Answer an operator request with the paths this worker serves."""
    by_id = {p.id: p for p in served}
    if isinstance(request, m.OpCheck):
        return check(request, by_id)
    if isinstance(request, m.OpPrepare):
        return prepare(request, by_id)
    if isinstance(request, m.OpTime):
        return time_prepared(request)
    if isinstance(request, m.OpPeak):
        return peak(request, by_id)
    raise ValueError(f"{request.TASK} is not an operator task")
