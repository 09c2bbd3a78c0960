"""Models of several inputs and outputs without a framework (issue 78): the
spec's inputs, outputs and per-output losses (``zoo.specs``), the packed
arrays every path is fed (``zoo.packing``, ``zoo.data``), the weighted total
(``zoo.losses.total``), and the ``[model]`` table and ``.keras`` config
that describe them (``zoo.user_models``, ``zoo.keras_import``).  Every
path on ``wide-deep`` against float64 is ``tests/paths``' (a kind model of
both tiers), its fault ``loss-weights-ignored`` the fault suite's."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import numpy as np
import pytest

from equivalence import keras_known
from equivalence.keras_known import KNOWN_BUG
from zoo import keras_import, packing, user_models
from zoo.data import make_batches
from zoo.losses import Heads, Objective, total
from zoo.models import get_spec
from zoo.specs import INPUT, Layer, ModelInput, ModelSpec, Workload

MSE = Objective("mean_squared_error", False)


def _two(**changes: Any) -> ModelSpec:
    """Two inputs (one of token ids), two outputs: a class head and a score."""
    given: dict[str, Any] = {
        "layers": (
            Layer.of("embed", "embedding", input_dim=7, output_dim=3),
            Layer.of("pool", "global_avg_pool"),
            Layer.of("both", "concatenate", inputs=("pool", "side")),
            Layer.of("cls", "dense", units=4),
            Layer.of("score", "dense", units=1, inputs=("both",)),
        ),
        "workload": Workload(
            "user", "sgd", 0.1, 4, losses=(Objective(), MSE), loss_weights=(1.0, 0.25)
        ),
        "more_inputs": (ModelInput("side", (2,)),),
        "outputs": ("cls", "score"),
    }
    given.update(changes)
    return ModelSpec("two", (5,), 4, **given)


def test_a_spec_of_two_inputs_and_outputs_has_a_head_per_output() -> None:
    spec = _two()
    assert spec.input_names == (INPUT, "side")
    assert spec.input_shapes == ((5,), (2,))
    assert spec.input_tokens(INPUT) == 7
    assert spec.input_tokens("side") == 0
    assert [(h.layer, h.objective, h.weight, h.shape) for h in spec.heads] == [
        ("cls", Objective(), 1.0, (4,)),
        ("score", MSE, 0.25, (1,)),
    ]
    assert spec.objective == Heads((Objective(), MSE), (1.0, 0.25))
    assert spec.several_outputs
    assert not spec.one_to_one


def test_one_input_or_one_output_alone_is_not_one_to_one() -> None:
    """``ModelSpec.one_to_one``, the one place that says whether batches and
    outputs are packed: two inputs and one output, or one input and two
    outputs, are not one to one; lenet is."""
    one_output = _two(
        layers=(*_two().layers[:3], Layer.of("score", "dense", units=4)),
        workload=Workload("user", "sgd", 0.1, 4),
        outputs=("score",),
    )
    assert not one_output.several_outputs
    assert not one_output.one_to_one
    one_input = ModelSpec(
        "one_input",
        (5,),
        4,
        (Layer.of("cls", "dense", units=4), Layer.of("score", "dense", units=1)),
        Workload("user", "sgd", 0.1, 4, losses=(Objective(), MSE)),
        outputs=("cls", "score"),
    )
    assert one_input.several_outputs
    assert not one_input.one_to_one
    assert get_spec("lenet").one_to_one


def test_one_input_and_output_keep_their_repr_and_objective() -> None:
    spec = get_spec("lenet")
    assert "more_inputs" not in repr(spec)
    assert "outputs" not in repr(spec)
    assert spec.objective == spec.workload.objective
    assert "more_inputs=" in repr(_two())  # another model, another verdict key


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"outputs": ("cls", "nowhere")}, "'nowhere', which is no layer"),
        ({"outputs": ("cls", "cls")}, "outputs name a layer twice"),
        ({"outputs": ("cls",)}, "layer 'score' feeds no later layer"),
        (
            {"more_inputs": (ModelInput("side", (2,)), ModelInput("idle", (3,)))},
            "input 'idle' feeds no layer",
        ),
        (
            {"more_inputs": (ModelInput("pool", (2,)),)},
            "names 'pool' twice among its inputs and layers",
        ),
        (
            {"workload": Workload("user", "sgd", 0.1, 4, losses=(MSE,))},
            "gives 2 output(s) and its workload names 1 loss(es)",
        ),
        (
            {"workload": Workload("user", "sgd", 0.1, 4, loss_weights=(1.0, -1.0))},
            "loss weight is -1.0",
        ),
    ],
)
def test_a_spec_refuses_what_it_cannot_be_in_one_sentence(
    changes: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(said)) as caught:
        _two(**changes)
    assert "\n" not in str(caught.value)


def test_batches_are_drawn_per_input_and_output_and_packed() -> None:
    spec = _two()
    x, y = make_batches(spec, seed=3, batch_size=4, count=2)
    assert x.shape == (2, 4, 5 + 2)
    assert y.shape == (2, 4, 1 + 1)  # a class id, a score
    tokens, side = packing.split_inputs(spec, x[0])
    assert tokens.dtype == np.int32
    assert tokens.shape == (4, 5)
    assert side.shape == (4, 2)
    assert tokens.min() >= 0
    assert tokens.max() < 7
    ids, scores = packing.split_targets(spec, y[1])
    assert ids.dtype == np.int32
    assert ids.shape == (4,)
    assert scores.shape == (4, 1)
    assert ids.min() >= 0
    assert ids.max() < 4
    # a model of one input and one output is never packed
    x1, y1 = make_batches(get_spec("ffn"), 0, 4, 1)
    assert x1.shape == (1, 4, 784)
    assert y1.dtype == np.int32


def test_packing_round_trips_exactly_and_refuses_a_wrong_width() -> None:
    spec = _two()
    ids = np.array([[0, 6, 5, 2**20, 1]] * 3, np.int32)
    side = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    packed = packing.pack([ids, side], 1)
    back = packing.split_inputs(spec, packed)
    assert np.array_equal(back[0], ids)
    assert np.array_equal(back[1], side)
    with pytest.raises(ValueError, match="7 values per example cannot hold"):
        packing.split_targets(spec, packed)


def test_outputs_are_packed_in_order_and_split_back_by_name() -> None:
    spec = _two()
    cls, score = np.ones((3, 4), np.float32), np.full((3, 1), 2.0, np.float32)
    packed = packing.outputs(spec, (cls, score), np.asarray)
    assert packed.shape == (3, 5)
    split = packing.per_output(spec, packed)
    assert list(split) == ["cls", "score"]
    assert np.array_equal(split["score"], score)
    assert packing.per_output(get_spec("ffn"), packed) == {}


def test_a_float64_runs_outputs_stay_float64_when_packed() -> None:
    """Finding d8b231ec1c: a float64 run's several outputs were packed as
    float32, so every float64 reference's outputs were rounded to float32
    and two that agree to 1e-15 could land a float32 unit apart."""
    spec = _two()
    cls = np.full((3, 4), 1 / 3, np.float64)
    packed = packing.outputs(spec, (cls, np.full((3, 1), 0.1)), np.asarray)
    assert packed.dtype == np.float64
    assert np.array_equal(packing.per_output(spec, packed)["cls"], cls)
    single = (cls.astype(np.float32), np.ones((3, 1), np.float32))
    assert packing.outputs(spec, single, np.asarray).dtype == np.float32


def test_the_total_is_each_outputs_loss_times_its_weight() -> None:
    def of(out: float, target: float, objective: Objective) -> float:
        return (out - target) ** 2 if objective == MSE else abs(out - target)

    goal = Heads((Objective(), MSE), (1.0, 0.25))
    assert total(of, (3.0, 5.0), (1.0, 1.0), goal) == 2.0 + 0.25 * 16.0
    # the weights dropped (the fault loss-weights-ignored) give another total
    plain = Heads(goal.objectives, (1.0, 1.0))
    assert total(of, (3.0, 5.0), (1.0, 1.0), plain) != total(
        of, (3.0, 5.0), (1.0, 1.0), goal
    )
    assert total(of, 3.0, 1.0, MSE) == 4.0  # one output: its loss


def test_a_table_names_its_inputs_outputs_and_losses() -> None:
    table = {
        "inputs": [{"name": "ids", "shape": [5]}, {"name": "side", "shape": [2]}],
        "outputs": ["cls", "score"],
        "layers": [
            {"kind": "embedding", "name": "embed", "input_dim": 7, "output_dim": 3},
            {"kind": "global_avg_pool", "name": "pool"},
            {"kind": "concatenate", "name": "both", "inputs": ["pool", "side"]},
            {"kind": "dense", "name": "cls", "units": 4},
            {"kind": "dense", "name": "score", "units": 1, "inputs": ["both"]},
        ],
        "workload": {
            "optimizer": "sgd",
            "learning_rate": 0.1,
            "batch_size": 4,
            "loss": ["sparse_categorical_crossentropy", "mean_squared_error"],
            "from_logits": [True, False],
            "loss_weights": [1, 0.25],
        },
    }
    spec = user_models.spec_from_document("t", table)
    assert spec.input_names == (INPUT, "side")  # the first input is the input
    assert spec.objective == _two().objective
    again = user_models.spec_from_document(
        "t", json.loads(json.dumps(user_models.document_of(spec)))
    )
    assert again == dataclasses.replace(spec)
    assert again.heads == spec.heads
    with pytest.raises(ValueError, match=r"input_shape \(one input\) or inputs"):
        user_models.spec_from_document("t", {**table, "input_shape": [5]})
    single = {**table, "outputs": ["cls"]}
    single["layers"] = table["layers"][:4]
    with pytest.raises(ValueError, match="a list of losses or loss_weights is for"):
        user_models.spec_from_document("t", single)


@pytest.mark.parametrize(
    ("loss", "weights", "read"),
    [
        (
            ["mae", "mse"],
            [2, 1],
            (["mean_absolute_error", "mean_squared_error"], [2, 1]),
        ),
        (  # a dict by output name, in the outputs' order
            {"b": "mse", "a": "mae"},
            {"a": 2, "b": 1},
            (["mean_absolute_error", "mean_squared_error"], [2, 1]),
        ),
        ("mse", [0.5, 0.5], ("mean_squared_error", [0.5, 0.5])),  # one for both
    ],
)
def test_a_files_loss_per_output_is_read_in_output_order(
    loss: Any, weights: Any, read: tuple[Any, list[float]]
) -> None:
    config = {"compile_config": {"loss": loss, "loss_weights": weights}}
    workload, problems = keras_import._workload(config, False, ["a", "b"])
    assert not problems
    assert workload["loss"] == read[0]
    assert workload["loss_weights"] == read[1]


def test_a_files_loss_for_other_outputs_is_refused() -> None:
    config = {"compile_config": {"loss": {"a": "mse", "c": "mse"}}}
    _, problems = keras_import._workload(config, False, ["a", "b"])
    assert problems
    assert "one for each of its outputs" in problems[0]


def test_a_known_error_is_named_only_where_it_applies_and_was_raised() -> None:
    """Keras on PyTorch cannot train a sparse cross-entropy from
    probabilities on an image output (docs/findings/nll_loss_channels_last.py):
    the error names the bug on keras-torch for such a model, and nowhere
    else: not on another path, not for another error, not from logits."""
    layers = (Layer.of("classes", "conv2d", filters=3, kernel_size=1),)
    probabilities = ModelSpec(
        "seg",
        (4, 4, 2),
        3,
        layers,
        Workload(
            "user",
            "adam",
            0.001,
            4,
            loss="sparse_categorical_crossentropy",
            from_logits=False,
        ),
    )
    error = "RuntimeError: grad_input must be contiguous"
    named = keras_known.notes(probabilities, "keras-torch", [], error)
    assert len(named) == 1
    assert named[0].startswith(KNOWN_BUG)
    assert "nll_loss" in named[0]
    assert not keras_known.notes(probabilities, "keras-torch", [], "ValueError: no")
    assert not keras_known.notes(probabilities, "keras-jax", [], error)
    logits = dataclasses.replace(
        probabilities,
        workload=dataclasses.replace(probabilities.workload, from_logits=True),
    )
    assert not keras_known.notes(logits, "keras-torch", [], error)


def _smoothed_table(**workload: Any) -> dict[str, Any]:
    """A two-output table whose first loss takes label smoothing."""
    return {
        "input_shape": [5],
        "outputs": ["cls", "score"],
        "layers": [
            {"kind": "dense", "name": "hidden", "units": 4},
            {"kind": "dense", "name": "cls", "units": 3},
            {"kind": "dense", "name": "score", "units": 1, "inputs": ["hidden"]},
        ],
        "workload": {
            "optimizer": "sgd",
            "learning_rate": 0.1,
            "batch_size": 4,
            "loss": ["categorical_crossentropy", "mean_squared_error"],
            "from_logits": [True, False],
            **workload,
        },
    }


def test_a_loss_option_goes_to_each_loss_that_takes_it() -> None:
    """A table's ``label_smoothing`` (Keras' word) smooths the one-hot loss
    and leaves the squared error, which takes none; it survives the store's
    document; given where no loss takes it, it is refused."""
    spec = user_models.spec_from_document("t", _smoothed_table(label_smoothing=0.1))
    assert [h.objective for h in spec.heads] == [
        Objective("categorical_crossentropy", True, label_smoothing=0.1),
        MSE,
    ]
    again = user_models.spec_from_document("t", user_models.document_of(spec))
    assert again.heads == spec.heads
    table = _smoothed_table(label_smoothing=0.1)
    table["workload"]["loss"] = ["mean_absolute_error", "mean_squared_error"]
    with pytest.raises(ValueError, match="label_smoothing is for a loss that takes"):
        user_models.spec_from_document("t", table)
    one = {k: v for k, v in table.items() if k != "outputs"}
    one["layers"] = table["layers"][:1]
    one["workload"] = {**table["workload"], "loss": "mean_squared_error"}
    one["workload"]["from_logits"] = False
    with pytest.raises(ValueError, match="takes no label_smoothing; leave it out"):
        user_models.spec_from_document("t", one)


def test_a_files_losses_with_two_smoothings_are_refused() -> None:
    """A workload gives one value of an option to every loss that takes it:
    two one-hot losses smoothed differently cannot be written, and the
    reader says so rather than keep one."""
    smoothed = [
        {"class_name": "CategoricalCrossentropy", "config": {"label_smoothing": s}}
        for s in (0.1, 0.2)
    ]
    config = {"compile_config": {"loss": smoothed}}
    _, problems = keras_import._workload(config, False, ["a", "b"])
    assert problems == [
        "the model's losses take label_smoothing [0.1, 0.2]; the tool takes one "
        "label_smoothing for every loss that takes it"
    ]
    same = {"compile_config": {"loss": [smoothed[0], smoothed[0]]}}
    workload, problems = keras_import._workload(same, False, ["a", "b"])
    assert not problems
    assert workload["label_smoothing"] == 0.1
