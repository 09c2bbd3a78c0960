"""The real check of a drawn model: registered in the campaign's model store
and checked by one ``equivalence.check.Checker`` that stays up, on every
default path and the modes the draw chose, against float64, as ``python -m
equivalence --model`` does (no accuracy epochs: they need real data).

Memory.  Every worker is a framework's interpreter, 150 to 570 MB resident;
with a worker for each of the 15 paths and modes and the three float64
reference runs, a 60-second campaign's processes held 7.5 GB on a 24 GiB,
2-core machine.  The rule now: the default paths' workers and the
references stay up (every model is checked on them); a mode's worker
(``workers.paths.MODE_PATHS``: a path compiled or jitted) is started when
a drawn model asks for its mode, and at most ``MODE_WORKERS`` are kept at
once (one draw asks for two at most), the least recently used closed
first; none is started while ``/proc/meminfo`` says less than
``MODE_HEADROOM_BYTES`` is available (the draw's mode is then left out of
its check, and said).  And the workers' compile caches grow with every
drawn model (keras-jax's from 400 to 850 MB in a minute): when the
campaign's workers together hold more than ``WORKERS_MAX_BYTES``
resident (``/proc/<pid>/status``), they are all started again after the
model being checked, and that is said.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from equivalence.check import (
    WORKER_ENV,
    Case,
    Checker,
    ModelReport,
    missing_framework,
)
from harness.fuzz.campaign import crashed
from harness.fuzz.draw import Drawn
from harness.fuzz.findings import Outcome
from workers.launch import Worker
from workers.paths import MODE_PATHS, PATHS
from zoo import files
from zoo.models import get_spec
from zoo.user_models import register, use_store

# Seconds a worker may take for one drawn model (they take about one).
TIMEOUT_S = 120.0
# Mode workers kept at once (module docstring): what one draw asks for.
MODE_WORKERS = 2
# The memory the machine must have available to start a mode's worker: the
# largest worker measured (570 MB, TensorFlow's) and room for the rest of
# the machine.
MODE_HEADROOM_BYTES = 2 * 1024**3
MEMINFO = Path("/proc/meminfo")


def resident_bytes(pid: int) -> int:
    """``VmRSS`` of process ``pid`` (0 when it is gone or not said)."""
    try:
        text = files.read_text(Path(f"/proc/{pid}/status"), 1 << 20)
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "VmRSS" and value.split():
            return int(value.split()[0]) * 1024
    return 0


def meminfo(field: str) -> int | None:
    """Bytes of ``field`` of ``/proc/meminfo``; ``None`` where it is not
    there (no Linux)."""
    try:
        text = files.read_text(MEMINFO, 1 << 20)
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field and value.split():
            return int(value.split()[0]) * 1024
    return None


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (``None``: not said)."""
    return meminfo("MemAvailable")


