"""The fault-sensitivity suite: every deliberate fault (``native.faults``),
injected into every native path, must be caught and localized.

Each fault runs on the cheapest model it applies to, with the training steps
its stage needs (an optimizer fault shows only after a step): a kind's
mistake on the model it declares (``zoo.kinds.base.Mistake``), the faults of
no one kind on the models written here.  A fault is
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
from zoo.kinds import MISTAKES
from zoo.kinds.base import Mistake
from zoo.models import get_spec

# The case each fault of no one kind is tried on; a kind's mistake declares
# its own (``zoo.kinds.base.Mistake``).
_CROSS_CUTTING_CASES: dict[str, Case] = {
    "unpermuted-flatten": Case("lenet", 0, 4),
    "missing-bias": Case("lenet", 0, 4),
    "activation-swapped": Case("strided-cnn", 0, 4),
    "gelu-tanh": Case("transformer-tiny", 0, 4),
    "l2-halved": Case("kinds-cnn", 0, 4),
    "loss-weights-ignored": Case("wide-deep", 0, 4),
    "adam-eps-inside-sqrt": Case("lenet", 0, 4, steps=1),
}


def mistake_case(mistake: Mistake) -> Case:
    """The case a kind's mistake declares it is tried on."""
    return Case(
        mistake.model,
        0,
        mistake.batch_size,
        seq_len=mistake.seq_len,
        steps=mistake.steps,
    )


def _case_of(fault: str) -> Case:
    if fault in _CROSS_CUTTING_CASES:
        return _CROSS_CUTTING_CASES[fault]
    return mistake_case(MISTAKES[fault])


def _grouped(faults: list[str]) -> list[str]:
    """``faults`` with those tried on one case next to each other, each case
    where its first fault is: a checker keeps the answers of the current
    batches only, so the reference runs of a case are asked once, not once
    for every visit (the fast tier's fault tests 168 to 151 test-seconds)."""
    cases = list(dict.fromkeys(_case_of(f) for f in faults))
    return sorted(faults, key=lambda f: cases.index(_case_of(f)))


# The case each fault is tried on: in the order of ``FAULTS``, those of one
# case next to each other.
FAULT_CASES: dict[str, Case] = {name: _case_of(name) for name in _grouped(list(FAULTS))}


def fault_stage(fault: str) -> str:
    """The stage of a training step localization must name for ``fault`` on
    its own case (``forward``, ``loss``, ``backward`` or ``update``)."""
    return FAULTS[fault].target(get_spec(_case_of(fault).model)).stage


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
    return [
        check_fault(checker, fault, path) for fault in FAULT_CASES for path in paths
    ]
