"""The two test tiers and the sizes each runs its checks at: one table.

``nox -s tests`` (CI) runs the **fast** tier, ``nox -s tests-full`` the
**full** one (``pytest --tier full``).  A test is written once; where its
size matters it carries ``@pytest.mark.sized`` and reads its sizes from
:func:`size` (a Hypothesis test's number of draws from :func:`draws`), so the
tier, not the test, decides how big a model, how long a sequence and how many
draws.  ``pytest -m sized`` lists exactly the tests the tier changes.

The fast tier proves the code: every path, execution mode, layer kind, fault
and worker task through real workers once, and every command end to end once
through one framework (the same command through the others, or run a second
time, is the full tier's: ``full_only``), at the smallest size that exercises
it (VGG16's blocks and layer kinds at a sixteenth of its filters; the LSTM at
a short sequence).  The full
sizes are what every ``harness run`` checks anyway before it times anything
(the gate): the full tier runs the suite at today's sizes, for a release or
after a change to ``native/`` or ``equivalence/`` (docs/testing.md).
``tests/paths/test_touched.py`` fails when the fast tier stops exercising a
path, a mode, a model family, a layer kind or a fault.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workers.paths import PATHS
from zoo.specs import EXAMPLE_MODELS, MODELS, SHAPE_MODELS

TIERS = ("fast", "full")
# The one framework the fast tier sends a command through end to end (the
# others are the full tier's): PyTorch, whose Keras and native paths share one
# paired worker, the cheapest start; and its paths.
COMMAND_FRAMEWORK = "torch"
COMMAND_PATHS = tuple(p for p, i in PATHS.items() if i.framework == COMMAND_FRAMEWORK)
# The variants that carry the layer options users' models bring (strides,
# 'same' pools, tanh, sigmoid, softmax, stacked LSTMs, dense on sequences):
# small, so both tiers check every path on them.
OPTION_MODELS = ("strided-cnn", "stacked-lstm")
# The variants that carry the layer kinds today's models are made of
# (embeddings, attention, residual adds, layer normalization, GELU, 1-D
# convolutions and pools, GRUs, global average pooling, batch normalization,
# dropout), those users' models brought (issue 62: ``kinds-cnn``,
# ``kinds-seq``), and each kind's own example (``Kind.example``: a kind added
# since needs no line here): small, so both tiers check every path on them.
KIND_MODELS = (
    "transformer-tiny",
    "conv1d-gru",
    "gap-cnn",
    "bn-dropout-cnn",
    "kinds-cnn",
    "kinds-seq",
    *EXAMPLE_MODELS,
    *SHAPE_MODELS,  # several inputs and outputs (``zoo.specs.SHAPE_MODELS``)
)


@dataclass(frozen=True)
class Sizes:
    """What one tier runs its sized checks at."""

    # The VGG16 family: the model itself, or its narrow twin (same blocks and
    # layer kinds, same module, a sixteenth of the filters).
    vgg16: str
    # The transformer family: the model itself, or its tiny twin (the same
    # layer kinds and block, one block of width 8 over 12 tokens of 50).
    transformer: str
    # The named variants the native tests check in process besides one model
    # of each family.
    variants: tuple[str, ...]
    # The LSTM case at the workload's own length (``None``: 250 steps), or a
    # shorter one that still runs every gate over many steps.
    lstm_long: int | None
    # How many draws each equivalence test makes: a factor on its own count.
    draw_factor: float
    # The models execution modes are compared on in process (a compiled mode
    # recompiles per model: torch.compile takes 30-50 s for LeNet or the LSTM).
    mode_models: tuple[str, ...]
    # The models whose accuracy on real digits every path must reach.
    accuracy_models: tuple[str, ...]
    # The checks that only repeat at full size what the fast tier proves at a
    # smaller one (a second model compiled in one worker, an injected change
    # counted in a second callgrind process): run, or skipped with the tier.
    full_only: bool

    @property
    def families(self) -> tuple[str, ...]:
        """One model of each reference model's family, at this tier's size."""
        scaled = {"vgg16": self.vgg16, "transformer": self.transformer}
        return tuple(scaled.get(name, name) for name in MODELS)

    @property
    def models(self) -> tuple[str, ...]:
        return (*self.families, *self.variants)


SIZES = {
    "fast": Sizes(
        vgg16="vgg16-narrow",
        transformer="transformer-tiny",
        # every kind model but the transformer's, which is the family here
        variants=(*OPTION_MODELS, *(m for m in KIND_MODELS if m != "transformer-tiny")),
        lstm_long=40,
        draw_factor=0.25,
        mode_models=("ffn",),
        accuracy_models=("ffn",),
        full_only=False,
    ),
    "full": Sizes(
        vgg16="vgg16",
        transformer="transformer",
        variants=("vgg-rysia", "vgg16-narrow", *OPTION_MODELS, *KIND_MODELS),
        lstm_long=None,
        draw_factor=1.0,
        mode_models=("ffn", "lenet", "lstm"),
        accuracy_models=("ffn", "lenet"),
        full_only=True,
    ),
}

# Set by ``tests/conftest.py`` from ``--tier`` before any test module is
# imported; the environment variable is for a run outside pytest's options
# (a subprocess, a debugger).
_tier = os.environ.get("ZOO_TEST_TIER", "fast")


def set_tier(name: str) -> None:
    global _tier  # noqa: PLW0603 (one setting for the session, set once)
    if name not in TIERS:
        raise ValueError(f"unknown test tier {name!r}; known: {', '.join(TIERS)}")
    _tier = name


def tier() -> str:
    return _tier


def size() -> Sizes:
    """The sizes of the tier this session runs."""
    return SIZES[_tier]


def full_only(sizes: Sizes, what: str) -> None:
    """Skip the calling test in the fast tier, saying what the full tier adds."""
    import pytest

    if not sizes.full_only:
        pytest.skip(f"full tier only (nox -s tests-full): {what}")


def draws_at(in_full: int) -> int:
    """A sized test's draws: its own count in the full tier, the fast tier's
    share of it (at least one) otherwise."""
    return max(1, round(in_full * size().draw_factor))


def fault_pairs(paths: tuple[str, ...]) -> list[tuple[str, str]]:
    """The (fault, native path) pairs the fault test runs.  The full tier:
    every fault in every one of ``paths``.  The fast tier: each fault once,
    the paths taken in turn within each stage the faults point at
    (``forward``, ``loss``, ``update``), and a stage with fewer faults than
    paths goes round its faults again until every path has met it: every
    fault caught once, every path's localization tried at every stage.  In
    ``FAULT_CASES``' order either way (those of one case together: the
    checker asks the case's other paths once)."""
    from equivalence.sensitivity import FAULT_CASES, fault_stage

    faults = list(FAULT_CASES)
    if size().full_only:
        return [(f, p) for f in faults for p in paths]
    stages: dict[str, list[str]] = {}
    for fault in faults:
        stages.setdefault(fault_stage(fault), []).append(fault)
    pairs = {
        (named[i % len(named)], paths[i % len(paths)])
        for named in stages.values()
        for i in range(max(len(named), len(paths)))
    }
    return sorted(pairs, key=lambda pair: (faults.index(pair[0]), paths.index(pair[1])))
