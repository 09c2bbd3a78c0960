"""Users' models without a framework: documents, the store and its names,
and every refusal the architecture alone decides (``zoo.user_models``, the
config half of ``zoo.keras_import``).  The Keras half runs in
``tests/paths/test_user_model.py``, but for one file of batch normalization
and dropout, saved by Keras in a process of its own and read here through
the Keras worker that reads a user's file."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core.flops import step_flops
from tests.helpers import PROJECT_ROOT, keras_on_torch
from zoo import keras_import, user_models
from zoo.data import make_batches
from zoo.losses import LOSSES, Objective
from zoo.models import get_spec
from zoo.optimizers import Schedule
from zoo.specs import (
    MODELS,
    VARIANTS,
    layer_shapes,
    masks_of,
    output_positions,
    without_noise,
)
from zoo.weights import make_weights

SEQUENTIAL_DENSE = {"class_name": "Dense", "module": "keras.layers"}


@pytest.fixture(autouse=True)
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(user_models.STORE_ENV, str(tmp_path / "models"))
    return tmp_path / "models"


@pytest.mark.parametrize("name", sorted({**MODELS, **VARIANTS}))
def test_a_document_round_trips_every_option(name: str) -> None:
    spec = get_spec(name)
    document = user_models.document_of(spec)
    # through JSON, as the store keeps it
    again = user_models.spec_from_document("x", json.loads(json.dumps(document)))
    assert again.layers == spec.layers
    assert again.input_shape == spec.input_shape
    assert again.params == spec.params
    assert again.workload.optimizer == spec.workload.optimizer


def test_a_table_names_layers_and_takes_keras_defaults() -> None:
    spec = user_models.spec_from_document(
        "t",
        {
            "input_shape": [20, 8],
            "layers": [
                {"kind": "lstm", "units": 6, "return_sequences": True},
                {"kind": "flatten"},
                {"kind": "dense", "units": 3, "activation": "linear"},
            ],
        },
    )
    assert [layer.name for layer in spec.layers] == ["lstm_1", "flatten_2", "dense_3"]
    assert spec.classes == 3
    assert spec.layers[-1].activation is None
    assert (spec.workload.optimizer, spec.workload.batch_size) == ("adam", 32)
    assert spec.workload.dataset == "user"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["layers"].append({"kind": "spatial_dropout"}),
            "kind 'spatial_dropout'; supported",
        ),
        (lambda d: d["layers"][0].update(dilation=2), "dilation, which it does not"),
        (
            lambda d: d["layers"][0].update(padding="full"),
            "padding must be valid, same or",
        ),
        (lambda d: d["layers"][0].update(filters=2.5), "filters must be a whole"),
        (lambda d: d["layers"][0].update(name="a/b"), "must be letters"),
        (lambda d: d.update(input_shape=[28, -1]), "input_shape must be 1 to 3"),
        (lambda d: d.update(layers=[]), "needs a list of layers"),
        (
            lambda d: d.update(workload={"optimizer": "adadelta"}),
            "optimizer 'adadelta'",
        ),
        (lambda d: d.update(workload={"batch_size": 0}), "must be positive"),
        (lambda d: d.update(workload={"epochs": 3}), "workload has epochs"),
        (lambda d: d.update(loss="mse"), "a model has loss"),
        (lambda d: d.update(classes=3), "classes is 3 but the model gives"),
        (lambda d: d["layers"][0].update(inputs=["pool1"]), "takes pool1, which no"),
        (lambda d: d["layers"][1].update(inputs="conv1"), "inputs must be a list"),
        (lambda d: d["layers"][0].update(epsilon=0.1), "epsilon, which it does"),
    ],
)
def test_a_bad_table_is_one_sentence(change: Any, message: str) -> None:
    document = user_models.document_of(VARIANTS["strided-cnn"])
    change(document)
    with pytest.raises(ValueError, match=message) as caught:
        user_models.spec_from_document("t", document)
    assert "\n" not in str(caught.value)


TRANSFORMER_TABLE: dict[str, Any] = {
    "input_shape": [16],
    "layers": [
        {"kind": "embedding", "name": "embed", "input_dim": 100, "output_dim": 8},
        {"kind": "attention", "name": "att", "num_heads": 2, "key_dim": 4},
        {"kind": "add", "name": "res", "inputs": ["embed", "att"]},
        {"kind": "layer_norm", "name": "norm", "epsilon": 1e-6},
        {"kind": "conv1d", "name": "conv", "filters": 6, "kernel_size": 3},
        {"kind": "max_pool1d", "name": "pool", "pool_size": 2},
        {"kind": "gru", "name": "gru", "units": 5, "inputs": ["pool"]},
        {"kind": "dense", "name": "logits", "units": 2},
    ],
}


def test_a_table_takes_the_new_kinds_in_keras_words() -> None:
    spec = user_models.spec_from_document("t", TRANSFORMER_TABLE)
    assert spec.tokens == 100
    assert spec.layer("att").options.num_heads == 2
    assert spec.layer("att").options.key_dim == 4
    assert spec.layer("res").inputs == ("embed", "att")
    assert spec.layer("norm").options.epsilon == 1e-6
    assert spec.layer("conv").options.kernel_size == 3
    # naming the previous layer is the same layer as leaving it out
    assert spec.layer("gru").inputs == ()
    assert spec.classes == 2
    assert user_models.document_of(spec)["layers"][6] == {
        "kind": "gru",
        "name": "gru",
        "units": 5,
    }
    # Keras' default epsilon written out is the default
    table = copy.deepcopy(TRANSFORMER_TABLE)
    table["layers"][3]["epsilon"] = 1e-3
    written = user_models.spec_from_document("t", table).layer("norm")
    del table["layers"][3]["epsilon"]
    assert written == user_models.spec_from_document("t", table).layer("norm")


def test_a_toml_table_of_the_new_kinds_is_a_model(tmp_path: Path) -> None:
    from workers.user_model import model_from_file

    def inline(layer: dict[str, Any]) -> str:
        return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in layer.items()) + "}"

    lines = [
        "[model]",
        f"input_shape = {TRANSFORMER_TABLE['input_shape']}",
        "layers = [",
        *(f"  {inline(layer)}," for layer in TRANSFORMER_TABLE["layers"]),
        "]",
    ]
    (tmp_path / "mine.toml").write_text("\n".join(lines) + "\n")
    spec = get_spec(model_from_file(tmp_path / "mine.toml", tmp_path / "models"))
    assert spec.layers == user_models.spec_from_document("t", TRANSFORMER_TABLE).layers


def test_a_layer_that_feeds_nothing_is_refused() -> None:
    """What ``harness fuzz`` found (a dense layer beside the model, feeding
    nothing): Keras' functional model leaves such a layer out, PyTorch and
    TensorFlow have no gradient for its parameters, so the float64 runs
    stopped.  The spec refuses it in one sentence."""
    table = copy.deepcopy(TRANSFORMER_TABLE)
    # the GRU takes the normalized sequence, leaving the conv and pool aside
    table["layers"][6]["inputs"] = ["norm"]
    with pytest.raises(ValueError, match="layer 'pool' feeds no later layer"):
        user_models.spec_from_document("t", table)
    found = {
        "input_shape": [3],
        "layers": [
            {"kind": "dense", "name": "dense_1", "units": 1},
            {"kind": "dense", "name": "dense_2", "units": 4, "inputs": ["input"]},
            {"kind": "dense", "name": "outputs", "units": 2},
        ],
    }
    with pytest.raises(ValueError, match="'dense_1' feeds no later layer"):
        user_models.spec_from_document("drawn", found)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["layers"][0].pop("input_dim"), "'embed' needs input_dim"),
        (lambda d: d["layers"][1].pop("num_heads"), "'att' needs num_heads"),
        (lambda d: d["layers"][2].pop("inputs"), "an add layer sums two or more"),
        (lambda d: d["layers"][2].update(inputs=["att"]), "an add layer sums two"),
        (lambda d: d["layers"][3].update(epsilon=0), "epsilon must be above 0"),
        (lambda d: d["layers"][3].update(epsilon="small"), "epsilon must be a num"),
        (lambda d: d["layers"][4].update(inputs=["embed", "att"]), "every other"),
        (lambda d: d["layers"][1].update(inputs=["logits"]), "takes logits, which"),
        (
            lambda d: d["layers"].insert(1, d["layers"][0] | {"name": "e2"}),
            "must take the",
        ),
        (lambda d: d["layers"][1].update(activation="relu"), "activation, which"),
        (lambda d: d["layers"][5].update(pool_size=40), "does not fit"),
        (lambda d: d.update(input_shape=[16, 4]), "needs token ids"),
    ],
)
def test_a_bad_new_kind_is_one_sentence(change: Any, message: str) -> None:
    document = copy.deepcopy(TRANSFORMER_TABLE)
    change(document)
    with pytest.raises(ValueError, match=message) as caught:
        user_models.spec_from_document("t", document)
    assert "\n" not in str(caught.value)


BN_TABLE: dict[str, Any] = {
    "input_shape": [8, 8, 1],
    "layers": [
        {"kind": "conv2d", "name": "conv", "filters": 4, "kernel_size": 3},
        {"kind": "batch_norm", "name": "conv_norm"},
        {"kind": "flatten", "name": "flatten"},
        {"kind": "dense", "name": "fc", "units": 6},
        {"kind": "batch_norm", "name": "fc_norm", "epsilon": 1e-5, "momentum": 0.9},
        {"kind": "dropout", "name": "drop", "rate": 0.3},
        {"kind": "dense", "name": "logits", "units": 3},
    ],
}


def test_a_table_takes_batch_norm_and_dropout_in_keras_words() -> None:
    spec = user_models.spec_from_document("t", BN_TABLE)
    fc_norm, conv_norm = spec.layer("fc_norm"), spec.layer("conv_norm")
    assert (fc_norm.kind, fc_norm.options.epsilon, fc_norm.options.momentum) == (
        "batch_norm",
        1e-5,
        0.9,
    )
    assert (conv_norm.options.epsilon, conv_norm.options.momentum) == (1e-3, 0.99)
    assert (spec.layer("drop").kind, spec.layer("drop").options.rate) == (
        "dropout",
        0.3,
    )
    assert spec.noisy
    assert [
        (p.role, p.shape, p.trainable) for p in spec.params if p.layer == "fc_norm"
    ] == [
        ("gamma", (6,), True),
        ("beta", (6,), True),
        ("moving_mean", (6,), False),
        ("moving_variance", (6,), False),
    ]
    document = user_models.document_of(spec)
    assert document["layers"][4:6] == [
        {"kind": "batch_norm", "name": "fc_norm", "epsilon": 1e-5, "momentum": 0.9},
        {"kind": "dropout", "name": "drop", "rate": 0.3},
    ]
    assert document["layers"][1] == {"kind": "batch_norm", "name": "conv_norm"}
    # Keras' defaults written out are the defaults: the same layer and name
    table = copy.deepcopy(BN_TABLE)
    table["layers"][1].update(epsilon=1e-3, momentum=0.99)
    assert user_models.spec_from_document("t", table).layers == spec.layers
    assert user_models.register("bn.toml", table) == user_models.register(
        "bn.toml", BN_TABLE
    )
    # a dropout of rate 0 is the identity, still a layer of the table
    table["layers"][5]["rate"] = 0
    still = user_models.spec_from_document("t", table)
    assert still.layer("drop").options.rate == 0
    assert not still.noisy


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["layers"][1].update(momentum=0),
            "batch_norm layer 'conv_norm': momentum must be above 0 and below 1",
        ),
        (lambda d: d["layers"][4].update(momentum=1.0), "momentum must be above 0"),
        (lambda d: d["layers"][4].update(momentum="slow"), "momentum must be a num"),
        (
            lambda d: d["layers"][4].update(epsilon=0),
            "batch_norm layer 'fc_norm': epsilon must be above 0",
        ),
        (
            lambda d: d["layers"][5].update(rate=1),
            "dropout layer 'drop': rate must be at least 0 and below 1",
        ),
        (lambda d: d["layers"][5].update(rate=-0.1), "rate must be at least 0"),
        (lambda d: d["layers"][5].update(rate=True), "rate must be a number"),
        (
            lambda d: d["layers"][1].update(rate=0.5),
            "batch_norm layer 'conv_norm' has rate, which it does not take",
        ),
        (
            lambda d: d["layers"][5].update(momentum=0.9),
            "dropout layer 'drop' has momentum, which it does not take",
        ),
    ],
)
def test_a_bad_batch_norm_or_dropout_is_one_sentence(change: Any, message: str) -> None:
    document = copy.deepcopy(BN_TABLE)
    change(document)
    with pytest.raises(ValueError, match=message) as caught:
        user_models.spec_from_document("t", document)
    assert "\n" not in str(caught.value)


def test_a_name_is_the_stem_and_a_digest_of_architecture_and_weights(
    store: Path,
) -> None:
    spec = VARIANTS["stacked-lstm"]
    document = user_models.document_of(spec)
    weights = make_weights(spec, 1)
    name = user_models.register("my lstm.keras", document, weights)
    assert name.startswith("my_lstm-")
    assert len(name) == len("my_lstm-") + 12
    assert user_models.register("my lstm.keras", document, weights) == name
    changed = {**weights, "logits/bias": weights["logits/bias"] + 1}
    assert user_models.register("my lstm.keras", document, changed) != name
    assert user_models.register("other.keras", document, weights) != name
    wider = copy.deepcopy(document)
    wider["layers"][0]["units"] = 17
    assert user_models.register("my lstm.keras", wider) != name
    assert sorted(p.name for p in (store / name).iterdir()) == [
        "model.json",
        "weights.npz",
    ]


def test_a_stored_model_is_found_by_name_with_its_own_weights() -> None:
    spec = VARIANTS["strided-cnn"]
    weights = make_weights(spec, 4)
    name = user_models.register("cnn.keras", user_models.document_of(spec), weights)
    found = get_spec(name)
    assert found.name == name
    assert found.layers == spec.layers
    for seed in (0, 9):  # a file's weights are its own, whatever the seed
        drawn = make_weights(found, seed)
        assert all(np.array_equal(drawn[k], weights[k]) for k in weights)
    table = user_models.register("cnn.toml", user_models.document_of(spec))
    assert not get_spec(table).weights  # a table's are drawn from the seed


def test_weights_that_do_not_fit_the_document_are_refused() -> None:
    spec = VARIANTS["strided-cnn"]
    weights = make_weights(spec, 0)
    weights["conv1/kernel"] = weights["conv1/kernel"][..., :4]
    with pytest.raises(ValueError, match="wrong shape"):
        user_models.register("cnn.keras", user_models.document_of(spec), weights)


def test_an_unknown_name_points_at_the_store_and_model_file() -> None:
    with pytest.raises(ValueError, match=r"known models: .*--model FILE"):
        get_spec("mine-0123456789ab")


# --- a Keras archive's config, without Keras ----------------------------------------


def _layer(cls: str, name: str, **config: Any) -> dict[str, Any]:
    return {
        "module": "keras.layers",
        "class_name": cls,
        "config": {"name": name, **config},
    }


def _sequential(*layers: dict[str, Any]) -> dict[str, Any]:
    first = _layer("InputLayer", "input", batch_shape=[None, 8, 8, 1])
    return {"class_name": "Sequential", "config": {"layers": [first, *layers]}}


def _tensor(source: str) -> dict[str, Any]:
    return {
        "class_name": "__keras_tensor__",
        "config": {"keras_history": [source, 0, 0]},
    }


def _functional(*layers: tuple[dict[str, Any], list[list[str]]]) -> dict[str, Any]:
    entries = [
        {
            **_layer("InputLayer", "input", batch_shape=[None, 8, 8, 1]),
            "name": "input",
            "inbound_nodes": [],
        }
    ]
    for layer, calls in layers:
        nodes = [{"args": [_tensor(s) for s in sources]} for sources in calls]
        entries.append(
            {**layer, "name": layer["config"]["name"], "inbound_nodes": nodes}
        )
    last = entries[-1]["name"]
    config = {"layers": entries, "input_layers": ["input", 0, 0]}
    return {
        "class_name": "Functional",
        "config": {**config, "output_layers": [last, 0, 0]},
    }


DENSE = {"units": 10, "activation": "linear"}
CONV = {"filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same"}


def test_a_config_becomes_a_document() -> None:
    config = _sequential(
        _layer("Conv2D", "c", **CONV, activation="tanh"),
        _layer("MaxPooling2D", "p", pool_size=[2, 2], strides=None),
        _layer("Flatten", "f"),
        _layer("Dense", "d", **DENSE),
    )
    config["compile_config"] = {
        "optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.05}}
    }
    document = keras_import.document_from_config(config)
    spec = user_models.spec_from_document("m", document)
    assert document["input_shape"] == [8, 8, 1]
    assert spec.layer("c").options.stride == 2
    assert spec.layer("c").activation == "tanh"
    assert spec.layer("p").options.stride == 2
    assert (spec.workload.optimizer, spec.workload.learning_rate) == ("sgd", 0.05)


def _compiled(optimizer: str, **options: Any) -> dict[str, Any]:
    """A small model's config compiled with Keras' ``optimizer`` saved as
    Keras 3.15 saves it: every option of its base class, then its own."""
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **DENSE))
    base = {
        "name": optimizer.lower(),
        "learning_rate": 0.0010000000474974513,
        "weight_decay": None,
        "clipnorm": None,
        "global_clipnorm": None,
        "clipvalue": None,
        "use_ema": False,
        "ema_momentum": 0.99,
        "ema_overwrite_frequency": None,
        "loss_scale_factor": None,
        "gradient_accumulation_steps": None,
    }
    saved = {
        "module": "keras.optimizers",
        "class_name": optimizer,
        "registered_name": None,
    }
    config["compile_config"] = {"optimizer": {**saved, "config": base | options}}
    return config


@pytest.mark.parametrize(
    ("optimizer", "options", "expected"),
    [
        # a DCGAN's Adam, a Transformer's, SGD with Nesterov, AdamW, RMSprop,
        # Adagrad and Nadam: each the file's own, not Adam at 0.001 (issue 75)
        (
            "Adam",
            {"learning_rate": 2e-4, "beta_1": 0.5},
            {"optimizer": "adam", "beta_1": 0.5},
        ),
        ("Adam", {"beta_2": 0.98, "epsilon": 1e-9}, {"beta_2": 0.98, "epsilon": 1e-9}),
        (
            "SGD",
            {"momentum": 0.9, "nesterov": True},
            {"optimizer": "sgd", "nesterov": True},
        ),
        (
            "AdamW",
            {"weight_decay": 0.004},
            {"optimizer": "adamw", "weight_decay": 0.004},
        ),
        (
            "RMSprop",
            {"rho": 0.8, "centered": True},
            {"optimizer": "rmsprop", "centered": True},
        ),
        (
            "Adagrad",
            {"initial_accumulator_value": 0.2},
            {"initial_accumulator_value": 0.2},
        ),
        ("Nadam", {"beta_1": 0.8}, {"optimizer": "nadam", "beta_1": 0.8}),
        (
            "Adam",
            {"amsgrad": True, "weight_decay": 0.01},
            {"amsgrad": True, "weight_decay": 0.01},
        ),
    ],
)
def test_the_optimizer_is_the_one_the_file_was_compiled_with(
    optimizer: str, options: dict[str, Any], expected: dict[str, Any]
) -> None:
    document = keras_import.document_from_config(_compiled(optimizer, **options))
    spec = user_models.spec_from_document("m", document)
    rate = options.get("learning_rate", 0.001)
    for field, value in {"learning_rate": rate, **expected}.items():
        assert getattr(spec.workload, field) == pytest.approx(value), field
    # and the store's document keeps it: a stored model trains on it, and
    # its name is another than a default Adam's
    again = user_models.spec_from_document("m", user_models.document_of(spec))
    assert again.workload == spec.workload
    plain = keras_import.document_from_config(_compiled("Adam"))
    assert user_models.document_of(spec) != user_models.document_of(
        user_models.spec_from_document("m", plain)
    )


@pytest.mark.parametrize(
    ("optimizer", "options", "named"),
    [
        ("Adam", {"use_ema": True}, "use_ema=True"),
        ("Adam", {"gradient_accumulation_steps": 4}, "gradient_accumulation_steps=4"),
        ("Adam", {"loss_scale_factor": 128.0}, "loss_scale_factor=128.0"),
        (
            "SGD",
            {"learning_rate": {"class_name": "PolynomialDecay", "config": {}}},
            "the learning-rate schedule 'PolynomialDecay' \\(the tool computes",
        ),
        ("Adadelta", {}, "optimizer 'Adadelta' \\(the tool computes Keras' SGD, Adam"),
        ("Adam", {"future_option": 3}, "future_option=3"),
    ],
)
def test_an_optimizer_the_tool_does_not_compute_is_refused_never_replaced(
    optimizer: str, options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named) as caught:
        keras_import.document_from_config(_compiled(optimizer, **options))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("rate", "schedule", "first"),
    [
        (
            {"initial_learning_rate": 0.1, "decay_steps": 100, "decay_rate": 0.9},
            Schedule("exponential_decay", 100, 0.9),
            0.1,
        ),
        (
            {
                "initial_learning_rate": 0.01,
                "decay_steps": 10,
                "decay_rate": 1.0,
                "staircase": True,
            },
            Schedule("inverse_time_decay", 10, 1.0, staircase=True),
            0.01,
        ),
        (
            {
                "initial_learning_rate": 0.1,
                "decay_steps": 50,
                "alpha": 0.0,
                "warmup_target": None,
                "warmup_steps": 0,
            },
            Schedule("cosine_decay", 50),
            0.1,
        ),
        (
            {
                "initial_learning_rate": 0.0,
                "decay_steps": 50,
                "alpha": 0.1,
                "warmup_target": 0.01,
                "warmup_steps": 5,
            },
            Schedule("cosine_decay", 50, alpha=0.1, warmup_target=0.01, warmup_steps=5),
            0.0,
        ),
        (
            {"boundaries": [10, 20], "values": [0.1, 0.01, 0.001]},
            Schedule(
                "piecewise_constant_decay",
                boundaries=(10, 20),
                values=(0.1, 0.01, 0.001),
            ),
            0.1,
        ),
    ],
)
def test_a_learning_rate_schedule_and_a_clip_are_read(
    rate: dict[str, Any], schedule: Schedule, first: float
) -> None:
    names = {
        "exponential_decay": "ExponentialDecay",
        "inverse_time_decay": "InverseTimeDecay",
        "cosine_decay": "CosineDecay",
        "piecewise_constant_decay": "PiecewiseConstantDecay",
    }
    saved = {
        "module": "keras.optimizers.schedules",
        "class_name": names[schedule.kind],
        "config": {**rate, "name": "s"},
        "registered_name": None,
    }
    config = _compiled("SGD", learning_rate=saved, momentum=0.9, clipnorm=1.0)
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(config)
    )
    w = spec.workload
    assert (w.schedule, w.learning_rate, w.clipnorm, w.momentum) == (
        schedule,
        first,
        1.0,
        0.9,
    )
    again = user_models.spec_from_document("m", user_models.document_of(spec))
    assert again.workload == w


def test_an_optimizer_saved_on_pytorch_is_keras_own() -> None:
    """Keras on PyTorch saves its optimizers as its backend's subclasses
    (module keras.src.backend.torch.optimizers.torch_rmsprop); a class of
    the user's own, registered under another name, stays refused."""
    config = _compiled("RMSprop", centered=True)
    saved = config["compile_config"]["optimizer"]
    saved |= {
        "module": "keras.src.backend.torch.optimizers.torch_rmsprop",
        "registered_name": "RMSprop",
    }
    document = keras_import.document_from_config(config)
    assert document["workload"]["optimizer"] == "rmsprop"
    assert document["workload"]["centered"] is True
    saved |= {"module": "my_project.optimizers", "registered_name": "Custom>RMSprop"}
    with pytest.raises(ValueError, match="optimizer 'RMSprop' from 'my_project"):
        keras_import.document_from_config(config)


