"""What a bisection measures at a release: the cheapest deterministic signal
of the cell (``harness.versions.bisect``).

- **Instructions** where the framework repeats to a fraction of a percent
  (PyTorch and TensorFlow under callgrind, docs/results/count.md): the
  Keras path's work per step (all instructions but the thread pools'
  polling), from ``python -m harness count`` in the release's overlay
  (``harness.versions.overlay``); its range is the larger of the spreads
  between processes and between blocks, and a change must also exceed
  ``COUNT_FLOOR``.  The native path is counted beside it as a control: its
  count must not move with a Keras release.
- **Time** where it does not (JAX: XLA's compiled code counts differently
  from one process to the next): the paired Keras/native ratio and its 95%
  CI from ``python -m harness run`` of the two paths, with the profile's
  processes.

Each release's run goes into ``<out>/keras-<release>/`` and is reused when
it is there, so an interrupted bisection resumes where it stopped.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.core import jsonl, validated
from harness.core.records import scan
from harness.report.analysis import overhead_rows
from harness.versions.bisect import Figure
from harness.versions.overlay import Overlay, prepare
from workers.launch import PROJECT_ROOT
from workers.paths import PATHS
from zoo import files
from zoo.user_models import plain_name

COUNT_FLOOR = 0.003  # a count change smaller than 0.3% is no change
TIME_FLOOR = 0.02  # nor a ratio change smaller than 2%
MEASURED_S = "measure_s.txt"  # a release's measuring time, in its folder
MEASURED_BYTES = 1024  # it holds one number
# The most a count run's analysis (``count.json``) may hold: a few hundred
# functions per path and cell, some megabytes.
ANALYSIS_BYTES = 256 * 1024 * 1024
COUNTED = ("torch", "tensorflow")
TIMED = ("jax",)
Log = Callable[[str], None]


@dataclass(frozen=True)
class Cell:
    """The cell bisected: a model, a Keras path, a phase and the profile
    that sets its batch size and steps."""

    model: str
    path: str
    phase: str
    profile: str

    @property
    def framework(self) -> str:
        return PATHS[self.path].framework

    @property
    def native(self) -> str:
        return f"native-{self.framework}"

    @property
    def signal(self) -> str:
        return "instructions" if self.framework in COUNTED else "time"

    @property
    def floor(self) -> float:
        return COUNT_FLOOR if self.signal == "instructions" else TIME_FLOOR

    @property
    def name(self) -> str:
        return f"{self.model}-{self.path}-{self.phase}"


def check(cell: Cell) -> None:
    """Refuse, in one sentence, a cell a Keras release cannot change or this
    harness cannot measure."""
    plain_name(cell.model, "model")  # it names the bisection's folder
    info = PATHS.get(cell.path)
    if info is None:
        raise ValueError(f"no path {cell.path!r}; give one of {', '.join(PATHS)}")
    if info.api != "keras":
        raise ValueError(
            f"{cell.path} does not import Keras, so no Keras release changes it; "
            "bisect a keras-* path"
        )
    if info.framework not in COUNTED + TIMED:
        raise ValueError(f"{cell.path} has no signal to bisect on")
    if cell.phase not in ("train", "infer"):
        raise ValueError(f"phase {cell.phase!r}: give train or infer")


def harness_in(overlay: Overlay, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` with ``overlay``'s Keras; its output."""
    return subprocess.run(
        [overlay.python, "-m", "harness", *args],
        cwd=PROJECT_ROOT,
        env=overlay.environment(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def measurer(
    cell: Cell, out: Path, python: str, log: Log = print
) -> Callable[[str], Figure]:
    """``measure(release)`` for :func:`harness.versions.bisect.bisect`."""

    def measure(release: str) -> Figure:
        folder = (out / f"keras-{release}").absolute()
        found = _read(cell, folder)
        if found is None:
            overlay = prepare(release, python)
            log(f"keras {release}: measuring {cell.name} ({cell.signal})")
            common = ["--profile", cell.profile, "--models", cell.model]
            common += ["--phases", cell.phase, "--results", str(folder)]
            if cell.signal == "instructions":
                args = ["count", *common, "--frameworks", cell.framework]
            else:
                args = ["run", *common, "--paths", f"{cell.path},{cell.native}"]
            started = time.monotonic()
            done = harness_in(overlay, *args)
            found = _read(cell, folder)
            if found is not None:
                seconds = f"{time.monotonic() - started:.1f}\n"
                files.write_text(folder / MEASURED_S, seconds)
            if found is None:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise ValueError(
                    f"keras {release}: {cell.name} was not measured: "
                    + " / ".join(tail)
                )
        log(f"keras {release}: {found.text()}{found.note and ' ' + found.note}")
        return found

    return measure


def measured_s(folder: Path) -> float | None:
    """How long measuring the release of ``folder`` took (its gate and its
    run), as the bisection that measured it wrote; None where it was not
    written, and where it cannot be read or holds no number of seconds
    (said once on stderr)."""
    path = folder / MEASURED_S
    try:
        seconds = float(files.read_text(path, MEASURED_BYTES))
    except FileNotFoundError:
        return None
    except OSError as exc:  # files.Refused: a link, a FIFO, too large ...
        jsonl.warn(f"warning: {exc}; its release's measuring time is not counted")
        return None
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds >= 0:
        return seconds
    jsonl.warn(
        f"warning: {path} holds no number of seconds; its release's measuring "
        "time is not counted"
    )
    return None


def _read(cell: Cell, folder: Path) -> Figure | None:
    """The release's figure from what its run left in ``folder``."""
    if cell.signal == "instructions":
        return _counted(cell, folder)
    return _timed(cell, folder)


def counted_rows(cell: Cell, folder: Path) -> dict[str, dict[str, Any]] | None:
    """The newest count run's rows of the cell in ``folder``, by path: rows
    that hold what a bisection reads of them (:class:`CountRow`).  An
    analysis that cannot be read (a link, a FIFO, too large, not JSON, no
    list of rows) is passed over, said once on stderr."""
    for analysis in sorted(folder.glob("count-*/count.json"), reverse=True):
        try:
            rows = files.read_object(analysis, ANALYSIS_BYTES).get("paths")
        except OSError as exc:  # files.Refused, or gone since it was listed
            jsonl.warn(f"warning: {exc}; that count run is passed over")
            continue
        if not isinstance(rows, list):
            jsonl.warn(
                f"warning: {analysis} holds no list of counted paths; that count "
                "run is passed over"
            )
            continue
        mine = {
            r["path"]: r
            for r in rows
            if validated.fits(CountRow, r)
            and r["model"] == cell.model
            and r["phase"] == cell.phase
        }
        if cell.path in mine:
            return mine
    return None


NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class CountRow(validated.Schema):
    """What a bisection reads of a row of a count run's analysis
    (``harness.count.analysis``): its cell, its work per step and spreads,
    and its functions' instructions."""

    path: str
    model: str
    phase: str
    work: NonNegative
    work_spread: NonNegative = 0.0
    work_block_spread: NonNegative = 0.0
    functions: dict[str, validated.Finite] = Field(default_factory=dict)


def _counted(cell: Cell, folder: Path) -> Figure | None:
    rows = counted_rows(cell, folder)
    if rows is None:
        return None
    row = rows[cell.path]
    spread = max(
        float(row.get("work_spread", 0)), float(row.get("work_block_spread", 0))
    )
    work = float(row["work"])
    native = rows.get(cell.native)
    note = "" if native is None else f"(native {float(native['work']) / 1e6:.4g} M)"
    return Figure(
        folder.name.removeprefix("keras-"),
        work,
        work * (1 - spread / 2),
        work * (1 + spread / 2),
        note,
    )


def _timed(cell: Cell, folder: Path) -> Figure | None:
    for run in sorted(folder.glob("run-*.jsonl"), reverse=True):
        try:
            rows = overhead_rows(scan(run).records)
        except ValueError:
            continue
        for row in rows:
            if (
                row["model"] == cell.model
                and row["framework"] == cell.framework
                and row["phase"] == cell.phase
                and row["overhead"] is not None
                and row["overhead_ci_low"] is not None
                and row["overhead_ci_high"] is not None
            ):
                return Figure(
                    folder.name.removeprefix("keras-"),
                    float(row["overhead"]),
                    float(row["overhead_ci_low"]),
                    float(row["overhead_ci_high"]),
                    f"(Keras/native, {row['pairs']})",
                )
    return None
