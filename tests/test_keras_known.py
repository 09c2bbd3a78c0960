"""What Keras is known to compute differently (``equivalence.keras_known``):
a known difference names a failure only where it applies and the failing
quantities are exactly the ones it moves."""

from __future__ import annotations

import dataclasses

from equivalence import keras_known
from equivalence.keras_known import KNOWN_BUG
from zoo.losses import Objective
from zoo.specs import Layer, ModelSpec, Workload

# A per-pixel softmax trained on a sparse cross-entropy from probabilities,
# as keras.io's U-Net is (docs/results/per_position.md).
SOFTMAX = ModelSpec(
    "seg",
    (4, 4, 2),
    3,
    (Layer.of("classes", "conv2d", filters=3, kernel_size=1, activation="softmax"),),
    Workload(
        "user",
        "adam",
        0.001,
        4,
        loss="sparse_categorical_crossentropy",
        from_logits=False,
    ),
)
TRAINED = ["step1/loss", "step1/classes/kernel", "step2/loss"]


def _named(spec: ModelSpec, path: str, failing: list[str]) -> list[str]:
    return [
        n for n in keras_known.notes(spec, path, failing) if n.startswith(KNOWN_BUG)
    ]


def test_keras_tensorflows_unclipped_loss_names_a_failure_of_its_steps() -> None:
    """Keras on TensorFlow never clips (docs/findings/
    keras_tensorflow_unclipped_crossentropy.py): a failure of its training steps that
    begins at the loss of step 1 is named; it is said, not named, when the
    path passes."""
    named = _named(SOFTMAX, "keras-tensorflow", TRAINED)
    assert len(named) == 1
    assert "never clips" in named[0]
    said = keras_known.notes(SOFTMAX, "keras-tensorflow", [])
    assert said
    assert not said[0].startswith(KNOWN_BUG)


def test_the_unclipped_loss_names_nothing_it_cannot_explain() -> None:
    """Deliberately wrong inputs: the step-1 loss agreeing (the update
    alone wrong), a failure of the logits or gradients, another path, and a
    model from logits are each not named."""
    assert not _named(SOFTMAX, "keras-tensorflow", ["step1/classes/kernel"])
    assert not _named(SOFTMAX, "keras-tensorflow", [*TRAINED, "logits"])
    assert not _named(SOFTMAX, "keras-tensorflow", [*TRAINED, "grad:classes/kernel"])
    assert not _named(SOFTMAX, "keras-jax", TRAINED)
    assert not _named(SOFTMAX, "native-tensorflow", TRAINED)
    logits = dataclasses.replace(
        SOFTMAX, workload=dataclasses.replace(SOFTMAX.workload, from_logits=True)
    )
    assert not keras_known.notes(logits, "keras-tensorflow", TRAINED)


def test_the_unclipped_loss_is_read_per_output() -> None:
    """Several outputs: the note applies where any output's own loss is a
    cross-entropy from its own layer's softmax, not by the first loss and
    the last layer alone."""
    layers = (
        Layer.of("score", "dense", units=1),
        Layer.of("classes", "dense", units=3, activation="softmax", inputs=("input",)),
    )
    sparse = Objective("sparse_categorical_crossentropy", from_logits=False)
    mse = Objective("mean_squared_error", from_logits=False)
    spec = ModelSpec(
        "two",
        (4,),
        1,
        layers,
        Workload("user", "adam", 0.001, 4, losses=(mse, sparse)),
        outputs=("score", "classes"),
    )
    assert keras_known.unclipped(spec)
    assert _named(spec, "keras-tensorflow", TRAINED)
    logits = dataclasses.replace(
        spec,
        workload=Workload(
            "user", "adam", 0.001, 4, losses=(mse, sparse._replace(from_logits=True))
        ),
    )
    assert not keras_known.unclipped(logits)


def _pooled(steps: int, window: int, stride: int | None = None) -> ModelSpec:
    return ModelSpec(
        "pooled",
        (steps, 2),
        3,
        (
            Layer.of(
                "pool", "avg_pool1d", pool_size=window, strides=stride, padding="same"
            ),
            Layer.of("flat", "flatten"),
            Layer.of("out", "dense", units=3),
        ),
        Workload("user", "adam", 0.001, 4),
    )


def test_a_bug_that_moves_any_quantity_names_any_failure() -> None:
    """keras-torch's padded average pool (no ``quantities``: it moves the
    forward pass and everything after) names a failure anywhere, on
    keras-torch only, for a model with a 'same' average pool of three over
    five steps (padded (0, 1): the copy counted)."""
    pooled = _pooled(5, 3)
    named = _named(pooled, "keras-torch", ["logits", "grad:out/kernel"])
    assert len(named) == 1
    assert "average pool" in named[0]
    assert not _named(pooled, "keras-jax", ["logits"])
    assert not _named(pooled, "keras-torch", [])


def test_the_padded_pool_is_named_only_where_keras_on_pytorch_is_wrong() -> None:
    """docs/findings/padded_average_pool.py's table: a window of two (its
    one copy averaged with itself), or padding even on both edges (three
    over ten steps, six at stride three), is right on PyTorch, so a failure
    there is not the bug's; three at stride two over ten steps is wrong."""
    assert keras_known.padded_unevenly(_pooled(10, 3, 2))
    for right in (_pooled(5, 2), _pooled(10, 3), _pooled(6, 3)):
        assert not keras_known.padded_unevenly(right)
        assert not _named(right, "keras-torch", ["logits"])


def test_the_sparse_gradient_bug_names_sgd_only_with_a_clip() -> None:
    """docs/findings/sparse-gradient-optimizers.md: SGD's update is linear in
    the gradient, so the occurrences summed late are right; a clip of the
    gradient (each value, or its norm) taken per occurrence is not (found by
    issue 80's campaigns: SGD with clipvalue failing at an embedding)."""
    tokens = ModelSpec(
        "tokens",
        (3,),
        2,
        (
            Layer.of("embedding", "embedding", input_dim=4, output_dim=2),
            Layer.of("flat", "flatten"),
            Layer.of("out", "dense", units=2),
        ),
        Workload("user", "sgd", 0.1, 2),
    )
    failing = ["step1/embedding/embeddings"]
    assert not _named(tokens, "keras-tensorflow", failing)
    for clip in ("clipvalue", "clipnorm", "global_clipnorm"):
        clipped = dataclasses.replace(
            tokens, workload=dataclasses.replace(tokens.workload, **{clip: 1.0})
        )
        named = _named(clipped, "keras-tensorflow", failing)
        assert len(named) == 1
        assert "sparse gradient" in named[0]
        assert not _named(clipped, "keras-jax", failing)