def test_the_control_an_unknown_optimizer_is_caught_by_the_test() -> None:
    """The test above sees a replacement: a reader that dropped what it
    does not know (the old one) gives a document, where it must refuse."""
    config = _compiled("Adam", use_ema=True)
    config["compile_config"]["optimizer"]["config"]["use_ema"] = False
    assert keras_import.document_from_config(config)["workload"]["optimizer"] == "adam"


def test_every_reason_is_named_at_once_layers_grouped() -> None:
    """Three checks of different kinds in one sentence, and many layers
    refused for one reason as one phrase (issue 75)."""
    convs = [_layer("Conv2D", f"c{i}", **CONV, groups=2) for i in range(6)]
    config = _sequential(*convs, _layer("Flatten", "f"), _layer("Dense", "d", **DENSE))
    config["compile_config"] = {
        "loss": "squared_hinge",
        "optimizer": _compiled("Adam", use_ema=True)["compile_config"]["optimizer"],
    }
    with pytest.raises(ValueError, match="3 things stop the tool") as caught:
        keras_import.document_from_config(config)
    sentence = str(caught.value)
    assert sentence.startswith("3 things stop the tool: (1) 6 layers ('c0', 'c1', 'c2'")
    assert "and 3 more): Conv2D layer has groups" in sentence
    assert "(2) optimizer Adam with use_ema=True" in sentence
    assert "(3) the model was compiled with loss 'squared_hinge'" in sentence
    assert "'c3'" not in sentence
    assert len(sentence) < 600


