"""What Keras is known to compute differently, said beside a verdict.

Two sorts, both only ever *said*, never used to turn a failure into a pass:

- **by design** (``bug=False``): the path computes another formula than
  Keras' documented one on purpose, and is judged against float64 as usual;
  the verdict carries the sentence so a reader knows what was judged.
  Keras on TensorFlow takes a cross-entropy from the logits before a final
  softmax or sigmoid (``zoo.losses.reaches_back``), whatever ``from_logits``
  says, and so never clips a probability.
- **a Keras bug** (``bug=True``): where a path fails *only* on the
  quantities the bug moves (``quantities``, a prefix: ``step`` for a
  training update), the failure is named as that bug, with where it is
  written up; a failure anywhere else is the path's own and is not named.

A by-design difference that moves a quantity the same way names the
failure too, on the same rule, and only where the quantity it must move
first (``needs``) is among the failing: Keras on TensorFlow's unclipped
cross-entropy fails a model only where a training pass puts a true class
below the clip, and then first on the loss at step 1, where every path
starts from the same parameters on the same batch (keras.io's U-Net:
docs/results/per_position.md).

Framework-free: it reads the spec and the failing quantities' names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zoo.kinds.base import same_padding
from zoo.losses import LOSSES, Objective, reaches_back
from zoo.optimizers import CLIPS
from zoo.specs import ModelSpec, layer_inputs

# How a note naming a Keras bug begins, for readers that pick them out.
KNOWN_BUG = "fails as known"


@dataclass(frozen=True)
class Known:
    """One thing Keras computes differently: ``name`` (an id),
    ``sentence`` (what, and where it is written up), whether it is a bug,
    ``applies(spec, path)``, and for a bug the prefix of the quantities it
    moves (``equivalence.compare`` names: ``step3/dense/kernel``), or the
    words of the error it stops the path with (``error``: the path cannot
    run the model at all); ``needs``: a quantity that must be among the
    failing ones for it to name them."""

    name: str
    sentence: str
    bug: bool
    applies: Callable[[ModelSpec, str], bool]
    quantities: str = ""
    error: str = ""
    needs: str = ""

    def names(self, failing: list[str], error: str) -> bool:
        """Whether it is what failed: the path stopped with its error, or
        failed only on the quantities it moves (a bug without ``quantities``
        moves any; a by-design difference without them names nothing), and
        on ``needs``."""
        if self.error:
            return bool(error) and self.error in error
        if not failing or not (self.bug or self.quantities):
            return False
        if self.needs and self.needs not in failing:
            return False
        return all(q.startswith(self.quantities) for q in failing)


def _keras_tensorflow(path: str) -> bool:
    return path.split("@", maxsplit=1)[0] == "keras-tensorflow"


def unclipped(spec: ModelSpec) -> bool:
    """Whether Keras on TensorFlow computes some output's cross-entropy
    from the logits before a sigmoid or softmax, unclipped
    (``zoo.losses.reaches_back``): a loss from probabilities on an output
    that ends in its softmax or sigmoid, or the focal loss from logits."""
    return any(
        LOSSES[h.objective.loss].takes_logits
        and reaches_back(h.objective, spec.layer(h.layer).activation)
        for h in spec.heads
    )


def padded_unevenly(spec: ModelSpec) -> bool:
    """Whether some ``same`` average pool of ``spec`` has a window wider than
    two and pads an axis of its input unevenly (one edge a step more than
    the other): the only pools Keras on PyTorch averages wrongly, its edge
    copies then counted in a mean of three or more (a window of two over
    one copy averages a value with itself; docs/findings/padded_average_pool.py
    prints the table)."""
    for layer, (shapes, _) in zip(spec.layers, layer_inputs(spec), strict=True):
        o = layer.options
        if layer.kind not in ("avg_pool", "avg_pool1d") or o.padding != "same":
            continue
        if o.pool_size > 2 and any(
            len(set(same_padding(side, o.pool_size, o.stride))) > 1
            for side in shapes[0][:-1]
        ):
            return True
    return False


KNOWN = (
    Known(
        "keras-tensorflow-sparse-gradient-optimizers",
        "Keras' optimizers on TensorFlow square (or take the absolute value "
        "of) an Embedding's sparse gradient per token occurrence, not per row, "
        "so a repeated token's update is wrong; every optimizer but SGD here, "
        "and SGD too with a gradient clip, applied per occurrence (a Keras bug "
        "since 3.0.0; docs/findings/sparse-gradient-optimizers.md)",
        bug=True,
        applies=lambda spec, path: (
            _keras_tensorflow(path)
            and (
                spec.workload.optimizer != "sgd"
                or any(getattr(spec.workload, clip) for clip in CLIPS)
            )
            and any(layer.kind == "embedding" for layer in spec.layers)
        ),
        quantities="step",
    ),
    Known(
        "keras-torch-padded-average-pool",
        "Keras on PyTorch pads an asymmetric 'same' average pool by repeating "
        "the edge and counts the copies (a Keras bug, fixed on Keras' main "
        "branch by keras-team/keras#23233, unreleased in 3.15.1; "
        "docs/findings/padded-average-pool.md)",
        bug=True,
        applies=lambda spec, path: (
            path.split("@", maxsplit=1)[0] == "keras-torch" and padded_unevenly(spec)
        ),
    ),
    Known(
        "keras-torch-nadam-velocity",
        "Keras' Nadam on PyTorch (its own torch_nadam.py) accumulates the "
        "velocity with 1 - beta_2 in double and corrects it by 1 - beta_2**t in "
        "float32, so its first step is 1 - 6.4e-6 of the exact one on every "
        "parameter, where Keras' generic Nadam is exact to float32 (a Keras "
        "bug; docs/findings/keras-torch-nadam.md)",
        bug=True,
        applies=lambda spec, path: (
            path.split("@", maxsplit=1)[0] == "keras-torch"
            and spec.workload.optimizer == "nadam"
        ),
        quantities="step",
    ),
    Known(
        "keras-torch-sparse-crossentropy-channels-last",
        "Keras' sparse categorical cross-entropy from probabilities on PyTorch "
        "hands nll_loss a channels-last view of an image output (its movedim), "
        "whose backward pass PyTorch 2.13 cannot take on CPU, so no training "
        "step runs: 'grad_input must be contiguous' (a Keras-on-PyTorch bug; "
        "docs/findings/nll_loss_channels_last.py, docs/results/per_position.md)",
        bug=True,
        applies=lambda spec, path: (
            path.split("@", maxsplit=1)[0] == "keras-torch"
            and any(
                h.objective == Objective("sparse_categorical_crossentropy", False)
                and len(h.shape) == 3
                for h in spec.heads
            )
        ),
        error="grad_input must be contiguous",
    ),
    Known(
        "keras-tensorflow-logits-before-activation",
        "Keras on TensorFlow computes this cross-entropy from the logits before "
        "a softmax or sigmoid (_keras_logits: the output's own activation where "
        "from_logits=False, or the focal loss' own sigmoid), not from the "
        "probabilities, and never clips, where Keras' formula (and "
        "Keras on JAX and PyTorch) clips each probability to [1e-7, 1 - 1e-7]; "
        "the two agree to float32 rounding unless a true class is below 1e-7 "
        "(by design; docs/findings/keras_tensorflow_unclipped_crossentropy.py)",
        bug=False,
        applies=lambda spec, path: _keras_tensorflow(path) and unclipped(spec),
        quantities="step",
        needs="step1/loss",
    ),
)


def notes(
    spec: ModelSpec, path: str, failing: Iterable[str], error: str = ""
) -> list[str]:
    """What to say beside ``path``'s verdict on ``spec``: every by-design
    difference that applies, and, prefixed ``KNOWN_BUG``, a known
    difference that applies and names the failure (``Known.names``: the
    quantities beyond their allowance, ``failing``, are all ones it moves,
    or the path stopped with ``error``, its evaluation's error, and its
    words are in it)."""
    failing = list(failing)
    said = []
    for known in KNOWN:
        if not known.applies(spec, path):
            continue
        if known.names(failing, error):
            said.append(f"{KNOWN_BUG}: {known.sentence}")
        elif not known.bug:
            said.append(known.sentence)
    return said
