"""How late getrusage counts a thread running on another CPU (issue 81,
docs/methodology.md, "Idle blocks").

One thread computes throughout (a 200x200 matmul in a loop, one BLAS
thread); the main thread sleeps blocks of 20 ms to 0.5 s and takes the
process' CPU time around each by getrusage and by each thread's own clock
(``pthread_getcpuclockid``, exact).  Printed per block length: the spread of
getrusage's CPU share over the blocks (a process that computed alike in
every block: any spread is the counting), and getrusage less the threads'
clocks, per wall second.  Run it as it is (two CPUs) and under
``taskset -c 0`` (one CPU: nothing runs while the main thread asks)::

    python docs/results/getrusage_tick.py
    taskset -c 0 python docs/results/getrusage_tick.py
"""

from __future__ import annotations

import os
import resource
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np

BLOCKS_S = (0.02, 0.05, 0.1, 0.2, 0.5)
SECONDS_EACH = 4.0


def _rusage_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    stop = threading.Event()
    started: list[int] = []

    def compute() -> None:
        started.append(threading.get_ident())
        a = np.random.default_rng(0).random((200, 200))
        while not stop.is_set():
            a @ a

    threading.Thread(target=compute, daemon=True).start()
    time.sleep(0.5)
    clocks = [time.pthread_getcpuclockid(t) for t in (threading.get_ident(), *started)]

    def exact_s() -> float:
        return sum(time.clock_gettime(c) for c in clocks)

    for block in BLOCKS_S:
        shares, unseen = [], []
        for _ in range(int(SECONDS_EACH / block)):
            r0, e0, w0 = _rusage_s(), exact_s(), time.perf_counter()
            time.sleep(block)
            r1, e1, w1 = _rusage_s(), exact_s(), time.perf_counter()
            shares.append((r1 - r0) / (w1 - w0))
            unseen.append(((r1 - r0) - (e1 - e0)) / (w1 - w0))
        print(
            f"block {block * 1e3:4.0f} ms: getrusage share spread "
            f"{max(shares) - min(shares):.2f}; getrusage less the thread clocks, "
            f"per wall second: {min(unseen):+.3f} to {max(unseen):+.3f}"
        )
    stop.set()


if __name__ == "__main__":
    main()