def test_the_head_is_judged_even_beside_a_refused_layer() -> None:
    """A refused layer stops the spec from being built, but the head is
    judged from the shape Keras built the last layer for: a head the loss
    cannot train on is named in the same sentence (the second fix a user
    would make is not refused anew); a row per pixel is a head (issue 78)."""
    dilated = _layer("Conv2D", "c", **CONV, groups=2)
    per_pixel = {
        **_layer("Conv2D", "d", **CONV),
        "build_config": {"input_shape": [None, 6, 6, 4]},  # an image's pixels
    }
    with pytest.raises(ValueError, match="groups") as caught:
        keras_import.document_from_config(_sequential(dilated, per_pixel))
    assert "stop the tool" not in str(caught.value)
    one = {
        **_layer("Dense", "d", units=1, activation="linear"),
        "build_config": {"input_shape": [None, 64]},
    }
    config = _sequential(dilated, _layer("Flatten", "f"), one)
    with pytest.raises(ValueError, match="needs at least 2"):
        keras_import.document_from_config(config)
    # the control: a head that trains, beside the refused layer, is not named
    fine = {**one, "config": {**one["config"], "units": 10}}
    with pytest.raises(ValueError, match="groups") as caught:
        keras_import.document_from_config(
            _sequential(dilated, _layer("Flatten", "f"), fine)
        )
    assert str(caught.value).startswith("Conv2D layer 'c' has groups")


def test_a_default_prelu_is_read() -> None:
    """A PReLU that leaves shared_axes unset (an alpha per value) was
    refused by the reader's own bug (issue 75)."""
    config = _sequential(
        _layer("Flatten", "f"), _layer("PReLU", "p"), _layer("Dense", "d", **DENSE)
    )
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(config)
    )
    assert spec.param("p/alpha").shape == (64,)


def test_a_frozen_layer_is_read_frozen_and_its_weights_held() -> None:
    """Keras' trainable=False, on a layer or on a model used as a layer
    (a transfer model's base): its parameters are not trained."""
    base = {
        "module": "keras",
        "class_name": "Sequential",
        "config": {
            "name": "base",
            "trainable": False,
            "layers": [
                _layer("InputLayer", "base_in", batch_shape=[None, 8, 8, 1]),
                _layer("Conv2D", "conv", **CONV),
                _layer("BatchNormalization", "norm"),
            ],
        },
    }
    config = _sequential(
        base,
        _layer("Flatten", "f", trainable=False),
        _layer("Dense", "d", **DENSE),
    )
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(config)
    )
    assert set(spec.frozen_names()) == {
        "base__conv/kernel",
        "base__conv/bias",
        "base__norm/gamma",
        "base__norm/beta",
        "base__norm/moving_mean",
        "base__norm/moving_variance",
    }
    assert spec.trainable_names() == ("d/kernel", "d/bias")
    again = user_models.spec_from_document("m", user_models.document_of(spec))
    assert again == spec
    thawed = copy.deepcopy(config)
    thawed["config"]["layers"][1]["config"]["trainable"] = True
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(thawed)
    )
    assert not spec.frozen_names()  # the control: a base not frozen trains


@pytest.mark.parametrize(
    ("activation", "units", "loss", "objective"),
    [
        (
            "softmax",
            10,
            "sparse_categorical_crossentropy",
            Objective("sparse_categorical_crossentropy", False),
        ),
        ("sigmoid", 1, "binary_crossentropy", Objective("binary_crossentropy", False)),
        ("linear", 1, "mse", Objective("mean_squared_error", False)),
        (
            "linear",
            10,
            {"class_name": "CategoricalCrossentropy", "config": {"from_logits": True}},
            Objective("categorical_crossentropy", True),
        ),
        (  # label smoothing, kept in the document the store writes
            "softmax",
            10,
            {
                "class_name": "CategoricalCrossentropy",
                "config": {"from_logits": False, "label_smoothing": 0.1},
            },
            Objective("categorical_crossentropy", False, label_smoothing=0.1),
        ),
        (  # the focal loss with class balancing, as Keras 3.15 saves it
            "sigmoid",
            1,
            {
                "class_name": "BinaryFocalCrossentropy",
                "config": {"apply_class_balancing": True, "alpha": 0.3, "gamma": 1.0},
            },
            Objective("binary_focal_crossentropy", False, gamma=1.0, alpha=0.3),
        ),
    ],
)
def test_the_loss_is_the_one_the_file_was_compiled_with(
    activation: str, units: int, loss: object, objective: Objective
) -> None:
    config = _sequential(
        _layer("Flatten", "f"), _layer("Dense", "d", units=units, activation=activation)
    )
    config["compile_config"] = {"loss": loss}
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(config)
    )
    assert spec.workload.objective == objective
    assert spec.classes == units
    # and the document the store keeps says so, so a stored model trains on it
    again = user_models.spec_from_document("m", user_models.document_of(spec))
    assert again.workload == spec.workload


def test_an_uncompiled_file_trains_on_the_default_loss() -> None:
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **DENSE))
    document = keras_import.document_from_config(config)
    spec = user_models.spec_from_document("m", document)
    assert spec.workload.objective == Objective("sparse_categorical_crossentropy")
    assert "loss" not in user_models.document_of(spec)["workload"]  # digests stay


