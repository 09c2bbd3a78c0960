"""The fault-sensitivity suite: every deliberate fault (``native.faults``),
injected into every native path, must be caught and localized.

Each fault runs on the cheapest model it applies to, with the training steps
its stage needs (an optimizer fault shows only after a step).  A fault is
*caught* when its path fails (or errors) while every other path passes, and
*localized* when localization names the fault's own stage and layer.
``python -m equivalence --fault-suite`` prints the table and the catch rate;
``tests/paths/test_equivalence.py`` asserts every row.  Framework-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from equivalence.check import Case, Checker
from native.faults import FAULTS, Location
from zoo.models import get_spec

# The case each fault is tried on.
FAULT_CASES: dict[str, Case] = {
    "unpermuted-flatten": Case("lenet", 0, 4),
    "conv-hw-swapped": Case("lenet", 0, 4),
    "lstm-gates-swapped": Case("lstm", 0, 4, seq_len=12),
    "missing-bias": Case("lenet", 0, 4),
    "valid-padding": Case("vgg16", 0, 2),
    "activation-swapped": Case("strided-cnn", 0, 4),
    "same-padding-symmetric": Case("strided-cnn", 0, 4),
    "attention-heads-interleaved": Case("transformer-tiny", 0, 4),
    "attention-unscaled": Case("transformer-tiny", 0, 4),
    "gru-gates-swapped": Case("conv1d-gru", 0, 4),
    "layer-norm-epsilon": Case("transformer-tiny", 0, 4),
    "gelu-tanh": Case("transformer-tiny", 0, 4),
    "embedding-off-by-one": Case("transformer-tiny", 0, 4),
    "conv1d-kernel-flipped": Case("conv1d-gru", 0, 4),
    "batch-norm-momentum-swapped": Case("bn-dropout-cnn", 0, 4, steps=1),
    "adam-eps-inside-sqrt": Case("lenet", 0, 4, steps=1),
    "join-reversed": Case("kinds-cnn", 0, 4),
    "slope-default": Case("kinds-cnn", 0, 4),
    "crop-swapped": Case("kinds-seq", 0, 4),
    "l2-halved": Case("kinds-cnn", 0, 4),
    "directions-swapped": Case("kinds-seq", 0, 4),
    "transpose-taps-unflipped": Case("kinds-cnn", 0, 4),
    "depthwise-order": Case("kinds-cnn", 0, 4),
    "query-key-swapped": Case("kinds-seq", 0, 4),
    "recurrence-transposed": Case("kinds-seq", 0, 4),
}


@dataclass(frozen=True)
class FaultResult:
    fault: str
    path: str
    case: Case
    caught: bool
    expected: Location
    located: Location | None
    # the margins: the multiple the faulty path needed (it is caught above
    # ``MULTIPLE``), and the largest any other path needed (below it)
    needed: float = math.nan
    others_needed: float = math.nan

    @property
    def localized(self) -> bool:
        return self.located == self.expected


def check_fault(
    checker: Checker, fault: str, path: str, case: Case | None = None
) -> FaultResult:
    """Inject ``fault`` into ``path`` and see whether the checks catch and
    localize it, on ``case`` (default: the fault's own, ``FAULT_CASES``)."""
    case = case or FAULT_CASES[fault]
    report = checker.check(case, {path: fault})
    others_pass = all(v == "pass" for p, v in report.verdicts.items() if p != path)
    caught = report.verdicts.get(path) in ("fail", "error") and others_pass
    localization = report.localizations.get(path)
    return FaultResult(
        fault,
        path,
        case,
        caught,
        FAULTS[fault].target(get_spec(case.model)),
        localization.first if localization else None,
        report.multiples.get(path, math.nan),
        max((m for p, m in report.multiples.items() if p != path), default=math.nan),
    )


def run_suite(checker: Checker, paths: list[str]) -> list[FaultResult]:
    """Every fault into every one of ``paths`` (native paths)."""
    return [check_fault(checker, fault, path) for fault in FAULTS for path in paths]
