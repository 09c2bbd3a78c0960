"""Reading callgrind's dumps: instructions per function, grouped by where
they execute.

A counting worker (``workers.counting``) asks callgrind for one dump per
counted block (``CALLGRIND_DUMP_STATS_AT(label)``); each dump is a file in
callgrind's format (https://valgrind.org/docs/manual/cl-format.html) holding
the instructions executed since the previous zero, per object file and
function.  ``read`` keeps what this project needs of it: the label, the
total, and the *self* instructions of every (object, function), the
instructions of the function's own code and not of the functions it calls
(a cost line straight after a ``calls=`` line is a call's inclusive cost
and is skipped).

``group`` puts each (object, function) in one of four groups:

- ``interpreter``: CPython itself (``libpython``, the ``python`` binary, the
  standard library's C modules in ``lib-dynload``);
- ``system``: the C and C++ runtimes, the loader, OpenMP (``libc``,
  ``libstdc++``, ``libgomp``...): the allocator, ``memcpy``, thread
  hand-offs;
- ``kernel``: the arithmetic: BLAS and oneDNN/MKL, Eigen, numpy's ufunc
  loops, ATen's vectorized loops, MXNet's mshadow kernels, and code with no
  object file at all (XLA's and oneDNN's code generated at run time, which
  valgrind cannot name);
- ``framework``: everything else, the frameworks' own native code:
  dispatch, autograd, graph runtimes, their Python bindings;
- ``spin``: threads of a pool polling for work (Eigen's thread pool in
  TensorFlow and JAX steals and polls between tasks, ``SPIN_FUNCTIONS``),
  with what those loops call (``__tls_get_addr``...).  How long a thread
  polls depends on when work arrives, not on the step: JAX's blocks here
  differed by up to 5 million such instructions.  Spinning is waiting, not
  work: it is reported apart and left out of ``work`` (every other group).

Which group a function lands in is decided by its object file and, inside
the frameworks' big libraries (``libtorch_cpu.so`` holds both the
dispatcher and ATen's kernels), by its name (``KERNEL_FUNCTIONS``).  The
rules are heuristics; ``docs/methodology.md`` ("Instruction counts") says
what they get wrong.  Non-kernel instructions (interpreter, framework,
system) are the work an API adds around the arithmetic.

Framework-free: the orchestrator reads dumps after the worker wrote them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from zoo import files

# The most a callgrind dump may hold: one block of a worker (the interpreter,
# a framework's libraries, some ten thousand functions and their calls) is
# some megabytes; a dump past this is no dump this code wrote for.
DUMP_BYTES = 512 * 1024 * 1024
GROUPS = ("interpreter", "framework", "system", "kernel", "spin")
NON_KERNEL = ("interpreter", "framework", "system")

_INTERPRETER_OBJECTS = re.compile(
    r"(^|/)(libpython3[^/]*|python3[.\d]*)$|/lib-dynload/"
)
_SYSTEM_OBJECTS = re.compile(
    r"(^|/)(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt"
    r"|libgomp|libiomp5|libomp|libz|libffi|libutil|libtcmalloc[^/]*|libjemalloc"
    r"|vgpreload_[^/]*)[.-][^/]*$"
)
_KERNEL_OBJECTS = re.compile(
    r"(mkl|openblas|blas|lapack|dnnl|mkldnn|onednn|xsmm|gfortran|sleef)[^/]*$", re.I
)
_OBJECT_GROUPS = (
    ("interpreter", _INTERPRETER_OBJECTS),
    ("system", _SYSTEM_OBJECTS),
    ("kernel", _KERNEL_OBJECTS),
)
# Kernel code inside the frameworks' own libraries, by function name.
KERNEL_FUNCTIONS = re.compile(
    r"Eigen::|dnnl|mkldnn|mkl_|gemm|GEMM|cblas|xnn_|__xla_cpu_runtime|"
    r"at::vec::|at::native::[^(]*(kernel|Kernel|vectorized|loop|Loop)|"
    r"c10::function_ref<void \(char\*\*|"
    r"tensorflow::functor::|mshadow::|mxnet::op::[^(]*Kernel|"
    r"^(BYTE|UBYTE|SHORT|USHORT|INT|UINT|LONG|ULONG|LONGLONG|ULONGLONG|HALF|FLOAT|"
    r"DOUBLE|LONGDOUBLE|BOOL)_|_aligned_contig|_contig_cast|simd_|sse2_|avx2_|avx512_"
)


# Thread pools waiting for work: the polling loops themselves.
SPIN_FUNCTIONS = re.compile(
    r"Eigen::ThreadPoolTempl<.*>::(GlobalSteal|LocalSteal|Steal|MaybeGetTask|"
    r"WaitForWork|NonEmptyQueueIndex)|"
    r"Eigen::RunQueue<.*>::(PopBack|PopFront|PopBackHalf|Empty|Size|SizeOrNotEmpty)|"
    r"Eigen::EventCount::|EigenEnvironment::Task::operator=|"
    r"gomp_(barrier|team_barrier|mutex|sem|ptrlock)_wait|do_spin|do_wait"
)
# Code valgrind can name only by its address (generated at run time).
GENERATED = "(code generated at run time)"


def group(obj: str, function: str) -> str:
    """The group (``GROUPS``) of ``function`` in object file ``obj``
    (``"???"`` or empty: code with no object file, generated at run time)."""
    if SPIN_FUNCTIONS.search(function):
        return "spin"
    if obj in ("", "???"):
        return "kernel"
    for name, objects in _OBJECT_GROUPS:
        if objects.search(obj):
            return name
    return "kernel" if KERNEL_FUNCTIONS.search(function) else "framework"


@dataclass
class Dump:
    """One callgrind dump: its label (the client request's), its total
    instructions, the self instructions of each (object, function), and
    of those, the ones each (object, function) spent called from a
    polling loop (``SPIN_FUNCTIONS``: a call's inclusive cost, at most the
    callee's own)."""

    label: str
    total: int
    functions: Counter[tuple[str, str]] = field(default_factory=Counter)
    from_spin: Counter[tuple[str, str]] = field(default_factory=Counter)

    def grouped(self) -> Counter[tuple[str, str, str]]:
        """Self instructions per (group, object, function): a function's
        instructions called from polling loops under ``spin``, the rest
        under its own group."""
        out: Counter[tuple[str, str, str]] = Counter()
        for (obj, function), count in self.functions.items():
            spun = min(count, self.from_spin[(obj, function)])
            if spun:
                out[("spin", obj, function)] += spun
            if count - spun:
                out[(group(obj, function), obj, function)] += count - spun
        return out

    def groups(self) -> dict[str, int]:
        """Instructions per group (every group present, 0 where none)."""
        out = dict.fromkeys(GROUPS, 0)
        for (name, _, _), count in self.grouped().items():
            out[name] += count
        return out


class DumpError(ValueError):
    """A file that is no whole callgrind dump."""


_NAMED = re.compile(r"^(c?ob|c?fn|fl|fi|fe|cfi|cfl)=(?:\((\d+)\))?\s*(.*)$")
_COST = re.compile(r"^[+\-*\d]")
# callgrind names a recursive call's instance f'2, f'3...: one function.
_RECURSION = re.compile(r"'\d+$")


class _Reader:
    """The state of reading one dump, line by line."""

    def __init__(self) -> None:
        self.label = ""
        self.total: int | None = None
        self.events: list[str] = []
        self.positions = 1
        self.names: dict[tuple[str, str], str] = {}  # (kind, id) -> name
        self.obj = self.fn = ""
        self.callee: tuple[str | None, str] = (None, "")  # cob=, cfn=
        self.after_call = False
        self.functions: Counter[tuple[str, str]] = Counter()
        self.from_spin: Counter[tuple[str, str]] = Counter()

    def line(self, line: str) -> None:
        if _COST.match(line):
            self._cost(line)
        elif line.startswith("calls="):
            self.after_call = True
        elif named := _NAMED.match(line):
            self._name(*named.groups())
        else:
            self._header(*line.partition(":")[::2])

    def _cost(self, line: str) -> None:
        fields = line.split()
        if len(fields) <= self.positions or "Ir" not in self.events:
            return
        count = int(fields[self.positions + self.events.index("Ir")])
        if self.after_call:  # a call's inclusive cost: not the caller's own
            self.after_call = False
            if SPIN_FUNCTIONS.search(self.fn):
                callee_obj, callee_fn = self.callee
                self.from_spin[(callee_obj or self.obj, callee_fn)] += count
            self.callee = (None, "")
            return
        self.functions[(self.obj, self.fn)] += count

    def _name(self, kind: str, ident: str | None, name: str) -> None:
        """``ob=``, ``fn=`` and the like, with callgrind's name compression:
        ``(id) name`` defines an id, ``(id)`` alone refers to it."""
        space = kind.removeprefix("c")
        space = "fl" if space in ("fi", "fe", "fl") else space
        if ident is not None and name:
            self.names[(space, ident)] = name
        elif ident is not None:
            name = self.names.get((space, ident), "???")
        if kind in ("fn", "cfn"):
            name = _RECURSION.sub("", name)
            if name.startswith("0x"):  # no symbol: code generated at run time
                name = GENERATED
        if kind == "ob":
            self.obj = name
        elif kind == "fn":
            self.fn = name
        elif kind == "cob":
            self.callee = (name, self.callee[1])
        elif kind == "cfn":
            self.callee = (self.callee[0], name)

    def _header(self, key: str, value: str) -> None:
        if key == "desc" and value.strip().startswith("Trigger: Client Request:"):
            self.label = value.split("Client Request:", 1)[1].strip()
        elif key == "events":
            self.events = value.split()
        elif key == "positions":
            self.positions = len(value.split())
        elif key == "totals":
            # the sum of every cost line (summary: less the dump request's own)
            self.total = int(value.split(maxsplit=1)[0])


def read(path: Path) -> Dump:
    """The dump in ``path``.  Raises DumpError when it is not a whole
    callgrind dump of instruction counts (no ``events: Ir``, no total, or
    self costs that do not add up to the total), or is no regular file of at
    most ``DUMP_BYTES`` (``zoo.files``)."""
    try:
        text = files.read_bytes(path, DUMP_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise DumpError(f"cannot read callgrind dump {path}: {exc}") from None
    reader = _Reader()
    for line in text.splitlines():
        if line:
            reader.line(line)
    if "Ir" not in reader.events or reader.total is None:
        raise DumpError(f"{path} is no callgrind dump of instructions (events: Ir)")
    counted = sum(reader.functions.values())
    if counted != reader.total:
        raise DumpError(
            f"{path}: the functions' instructions add up to {counted}, its total "
            f"says {reader.total}: a torn or foreign file"
        )
    return Dump(
        label=reader.label,
        total=reader.total,
        functions=reader.functions,
        from_spin=reader.from_spin,
    )