def test_an_uncompiled_file_ending_in_a_softmax_trains_on_its_probabilities() -> None:
    """keras.io's ResNet blocks, uncompiled, end in a softmax: taken as
    logits it is applied twice (and Keras on TensorFlow alone swaps in the
    logits before it, so that path failed with m 5e6)."""
    softmax = {**DENSE, "activation": "softmax"}
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **softmax))
    spec = user_models.spec_from_document(
        "m", keras_import.document_from_config(config)
    )
    assert spec.workload.objective == Objective(
        "sparse_categorical_crossentropy", False
    )


def test_a_loss_the_tool_does_not_compute_is_refused_from_the_file() -> None:
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **DENSE))
    config["compile_config"] = {"loss": "squared_hinge"}
    with pytest.raises(ValueError, match="compiled with loss 'squared_hinge'"):
        keras_import.document_from_config(config)


def test_a_poisson_loss_on_outputs_that_may_be_negative_is_refused() -> None:
    """Poisson takes the log of the outputs: a file that ends in a linear
    layer is refused in one sentence; the same ending in a softplus reads."""
    linear = {**DENSE, "activation": "linear"}
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **linear))
    config["compile_config"] = {"loss": "poisson"}
    with pytest.raises(ValueError, match="takes the log of its outputs"):
        keras_import.document_from_config(config)
    positive = {**DENSE, "activation": "softplus"}
    config = _sequential(_layer("Flatten", "f"), _layer("Dense", "d", **positive))
    config["compile_config"] = {"loss": "poisson"}
    document = keras_import.document_from_config(config)
    assert document["workload"]["loss"] == "poisson"


def test_a_single_output_cannot_train_on_a_categorical_loss() -> None:
    config = _sequential(
        _layer("Flatten", "f"), _layer("Dense", "d", units=1, activation="linear")
    )
    # the default loss: the door's one sentence says so, before any spec
    with pytest.raises(ValueError, match="needs at least 2"):
        keras_import.document_from_config(config)


def test_a_functional_chain_is_read_in_order() -> None:
    config = _functional(
        (_layer("Flatten", "f"), [["input"]]),
        (_layer("Dense", "d", **DENSE), [["f"]]),
    )
    document = keras_import.document_from_config(config)
    assert [e["name"] for e in document["layers"]] == ["f", "d"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            _sequential(
                {
                    "class_name": "Lambda",
                    "module": "keras.layers",
                    "config": {"name": "lam"},
                }
            ),
            "layer 'lam' \\(Lambda\\) is not one the tool knows; supported: Keras' "
            "built-in layers",
        ),
        (
            _sequential(
                {"class_name": "MyLayer", "module": "mine", "config": {"name": "mine"}}
            ),
            "layer 'mine' is 'MyLayer' from 'mine': a class of its own runs code",
        ),
        (
            _sequential(_layer("Conv2D", "c", **CONV, groups=2)),
            "groups=2, which the tool does not compute",
        ),
        (
            _sequential(_layer("Conv2D", "c", **CONV, data_format="channels_first")),
            "data_format='channels_first'",
        ),
        (
            _sequential(_layer("Dense", "d", **DENSE, kernel_constraint="non_neg")),
            "kernel_constraint='non_neg'",
        ),
        (
            _sequential(_layer("LSTM", "l", units=4, recurrent_activation="relu")),
            "recurrent_activation='relu', which the tool does not compute",
        ),
        (
            _sequential(_layer("Dense", "d", units=4, activation="hard_sigmoid")),
            "activation 'hard_sigmoid'",
        ),
        (
            _sequential(_layer("Conv2D", "c", filters=4, kernel_size=[3, 1])),
            "only square windows",
        ),
        (
            _sequential(
                {
                    "class_name": "Sequential",
                    "module": "keras",
                    "config": {"name": "inner"},
                }
            ),
            "'inner' inside the model has no layers",
        ),
        (
            _functional(
                (_layer("Dense", "d", **DENSE), [["input"], ["input"]]),
            ),
            "called 2 times \\(a shared layer\\)",
        ),
        (
            _functional(
                (_layer("Flatten", "f"), [["input"]]),
                (_layer("Dense", "d", **DENSE), [["input"]]),
            ),
            # a branch from the model's input is read, and the door says at
            # once what the spec makes of it (issue 75)
            "layer 'f' feeds no later layer",
        ),
        (
            {**_functional((_layer("Flatten", "f"), [["input"]]))}
            | {"class_name": "Functional"},
            None,  # the control: a one-layer chain is read
        ),
        ({"class_name": "MyModel", "config": {}}, "not a Sequential or functional"),
    ],
)
def test_an_architecture_the_spec_cannot_express_is_one_sentence(
    config: dict[str, Any], message: str | None
) -> None:
    if message is None:
        assert keras_import.document_from_config(config)["layers"]
        return
    with pytest.raises(ValueError, match=message) as caught:
        keras_import.document_from_config(config)
    assert "\n" not in str(caught.value)


# --- functional graphs and the newer layers ---------------------------------------


def _node(*sources: str, **kwargs: Any) -> dict[str, Any]:
    """A call on the outputs of ``sources``, with keyword arguments."""
    return {"args": [_tensor(s) for s in sources], "kwargs": kwargs}


def _add(*sources: str) -> dict[str, Any]:
    """An Add's call: its tensors in one list, as Keras writes it."""
    return {"args": [[_tensor(s) for s in sources]], "kwargs": {}}


def _graph(
    *layers: tuple[dict[str, Any], dict[str, Any]],
    shape: tuple[int, ...] = (12,),
    dtype: str = "int32",
) -> dict[str, Any]:
    """A functional config: an input of ``shape`` and ``dtype``, then each
    layer with its one inbound node."""
    entries = [
        {
            **_layer("InputLayer", "input", batch_shape=[None, *shape], dtype=dtype),
            "name": "input",
            "inbound_nodes": [],
        }
    ]
    for layer, node in layers:
        name = layer["config"]["name"]
        entries.append({**layer, "name": name, "inbound_nodes": [node]})
    config = {"layers": entries, "input_layers": [["input", 0, 0]]}
    output = entries[-1]["name"]
    return {
        "class_name": "Functional",
        "config": {**config, "output_layers": [[output, 0, 0]]},
    }


EMBED = _layer("Embedding", "embed", input_dim=50, output_dim=8, mask_zero=False)
ATTENTION = {
    "num_heads": 2,
    "key_dim": 4,
    "value_dim": 4,
    "dropout": 0.0,
    "use_bias": True,
    "use_gate": False,
    "output_shape": None,
    "attention_axes": [1],
    "sliding_window": None,
}
NORM = {
    "axis": [-1],
    "epsilon": 0.001,
    "center": True,
    "scale": True,
    "rms_scaling": False,
}
GRU = {
    "units": 6,
    "activation": "tanh",
    "recurrent_activation": "sigmoid",
    "reset_after": True,
    "return_sequences": True,
}


def _transformer(
    *,
    attention: dict[str, Any] | None = None,
    norm: dict[str, Any] | None = None,
    gru: dict[str, Any] | None = None,
    embed: dict[str, Any] | None = None,
    attention_call: dict[str, Any] | None = None,
    dtype: str = "int32",
) -> dict[str, Any]:
    """An embedding, a gelu Conv1D added back, self-attention added back, a
    layer normalization, a Dropout of rate 0, a GRU over every step, 1-D
    pools, the global mean and logits; each part's options replaceable."""
    conv = _layer(
        "Conv1D",
        "position",
        filters=8,
        kernel_size=[3],
        strides=[1],
        padding="same",
        dilation_rate=[1],
        activation="gelu",
    )
    return _graph(
        (embed or EMBED, _node("input")),
        (conv, _node("embed")),
        (_layer("Add", "encode"), _add("embed", "position")),
        (
            _layer("MultiHeadAttention", "att", **(attention or ATTENTION)),
            attention_call or _node("encode", "encode"),
        ),
        (_layer("Add", "res"), _add("encode", "att")),
        (_layer("LayerNormalization", "norm", **(norm or NORM)), _node("res")),
        (_layer("Dropout", "drop", rate=0.0), _node("norm", training=False)),
        (_layer("GRU", "gru", **(gru or GRU)), _node("drop", mask=None)),
        (_layer("MaxPooling1D", "pool", pool_size=[2], strides=None), _node("gru")),
        (
            _layer("AveragePooling1D", "avg", pool_size=[2], strides=[1]),
            _node("pool"),
        ),
        (_layer("GlobalAveragePooling1D", "gap", keepdims=False), _node("avg")),
        (_layer("Dense", "logits", **DENSE), _node("gap")),
        dtype=dtype,
    )


def test_a_functional_transformer_becomes_a_document() -> None:
    document = keras_import.document_from_config(_transformer())
    spec = user_models.spec_from_document("m", document)
    assert document["input_shape"] == [12]
    assert [layer.name for layer in spec.layers] == [
        "embed",
        "position",
        "encode",
        "att",
        "res",
        "norm",  # the Dropout of rate 0 is left out: the GRU takes the norm
        "gru",
        "pool",
        "avg",
        "gap",
        "logits",
    ]
    assert spec.tokens == 50
    assert spec.layer("position").activation == "gelu"
    assert spec.layer("encode").inputs == ("embed", "position")
    assert spec.layer("att").inputs == ()  # the previous layer's output, twice
    assert (spec.layer("att").options.num_heads, spec.layer("att").options.key_dim) == (
        2,
        4,
    )
    assert spec.layer("res").inputs == ("encode", "att")
    assert spec.layer("norm").options.epsilon == 1e-3  # Keras' default
    assert spec.layer("gru").options.return_sequences
    assert spec.layer("gru").inputs == ()
    assert spec.layer("pool").options.stride == 2
    assert spec.layer("avg").options.stride == 1
    assert spec.classes == 10


