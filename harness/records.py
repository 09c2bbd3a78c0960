"""Measurement records: one immutable record per cell, as JSON Lines.

Schema history:
- 1: first version (model, path, phase, status, batch size, raw values,
  summary, settings, platform, equivalence verdict).
- 2: ``verified`` (timed with a passing equivalence verdict from the gate);
  status ``not-timed`` for a cell the gate held back; the worker's pinned
  numeric settings under ``platform["numerics"]``.
- 3: ``repeat`` (which fresh-process repeat of the cell this is; a cell has
  one record per repeat); ``summary`` gains ``flops`` (per step or
  mini-batch, from the spec), ``cpu_util`` and ``peak_rss_mb`` (sampled by
  the orchestrator; ``peak_gpu_mb`` too where NVML sees the worker on a
  GPU) and, for inference, ``latency_p50_s``/``p90``/``p99``;
  ``platform`` gains ``matmul_peak_flops`` and ``threads``.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 3


@dataclass(frozen=True)
class Record:
    run_id: str
    profile: str
    model: str
    path: str
    framework: str
    api: str
    phase: str
    # "ok"; how it failed: "error", "crashed", "timeout", "unavailable"; or
    # "not-timed" when the equivalence gate held it back
    status: str
    batch_size: int
    equivalence: str  # the path's verdict for this model: pass, fail, error...
    verified: bool = False  # timed with a passing verdict
    repeat: int = 0  # which fresh-process repeat of the cell
    values: dict[str, Any] = field(default_factory=dict)  # every raw measurement
    summary: dict[str, Any] = field(default_factory=dict)  # medians and friends
    settings: dict[str, Any] = field(default_factory=dict)  # what was asked for
    platform: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    schema_version: int = SCHEMA_VERSION


def append(path: Path, record: Record) -> None:
    """Append one record as one line with one ``write`` and ``fsync`` it, so a
    crash can lose the record being written but never corrupt earlier ones."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(asdict(record), sort_keys=True) + "\n"
    if _ends_torn(path):
        line = "\n" + line  # a crash left half a line: never glue onto it
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_torn(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:  # missing or empty file
        return False


def read(path: Path) -> list[dict[str, Any]]:
    """Every complete record of a JSON Lines file (a torn last line is skipped)."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


# What must agree between records before their samples are pooled into one
# cell: the machine, the code, the libraries, the numeric and thread settings
# and what was asked for.  Measured quantities (the matmul peak) may differ.
POOLED_KEYS = (
    "hostname",
    "cpu_model",
    "cpu_count",
    "os",
    "python",
    "git_revision",
    "threads",
    "framework_version",
    "keras_version",
    "device",
    "numerics",
    "xla_flags",
)


def environment(record: dict[str, Any]) -> dict[str, Any]:
    """The parts of a record's environment that ``POOLED_KEYS`` names, and its
    settings (steps, window...), as ``platform.<key>`` / ``settings``."""
    platform_ = record.get("platform") or {}
    found = {f"platform.{k}": platform_[k] for k in POOLED_KEYS if k in platform_}
    return found | {"settings": record.get("settings") or {}}


def pooling_conflict(recs: list[dict[str, Any]]) -> str | None:
    """The first environment key on which ``recs`` disagree, as
    ``"key (a vs b)"``; ``None`` when they may be pooled.  A key that some
    records lack (older schemas, failed cells) is not a conflict."""
    seen: dict[str, Any] = {}
    for r in recs:
        if r.get("status") != "ok":
            continue
        for key, value in environment(r).items():
            if key not in seen:
                seen[key] = value
            elif value != seen[key]:
                return f"{key} ({seen[key]!r} vs {value!r})"
    return None


def host_platform() -> dict[str, Any]:
    """What the orchestrator can tell about the machine, without any framework."""
    return {
        "python": platform.python_version(),
        "orchestrator_python": sys.executable,
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "git_revision": _git_revision(),
        "thread_env": {
            k: os.environ.get(k)
            for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
        },
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")
