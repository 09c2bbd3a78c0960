"""Operators judged against float64 before they are timed.

A path's results and gradients of one operator case (computed in its worker
by ``workers.operators``) are judged as whole models are
(``equivalence.reference.judge``): each quantity's normwise relative error
against a float64 NumPy computation (``equivalence.op_reference``) may be at
most ``MULTIPLE`` times the error of a correct float32 computation of the
same case (the same NumPy code in float32, the *baseline*) plus ``FLOOR``.

``search`` looks for a case where a path disagrees: Hypothesis draws cases
of the operator (``strategy``: batch 1 and other small batches, odd spatial
sizes, channel counts that are not multiples of 8, padding ``same`` and
``valid``, value scales from 1e-3 to 1e3, seeds), each run through the
path's worker (``OpChecker``), and shrinks the first disagreement it finds
to a minimal case, which the verdict names.  ``harness ops`` times no
operator a search found wrong, and checks every timed closure's own results
at its timed case too (``judge_case``).

Framework-free: the frameworks run in the workers.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from equivalence import op_reference
from equivalence.compare import PairResult
from equivalence.reference import judge
from workers.launch import Worker
from workers.messages import ArraysAnswer, OpCheck
from zoo.arrays import load_npz, save_npz
from zoo.operators import BATCH_NORM_MIN_ROWS, Case, get_operator, make_operands

SCALES = (1e-3, 1.0, 1e3)
Arrays = dict[str, np.ndarray]


@dataclass(frozen=True)
class Drawn:
    """One case to check: its dims, the operands' seed and value scale."""

    case: Case
    seed: int
    scale: float

    def describe(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.case.named.items())
        return f"{self.case.op}({dims}), seed {self.seed}, scale {self.scale:g}"


def _dims(op: str) -> st.SearchStrategy[tuple[int, ...]]:  # noqa: PLR0911, PLR0912
    """Small dims of ``op`` in its operator's order, edges included."""
    small = st.integers(1, 40)
    batch = st.integers(1, 4)
    channels = st.integers(1, 13)
    if op in ("matmul", "dense"):
        return st.tuples(small, small, small)
    if op == "conv2d":
        return st.sampled_from([1, 3, 5]).flatmap(
            lambda k: st.booleans().flatmap(
                lambda same: st.tuples(
                    batch,
                    st.integers(1 if same else k, 11),
                    st.integers(1 if same else k, 11),
                    channels,
                    channels,
                    st.just(k),
                    st.just(int(same)),
                )
            )
        )
    if op == "conv1d":
        # even widths too: "same" then pads one more after than before
        return st.sampled_from([1, 2, 3, 5]).flatmap(
            lambda k: st.booleans().flatmap(
                lambda same: st.tuples(
                    batch,
                    st.integers(1 if same else k, 20),
                    channels,
                    channels,
                    st.just(k),
                    st.just(int(same)),
                )
            )
        )
    if op == "global_avg_pool":
        return st.tuples(batch, st.integers(1, 20), channels)
    if op == "layer_norm":
        # Over one feature the result is beta whatever x is: float64's
        # gradients of x and gamma are exactly 0, a path's rounding leaves
        # tiny ones, which no relative error can weigh.
        return st.tuples(st.integers(1, 16), st.integers(2, 40))
    if op == "batch_norm":
        # Over one row the result is beta whatever x is (and PyTorch refuses
        # it); over two, x's gradient carries a factor epsilon / (var +
        # epsilon), a cancellation that rounding swamps at scale 1e3.
        return st.tuples(st.integers(BATCH_NORM_MIN_ROWS, 40), channels)
    if op == "embedding":
        return st.tuples(batch, st.integers(1, 12), st.integers(1, 50), channels)
    if op == "attention":
        return st.tuples(batch, st.integers(1, 20), st.integers(1, 4), channels)
    if op in ("avg_pool", "max_pool"):
        return st.sampled_from([2, 3]).flatmap(
            lambda size: st.tuples(
                batch,
                st.integers(size, 11),
                st.integers(size, 11),
                channels,
                st.just(size),
            )
        )
    if op in ("relu", "sigmoid", "tanh", "gelu"):
        return st.tuples(st.integers(1, 16), small)
    if op in ("lstm_cell", "gru_cell"):
        return st.tuples(st.integers(1, 5), st.integers(1, 20), st.integers(1, 20))
    if op == "softmax_cross_entropy":
        return st.tuples(st.integers(1, 16), st.integers(2, 20))
    if op == "adam":
        return st.tuples(st.integers(1, 300), st.integers(1, 20))
    get_operator(op)  # an unknown name: the error lists the known ones
    raise ValueError(f"no strategy for operator {op!r}")


def strategy(op: str) -> st.SearchStrategy[Drawn]:
    """Cases of ``op`` to check, as Hypothesis draws them."""
    return st.builds(
        Drawn,
        _dims(op).map(lambda dims: Case(op, dims, "drawn")),
        st.integers(0, 2**16),
        st.sampled_from(SCALES),
    )


