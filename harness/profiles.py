"""Benchmark profiles: how long and how hard ``harness run`` measures.

A profile is a set of base settings plus per-model replacements.  ``default``
is sized to finish ``nox -s bench`` in about 15 minutes on a 2-core machine,
at each workload's own batch size.  Keras pays a fixed cost per ``fit`` and
``predict`` call (building its data pipeline), so cheap models get many steps
per call, as in a real epoch; VGG16 gets few (one step takes seconds there,
and Keras on JAX is slower still).  ``smoke`` finishes in about
2 minutes (small VGG16 and LSTM batches, one worker per path for all its
cells).  ``paper`` follows the Rysia paper's protocol (workload batch sizes,
seven repeats, one-minute inference windows) and is meant for bigger machines.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Settings:
    train_steps: int  # timed optimizer steps per repeat
    repeats: int  # timed repeats of train_steps; the median is reported
    infer_batches: int  # resident mini-batches per inference round
    window_s: float  # inference time window (at least one round is timed)
    warmup_rounds: int  # untimed inference rounds first
    # untimed runs of train_steps after the first step: some runtimes (XLA on
    # CPU) keep getting faster for a few steps after compiling
    warmup_repeats: int = 0
    batch_size: int | None = None  # None: the workload's batch size


@dataclass(frozen=True)
class Profile:
    name: str
    base: Settings
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    fresh_worker_per_cell: bool = True  # else one worker per path serves all
    timeout_s: float = 1800.0  # for one cell, worker start-up excluded

    def settings(self, model: str) -> Settings:
        return replace(self.base, **self.per_model.get(model, {}))


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        Settings(
            train_steps=2, repeats=1, infer_batches=2, window_s=0.5, warmup_rounds=1
        ),
        per_model={"vgg16": {"batch_size": 8}, "lstm": {"batch_size": 32}},
        fresh_worker_per_cell=False,
    ),
    "default": Profile(
        "default",
        Settings(
            train_steps=3, repeats=3, infer_batches=4, window_s=3.0, warmup_rounds=1
        ),
        per_model={
            # Cheap steps: many per fit/predict call, so that Keras' fixed cost
            # per call is spread as it is in a real epoch.
            "ffn": {"train_steps": 50, "infer_batches": 50, "warmup_repeats": 1},
            "lenet": {"train_steps": 20, "infer_batches": 20, "warmup_repeats": 1},
            "vgg16": {"train_steps": 2, "repeats": 2, "infer_batches": 1},
            "lstm": {"repeats": 2, "infer_batches": 2},
        },
    ),
    "paper": Profile(
        "paper",
        Settings(
            train_steps=100, repeats=7, infer_batches=8, window_s=60.0, warmup_rounds=3
        ),
    ),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(
            f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}"
        )
    return PROFILES[name]
