"""What a worker's resource use adds to a record or a line of results.

The orchestrator samples every worker while it serves a request
(``workers.resources``): its CPU use and peak memory, and the machine's
other work meanwhile.  ``run``, ``explain``, ``ops`` and ``floors`` keep the
same figures of it, in the same form, through :func:`resource_summary`.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from workers.resources import contended

# workers.resources: the worker's own use, and the machine's other work
RESOURCE_KEYS = (
    "cpu_util",
    "peak_rss_mb",
    "peak_gpu_mb",
    "wall_s",
    "others_cpu",
    "steal_frac",
)


def resource_summary(resources: dict[str, Any]) -> dict[str, Any]:
    """The worker's resource use and whether the machine was busy meanwhile
    (``workers.resources.contended``)."""
    # A value that is not finite (a worker gone before its CPU time was read)
    # is left out: the records reader refuses times that are not numbers.
    found = {
        k: v
        for k, v in resources.items()
        if k in RESOURCE_KEYS and isinstance(v, int | float) and math.isfinite(v)
    }
    return found | {"contended": contended(resources)}


# workers.timing.USAGE: getrusage per step or mini-batch of the timed regions,
# and the timing thread's wait for a CPU (ready_s; older workers lack it)
USAGE_KEYS = ("user_s", "sys_s", "minflt", "majflt", "nvcsw", "nivcsw", "ready_s")


def usage_summary(usage: Any) -> dict[str, float]:
    """The median over a record's timed runs or blocks of each ``getrusage``
    figure per step or mini-batch (``workers.timing.USAGE``), as summary keys
    ``usage_<name>``; empty for a record without them (an older worker)."""
    if not isinstance(usage, list) or not usage:
        return {}
    out = {}
    for key in USAGE_KEYS:
        seen = [
            float(u[key])
            for u in usage
            if isinstance(u, dict) and isinstance(u.get(key), int | float)
        ]
        if seen and all(math.isfinite(v) for v in seen):
            out[f"usage_{key}"] = statistics.median(seen)
    return out