def reference(
    case: Case, operands: Arrays, cotangents: Arrays
) -> tuple[Arrays, Arrays]:
    """The float64 reference and the float32 baseline of a case, as
    ``result:<name>`` and (where the operator has a backward pass)
    ``grad:<operand>`` arrays."""
    attributes = case.operator.attributes(case.named)

    def computed(dtype: type[np.floating]) -> Arrays:
        if not case.operator.has_backward:
            results = op_reference.forward(case.op, operands, attributes, dtype)
            grads: Arrays = {}
        else:
            results, grads = op_reference.backward(
                case.op, operands, attributes, cotangents, dtype
            )
        return {
            **{f"result:{k}": v for k, v in results.items()},
            **{f"grad:{k}": v for k, v in grads.items()},
        }

    return computed(np.float64), computed(np.float32)


def judge_case(
    case: Case,
    path: str,
    arrays: Arrays,
    reference64: Arrays,
    baseline: Arrays,
    *,
    direction: str = "backward",
) -> PairResult:
    """``path``'s arrays of ``case`` against float64, each quantity with its
    own allowance; a forward call is judged on its results alone."""
    if direction == "forward":
        reference64 = {k: v for k, v in reference64.items() if k.startswith("result:")}
        baseline = {k: v for k, v in baseline.items() if k.startswith("result:")}
    # One baseline, the NumPy float32 computation, for every path.
    return judge(case.id, path, arrays, reference64, {"numpy": baseline})


def describe_failure(result: PairResult) -> str:
    """The quantity furthest past its allowance, in one line."""
    worst = max(
        result.entries,
        key=lambda e: math.inf if e.tolerance == 0 else e.error / e.tolerance,
    )
    return f"{worst.quantity}: error {worst.error:.3g} > allowed {worst.tolerance:.3g}"


@dataclass(frozen=True)
class Verdict:
    """What ``search`` found for one operator on one path: ``ok`` when no
    drawn case disagreed; else the minimal disagreeing case and why."""

    op: str
    path: str
    ok: bool
    examples: int  # cases checked, shrinking included
    counterexample: str | None = None
    why: str | None = None

    @property
    def verdict(self) -> str:
        return "pass" if self.ok else "fail"


Evaluate = Callable[[str, Drawn], tuple[Arrays | None, str | None]]


def search(op: str, path: str, evaluate: Evaluate, examples: int) -> Verdict:
    """Draw up to ``examples`` cases of ``op`` (derandomized: the same cases
    every run) and check ``path`` on each (``evaluate(path, drawn)``: its
    arrays, or None and the error it raised); the first disagreement is
    shrunk to a minimal case."""
    checked = [0]

    @functools.cache
    def failure(drawn: Drawn) -> str | None:
        checked[0] += 1
        operands, cotangents = make_operands(drawn.case, drawn.seed, drawn.scale)
        arrays, error = evaluate(path, drawn)
        if arrays is None:
            return f"the path raised: {error}"
        reference64, baseline = reference(drawn.case, operands, cotangents)
        result = judge_case(drawn.case, path, arrays, reference64, baseline)
        return None if result.ok else describe_failure(result)

    try:
        found = find(
            strategy(op),
            lambda drawn: failure(drawn) is not None,
            settings=settings(
                max_examples=examples,
                derandomize=True,
                database=None,
                deadline=None,
                phases=(Phase.explicit, Phase.generate, Phase.shrink),
                suppress_health_check=list(HealthCheck),
            ),
        )
    except NoSuchExample:
        return Verdict(op, path, ok=True, examples=checked[0])
    return Verdict(
        op,
        path,
        ok=False,
        examples=checked[0],
        counterexample=found.describe(),
        why=failure(found),
    )


class OpChecker:
    """Runs drawn cases through a worker (``workers.messages.OpCheck``);
    operands and results travel as ``.npz`` files in a folder of its own."""

    def __init__(
        self, worker: Worker, fault: str | None = None, timeout: float = 300.0
    ) -> None:
        self.worker, self.fault, self.timeout = worker, fault, timeout
        self._folder = tempfile.TemporaryDirectory(prefix="op-check-")
        self.folder = Path(self._folder.name)

    def __enter__(self) -> OpChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self._folder.cleanup()

    def evaluate(self, path: str, drawn: Drawn) -> tuple[Arrays | None, str | None]:
        """``path``'s arrays of a drawn case, or None and why it has none."""
        operands, cotangents = make_operands(drawn.case, drawn.seed, drawn.scale)
        file = self.folder / "operands.npz"
        write_operands(file, operands, cotangents)
        out = self.folder / "out.npz"
        reply = self.worker.call(
            OpCheck(
                op=drawn.case.op,
                dims=list(drawn.case.dims),
                operands=str(file),
                path=path,
                out=str(out),
                fault=self.fault,
            ),
            self.timeout,
        )
        if not reply.ok or not isinstance(reply.answer, ArraysAnswer):
            return None, reply.error or reply.status
        return load_npz(out), None


def write_operands(file: Path, operands: Arrays, cotangents: Arrays) -> None:
    """A case's operands and cotangents as the worker reads them."""
    save_npz(
        file,
        {
            **{f"operand:{k}": v for k, v in operands.items()},
            **{f"cotangent:{k}": v for k, v in cotangents.items()},
        },
    )