def test_an_attentions_dropout_is_read_as_masks_of_its_weights() -> None:
    """Keras' MultiHeadAttention(dropout=0.1), as keras.io's time-series
    Transformer writes it: read as the layer's ``dropout`` (left out of the
    document at 0, so older files keep their digest), one mask per head of
    its weights (``masks_of``), written back, at 0 in a trajectory's
    spec."""
    document = keras_import.document_from_config(
        _transformer(attention=ATTENTION | {"dropout": 0.1})
    )
    spec = user_models.spec_from_document("m", document)
    att = spec.layer("att")
    assert att.options.dropout == 0.1
    assert [(m.tap, m.side, m.count, m.rate) for m in masks_of(att)] == [
        ("att/score_masks", "scores", 2, 0.1)
    ]
    assert spec.noisy_layers() == (att,)
    assert without_noise(spec).layer("att").options.dropout == 0.0
    assert user_models.document_of(spec)["layers"][3]["dropout"] == 0.1
    plain = keras_import.document_from_config(_transformer())
    assert "dropout" not in plain["layers"][3]
    assert not masks_of(user_models.spec_from_document("m", plain).layer("att"))


def test_a_layer_taking_an_earlier_layer_names_it() -> None:
    config = _graph(
        (EMBED, _node("input")),
        (_layer("LayerNormalization", "norm", **NORM), _node("embed")),
        (_layer("GRU", "gru", **GRU), _node("embed")),  # not the norm's output
        (_layer("GlobalAveragePooling1D", "gap"), _node("gru")),
        (_layer("Dense", "logits", **DENSE), _node("gap")),
    )
    # the norm feeds nothing here: the door refuses it, naming it, from what
    # the spec makes of the graph it read (Keras' own configs hold only the
    # layers between the input and the outputs)
    with pytest.raises(ValueError, match="'norm' feeds no later layer"):
        keras_import.document_from_config(config)
    graph = keras_import._layers(config)
    entries: list[dict[str, Any]] = []
    for layer, sources in graph:
        entry = keras_import._entry(layer)
        entries.append(
            {**entry, **keras_import._inputs(layer, entry, sources, entries)}
        )
    assert entries[2]["inputs"] == ["embed"]
    assert "inputs" not in entries[3]


def _call_with(**kwargs: Any) -> dict[str, Any]:
    return _node("encode", "encode", **kwargs)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_transformer(attention=ATTENTION | {"value_dim": 8}), "value_dim=8 and"),
        (_transformer(attention=ATTENTION | {"dropout": 1.0}), "dropout 1.0; it must"),
        (_transformer(attention=ATTENTION | {"kernel_regularizer": "l2"}), "l2"),
        (_transformer(attention=ATTENTION | {"use_gate": True}), "use_gate=True"),
        (
            _transformer(attention=ATTENTION | {"output_shape": [4]}),
            r"output_shape=\[4\]",
        ),
        (
            _transformer(attention=ATTENTION | {"attention_axes": [1, 2]}),
            r"attention_axes=\[1, 2\]",
        ),
        (
            _transformer(attention=ATTENTION | {"sliding_window": 4}),
            "sliding_window=4",
        ),
        (
            _transformer(attention_call=_node("encode", "position")),
            r"from different layers \(encode, position\); the tool computes self",
        ),
        (
            _transformer(attention_call=_call_with(key=_tensor("embed"))),
            r"from different layers \(encode, encode, embed\)",
        ),
        (
            _transformer(attention_call=_call_with(use_causal_mask=True)),
            "called with use_causal_mask",
        ),
        (
            _transformer(attention_call=_call_with(return_attention_scores=True)),
            "called with return_attention_scores",
        ),
        (
            _transformer(attention_call=_call_with(attention_mask=_tensor("embed"))),
            "called with attention_mask",
        ),
        (_transformer(gru=GRU | {"reset_after": False}), "reset_after=False"),
        (
            _transformer(gru=GRU | {"recurrent_activation": "hard_sigmoid"}),
            "recurrent_activation='hard_sigmoid'",
        ),
        (_transformer(gru=GRU | {"go_backwards": True}), "go_backwards=True"),
        (_transformer(norm=NORM | {"axis": [1]}), r"over axis \[1\]"),
        (_transformer(norm=NORM | {"center": False}), "center=False"),
        (_transformer(norm=NORM | {"scale": False}), "scale=False"),
        (_transformer(norm=NORM | {"rms_scaling": True}), "rms_scaling=True"),
        (
            _transformer(embed=_layer("Embedding", "embed", mask_zero=True)),
            "mask_zero=True",
        ),
    ],
)
def test_a_newer_layer_the_spec_cannot_express_is_one_sentence(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        keras_import.document_from_config(config)
    assert "\n" not in str(caught.value)


def test_a_padding_mask_is_named_once_at_its_embedding() -> None:
    """Keras saves an Embedding(mask_zero=True)'s mask as a NotEqual of the
    token ids that the next layer takes as a second tensor: the refusal
    names the Embedding's mask_zero alone, not layers the user never wrote
    (issue 75: four of them, with advice to use a Reshape)."""
    not_equal = {
        "module": "keras.src.ops.numpy",
        "class_name": "NotEqual",
        "config": {"name": "not_equal"},
    }
    gru = _layer("GRU", "gru", **(GRU | {"return_sequences": False}))
    config = _graph(
        (
            _layer("Embedding", "embed", input_dim=50, output_dim=8, mask_zero=True),
            _node("input"),
        ),
        (not_equal, _node("input")),
        (gru, _node("embed", mask=_tensor("not_equal"))),
        (_layer("Dense", "logits", **DENSE), _node("gru")),
    )
    with pytest.raises(ValueError, match="mask_zero") as caught:
        keras_import.document_from_config(config)
    assert str(caught.value) == (
        "Embedding layer 'embed' has mask_zero=True, which the tool does not "
        "compute; it needs mask_zero=False"
    )


def test_a_float_input_before_an_embedding_is_read_as_keras_reads_it() -> None:
    """keras.io's text examples write ``keras.Input(shape=(maxlen,))``, a
    float32 input, before an Embedding, which casts it to token ids."""
    as_ids = keras_import.document_from_config(_transformer())
    as_floats = keras_import.document_from_config(_transformer(dtype="float32"))
    assert as_floats == as_ids
    assert user_models.spec_from_document("m", as_floats).tokens


def _with_layer(config: dict[str, Any], name: str, **change: Any) -> dict[str, Any]:
    changed = copy.deepcopy(config)
    for entry in changed["config"]["layers"]:
        if entry["name"] == name:
            entry["config"].update(change)
    return changed


def test_more_refusals_of_newer_layers_are_one_sentence() -> None:
    config = _transformer()
    lambda_gelu = {"module": "builtins", "class_name": "function", "config": "f"}
    refusals = {
        r"Dropout layer 'drop' has noise_shape=\[1, 1, 6\], which the tool": (
            _with_layer(config, "drop", rate=0.5, noise_shape=[1, 1, 6])
        ),
        r"Conv1D layer 'position' has groups=2": _with_layer(
            config, "position", groups=2
        ),
        "an activation function of its own": _with_layer(
            config, "position", activation=lambda_gelu
        ),
        "GlobalAveragePooling1D layer 'gap' has keepdims=True": _with_layer(
            config, "gap", keepdims=True
        ),
        r"pool_size \[2, 2\]; it must be one number": _with_layer(
            config, "pool", pool_size=[2, 2]
        ),
    }
    for message, bad in refusals.items():
        with pytest.raises(ValueError, match=message) as caught:
            keras_import.document_from_config(bad)
        assert "\n" not in str(caught.value)
    # an attention layer's options as written before it is built
    unbuilt = _with_layer(config, "att", attention_axes=None, value_dim=None)
    assert keras_import.document_from_config(unbuilt)["layers"][3]["key_dim"] == 4


def test_a_graph_the_spec_cannot_express_is_one_sentence() -> None:
    # a second layer taking the model's input (a branch from the input)
    from_input = _graph(
        (EMBED, _node("input")),
        (_layer("Embedding", "other", input_dim=50, output_dim=8), _node("input")),
        (_layer("Add", "sum"), _add("embed", "other")),
        (_layer("GlobalAveragePooling1D", "gap"), _node("sum")),
        (_layer("Dense", "logits", **DENSE), _node("gap")),
    )
    floats: dict[str, Any] = {"shape": (8,), "dtype": "float32"}
    # a Dense given a second tensor (a mask)
    two = _graph(
        (_layer("Dense", "d", **DENSE), _node("input")),
        (_layer("Dense", "e", **DENSE), _node("d", mask=_tensor("input"))),
        **floats,
    )
    # an output that is not the last layer
    early = _graph(
        (_layer("Dense", "d", **DENSE), _node("input")),
        (_layer("Dense", "e", **DENSE), _node("d")),
        **floats,
    )
    early["config"]["output_layers"] = [["d", 0, 0]]
    # a layer taking one the config does not list before it
    unknown = _graph((_layer("Dense", "d", **DENSE), _node("nowhere")), **floats)
    several = _transformer()  # several outputs, one of them no layer
    several["config"]["output_layers"] = [["logits", 0, 0], ["nowhere", 0, 0]]
    unused = _transformer()
    unused["config"]["layers"][-1]["inbound_nodes"] = []
    refusals = {
        r"layer 'e' takes 2 tensor\(s\); a merge \(Add, Concatenate": two,
        "the model's output is 'd', not the last layer": early,
        "layer 'd' takes 'nowhere', which is not an earlier layer": unknown,
        "names 'nowhere' among its inputs or outputs, which is none": several,
        "layer 'logits' is unused": unused,
    }
    for message, config in refusals.items():
        with pytest.raises(ValueError, match=message) as caught:
            keras_import.document_from_config(config)
        assert "\n" not in str(caught.value)
    # two embeddings of the token ids, summed: a branch from the input is read
    document = keras_import.document_from_config(from_input)
    assert document["layers"][1]["inputs"] == ["input"]
    user_models.spec_from_document("two-tables", document)


def test_an_input_no_layer_is_and_an_open_feature_axis_are_refused() -> None:
    # several inputs are read (tests/test_several_outputs.py); one the
    # config lists and does not hold is refused
    config = _functional((_layer("Flatten", "f"), [["input"]]))
    config["config"]["input_layers"] = [["input", 0, 0], ["other", 0, 0]]
    with pytest.raises(ValueError, match="names 'other' among its inputs or outputs"):
        keras_import.document_from_config(config)
    config = _sequential(_layer("LSTM", "l", units=4))
    config["config"]["layers"][0]["config"]["batch_shape"] = [None, 5, None]
    with pytest.raises(ValueError, match="is not fixed; give every axis"):
        keras_import.document_from_config(config)
    # a free sequence length is read (tests/test_kinds.py: at which length)
    config["config"]["layers"][0]["config"]["batch_shape"] = [None, None, 8]
    assert keras_import.document_from_config(config)["input_shape"][1] == 8


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "SimpleRNN"])
def test_a_recurrent_layers_own_activation_is_read_into_its_cell(cls: str) -> None:
    """Keras' LSTM(activation='relu') (a forecaster as public examples
    write it) computes relu inside the cell: read as the layer's cell
    activation, never as an activation after the layer; Keras' tanh is
    left out of the document (older files keep their digest)."""

    def read(activation: str) -> Any:
        recurrent = _layer(cls, "r", units=4, activation=activation)
        config = _sequential(recurrent, _layer("Dense", "d", **DENSE))
        config["config"]["layers"][0]["config"]["batch_shape"] = [None, 5, 3]
        document = keras_import.document_from_config(config)
        return document, user_models.spec_from_document("m", document).layer("r")

    document, layer = read("relu")
    assert document["layers"][0]["activation"] == "relu"
    assert layer.options.activation == "relu"
    assert layer.activation is None  # nothing after the layer
    document, layer = read("tanh")
    assert "activation" not in document["layers"][0]
    assert layer.options.activation == "tanh"
    assert read("linear")[1].options.activation is None
    with pytest.raises(ValueError, match="activation 'hard_sigmoid'"):
        read("hard_sigmoid")


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "SimpleRNN"])
def test_a_recurrent_layers_own_dropout_and_recurrent_dropout_are_read(
    cls: str,
) -> None:
    """Keras' LSTM(dropout=0.2): one mask per sequence on the input for
    every gate (``masks_of``), read as the layer's ``dropout`` (left
    out of the document at 0, so older files keep their digest), written
    back, and at 0 in a trajectory's spec
    (``without_noise``); with ``recurrent_dropout`` the masks are the
    cell's, one per gate on the state and on the input
    (``masks_of``); a Bidirectional's dropout is read too."""

    def config(**options: Any) -> Any:
        recurrent = _layer(cls, "r", units=4, **options)
        made = _sequential(recurrent, _layer("Dense", "d", **DENSE))
        made["config"]["layers"][0]["config"]["batch_shape"] = [None, 5, 3]
        return made

    document = keras_import.document_from_config(config(dropout=0.2))
    assert document["layers"][0]["dropout"] == 0.2
    spec = user_models.spec_from_document("m", document)
    assert spec.layer("r").options.dropout == 0.2
    alone = masks_of(spec.layer("r"))  # one input mask for every gate
    assert [(m.tap, m.side, m.count) for m in alone] == [("r/input_masks", "input", 1)]
    assert spec.noisy_layers() == (spec.layer("r"),)
    assert spec.trains_differently
    assert without_noise(spec).layer("r").options.dropout == 0.0
    assert user_models.document_of(spec)["layers"][0]["dropout"] == 0.2
    plain = keras_import.document_from_config(config(dropout=0.0))
    assert "dropout" not in plain["layers"][0]
    assert "recurrent_dropout" not in plain["layers"][0]
    both = keras_import.document_from_config(
        config(dropout=0.2, recurrent_dropout=0.25)
    )
    assert both["layers"][0]["recurrent_dropout"] == 0.25
    masked = user_models.spec_from_document("m", both)
    gates = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}[cls]  # one mask per gate each
    assert [(m.tap, m.count) for m in masks_of(masked.layer("r"))] == [
        ("r/input_masks", gates),
        ("r/state_masks", gates),
    ]
    silent = without_noise(masked).layer("r").options
    assert (silent.dropout, silent.recurrent_dropout) == (0.0, 0.0)
    wrapped = _layer("Bidirectional", "b", layer=_layer(cls, "r", units=4, dropout=0.2))
    both = _sequential(wrapped, _layer("Dense", "d", **DENSE))
    both["config"]["layers"][0]["config"]["batch_shape"] = [None, 5, 3]
    read = user_models.spec_from_document("m", keras_import.document_from_config(both))
    assert read.layer("b").options.dropout == 0.2  # each direction draws its own
    assert read.noisy_layers() == (read.layer("b"),)
    with pytest.raises(ValueError, match=r"dropout 1\.0; it must be at least 0"):
        user_models.spec_from_document(
            "m", {**document, "layers": [{**document["layers"][0], "dropout": 1.0}]}
        )