# The most the campaign's workers may hold together, resident (module
# docstring): half the machine's memory, 6 GiB at least.  The eight paths'
# and three references' workers start at about 4 GB, two modes' workers
# bring them to 6: at a fixed 6 GiB, a 10-minute campaign on this 24 GiB
# machine started every worker again twice, its next models taking 48 and
# 66 s (docs/results/fuzz/README.md).
WORKERS_MAX_BYTES = max(6 * 1024**3, (meminfo("MemTotal") or 0) // 2)


# Where a quantity is computed, in the order a step runs (``first_wrong``).
_QUANTITY_STAGES = ("forward", "loss", "backward", "update")


def first_wrong(quantities: Iterable[str], kinds: dict[str, str]) -> tuple[str, str]:
    """Where a path that was not localized parts, read off the quantities
    it failed on: the earliest stage (the logits: forward; the loss; a
    gradient: backward; a training step's value: update), then the earliest
    layer, named by its kind and the parameter's role (``"dense kernel"``);
    ``("", "")`` for none.  A signature ending in "not localized" alone
    merged findings of every layer and stage (issue 80)."""
    order = {name: i for i, name in enumerate(kinds)}
    ranked = []
    for quantity in quantities:
        if quantity in ("logits", "loss"):
            stage = "forward" if quantity == "logits" else "loss"
            ranked.append((_QUANTITY_STAGES.index(stage), -1, stage, quantity))
            continue
        if quantity.startswith("grad:"):
            stage, name = "backward", quantity.removeprefix("grad:")
        elif quantity.startswith("step") and "/" in quantity:
            stage, name = "update", quantity.split("/", 1)[1]  # stepT/loss too
        else:
            continue
        layer, _, role = name.rpartition("/")
        where = f"{kinds.get(layer, layer)} {role}" if layer else name
        ranked.append(
            (_QUANTITY_STAGES.index(stage), order.get(layer, -1), stage, where)
        )
    if not ranked:
        return "", ""
    _, _, stage, where = min(ranked)
    return stage, where


def outcome_of(report: ModelReport) -> Outcome:
    """What the fuzzer keeps of a check (``harness.fuzz.findings.Outcome``):
    a failing path the localizer could not place is placed by the
    quantities it failed on (``first_wrong``); a float64 run voted out, by
    where it parts from the others."""
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
    for path in report.verdicts:
        if path not in located and report.verdicts[path] == "fail":
            stage, where = first_wrong(report.failing(path), kinds)
            if stage:
                located[path] = (f"not localized: {stage}", where)
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
        # where the odd float64 run parts (by kind, as a path is placed): the
        # signature's place, so two causes are not one finding (d8b231ec1c)
        odd, place = report.odd_localization, ""
        if odd is not None and odd.first is not None:
            place = (
                f" {odd.first.stage} at {kinds.get(odd.first.layer, odd.first.layer)}"
            )
        judge = f"{report.vote.odd}{place}: {report.vote.fault}"
    notes = {p: report.notes(p) for p in report.verdicts if report.notes(p)}
    return Outcome(dict(report.verdicts), located, errors, judge, notes)


class WorkerCheck:
    """The check ``harness.fuzz.campaign.Campaign`` calls: a checker with a
    worker for every path and mode, started again when one of its workers
    died (that model's check is a finding already)."""

    def __init__(self, store: Path, timeout: float = TIMEOUT_S) -> None:
        self.store = use_store(store)
        self.timeout = timeout
        self.paths = list(PATHS)
        self.checker = self._start()
        self.restarts = 0
        self.modes: list[str] = []  # mode workers up, the least recently used first

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

    def ready(self, modes: Iterable[str]) -> list[str]:
        """Of ``modes``, those whose workers are up now, started as the
        module docstring's rule allows (the others named on stderr)."""
        wanted = [m for m in modes if m in MODE_PATHS]
        for mode in wanted:
            if mode in self.modes:
                self.modes.remove(mode)
                self.modes.append(mode)
                continue
            for old in [m for m in self.modes if m not in wanted]:
                if len(self.modes) < MODE_WORKERS:
                    break
                self.modes.remove(old)
                self.checker.workers.pop(old).close()
            available = available_bytes()
            if available is not None and available < MODE_HEADROOM_BYTES:
                print(
                    f"{mode} is left out of this model's check: the machine has "
                    f"{available / 1024**3:.1f} GiB available, less than the "
                    f"{MODE_HEADROOM_BYTES / 1024**3:g} GiB a worker is started with",
                    file=sys.stderr,
                )
                continue
            self.checker.workers[mode] = Worker(
                mode, env=WORKER_ENV, deterministic=True
            )
            self.modes.append(mode)
        return [m for m in wanted if m in self.modes]

    def __call__(self, drawn: Drawn) -> Outcome:
        name = register("drawn", drawn.document, folder=self.store)
        case = Case(name, drawn.seed, drawn.batch_size, None, 1.0, drawn.steps)
        try:
            paths = [*PATHS, *self.ready(drawn.modes)]
            report = self.checker.check(case, paths=paths)
            outcome = outcome_of(report)
        except Exception as exc:
            outcome = crashed(exc)
        held = self.resident()
        if held > WORKERS_MAX_BYTES:
            print(
                f"the workers hold {held / 1024**3:.1f} GiB, more than the "
                f"{WORKERS_MAX_BYTES / 1024**3:g} GiB a campaign keeps: all are "
                "started again",
                file=sys.stderr,
            )
        if self._broken() or held > WORKERS_MAX_BYTES:
            self.checker.close()
            self.checker = self._start()
            self.modes = []
            self.restarts += 1
        return outcome

    def resident(self) -> int:
        """Bytes the checker's workers hold resident together."""
        workers = [*self.checker.workers.values(), *self.checker.references.values()]
        return sum(resident_bytes(w.pid) for w in workers if w.pid is not None)

    def _broken(self) -> bool:
        workers = [*self.checker.workers.values(), *self.checker.references.values()]
        # a framework that is not installed here stays unavailable: no restart
        return any(
            w.failure is not None and w.failure.status != "unavailable" for w in workers
        )
