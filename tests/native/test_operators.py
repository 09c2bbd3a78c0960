"""Every native operator module in process: its surface, its numbers against
the float64 reference, and the operator faults caught.

Parametrized over the frameworks (one not installed is skipped with its
reason; the MXNet environment runs this file too).  The closures are the
ones a worker times (``workers.operators.build``), judged as ``harness ops``
judges them (``equivalence.operators.judge_case``: against float64, within
the multiple of a float32 NumPy computation's own error).  The Keras path
needs a backend chosen per process, so it is checked through workers
(``tests/paths/test_operators.py``).
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

from equivalence.op_reference import backward, forward
from equivalence.reference import judge
from native import layout
from workers.operators import build
from workers.paths import get_path
from zoo.operators import FAULTS, OPERATORS, Case, make_operands

FRAMEWORKS = ("jax", "tensorflow", "torch", "mxnet")
# Small cases at the edges the issue names: batch 1, odd spatial sizes,
# channel counts that are not multiples of 8, both paddings, scales.
CASES = (
    Case("matmul", (1, 7, 5), "batch-1"),
    Case("matmul", (13, 13, 13), "square"),
    Case("dense", (3, 9, 5), "small"),
    Case("conv2d", (1, 9, 7, 3, 5, 3, 1), "same"),
    Case("conv2d", (2, 8, 11, 5, 13, 5, 0), "valid"),
    Case("avg_pool", (2, 7, 9, 5, 2), "odd"),
    Case("max_pool", (1, 9, 8, 3, 3), "window-3"),
    Case("relu", (3, 17), "small"),
    Case("sigmoid", (3, 17), "small"),
    Case("tanh", (3, 17), "small"),
    Case("lstm_cell", (1, 7, 5), "batch-1"),
    Case("softmax_cross_entropy", (5, 3), "small"),
    Case("adam", (37, 3), "step-3"),
    Case("conv1d", (2, 11, 5, 7, 3, 1), "same"),
    Case("conv1d", (1, 9, 3, 5, 2, 1), "same-even"),  # pads one more after
    Case("conv1d", (2, 9, 5, 7, 4, 0), "valid"),
    Case("global_avg_pool", (2, 7, 5), "small"),
    Case("gelu", (3, 17), "small"),
    Case("layer_norm", (5, 13), "small"),
    Case("batch_norm", (7, 5), "small"),
    Case("batch_norm", (3, 13), "three-rows"),  # the fewest a search draws
    Case("batch_norm", (392, 8), "image-rows"),  # bn-dropout-cnn's at batch 2
    Case("embedding", (2, 9, 7, 5), "repeated-ids"),
    Case("attention", (2, 9, 3, 5), "small"),
    Case("attention", (1, 1, 1, 4), "one-step"),
    Case("gru_cell", (1, 7, 5), "batch-1"),
    Case("gru_cell", (3, 4, 6), "small"),
)
SCALES = (1e-3, 1.0, 1e3)


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(request.param)
    return str(request.param)


def _arrays(case: Case, seed: int, scale: float) -> tuple[dict, dict]:
    return make_operands(case, seed, scale)


def _reference(case: Case, operands: dict, cotangents: dict) -> tuple[dict, dict]:
    attributes = case.operator.attributes(case.named)

    def computed(dtype: type[np.floating]) -> dict[str, np.ndarray]:
        if not case.operator.has_backward:
            results, grads = forward(case.op, operands, attributes, dtype), {}
        else:
            results, grads = backward(case.op, operands, attributes, cotangents, dtype)
        return {f"result:{k}": v for k, v in results.items()} | {
            f"grad:{k}": v for k, v in grads.items()
        }

    return computed(np.float64), computed(np.float32)


def _computed(
    framework: str, case: Case, scale: float, direction: str, fault: str | None = None
) -> tuple[dict, dict, dict]:
    operands, cotangents = _arrays(case, 3, scale)
    closure = build(
        get_path(f"native-{framework}"),
        case,
        direction,
        operands,
        cotangents,
        fault=fault,
    )
    reference64, baseline = _reference(case, operands, cotangents)
    return closure.arrays(closure.call()), reference64, baseline


def test_every_module_offers_every_operator(framework: str) -> None:
    module = importlib.import_module(f"native.{framework}.operators")
    assert module.LAYOUT in layout.FAMILIES
    for name in ("to_tensor", "to_numpy", "sync", "backward"):
        assert callable(getattr(module, name)), name
    for op in OPERATORS.values():
        function = getattr(module, op.name)
        dims = dict.fromkeys(op.dims, 2)
        operands = [o.name for o in op.inputs(dims)]
        names = list(inspect.signature(function).parameters)
        # the operands in order, then the attributes (by keyword)
        assert names[: len(operands)] == operands, op.name
        assert set(names[len(operands) :]) == set(op.attributes(dims)), op.name


@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"scale-{s:g}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_operator_agrees_with_float64(
    framework: str, case: Case, scale: float
) -> None:
    for direction in (
        ("forward", "backward") if case.operator.has_backward else ("forward",)
    ):
        arrays, reference64, baseline = _computed(framework, case, scale, direction)
        if direction == "forward":
            reference64 = {k: v for k, v in reference64.items() if "result:" in k}
            baseline = {k: v for k, v in baseline.items() if "result:" in k}
        result = judge(
            case.id, f"native-{framework}", arrays, reference64, {"numpy": baseline}
        )
        assert result.ok, (direction, result.failures)


@pytest.mark.parametrize(
    ("fault", "case"),
    [
        ("gemm-transposed", Case("matmul", (13, 13, 13), "square")),
        ("gemm-transposed", Case("dense", (6, 9, 9), "square-kernel")),
        ("conv-padding", Case("conv2d", (1, 9, 7, 3, 5, 3, 1), "same")),
        ("inputs-bfloat16", Case("matmul", (13, 13, 13), "square")),
        ("inputs-bfloat16", Case("lstm_cell", (2, 7, 5), "small")),
        ("conv-padding", Case("conv1d", (2, 11, 5, 7, 3, 1), "same")),
        ("layer-norm-epsilon", Case("layer_norm", (5, 13), "small")),
        ("batch-norm-unbiased-variance", Case("batch_norm", (392, 8), "image-rows")),
        ("attention-unscaled", Case("attention", (2, 9, 3, 5), "small")),
        ("gru-gate-order", Case("gru_cell", (3, 4, 6), "small")),
    ],
    ids=lambda v: v if isinstance(v, str) else v.id,
)
def test_an_operator_fault_is_caught(framework: str, fault: str, case: Case) -> None:
    assert fault in FAULTS
    assert _caught(framework, case, fault)
    # the same closure without the fault passes: the fault is what was caught
    arrays, reference64, baseline = _computed(framework, case, 1.0, "backward")
    assert judge(case.id, "native", arrays, reference64, {"numpy": baseline}).ok


def _caught(framework: str, case: Case, fault: str) -> bool:
    """Whether the judge (or the framework itself) stops ``fault``."""
    try:
        arrays, reference64, baseline = _computed(
            framework, case, 1.0, "backward", fault
        )
    except Exception:
        # a wrong padding's result has the wrong shape, and the cotangent of
        # the right shape cannot be applied to it: the path raises
        return fault == "conv-padding"
    return not judge(
        case.id, f"native-{framework}", arrays, reference64, {"numpy": baseline}
    ).ok