# --- batch normalization and dropout --------------------------------------------

BATCH_NORM = {
    "axis": -1,
    "momentum": 0.99,
    "epsilon": 0.001,
    "center": True,
    "scale": True,
    "beta_regularizer": None,
    "gamma_regularizer": None,
    "beta_constraint": None,
    "gamma_constraint": None,
    "synchronized": False,
    "renorm": False,
    "renorm_clipping": None,
    "renorm_momentum": 0.99,
    "trainable": True,
}
FC_NORM = BATCH_NORM | {"momentum": 0.9, "epsilon": 1e-5}
DROPOUT = {"rate": 0.3, "seed": 7, "noise_shape": None}


def _built(layer: dict[str, Any], *shape: int | None) -> dict[str, Any]:
    """``layer`` as Keras writes it once built on an input of ``shape``."""
    return {**layer, "build_config": {"input_shape": list(shape)}}


def _bn_cnn(
    conv_norm: dict[str, Any] = BATCH_NORM,
    fc_norm: dict[str, Any] = FC_NORM,
    drop: dict[str, Any] = DROPOUT,
    built: bool = True,
) -> dict[str, Any]:
    """Conv2D -> BatchNormalization over its channels -> pool -> Flatten ->
    Dense -> BatchNormalization (momentum 0.9, epsilon 1e-5) -> Dropout 0.3
    -> Dense, as Keras 3.15 writes a Sequential of them."""
    norm = _layer("BatchNormalization", "conv_norm", **conv_norm)
    return _sequential(
        _layer("Conv2D", "conv", **CONV, activation="relu"),  # 4x4x4
        _built(norm, None, 4, 4, 4) if built else norm,
        _layer("MaxPooling2D", "pool", pool_size=[2, 2], strides=None),
        _layer("Flatten", "flatten"),
        _layer("Dense", "fc", units=6, activation="linear"),
        _built(_layer("BatchNormalization", "fc_norm", **fc_norm), None, 6),
        _layer("Dropout", "drop", **drop),
        _layer("Dense", "logits", **DENSE),
    )


def test_a_batch_norm_without_gamma_or_beta_is_read() -> None:
    """Keras Applications' ResNet blocks normalize a convolution with
    ``scale=False`` (no gamma); ``center=False`` leaves the beta out: each
    is read, its parameters are the ones Keras has, and the store's
    document keeps it."""
    config = _bn_cnn(BATCH_NORM | {"scale": False}, FC_NORM | {"center": False})
    document = keras_import.document_from_config(config)
    entries = {entry["name"]: entry for entry in document["layers"]}
    assert entries["conv_norm"]["scale"] is False
    assert entries["fc_norm"]["center"] is False
    spec = user_models.spec_from_document("m", document)
    names = {p.name for p in spec.params}
    assert {"conv_norm/beta", "fc_norm/gamma"} <= names
    assert not {"conv_norm/gamma", "fc_norm/beta"} & names
    again = user_models.spec_from_document("m", user_models.document_of(spec))
    assert again.layers == spec.layers


def test_batch_norm_and_dropout_configs_become_a_document() -> None:
    document = keras_import.document_from_config(_bn_cnn())
    entries = {entry["name"]: entry for entry in document["layers"]}
    assert entries["conv_norm"] == {
        "kind": "batch_norm",
        "name": "conv_norm",
        "epsilon": 0.001,
        "momentum": 0.99,
    }
    assert entries["fc_norm"] == {
        "kind": "batch_norm",
        "name": "fc_norm",
        "epsilon": 1e-5,
        "momentum": 0.9,
    }
    assert entries["drop"] == {"kind": "dropout", "name": "drop", "rate": 0.3}
    spec = user_models.spec_from_document("m", document)
    assert [layer.kind for layer in spec.layers][4:] == [
        "dense",
        "batch_norm",
        "dropout",
        "dense",
    ]
    conv_norm, fc_norm = spec.layer("conv_norm").options, spec.layer("fc_norm").options
    assert (conv_norm.epsilon, conv_norm.momentum) == (1e-3, 0.99)
    assert (fc_norm.epsilon, fc_norm.momentum) == (
        1e-5,
        0.9,
    )
    assert spec.layer("drop").options.rate == 0.3
    assert spec.param("conv_norm/moving_variance").shape == (4,)
    # The channels' axis as Keras writes it when the model gives it: a list,
    # or counted with the batch (3 of an image's 4 axes) once built.
    for axis in ([-1], 3):
        given = keras_import.document_from_config(_bn_cnn(BATCH_NORM | {"axis": axis}))
        assert given["layers"][1]["kind"] == "batch_norm"
    # A Dropout of rate 0 is still the identity, left out.
    plain = keras_import.document_from_config(_bn_cnn(drop=DROPOUT | {"rate": 0.0}))
    assert [entry["name"] for entry in plain["layers"]][-2:] == ["fc_norm", "logits"]


