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
import gc
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from workers.messages import CALLGRIND_LIBRARY_ENV as LIBRARY_ENV
from workers.messages import CALLGRIND_OUT_ENV as OUT_ENV
from workers.messages import CountAnswer
from workers.timing import _order, blocks_of

EMPTY_DUMPS = 3  # dumps of an empty region: the counter's own cost
CALIBRATION_LOOP = 20_000  # iterations whose count calibrates the extra work


class Callgrind:
    """Callgrind's client requests in this process; ValueError in one
    sentence when the process does not run under callgrind."""

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

        Python's cyclic garbage collector is off inside the region, as
        ``timeit`` turns it off: it runs whenever allocations pass a
        threshold and then visits every object the heap holds, so where a
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


def instructions(dump: Path, label: str) -> int:
    """The instructions a dump file holds (its ``totals`` line), after
    checking that it is the dump labelled ``label``."""
    text = dump.read_text(errors="replace")
    if f"Client Request: {label}\n" not in text:
        raise ValueError(f"callgrind's dump {dump} is not the one labelled {label!r}")
    for line in text.splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise ValueError(f"callgrind's dump {dump} has no totals line")


def extra_work(iterations: int) -> int:
    """Pure-Python work of a known size: the injected change."""
    total = 0
    for i in range(iterations):
        total += i
    return total


def _calibrated(
    callgrind: Callgrind, block: Callable[[], object], factor: float, tag: str
) -> int:
    """Iterations of ``extra_work`` that add ``factor - 1`` times what one
    ``block`` executes (counted here twice, the second kept: the first
    count after others can differ, see ``count_blocks``)."""
    counts = [
        instructions(
            callgrind.count(block, f"{tag} calibrate {i}"), f"{tag} calibrate {i}"
        )
        for i in range(2)
    ]
    extra_work(CALIBRATION_LOOP)  # specialised by the interpreter before counting
    loop = f"{tag} calibrate-loop"
    loop_count = instructions(
        callgrind.count(lambda: extra_work(CALIBRATION_LOOP), loop), loop
    )
    return round((factor - 1.0) * counts[-1] / (loop_count / CALIBRATION_LOOP))


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
    in ``paths``), after each one's first step or round and ``warmup_runs``
    blocks, uncounted.  ``extra[k]`` above 1 adds that factor of path
    ``k``'s own work to each of its counted blocks.

    The first block counted after other work can differ from the next ones
    by what the heap was left holding (CPython's small-object allocator
    filling its pools again: 6% on a pure-Python loop here, 0.2% on
    Keras' ``fit``); the analysis takes the median of a process' blocks
    (three by default), which such a first block does not move."""
    if blocks < 1 or warmup_runs < 0 or len(extra) != len(runs):
        raise ValueError(
            f"counting needs at least one block, no negative warm-up and one "
            f"extra factor per path, got blocks={blocks}, warmup_runs="
            f"{warmup_runs} and {len(extra)} factors for {len(runs)} paths"
        )
    callgrind = Callgrind()
    rng = random.Random(seed)
    made = [blocks_of(run, phase, steps, batches_per_round) for run in runs]
    for first, _, _ in made:
        first()
    for _ in range(warmup_runs):
        for k in _order(rng, len(made)):
            made[k][1]()
    callgrind.start()
    try:
        empty = [f"{tag} empty {i}" for i in range(EMPTY_DUMPS)]
        for label in empty:
            callgrind.count(lambda: None, label)
        loops = [
            _calibrated(callgrind, made[k][1], factor, f"{tag} {paths[k]}")
            if factor > 1.0
            else 0
            for k, factor in enumerate(extra)
        ]
        labels = [[f"{tag} {i} {path}" for path in paths] for i in range(blocks)]
        for i in range(blocks):
            for k in _order(rng, len(made)):
                block, loop = made[k][1], loops[k]

                def region(
                    block: Callable[[], object] = block, loop: int = loop
                ) -> None:
                    block()
                    if loop:
                        extra_work(loop)

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
