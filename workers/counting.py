"""Counting the instructions of timed closures, inside a worker that runs
under callgrind.

``harness count`` starts a worker as ``valgrind --tool=callgrind
--instr-atstart=no ... python -m workers.serve ...`` (``harness.count.
measure``), with two environment variables: ``HARNESS_CALLGRIND_LIB``, the
shared library built from ``workers/callgrind_requests.c`` (callgrind's
client requests, callable through ctypes), and ``HARNESS_CALLGRIND_OUT``,
callgrind's ``--callgrind-out-file``.  Imports, compilation and warm-up run
uninstrumented (several times faster than counted code); then every
counted block is bracketed by a zero and a labelled dump, so a dump holds
the instructions of that block and nothing else: the same closures, steps
and blocks that the timing tasks time (``workers.timing.blocks_of``).

Standard library only (the MXNet worker imports it).
"""

from __future__ import annotations

import ctypes
import functools
import gc
import itertools
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from workers.messages import CALLGRIND_LIBRARY_ENV as LIBRARY_ENV
from workers.messages import CALLGRIND_OUT_ENV as OUT_ENV
from workers.messages import CountAnswer
from workers.timing import _order, blocks_of
from zoo import files

# The largest callgrind dump read (one labelled region's is a few MB).
MAX_DUMP_BYTES = 256 << 20
EMPTY_DUMPS = 3  # dumps of an empty region: the counter's own cost
CALIBRATION_LOOP = 20_000  # iterations whose count calibrates the extra work


class Callgrind:
    """Callgrind's client requests in this process; ValueError in one
    sentence when the process does not run under callgrind.  Callgrind
    numbers its dumps over the whole process, so a process has one of
    these (``process_callgrind``), however many requests it serves."""

    def __init__(self) -> None:
        library, out = os.environ.get(LIBRARY_ENV), os.environ.get(OUT_ENV)
        if not library or not out:
            raise ValueError(
                f"a count request needs a worker started by harness count "
                f"({LIBRARY_ENV} and {OUT_ENV} are not set)"
            )
        self._lib = ctypes.CDLL(library)
        self._lib.harness_dump.argtypes = [ctypes.c_char_p]
        if not self._lib.harness_on_valgrind():
            raise ValueError("a count request needs a worker running under valgrind")
        self.out = out
        self.dumps = 0  # callgrind numbers its dump files out.1, out.2, ...

    def start(self) -> None:
        self._lib.harness_start()

    def stop(self) -> None:
        self._lib.harness_stop()

    def count(self, region: Callable[[], object], label: str) -> Path:
        """Count ``region`` alone into a dump labelled ``label``; its file.

        Every region run while instrumentation is on is dumped: here, what a
        region run without a dump executed showed up in the next dump (2% of
        a block after one such warm-up block, 6% after four), though
        callgrind's zero came between.

        Python's cyclic garbage collector runs first and is off inside the
        region, as ``timeit`` turns it off: it runs whenever allocations pass
        a threshold and then visits every object the heap holds, so where a
        collection falls, and what it costs, depends on the process'
        history, not on the step (Keras' ``predict`` on PyTorch: blocks 1.4%
        apart with it on, here).  Reference counting frees as usual."""
        gc.collect()
        was_on = gc.isenabled()
        gc.disable()
        try:
            self._lib.harness_zero()
            region()
            self._lib.harness_dump(label.encode())
        finally:
            if was_on:
                gc.enable()
        self.dumps += 1
        return Path(f"{self.out}.{self.dumps}")


@functools.cache
def process_callgrind() -> Callgrind:
    """This process' ``Callgrind``, made on first use."""
    return Callgrind()


def instructions(dump: Path, label: str) -> int:
    """The instructions a dump file holds (its ``totals`` line), after
    checking that it is the dump labelled ``label``."""
    text = files.read_bytes(dump, MAX_DUMP_BYTES).decode(errors="replace")
    if f"Client Request: {label}\n" not in text:
        raise ValueError(f"callgrind's dump {dump} is not the one labelled {label!r}")
    for line in text.splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"callgrind's dump {dump} has no totals line")