def test_the_dropout_kinds_configs_become_a_document() -> None:
    """keras.io's spatial dropout, a Dropout with a ``noise_shape`` (built:
    its input's sides known), GaussianNoise and GaussianDropout, as Keras
    3.15 writes them: each a layer that draws noise, one draw shared along
    the axes a spatial dropout or a 1 in ``noise_shape`` names."""
    noise_shape = [None, 1, 4, None]  # one draw per column and channel
    config = _sequential(
        _layer("Conv2D", "conv", **CONV, activation="relu"),  # 4x4x4
        _layer("SpatialDropout2D", "spatial", rate=0.2, seed=None),
        _built(
            _layer("Dropout", "drop", rate=0.3, seed=None, noise_shape=noise_shape),
            None,
            4,
            4,
            4,
        ),
        _layer("GaussianNoise", "noise", stddev=0.1, seed=None),
        _layer("Flatten", "flatten"),
        _layer("GaussianDropout", "multiplied", rate=0.2, seed=None),
        _layer("Dense", "logits", **DENSE),
    )
    document = keras_import.document_from_config(config)
    entries = {entry["name"]: entry for entry in document["layers"]}
    assert entries["spatial"] == {
        "kind": "dropout",
        "name": "spatial",
        "rate": 0.2,
        "shared_axes": [1, 2],
    }
    assert entries["drop"] == {
        "kind": "dropout",
        "name": "drop",
        "rate": 0.3,
        "shared_axes": [1],
    }
    assert entries["noise"] == {
        "kind": "gaussian_noise",
        "name": "noise",
        "stddev": 0.1,
    }
    assert entries["multiplied"] == {
        "kind": "gaussian_dropout",
        "name": "multiplied",
        "rate": 0.2,
    }
    spec = user_models.spec_from_document("m", document)
    assert spec.layer("spatial").options.shared_axes == (1, 2)
    noisy = [layer.name for layer in spec.noisy_layers()]
    assert noisy == ["spatial", "drop", "noise", "multiplied"]
    assert not without_noise(spec).noisy


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            _bn_cnn(BATCH_NORM | {"axis": 1}),
            r"BatchNormalization layer 'conv_norm' normalizes over axis 1 of its "
            r"input \[None, 4, 4, 4\]; the tool computes the last axis",
        ),
        (
            _bn_cnn(BATCH_NORM | {"axis": 3}, built=False),
            "BatchNormalization layer 'conv_norm' normalizes over axis 3; the tool",
        ),
        (
            _bn_cnn(BATCH_NORM | {"beta_constraint": {"class_name": "NonNeg"}}),
            "BatchNormalization layer 'conv_norm' has beta_constraint=",
        ),
        (
            _bn_cnn(fc_norm=FC_NORM | {"renorm": True}),
            "BatchNormalization layer 'fc_norm' has renorm=True, which the tool",
        ),
        (
            _bn_cnn(fc_norm=FC_NORM | {"synchronized": True}),
            "layer 'fc_norm' has synchronized=True",
        ),
        (
            _bn_cnn(fc_norm=FC_NORM | {"gamma_regularizer": {"class_name": "L2"}}),
            "layer 'fc_norm' has gamma_regularizer=",
        ),
        (
            _bn_cnn(fc_norm=FC_NORM | {"momentum": 0.0}),
            "batch_norm layer 'fc_norm': momentum must be above 0 and below 1",
        ),
        (
            _bn_cnn(drop=DROPOUT | {"noise_shape": [None, 3]}),
            r"Dropout layer 'drop' has noise_shape=\[None, 3\], which the tool "
            r"does not compute: its 3 on axis 1 is neither 1 \(one draw along "
            r"it\) nor its input's size \(unknown: saved unbuilt\)",
        ),
        (
            _bn_cnn(drop=DROPOUT | {"rate": 1.0}),
            "dropout layer 'drop': rate must be at least 0 and below 1",
        ),
    ],
)
def test_a_batch_norm_or_dropout_the_spec_cannot_express_is_one_sentence(
    config: dict[str, Any], message: str
) -> None:
    # as keras_import.load refuses it: the document, then its spec
    with pytest.raises(ValueError, match=message) as caught:
        user_models.spec_from_document("m", keras_import.document_from_config(config))
    assert "\n" not in str(caught.value)


# Saves a Keras Sequential of Conv2D -> BatchNormalization (over axis 3, the
# channels, as a user may write it) -> ... -> Dense -> BatchNormalization
# (momentum 0.9, epsilon 1e-5) -> Dropout(0.3) -> Dense, every variable
# (moving statistics included) set away from its initial value, and each
# variable by its layer's name and its own (``variables.npz``).
SAVE_BN_CNN = """
import sys
import keras
import numpy as np
layers = keras.layers
model = keras.Sequential([
    keras.Input((8, 8, 1)),
    layers.Conv2D(4, 3, strides=2, padding="same", activation="relu", name="conv"),
    layers.BatchNormalization(axis=3, name="conv_norm"),
    layers.MaxPooling2D(2, name="pool"),
    layers.Flatten(name="flatten"),
    layers.Dense(6, name="fc"),
    layers.BatchNormalization(momentum=0.9, epsilon=1e-5, name="fc_norm"),
    layers.Dropout(0.3, seed=7, name="drop"),
    layers.Dense(3, name="logits"),
])
rng = np.random.default_rng(5)
for v in model.weights:
    v.assign(rng.uniform(0.1, 2.0, v.shape).astype("float32"))
model.save(sys.argv[1] + "/bn_cnn.keras")
np.savez(sys.argv[1] + "/variables.npz",
         **{f"{layer.name}/{v.name}": keras.ops.convert_to_numpy(v)
            for layer in model.layers for v in layer.weights})
"""


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("keras", "torch")),
    reason="Keras on PyTorch is not installed",
)
def test_a_saved_batch_norm_and_dropout_model_comes_back_with_its_statistics(
    tmp_path: Path,
) -> None:
    from workers.user_model import model_from_file

    # Keras in a process of its own: this one imports no framework.
    keras_on_torch(["-c", SAVE_BN_CNN, str(tmp_path)], tmp_path)
    spec = get_spec(model_from_file(tmp_path / "bn_cnn.keras", tmp_path / "models"))
    assert [layer.kind for layer in spec.layers] == [
        "conv2d",
        "batch_norm",
        "max_pool",
        "flatten",
        "dense",
        "batch_norm",
        "dropout",
        "dense",
    ]
    conv_norm, fc_norm = spec.layer("conv_norm"), spec.layer("fc_norm")
    assert (conv_norm.options.epsilon, conv_norm.options.momentum) == (1e-3, 0.99)
    assert (fc_norm.options.epsilon, fc_norm.options.momentum) == (1e-5, 0.9)
    assert spec.layer("drop").options.rate == 0.3
    weights = make_weights(spec, 0)  # the file's own, whatever the seed
    with np.load(tmp_path / "variables.npz") as saved:
        variables = dict(saved)
    assert weights.keys() == variables.keys()
    for name, value in variables.items():
        assert np.array_equal(weights[name], value), name
    # the moving statistics are the file's, not Keras' initial zeros and ones
    for stat in ("conv_norm/moving_mean", "fc_norm/moving_variance"):
        assert spec.param(stat).shape == weights[stat].shape
        assert not np.any(np.isin(weights[stat], (0.0, 1.0))), stat


# --- the archive -----------------------------------------------------------------


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_an_archive_is_checked_before_anything_is_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.dumps(_sequential(_layer("Flatten", "f"))).encode()
    good = _archive(
        tmp_path / "ok.keras", {"config.json": config, "model.weights.h5": b"x"}
    )
    assert keras_import.read_config(good)["class_name"] == "Sequential"
    (tmp_path / "text.keras").write_text("hello")
    refusals = {
        tmp_path / "text.keras": "not a zip file",
        _archive(tmp_path / "plain.zip", {"a.txt": b"a"}): "not a Keras archive",
        _archive(
            tmp_path / "bad.keras", {"config.json": b"{no", "model.weights.h5": b""}
        ): "damaged config.json",
        tmp_path / "missing.keras": "cannot be read",
        tmp_path: "is a folder",
    }
    for path, message in refusals.items():
        with pytest.raises(ValueError, match=message):
            keras_import.read_config(path)
    # A member that unpacks to more than the limit (a zip bomb): refused from
    # the archive's directory, before it is read.
    bomb = _archive(
        tmp_path / "bomb.keras",
        {"config.json": config, "model.weights.h5": bytes(1 << 20)},
    )
    monkeypatch.setattr(keras_import, "MAX_BYTES", 1 << 19)
    with pytest.raises(ValueError, match="would unpack to"):
        keras_import.read_config(bomb)


def test_the_documented_table_is_a_model(tmp_path: Path) -> None:
    """docs/user_models.md's ``[model]`` example reads as the model it
    describes."""
    from workers.launch import PROJECT_ROOT
    from workers.user_model import model_from_file

    section = (PROJECT_ROOT / "docs" / "user_models.md").read_text()
    start = section.index("```toml\n") + len("```toml\n")
    table = section[start : section.index("```\n", start)]
    (tmp_path / "mine.toml").write_text(table)
    spec = get_spec(model_from_file(tmp_path / "mine.toml", tmp_path / "models"))
    assert [layer.kind for layer in spec.layers] == [
        "conv2d",
        "max_pool",
        "flatten",
        "dense",
    ]
    assert spec.layers[0].options.stride == 2
    assert spec.classes == 10
    assert not spec.weights  # drawn from a seed
    (tmp_path / "none.toml").write_text("[profile]\n")
    with pytest.raises(ValueError, match="has no \\[model\\] table"):
        model_from_file(tmp_path / "none.toml", tmp_path / "models")


def test_a_blueprint_with_a_model_table_runs_that_model(tmp_path: Path) -> None:
    from harness.core.profiles import get_profile

    table = user_models.document_of(VARIANTS["strided-cnn"])

    def inline(layer: dict[str, Any]) -> str:
        return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in layer.items()) + "}"

    text = "\n".join(
        [
            'description = "my CNN, quickly"',
            'phases = ["train"]',
            "[settings]",
            "train_steps = 2",
            "repeats = 1",
            "[model]",
            f"input_shape = {table['input_shape']}",
            "classes = 10",
            "layers = [",
            *(f"  {inline(layer)}," for layer in table["layers"]),
            "]",
        ]
    )
    blueprint = tmp_path / "mine.toml"
    blueprint.write_text(text + "\n")
    profile = get_profile(blueprint)
    (model,) = profile.models
    assert model.startswith("mine-")
    assert get_spec(model).layers == VARIANTS["strided-cnn"].layers
    assert profile.phases == ("train",)
    blueprint.write_text('models = ["ffn"]\n' + text + "\n")
    with pytest.raises(ValueError, match="runs that model; leave out models"):
        get_profile(blueprint)


