"""Users' models without a framework: documents, the store and its names,
and every refusal the architecture alone decides (``zoo.user_models``, the
config half of ``zoo.keras_import``).  The Keras half runs in
``tests/paths/test_user_model.py``."""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zoo import keras_import, user_models
from zoo.specs import MODELS, VARIANTS, get_spec
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
            lambda d: d["layers"].append({"kind": "dropout"}),
            "kind 'dropout'; supported",
        ),
        (lambda d: d["layers"][0].update(dilation=2), "dilation, which it does not"),
        (lambda d: d["layers"][0].update(padding="full"), "padding must be valid or"),
        (lambda d: d["layers"][0].update(filters=2.5), "filters must be a whole"),
        (lambda d: d["layers"][0].update(name="a/b"), "must be letters"),
        (lambda d: d.update(input_shape=[28, -1]), "input_shape must be 1 to 3"),
        (lambda d: d.update(layers=[]), "needs a list of layers"),
        (lambda d: d.update(workload={"optimizer": "rmsprop"}), "optimizer 'rmsprop'"),
        (lambda d: d.update(workload={"batch_size": 0}), "must be positive"),
        (lambda d: d.update(workload={"epochs": 3}), "workload has epochs"),
        (lambda d: d.update(loss="mse"), "a model has loss"),
        (lambda d: d.update(layers=d["layers"][:-2]), "ends in shape"),  # a flatten
        (lambda d: d.update(classes=3), "classes is 3 but the last layer"),
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
    assert spec.layer("att").heads == 2
    assert spec.layer("att").size == 4
    assert spec.layer("res").inputs == ("embed", "att")
    assert spec.layer("norm").norm_epsilon == 1e-6
    assert spec.layer("conv").kernel == 3
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
    assert user_models.spec_from_document("t", table).layer("norm").epsilon == 0


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