def extra_work(iterations: int) -> int:
    """Pure-Python work of a known size: the injected change.  Every
    iteration costs the same (no integer it touches is allocated: small
    integers are shared), so its cost per iteration does not depend on how
    many there are."""
    flag = 0
    for _ in itertools.repeat(None, iterations):
        flag ^= 1
    return flag


def _calibrated(
    callgrind: Callgrind, block: Callable[[], object], factor: float, tag: str
) -> int:
    """Iterations of ``extra_work`` that add ``factor - 1`` times what one
    ``block`` executes: the block counted once, the loop's cost per
    iteration from a long loop.  Calling the loop at all costs some 2,500
    instructions more (0.25% of 1% of a block of a million), left as it is:
    counted alone after other regions, the call's cost moved by more than
    itself."""

    def counted(region: Callable[[], object], what: str) -> int:
        label = f"{tag} calibrate {what}"
        return instructions(callgrind.count(region, label), label)

    block_count = counted(block, "block")
    counted(lambda: extra_work(CALIBRATION_LOOP), "warm")  # specialised first
    per_iteration = counted(lambda: extra_work(CALIBRATION_LOOP), "loop") / (
        CALIBRATION_LOOP
    )
    return max(1, round((factor - 1.0) * block_count / per_iteration))


def count_blocks(
    runs: Sequence[Callable[..., object]],
    paths: Sequence[str],
    phase: str,
    *,
    steps: int,
    batches_per_round: int,
    blocks: int,
    warmup_runs: int,
    seed: int,
    tag: str,
    extra: Sequence[float],
) -> CountAnswer:
    """``blocks`` counted blocks of every closure in ``runs`` (one per path
    in ``paths``), after each one's first step or round, uncounted.
    ``extra[k]`` above 1 adds that factor of path ``k``'s own work to each
    of its counted blocks.

    Unlike the timing, which interleaves paths so that the machine's load
    falls on all alike, a path's blocks are counted one after another, the
    paths in an order drawn from ``seed``: a count does not move with load,
    but it does with the interpreter's caches (the type attribute cache, the
    small-object allocator's pools), which whatever ran just before leaves
    behind.  So each path first runs ``warmup_runs`` blocks (at least one),
    counted as every block is but not kept, then, when it gets extra work,
    its calibration and one more such block with the extra work, then its
    counted blocks.  The
    analysis takes the median of a process' blocks (three by default)."""
    if blocks < 1 or warmup_runs < 0 or len(extra) != len(runs):
        raise ValueError(
            f"counting needs at least one block, no negative warm-up and one "
            f"extra factor per path, got blocks={blocks}, warmup_runs="
            f"{warmup_runs} and {len(extra)} factors for {len(runs)} paths"
        )
    callgrind = process_callgrind()
    rng = random.Random(seed)
    made = [blocks_of(run, phase, steps, batches_per_round) for run in runs]
    for first, _, _ in made:
        first()
    labels = [[f"{tag} {i} {path}" for path in paths] for i in range(blocks)]
    loops = [0] * len(runs)
    callgrind.start()
    try:
        empty = [f"{tag} empty {i}" for i in range(EMPTY_DUMPS)]
        for label in empty:
            callgrind.count(lambda: None, label)
        for k in _order(rng, len(made)):
            block = made[k][1]
            for w in range(max(1, warmup_runs)):  # dumped, see Callgrind.run
                callgrind.count(block, f"{tag} warm {w} {paths[k]}")
            if extra[k] > 1.0:
                loops[k] = _calibrated(callgrind, block, extra[k], f"{tag} {paths[k]}")

            def region(
                block: Callable[[], object] = block, loop: int = loops[k]
            ) -> None:
                block()
                if loop:
                    extra_work(loop)

            if loops[k]:  # the calibration ran other code
                callgrind.count(region, f"{tag} warm extra {paths[k]}")
            for i in range(blocks):
                callgrind.count(region, labels[i][k])
    finally:
        callgrind.stop()
    return CountAnswer(
        paths=list(paths),
        per_block=made[0][2],
        labels=labels,
        empty=empty,
        loops=loops,
        nonfinite=[None] * len(runs),
    )
