"""What a worker's resource use adds to a record or a line of results.

The orchestrator samples every worker while it serves a request
(``workers.resources``): its CPU use and peak memory, and the machine's
other work meanwhile.  ``run``, ``explain``, ``ops`` and ``floors`` keep the
same figures of it, in the same form, through :func:`resource_summary`.
"""

from __future__ import annotations

import math
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
