"""Which machine a record was measured on, and the name it goes by.

Samples of one machine type may be pooled (two nodes of a cluster with the
same CPU, memory and accelerator measure the same thing); samples of two
machines never may.  A hostname cannot tell these apart: every node of a
cluster has its own, and two machines can share one.  So a machine is named
as asv names it, by ``HARNESS_MACHINE`` when it is set (give every node of
one type the same name) and else by the short hostname, and records are
pooled on that name together with what the machine is (:data:`POOLED`),
never on the hostname.

Framework-free: ``identity`` asks the operating system (and ``nvidia-smi``,
where there is one), so the orchestrator can call it before any worker runs.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from zoo import files

# The most /proc/cpuinfo may hold here: some 2 KB per logical CPU, so a
# machine of a few thousand CPUs stays below it.
CPUINFO_BYTES = 16 * 1024 * 1024
CPUINFO = Path("/proc/cpuinfo")


class Measured(Protocol):
    """What this module reads of a record (a ``harness.core.records.Record``;
    machines sits below records and does not import it)."""

    @property
    def framework(self) -> str: ...

    @property
    def platform(self) -> dict[str, Any]: ...


M = TypeVar("M", bound=Measured)

NAME_VARIABLE = "HARNESS_MACHINE"
# What must agree before two records' samples are pooled: the hostname is
# left out on purpose, so that the nodes of one machine type pool.
# The CPU is compared by what its kernels can use, not by its model name: two
# hosts that both call themselves "AMD EPYC", one with AVX-512 and one
# without, run other oneDNN, MKL, Eigen and XLA kernels, with other timings,
# rounding and even verdicts.
POOLED = (
    "name",
    "cpu_model",
    "cpu",
    "cpu_isa",
    "cores",
    "memory_gb",
    "accelerator",
)
# The instruction sets that change which kernels the frameworks pick.
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_NVIDIA_SMI_TIMEOUT_S = 20  # a hung driver must not stop a run


def identity(libraries: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This machine: ``name``, ``hostname``, ``cpu_model``, ``cpu`` and
    ``cpu_isa`` (``cpu_details``), ``cores`` (the
    logical CPUs this process may use), ``memory_gb`` (total RAM, 10^9 bytes,
    one decimal), ``accelerator`` (the GPUs ``nvidia-smi`` lists, else
    ``"none"``), ``os``, ``python``; and ``libraries`` when given.

    Raises ValueError when ``HARNESS_MACHINE`` is set to a name that is not
    1 to 64 letters, digits, dots, underscores or hyphens."""
    hostname = socket.gethostname()
    found: dict[str, Any] = {
        "name": _given_name() or short_hostname(hostname),
        "hostname": hostname,
        "cpu_model": cpu_model(),
        **cpu_details(),
        "cores": _cores(),
        "memory_gb": _memory_gb(),
        "accelerator": accelerator(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    if libraries is not None:
        found["libraries"] = dict(libraries)
    return found


def _given_name() -> str | None:
    """``HARNESS_MACHINE``, checked; None when it is not set."""
    given = os.environ.get(NAME_VARIABLE)
    if given is None:
        return None
    if not _NAME.fullmatch(given) or set(given) == {"."}:
        raise ValueError(
            f"{NAME_VARIABLE}={given[:80]!r} is no machine name: use 1 to 64 "
            "letters, digits, dots, underscores or hyphens (not only dots), the "
            "same on every node of one machine type, e.g. h200-node"
        )
    return given


def short_hostname(hostname: str) -> str:
    """``node7`` for ``node7.cluster.example.org``; an IPv4 address whole."""
    if hostname.replace(".", "").isdigit():
        return hostname
    return hostname.split(".", 1)[0] or hostname


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor``)."""
    try:
        for line in files.read_text(CPUINFO, CPUINFO_BYTES).splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_details(cpuinfo: str | None = None) -> dict[str, str]:
    """``cpu``: the first CPU's vendor, family, model number and stepping,
    e.g. ``AuthenticAMD family 25 model 17 stepping 1``; ``cpu_isa``: which of
    :data:`ISA_FLAGS` it has, e.g. ``avx avx2 fma avx512f ...`` (``none``
    when it has none of them).  Both ``unknown`` where ``/proc/cpuinfo``
    (or ``cpuinfo``, its text) does not say."""
    if cpuinfo is None:
        try:
            cpuinfo = files.read_text(CPUINFO, CPUINFO_BYTES)
        except OSError:
            cpuinfo = ""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if first:
                break  # the first processor's block is enough
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value.strip())
    parts = [first.get(k) for k in ("vendor_id", "cpu family", "model", "stepping")]
    if any(p is None for p in parts) or "flags" not in first:
        return {"cpu": "unknown", "cpu_isa": "unknown"}
    vendor, family, model, stepping = parts
    flags = set(first["flags"].split())
    return {
        "cpu": f"{vendor} family {family} model {model} stepping {stepping}",
        "cpu_isa": " ".join(f for f in ISA_FLAGS if f in flags) or "none",
    }


def _cores() -> int:
    """The logical CPUs this process may run on (its affinity, where the
    system has one: a pinned or containerised run has fewer than the host)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _memory_gb() -> float | None:
    """Total RAM in 10^9 bytes, one decimal (psutil, else ``sysconf``); None
    where neither can tell."""
    try:
        import psutil

        total = float(psutil.virtual_memory().total)
    except ImportError:
        try:
            total = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (AttributeError, OSError, ValueError):
            return None
    return round(total / 1e9, 1)


def accelerator() -> str:
    """The NVIDIA GPUs with their memory, e.g. ``2x NVIDIA H200 (143771 MiB)``;
    ``"none"`` without ``nvidia-smi`` or when it fails (no driver, a hang)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "none"
    try:
        listed = subprocess.run(
            [smi, "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
        ).stdout
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return "none"
    gpus = Counter(_gpu(line) for line in listed.splitlines() if line.strip())
    if not gpus:
        return "none"
    return "; ".join(
        gpu if n == 1 else f"{n}x {gpu}" for gpu, n in sorted(gpus.items())
    )


def _gpu(line: str) -> str:
    """``NVIDIA H200 (143771 MiB)`` for ``NVIDIA H200, 143771 MiB``."""
    name, _, memory = line.rpartition(",")
    return f"{name.strip()} ({memory.strip()})" if name else line.strip()


def name_of(record: Measured) -> str:
    """The name of the machine ``record`` was measured on: its identity's
    name, else (records before machine identities) its short hostname, else
    ``"unknown"``."""
    machine = record.platform.get("machine")
    if isinstance(machine, dict) and isinstance(machine.get("name"), str):
        return str(machine["name"])
    hostname = record.platform.get("hostname")
    return short_hostname(hostname) if isinstance(hostname, str) else "unknown"


def pooled(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a record's machine (``recorded``: its ``platform``) that
    must agree before its samples are pooled (:data:`POOLED`); for records
    without an identity, the name their hostname gives."""
    machine = recorded.get("machine")
    if isinstance(machine, dict):
        return {k: machine[k] for k in POOLED if k in machine}
    hostname = recorded.get("hostname")
    return {"name": short_hostname(hostname)} if isinstance(hostname, str) else {}


def group(recs: Iterable[M]) -> dict[str, list[M]]:
    """Records by machine name, machines in first-seen order."""
    out: dict[str, list[M]] = {}
    for r in recs:
        out.setdefault(name_of(r), []).append(r)
    return out


def describe(name: str, recs: Iterable[Measured]) -> dict[str, Any]:
    """One row for the machines table: what the machine is (from its records'
    identities; older records give their CPU model and count) and every
    framework version its records name, e.g. ``jax 0.10.2, keras 3.15.1``."""
    recs = list(recs)
    machine: dict[str, Any] = next(
        (
            r.platform["machine"]
            for r in recs
            if isinstance(r.platform.get("machine"), dict)
        ),
        {},
    )
    first = recs[0].platform if recs else {}
    versions = set()
    for r in recs:
        if isinstance(r.platform.get("framework_version"), str):
            versions.add(f"{r.framework} {r.platform['framework_version']}")
        if isinstance(r.platform.get("keras_version"), str):
            versions.add(f"keras {r.platform['keras_version']}")
    return {
        "machine": name,
        "cpu_model": machine.get("cpu_model", first.get("cpu_model")),
        "cpu": machine.get("cpu"),
        "cpu_isa": machine.get("cpu_isa"),
        "cores": machine.get("cores", first.get("cpu_count")),
        "memory_gb": machine.get("memory_gb"),
        "accelerator": machine.get("accelerator"),
        "frameworks": ", ".join(sorted(versions)) or None,
    }