def test_a_change_to_the_reading_code_reads_every_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store remembers a file by its digest and the reader's version,
    a digest of the code that reads (so a kind read differently, or a new
    default loss, is never served from an old reading)."""
    from workers import user_model

    assert "zoo/kinds/dense.py" in user_model.READING_CODE
    copy = tmp_path / "project"
    for name in user_model.READING_CODE:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((PROJECT_ROOT / name).read_bytes())
    monkeypatch.setattr(user_model, "_ROOT", copy)
    assert user_model._reader_version() == user_model.READER
    with (copy / "zoo/kinds/dense.py").open("a") as source:
        source.write("# read differently\n")
    assert user_model._reader_version() != user_model.READER


def test_layers_that_do_not_fit_are_named_before_the_classes() -> None:
    """A document that gives ``classes`` and whose layers do not fit together
    is refused for the layer, not for the count of outputs it never reaches
    (the newcomer trial of issue 77 met "classes is 3 but the model gives 0
    outputs per example")."""
    document = {
        "input_shape": [6, 2],
        "classes": 3,
        "layers": [{"kind": "repeat_vector", "n": 2}, {"kind": "dense", "units": 3}],
    }
    with pytest.raises(ValueError, match="needs a feature row"):
        user_models.spec_from_document("unfit", document)
    # layers that fit are held to the classes the document gives
    document["input_shape"] = [4, 4, 2]
    document["layers"] = [{"kind": "conv2d", "filters": 4, "kernel_size": 1}]
    with pytest.raises(ValueError, match="classes is 3 but the model gives 4"):
        user_models.spec_from_document("unfit", document)


# Issue 78: a row of outputs per step of a sequence, each step's loss a row's
# and their mean Keras' (a token tagger, a per-step forecaster).
PER_STEP = {
    "tagger": (
        {
            "input_shape": [7],
            "layers": [
                {"kind": "embedding", "input_dim": 20, "output_dim": 4},
                {"kind": "lstm", "units": 5, "return_sequences": True},
                {"kind": "dense", "units": 3},
            ],
        },
        3,
        (2, 4, 7),
    ),
    "forecaster": (
        {
            "input_shape": [6, 2],
            "layers": [
                {"kind": "lstm", "units": 5, "return_sequences": True},
                {"kind": "dense", "units": 1},
            ],
            "workload": {"loss": "mean_squared_error"},
        },
        1,
        (2, 4, 6, 1),
    ),
}


@pytest.mark.parametrize("name", list(PER_STEP))
def test_a_row_of_outputs_per_step_is_a_model(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    document, classes, targets = PER_STEP[name]
    spec = user_models.spec_from_document(name, document)
    steps = document["input_shape"][0]
    assert spec.classes == classes
    assert output_positions(spec) == (steps,)
    _, y = make_batches(spec, 0, 4, 2)
    assert y.shape == targets
    # every step's loss is counted: a batch of 4, ``steps`` rows each
    counted = step_flops(spec, "train", 4)
    loss = LOSSES[spec.workload.loss]
    monkeypatch.setitem(
        LOSSES, spec.workload.loss, dataclasses.replace(loss, flops_per_output=0)
    )
    assert counted - step_flops(spec, "train", 4) == (
        4 * steps * classes * loss.flops_per_output
    )


def test_a_row_of_outputs_per_pixel_is_a_model() -> None:
    """A segmentation's classes per pixel: a class id per pixel, every
    pixel's loss counted."""
    document = {
        "input_shape": [4, 5, 2],
        "layers": [{"kind": "conv2d", "filters": 3, "kernel_size": 1}],
    }
    spec = user_models.spec_from_document("mask", document)
    assert (spec.classes, output_positions(spec)) == (3, (4, 5))
    assert make_batches(spec, 0, 2, 1)[1].shape == (1, 2, 4, 5)


def test_dilated_and_causal_convolutions_are_read_as_keras_writes_them() -> None:
    """A TCN's Conv1D (``padding="causal"``, ``dilation_rate=[2]``) and an
    atrous Conv2D (``dilation_rate=[2, 2]``), as Keras 3.15 saves them;
    what Keras or the tool does not compute is refused in one sentence."""
    tcn = {
        "class_name": "Sequential",
        "config": {
            "layers": [
                _layer("InputLayer", "input", batch_shape=[None, 12, 2]),
                _layer(
                    "Conv1D",
                    "causal",
                    filters=3,
                    kernel_size=[2],
                    strides=[1],
                    padding="causal",
                    dilation_rate=[2],
                    activation="relu",
                ),
                _layer("Flatten", "f"),
                _layer("Dense", "d", **DENSE),
            ]
        },
    }
    document = keras_import.document_from_config(tcn)
    entry = document["layers"][0]
    assert (entry["padding"], entry["dilation_rate"]) == ("causal", 2)
    spec = user_models.spec_from_document("m", document)
    assert spec.layer("causal").options.window == 3  # the dilated kernel's span
    assert layer_shapes(spec)[0][1] == (12, 3)  # causal keeps every step
    atrous = {**CONV, "strides": [1, 1], "dilation_rate": [2, 2]}
    read = keras_import.document_from_config(
        _sequential(_layer("Conv2D", "c", **atrous), _layer("Flatten", "f"))
    )
    assert read["layers"][0]["dilation_rate"] == 2
    for entry_words, said in (
        ({**atrous, "strides": [2, 2]}, "strides 2 and dilation_rate 2; Keras"),
        ({**atrous, "dilation_rate": [2, 1]}, r"dilation_rate \[2, 1\]; only square"),
        ({**atrous, "padding": "causal"}, "padding 'causal'; use valid or same"),
    ):
        config = _sequential(
            _layer("Conv2D", "c", **entry_words), _layer("Flatten", "f")
        )
        with pytest.raises(ValueError, match=said):
            user_models.spec_from_document(
                "m", keras_import.document_from_config(config)
            )
    transposed = _sequential(
        _layer("Conv2DTranspose", "t", **atrous), _layer("Flatten", "f")
    )
    with pytest.raises(ValueError, match=r"has dilation_rate=\[2, 2\], which the tool"):
        keras_import.document_from_config(transposed)


# Saves keras.io-style functional graphs with Keras operations between layers
# (``x * 0.5``, ``2.0 - x``, ``keras.ops.concatenate``, ``mean``,
# ``expand_dims``), one as read and two with an operation the tool refuses.
SAVE_OPERATIONS = """
import sys
import keras
ops, layers = keras.ops, keras.layers
for tag, divide, keepdims in (("read", 0, 0), ("divide", 1, 0), ("keepdims", 0, 1)):
    i = keras.Input((6, 4))
    a = layers.Dense(4, activation="tanh", name="a")(i)
    b = a / 2.0 if divide else a * 0.5
    c = 2.0 - b
    d = ops.concatenate([a, c], axis=-1)
    e = ops.mean(d, axis=1, keepdims=bool(keepdims))
    f = layers.Flatten(name="flat")(ops.expand_dims(e, 1))
    model = keras.Model(i, layers.Dense(3, name="out")(f))
    model.save(f"{sys.argv[1]}/{tag}.keras")
"""


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("keras", "torch")),
    reason="Keras on PyTorch is not installed",
)
def test_keras_operations_in_a_functional_graph_are_read_as_the_layers_they_are(
    tmp_path: Path,
) -> None:
    """Keras 3 saves them as operations of ``keras.src.ops.numpy`` in the
    functional graph; each is read as the layer computing the same values
    exactly, and an operation the tool does not read so (a division, a mean
    keeping its axis) is refused in one sentence naming it."""
    keras_on_torch(["-c", SAVE_OPERATIONS, str(tmp_path)], tmp_path)
    config = keras_import.read_config(tmp_path / "read.keras")
    document = keras_import.document_from_config(config)
    read = [
        (e["kind"], {k: v for k, v in e.items() if k not in ("kind", "name")})
        for e in document["layers"]
    ]
    assert read[1:6] == [
        ("rescaling", {"scale": 0.5, "offset": 0.0}),
        ("rescaling", {"scale": -1.0, "offset": 2.0}),
        ("concatenate", {"inputs": ["a", "subtract"]}),
        ("global_avg_pool", {}),
        ("reshape", {"target_shape": [1, 8]}),
    ]
    spec = user_models.spec_from_document("m", document)
    assert layer_shapes(spec)[5][1] == (1, 8)
    for tag, said in (
        ("divide", r"layer 'true_divide' is Keras' operation TrueDivide on a"),
        ("keepdims", r"layer 'mean_2' is Keras' operation Mean on a tensor"),
    ):
        refused = keras_import.read_config(tmp_path / f"{tag}.keras")
        with pytest.raises(ValueError, match=said) as caught:
            keras_import.document_from_config(refused)
        assert "\n" not in str(caught.value)


# keras.io's time-series Transformer pools its encoder's (T, F) output over
# each step's features: GlobalAveragePooling1D(data_format="channels_first").
SAVE_FEATURE_POOLS = """
import sys
import keras
layers = keras.layers
i = keras.Input((6, 4))
a = layers.Dense(4, activation="tanh", name="a")(i)
avg = layers.GlobalAveragePooling1D(data_format="channels_first", name="avg")(a)
top = layers.GlobalMaxPooling1D(data_format="channels_first", name="top")(a)
mean = keras.ops.mean(a, axis=-1)
joined = layers.Concatenate(name="joined")([avg, top, mean])
model = keras.Model(i, layers.Dense(3, name="out")(joined))
model.save(f"{sys.argv[1]}/pools.keras")
"""


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("keras", "torch")),
    reason="Keras on PyTorch is not installed",
)
def test_a_sequences_pools_over_each_steps_features_are_read(tmp_path: Path) -> None:
    """A file's 1-D global pools ``channels_first`` and ``ops.mean`` over a
    sequence's last axis are read as global pools over each step's features
    (one value per step: the model then takes its own length only); images
    pooled ``channels_first`` are refused in one sentence naming the
    layer."""
    keras_on_torch(["-c", SAVE_FEATURE_POOLS, str(tmp_path)], tmp_path)
    config = keras_import.read_config(tmp_path / "pools.keras")
    document = keras_import.document_from_config(config)
    read = {e["name"]: e for e in document["layers"]}
    for name in ("avg", "top"):
        assert read[name]["data_format"] == "channels_first"
    means = [e for e in document["layers"] if e["name"].startswith("mean")]
    assert [(e["kind"], e["data_format"]) for e in means] == [
        ("global_avg_pool", "channels_first")
    ]
    spec = user_models.spec_from_document("m", document)
    assert layer_shapes(spec)[-2][1] == (18,)  # three pools of six steps
    assert not spec.free_length
    images = _sequential(
        _layer("GlobalAveragePooling2D", "g", data_format="channels_first")
    )
    with pytest.raises(ValueError, match=r"layer 'g' has data_format='channels_fi"):
        keras_import.document_from_config(images)
