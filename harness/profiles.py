"""Benchmark profiles: how long and how hard ``harness run`` measures.

``default`` is sized to finish ``nox -s bench`` in about 15 minutes on a
2-core machine; ``smoke`` in about 2 minutes (smaller VGG16 batches, one
worker per path for all its cells); ``paper`` follows the Rysia paper's
protocol (workload batch sizes, seven repeats, one-minute inference windows)
and is meant for bigger machines.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    name: str
    train_steps: int  # timed optimizer steps per repeat
    repeats: int  # timed repeats of train_steps; the median is reported
    infer_batches: int  # resident mini-batches per inference round
    window_s: float  # inference time window
    warmup_rounds: int
    fresh_worker_per_cell: bool  # else one worker per path serves all its cells
    batch_sizes: dict[str, int] = field(default_factory=dict)  # default: workload's
    timeout_s: float = 1200.0  # for one cell, worker start-up excluded

    def batch_size(self, model: str, workload_batch: int) -> int:
        return self.batch_sizes.get(model, workload_batch)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        train_steps=2,
        repeats=1,
        infer_batches=2,
        window_s=0.5,
        warmup_rounds=1,
        fresh_worker_per_cell=False,
        batch_sizes={"vgg16": 8, "lstm": 32},
    ),
    "default": Profile(
        "default",
        train_steps=3,
        repeats=3,
        infer_batches=2,
        window_s=3.0,
        warmup_rounds=1,
        fresh_worker_per_cell=True,
    ),
    "paper": Profile(
        "paper",
        train_steps=100,
        repeats=7,
        infer_batches=8,
        window_s=60.0,
        warmup_rounds=3,
        fresh_worker_per_cell=True,
    ),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(
            f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}"
        )
    return PROFILES[name]