def test_a_branch_names_an_earlier_layer() -> None:
    table = copy.deepcopy(TRANSFORMER_TABLE)
    # the GRU takes the normalized sequence, leaving the conv and pool aside
    # (a dead branch the spec still computes)
    table["layers"][6]["inputs"] = ["norm"]
    spec = user_models.spec_from_document("t", table)
    assert spec.sources("gru") == ("norm",)
    assert user_models.document_of(spec)["layers"][6]["inputs"] == ["norm"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["layers"][0].pop("input_dim"), "input_dim must be a whole"),
        (lambda d: d["layers"][1].pop("num_heads"), "num_heads must be a whole"),
        (lambda d: d["layers"][2].pop("inputs"), "an add layer sums two or more"),
        (lambda d: d["layers"][2].update(inputs=["att"]), "an add layer sums two"),
        (lambda d: d["layers"][3].update(epsilon=0), "epsilon must be above 0"),
        (lambda d: d["layers"][3].update(epsilon="small"), "epsilon must be a num"),
        (lambda d: d["layers"][4].update(inputs=["embed", "att"]), "every other"),
        (lambda d: d["layers"][1].update(inputs=["logits"]), "takes logits, which"),
        (lambda d: d["layers"].insert(1, d["layers"][0] | {"name": "e2"}), "first"),
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
    assert spec.layer("c").stride == 2
    assert spec.layer("c").activation == "tanh"
    assert spec.layer("p").stride == 2
    assert (spec.workload.optimizer, spec.workload.learning_rate) == ("sgd", 0.05)


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
            "layer 'lam' \\(Lambda\\) is not one the tool knows; supported: Dense",
        ),
        (
            _sequential(
                {"class_name": "MyLayer", "module": "mine", "config": {"name": "mine"}}
            ),
            "layer 'mine' \\(a custom class\\)",
        ),
        (
            _sequential(_layer("Conv2D", "c", **CONV, dilation_rate=[2, 2])),
            "dilation_rate=\\[2, 2\\], which the tool does not compute",
        ),
        (
            _sequential(_layer("Conv2D", "c", **CONV, data_format="channels_first")),
            "data_format='channels_first'",
        ),
        (
            _sequential(_layer("Dense", "d", **DENSE, use_bias=False)),
            "use_bias=False",
        ),
        (
            _sequential(_layer("LSTM", "l", units=4, dropout=0.5)),
            "dropout=0.5",
        ),
        (
            _sequential(_layer("Dense", "d", units=4, activation="swish")),
            "activation 'swish'",
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
            "model inside the model",
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
            "layer 'd' takes the model's input, which only the first layer may",
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
    assert (spec.layer("att").heads, spec.layer("att").size) == (2, 4)
    assert spec.layer("res").inputs == ("encode", "att")
    assert spec.layer("norm").epsilon == 0  # Keras' default
    assert spec.layer("gru").return_sequences
    assert spec.layer("gru").inputs == ()
    assert spec.layer("pool").stride == 2
    assert spec.layer("avg").stride == 1
    assert spec.classes == 10


def test_a_layer_taking_an_earlier_layer_names_it() -> None:
    config = _graph(
        (EMBED, _node("input")),
        (_layer("LayerNormalization", "norm", **NORM), _node("embed")),
        (_layer("GRU", "gru", **GRU), _node("embed")),  # not the norm's output
        (_layer("GlobalAveragePooling1D", "gap"), _node("gru")),
        (_layer("Dense", "logits", **DENSE), _node("gap")),
    )
    document = keras_import.document_from_config(config)
    assert document["layers"][2]["inputs"] == ["embed"]
    assert "inputs" not in document["layers"][3]
    spec = user_models.spec_from_document("m", document)
    assert spec.sources("gru") == ("embed",)


def _call_with(**kwargs: Any) -> dict[str, Any]:
    return _node("encode", "encode", **kwargs)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_transformer(attention=ATTENTION | {"value_dim": 8}), "value_dim=8 and"),
        (_transformer(attention=ATTENTION | {"use_bias": False}), "use_bias=False"),
        (_transformer(attention=ATTENTION | {"dropout": 0.1}), "dropout=0.1"),
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
        (_transformer(gru=GRU | {"activation": "relu"}), "activation='relu'"),
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
        (_transformer(dtype="float32"), "input is float32 but its first layer"),
    ],
)
def test_a_newer_layer_the_spec_cannot_express_is_one_sentence(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        keras_import.document_from_config(config)
    assert "\n" not in str(caught.value)


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
        "rate 0.5: the random mask": _with_layer(config, "drop", rate=0.5),
        r"Conv1D layer 'position' has dilation_rate=\[2\]": _with_layer(
            config, "position", dilation_rate=[2]
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
    several = _transformer()
    several["config"]["output_layers"] = [["logits", 0, 0], ["gap", 0, 0]]
    unused = _transformer()
    unused["config"]["layers"][-1]["inbound_nodes"] = []
    refusals = {
        "layer 'other' takes the model's input, which only the first": from_input,
        r"layer 'e' takes 2 tensor\(s\); an Add sums two or more": two,
        "the model's output is 'd', not the last layer": early,
        "layer 'd' takes 'nowhere', which is not an earlier layer": unknown,
        "several inputs or outputs": several,
        "layer 'logits' is unused": unused,
    }
    for message, config in refusals.items():
        with pytest.raises(ValueError, match=message) as caught:
            keras_import.document_from_config(config)
        assert "\n" not in str(caught.value)


def test_several_inputs_and_an_open_input_shape_are_refused() -> None:
    config = _functional((_layer("Flatten", "f"), [["input"]]))
    config["config"]["input_layers"] = [["input", 0, 0], ["other", 0, 0]]
    with pytest.raises(ValueError, match="several inputs or outputs"):
        keras_import.document_from_config(config)
    config = _sequential(_layer("LSTM", "l", units=4))
    config["config"]["layers"][0]["config"]["batch_shape"] = [None, None, 8]
    with pytest.raises(ValueError, match="is not fixed; give every axis"):
        keras_import.document_from_config(config)


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
        tmp_path: "is not a file",
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


def test_the_readme_table_is_a_model(tmp_path: Path) -> None:
    """README's ``[model]`` example reads as the model it describes."""
    from workers.launch import PROJECT_ROOT
    from workers.user_model import model_from_file

    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme[readme.index("## Your own model") :]
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
    assert spec.layers[0].stride == 2
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
