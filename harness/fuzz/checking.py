"""The real check of a drawn model: registered in the campaign's model store
and checked by one ``equivalence.check.Checker`` that stays up, on every
default path and the modes the draw chose, against float64, as ``python -m
equivalence --model`` does (no accuracy epochs: they need real data).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from equivalence.check import Case, Checker, ModelReport, missing_framework
from harness.fuzz.campaign import crashed
from harness.fuzz.draw import Drawn
from harness.fuzz.findings import Outcome
from workers.paths import MODE_PATHS, PATHS
from zoo.specs import get_spec
from zoo.user_models import register, use_store

# Seconds a worker may take for one drawn model (they take about one).
TIMEOUT_S = 120.0


def outcome_of(report: ModelReport) -> Outcome:
    """What the fuzzer keeps of a check (``harness.fuzz.findings.Outcome``)."""
    spec = get_spec(report.case.model)
    kinds = {layer.name: layer.kind for layer in spec.layers}
    located = {}
    for path, loc in report.localizations.items():
        if loc.contradiction:  # op by op right, as it runs wrong: its compiler
            located[path] = ("compiled", "")
        elif loc.first is not None:
            located[path] = (
                loc.first.stage,
                kinds.get(loc.first.layer, loc.first.layer),
            )
    errors = {
        path: (reply.error or reply.status).splitlines()[0][:200]
        if (reply.error or reply.status)
        else ""
        for path, reply in report.outcomes.items()
        if report.verdicts.get(path) == "error"
    }
    judge = ""
    if report.reference_error:
        judge = report.reference_error
    elif report.vote is not None and report.vote.odd is not None:
        judge = f"{report.vote.odd}: {report.vote.fault}"
    notes = {p: report.notes(p) for p in report.verdicts if report.notes(p)}
    return Outcome(dict(report.verdicts), located, errors, judge, notes)


class WorkerCheck:
    """The check ``harness.fuzz.campaign.Campaign`` calls: a checker with a
    worker for every path and mode, started again when one of its workers
    died (that model's check is a finding already)."""

    def __init__(self, store: Path, timeout: float = TIMEOUT_S) -> None:
        self.store = use_store(store)
        self.timeout = timeout
        self.paths = [*PATHS, *MODE_PATHS]
        self.checker = self._start()
        self.restarts = 0

    def _start(self) -> Checker:
        """The checker; a ValueError in one sentence when a path's worker
        cannot start (every model would then "fail", and a campaign would
        draw hundreds of nothings a second), except a framework that may be
        missing here (MXNet: its paths are then unavailable)."""
        checker = Checker(self.paths, timeout=self.timeout)
        for path, worker in checker.workers.items():
            failure = worker.failure
            if failure is not None and not missing_framework(path, failure):
                checker.close()
                raise ValueError(
                    f"cannot start {path} ({failure.error}); the fuzzer checks "
                    "every path: install the frameworks (pip install -e "
                    "'.[frameworks,harness]', or run nox -s fuzz)"
                )
        return checker

    def __enter__(self) -> WorkerCheck:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.checker.close()

    def __call__(self, drawn: Drawn) -> Outcome:
        name = register("drawn", drawn.document, folder=self.store)
        case = Case(name, drawn.seed, drawn.batch_size, None, 1.0, drawn.steps)
        try:
            report = self.checker.check(case, paths=[*PATHS, *drawn.modes])
            outcome = outcome_of(report)
        except Exception as exc:
            outcome = crashed(exc)
        if self._broken():
            self.checker.close()
            self.checker = self._start()
            self.restarts += 1
        return outcome

    def _broken(self) -> bool:
        workers = [*self.checker.workers.values(), *self.checker.references.values()]
        # a framework that is not installed here stays unavailable: no restart
        return any(
            w.failure is not None and w.failure.status != "unavailable" for w in workers
        )
