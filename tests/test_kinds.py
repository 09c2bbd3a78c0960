"""The registry of layer kinds (``zoo.kinds``): every kind has every facet,
every framework a block for it, and Keras' layer for it reads back as the
same layer (the builder and the reader of one kind's module agree)."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest

from harness.cli.kinds import rows
from tests.helpers import PROJECT_ROOT, keras_on_torch
from tests.tiers import SIZES
from zoo import keras_import, user_models
from zoo.kinds import BY_KERAS_CLASS, KINDS, MODULE_FILES, discovered
from zoo.kinds.base import ACTIVATIONS, SLOPED
from zoo.specs import MODELS, VARIANTS, Layer, ModelSpec

FRAMEWORKS = ("jax", "tensorflow", "torch", "mxnet")
FACETS = ("shape", "params", "flops", "keras", "read")


def _functions(path: Path) -> set[str]:
    """The module-level function names of a source file (read, not imported:
    a test process imports no framework)."""
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_has_every_facet(name: str) -> None:
    kind = KINDS[name]
    assert kind.name == name
    assert kind.summary
    assert all(callable(getattr(kind, facet)) for facet in FACETS), name
    assert kind.keras_classes, f"{name} names no Keras class it reads"
    assert dataclasses.is_dataclass(kind.options), name
    assert kind.options.__dataclass_params__.frozen, name  # type: ignore[attr-defined]
    assert set(typing.get_type_hints(kind.options).values()) <= READABLE, name
    assert kind.takes in (0, 1, 2)


# The types the document reader reads an option as (``zoo.user_models``).
READABLE = {
    int,
    float,
    bool,
    str,
    int | None,
    float | None,
    str | None,
    tuple[int, ...],
}
# Options of one Keras name and two meanings, as Keras has them: a
# convolution's ``padding`` (``valid``/``same``) and a zero padding's (widths);
# Rescaling's ``scale`` (a factor) and BatchNormalization's (whether it has a
# gamma: ``zoo.specs.IN_RANGE``'s finite test holds for both).
HOMONYMS = {"padding", "scale"}


def test_an_option_name_means_one_thing() -> None:
    """Each kind's options are its own record; a name two records share has
    one type in both (Keras' homonyms aside), so a reader, a rule or a fault
    that goes by the name reads the same thing."""
    types: dict[str, set[object]] = {}
    for kind in KINDS.values():
        for option, given in typing.get_type_hints(kind.options).items():
            # ``None`` only says "Keras' default" (a pool's strides: its window)
            bare = [t for t in typing.get_args(given) if t is not type(None)]
            types.setdefault(option, set()).add(bare[0] if bare else given)
    mixed = {o: t for o, t in types.items() if len(t) > 1 and o not in HOMONYMS}
    assert not mixed, mixed


def test_a_keras_class_is_read_by_one_kind() -> None:
    classes = [cls for kind in KINDS.values() for cls in kind.keras_classes]
    assert len(classes) == len(set(classes)) == len(BY_KERAS_CLASS)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_framework_has_a_block_for_every_kind(framework: str) -> None:
    ops = _functions(PROJECT_ROOT / "native" / framework / "ops.py")
    missing = sorted(set(KINDS) - ops)
    assert not missing, f"native/{framework}/ops.py has no block for {missing}"
    activations = {a for a in ACTIVATIONS if a}
    assert not activations - ops, f"native/{framework}/ops.py lacks {activations - ops}"


def test_a_framework_without_a_block_is_named(tmp_path: Path) -> None:
    # the check above on a copy of an ops.py with one block taken out
    source = (PROJECT_ROOT / "native" / "jax" / "ops.py").read_text()
    cut = source.replace("def global_max_pool(", "def _no_global_max_pool(")
    (tmp_path / "ops.py").write_text(cut)
    assert "global_max_pool" in set(KINDS) - _functions(tmp_path / "ops.py")


def _reference_kinds() -> set[str]:
    return {
        layer.kind
        for spec in (*MODELS.values(), *VARIANTS.values())
        for layer in spec.layers
    }


def test_every_kind_is_in_a_variant_every_path_checks() -> None:
    unused = sorted(set(KINDS) - _reference_kinds())
    assert not unused, "; ".join(
        f"no test-size model uses {kind}: give {MODULE_FILES[kind]}'s Kind an "
        "example=Example(input_shape, lambda: layers) (docs/extending.md, Adding a "
        "layer kind)"
        for kind in unused
    )
    assert _reference_kinds() <= set(KINDS)
    for tier, sizes in SIZES.items():
        unchecked = sorted(
            kind
            for kind in KINDS
            if not any(
                layer.kind == kind
                for name in sizes.models
                for layer in (MODELS.get(name) or VARIANTS[name]).layers
            )
        )
        assert not unchecked, (
            f"kinds {unchecked} are in no model the {tier} tier checks every "
            "path on (tests/tiers.py: SIZES, KIND_MODELS)"
        )
    assert set(SLOPED) <= {
        layer.activation for spec in VARIANTS.values() for layer in spec.layers
    }
    used = {layer.activation for spec in VARIANTS.values() for layer in spec.layers}
    assert {a for a in ACTIVATIONS if a} <= used


_ROUND_TRIP = """
import json, sys
from zoo.keras_models import build
from zoo.models import get_spec
out = {}
for name in sys.argv[1:]:
    model = build(get_spec(name))
    out[name] = json.loads(model.to_json())
print(json.dumps(out))
"""


def test_keras_layers_of_every_kind_read_back_as_built(tmp_path: Path) -> None:
    """Every variant's Keras model (built by each kind's ``keras``) read back
    by each kind's ``read`` is the same model: names, kinds, options, inputs."""
    names = [n for n, s in VARIANTS.items() if not s.tokens] + ["transformer-tiny"]
    script = tmp_path / "build.py"
    script.write_text(_ROUND_TRIP)
    configs = json.loads(keras_on_torch([str(script), *names]).stdout)
    for name in names:
        spec: ModelSpec = VARIANTS[name]
        document = keras_import.document_from_config(configs[name])
        read = user_models.spec_from_document(spec.name, document)
        # Keras lists a graph's layers in its own topological order
        assert _by_name(read) == _by_name(spec), name
        assert set(read.params) == set(spec.params), name


def _by_name(spec: ModelSpec) -> dict[str, tuple[object, ...]]:
    """Each layer's options and the layers it takes, by name."""
    return {
        layer.name: (dataclasses.replace(layer, inputs=()), spec.sources(layer.name))
        for layer in spec.layers
    }


def _free(shape: list[object]) -> dict[str, object]:
    """A functional config: an input of ``shape`` (with the batch), an LSTM
    and a dense layer."""

    def node(source: str) -> list[dict[str, object]]:
        tensor = {
            "class_name": "__keras_tensor__",
            "config": {"keras_history": [source, 0, 0]},
        }
        return [{"args": [tensor], "kwargs": {}}]

    layers = [
        {
            "class_name": "InputLayer",
            "module": "keras.layers",
            "name": "input",
            "config": {"batch_shape": shape, "name": "input"},
        },
        {
            "class_name": "LSTM",
            "module": "keras.layers",
            "name": "l",
            "config": {"name": "l", "units": 4},
            "inbound_nodes": node("input"),
        },
        {
            "class_name": "Dense",
            "module": "keras.layers",
            "name": "d",
            "config": {"name": "d", "units": 2},
            "inbound_nodes": node("l"),
        },
    ]
    return {
        "class_name": "Functional",
        "config": {
            "name": "m",
            "layers": layers,
            "input_layers": [["input", 0, 0]],
            "output_layers": [["d", 0, 0]],
        },
    }


def test_a_free_length_input_is_read_at_a_length_and_checked_shorter() -> None:
    free = _free([None, None, 5])
    assert keras_import.document_from_config(free)["input_shape"] == [
        keras_import.FREE_LENGTH,
        5,
    ]
    document = keras_import.document_from_config(free, seq_len=100)
    assert document["input_shape"] == [100, 5]
    spec = user_models.spec_from_document("free", document)
    assert spec.free_length  # the checks also run it at a short length
    with pytest.raises(ValueError, match="no free sequence length"):
        keras_import.document_from_config(_free([None, 12, 5]), seq_len=100)
    with pytest.raises(ValueError, match="is not fixed"):
        keras_import.document_from_config(_free([None, 12, None]))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"module": None, "registered_name": "Mine>Dense"}, "a class of its own"),
        ({"module": None, "class_name": "Block"}, "a class of its own"),
        ({"module": "keras.src.ops.numpy", "class_name": "Reshape"}, "operation"),
        ({"module": "keras.layers", "class_name": "Lambda"}, "not one the tool"),
        ({}, None),  # the control: Keras' own Dense is read
    ],
)
def test_what_is_not_a_built_in_layer_is_named(
    entry: dict[str, object], message: str | None
) -> None:
    layer = {
        "class_name": "Dense",
        "module": "keras.layers",
        "config": {"name": "d", "units": 2},
        **entry,
    }
    if message is None:
        assert keras_import._entry(layer)["kind"] == "dense"
        return
    with pytest.raises(ValueError, match=message):
        keras_import._entry(layer)


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        ({"class_name": "Dense", "config": {"units": 3}}, None),
        ({"class_name": "Conv2D", "config": {"filters": 3}}, "wraps a 'Conv2D'"),
        (
            {
                "class_name": "Dense",
                "config": {"units": 3, "kernel_regularizer": "l2"},
            },
            "with a regularizer",
        ),
        ({"class_name": "Dense"}, "wraps no layer the file describes"),
    ],
)
def test_time_distributed_reads_a_wrapped_dense_only(
    inner: dict[str, object], message: str | None
) -> None:
    layer = {
        "class_name": "TimeDistributed",
        "module": "keras.layers",
        "config": {"name": "tags", "layer": {"module": "keras.layers", **inner}},
    }
    if message is None:
        entry = keras_import._entry(layer)
        assert entry["kind"] == "time_distributed"
        assert entry["units"] == 3
        return
    with pytest.raises(ValueError, match=message):
        keras_import._entry(layer)


def _tensor_of(layer: str) -> dict[str, object]:
    """A layer's output as Keras saves it among an operation's arguments."""
    history = [layer, 0, 0]
    return {"class_name": "__keras_tensor__", "config": {"keras_history": history}}


def test_x_plus_y_in_a_functional_model_is_read_as_add() -> None:
    # what Keras saves for ``a + b`` and ``a * b`` on two tensors, and for
    # ``a * 0.5`` on one: the merge, or the rescaling of the same values
    for cls, kind in (("Add", "add"), ("Multiply", "multiply")):
        operation = {"class_name": cls, "module": "keras.src.ops.numpy"}
        two = [{"args": [_tensor_of("a"), _tensor_of("b")], "kwargs": {}}]
        given = operation | {"config": {"name": "o"}, "inbound_nodes": two}
        assert keras_import._entry(given) == {"kind": kind, "name": "o"}
    scaled = [{"args": [_tensor_of("a"), 0.5], "kwargs": {}}]
    given = {
        "class_name": "Multiply",
        "module": "keras.src.ops.numpy",
        "config": {"name": "o"},
        "inbound_nodes": scaled,
    }
    assert keras_import._entry(given) == {
        "kind": "rescaling",
        "name": "o",
        "scale": 0.5,
        "offset": 0.0,
    }


@pytest.mark.parametrize(
    ("given", "factors"),
    [
        ({"class_name": "L2", "config": {"l2": 0.02}}, (0.0, 0.02)),
        ({"class_name": "L1", "config": {}}, (0.01, 0.0)),  # Keras' default
        ({"class_name": "L1L2", "config": {"l1": 0.5, "l2": 0.25}}, (0.5, 0.25)),
        ("l2", (0.0, 0.01)),
    ],
)
def test_a_regularizer_is_read_as_its_factors(
    given: object, factors: tuple[float, float]
) -> None:
    config = {"name": "d", "units": 3, "kernel_regularizer": given}
    entry = BY_KERAS_CLASS["Dense"].read("Dense", "d", config, None)
    assert entry["regularize"] == [["kernel", *factors]]


def test_a_regularizer_the_tool_does_not_compute_is_named() -> None:
    config = {
        "name": "d",
        "units": 3,
        "bias_regularizer": {"class_name": "OrthogonalRegularizer", "config": {}},
    }
    with pytest.raises(ValueError, match="bias_regularizer='OrthogonalRegularizer'"):
        BY_KERAS_CLASS["Dense"].read("Dense", "d", config, None)


def test_a_penalty_must_name_a_trained_parameter_of_its_layer() -> None:
    spec = VARIANTS["kinds-cnn"]
    wrong = tuple(
        dataclasses.replace(layer, regularize=(("gamma", 0.0, 0.1),))
        if layer.name == "fc"
        else layer
        for layer in spec.layers
    )
    with pytest.raises(ValueError, match="regularizes 'gamma'"):
        dataclasses.replace(spec, layers=wrong)


def test_a_bidirectional_layer_the_tool_does_not_compute_is_named() -> None:
    lstm = {"class_name": "LSTM", "config": {"name": "f", "units": 3}}
    read = BY_KERAS_CLASS["Bidirectional"].read
    with pytest.raises(ValueError, match="merge_mode=None"):
        read("Bidirectional", "b", {"layer": lstm, "merge_mode": None}, None)
    own = {
        "class_name": "LSTM",
        "config": {"name": "b", "units": 5, "go_backwards": True},
    }
    with pytest.raises(ValueError, match="backward layer of its own"):
        read("Bidirectional", "b", {"layer": lstm, "backward_layer": own}, None)
    conv = {"class_name": "Conv1D", "config": {"name": "f", "filters": 3}}
    with pytest.raises(ValueError, match="over an LSTM, a GRU or a SimpleRNN"):
        read("Bidirectional", "b", {"layer": conv}, None)


_KERAS_PENALTY = """
import json, sys
import numpy as np
from workers.keras_runner import _with_penalty
from zoo.keras_models import build, set_weights
from zoo.models import get_spec
from zoo.weights import make_weights
spec = get_spec(sys.argv[1])
model = build(spec)
set_weights(model, spec, make_weights(spec, 0))
print(json.dumps(float(_with_penalty(model, 0.0))))
"""


def test_keras_adds_each_regularizer_as_the_spec_says(tmp_path: Path) -> None:
    """The Keras runner's loss adds Keras' own regularization losses; they
    are what ``ModelSpec.penalties`` says, computed here in NumPy (so a
    path that leaves them out, or halves them, differs from Keras)."""
    import numpy as np

    from zoo.weights import make_weights

    spec = VARIANTS["kinds-cnn"]
    assert len(spec.penalties) == 4
    weights = make_weights(spec, 0)
    expected = sum(
        l1 * np.abs(weights[name].astype(np.float64)).sum()
        + l2 * np.square(weights[name].astype(np.float64)).sum()
        for name, l1, l2 in spec.penalties
    )
    script = tmp_path / "penalty.py"
    script.write_text(_KERAS_PENALTY)
    keras_says = json.loads(keras_on_torch([str(script), spec.name]).stdout)
    assert keras_says == pytest.approx(expected, rel=1e-5)


_NESTED = """
import json, sys
import keras
inputs = keras.Input((8, 8, 3), name="image")
base_in = keras.Input((8, 8, 3))
h = keras.layers.Conv2D(4, 3, name="c")(base_in)
side = keras.layers.Conv2D(4, 3, padding="same", name="c2")(h)
h = keras.layers.Add(name="res")([h, side])
base = keras.Model(base_in, h, name="base")  # a pretrained base, say
head = keras.Sequential([keras.layers.Dense(5, name="d")], name="head")
x = keras.layers.GlobalAveragePooling2D(name="gap")(base(inputs, training=False))
model = keras.Model(inputs, keras.layers.Dense(2, name="out")(head(x)))
print(model.to_json())
"""


def test_a_model_nested_in_the_model_is_read_as_its_layers(tmp_path: Path) -> None:
    """A functional base and a Sequential head used as layers (transfer
    learning, as keras.io writes it): their layers inlined as
    ``<model>__<layer>``, each taking what it took inside."""
    script = tmp_path / "nested.py"
    script.write_text(_NESTED)
    config = json.loads(keras_on_torch([str(script)]).stdout)
    spec = user_models.spec_from_document(
        "nested", keras_import.document_from_config(config)
    )
    assert [layer.name for layer in spec.layers] == [
        "base__c",
        "base__c2",
        "base__res",
        "gap",
        "head__d",
        "out",
    ]
    assert spec.sources("base__res") == ("base__c", "base__c2")
    assert spec.sources("gap") == ("base__res",)


def documented_classes(text: str) -> set[str]:
    """The Keras classes docs/user_models.md's paragraph on layers names:
    every backticked class between its pointer to ``harness kinds`` and
    "read as the merge", ``X1D``/``2D`` read as both."""
    start = text.index("harness kinds")
    span = text[start : text.index("read as the merge", start)]
    named = set(re.findall(r"`([A-Z][A-Za-z0-9]*)`", span))
    named |= {f"{stem}2D" for stem in re.findall(r"`([A-Za-z]+)1D`/`2D`", span)}
    return named


def test_the_docs_layer_list_is_the_registry() -> None:
    """The list users read is ``harness kinds``' (derived from the registry,
    a row per kind naming each of its Keras classes); the docs point there
    and name no class the registry lacks."""
    table = rows()
    assert [row[0] for row in table] == list(KINDS)
    listed = {cls for row in table for cls in row[1].split(", ") if cls}
    assert listed == set(BY_KERAS_CLASS)
    text = (PROJECT_ROOT / "docs" / "user_models.md").read_text(encoding="utf-8")
    extra = sorted(documented_classes(text) - set(BY_KERAS_CLASS))
    assert not extra, (
        f"docs/user_models.md's paragraph on layers names {extra}, which no "
        "module of zoo/kinds reads: take it out, or add the kind"
    )


def test_the_docs_check_sees_a_class_the_registry_lacks() -> None:
    line = "harness kinds: `Dense`, `Conv3D`, `Cropping1D`/`2D`, read as the merge"
    assert documented_classes(line) == {"Dense", "Conv3D", "Cropping1D", "Cropping2D"}
    assert "Conv3D" not in BY_KERAS_CLASS


def test_harness_kinds_prints_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.__main__ import main

    assert main(["kinds", "--markdown"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("| kind")
    kinds = {line.split("|")[1].strip() for line in printed[2:]}
    assert kinds == set(KINDS)


def test_a_module_that_makes_no_kind_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registry reads every module of the package: one that makes no
    ``Kind`` (a newcomer's typo in ``KIND``) stops the import, naming it."""
    package = tmp_path / "toykinds"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text(
        "from zoo.kinds.flatten import KIND as _F\nKIND = _F\n"
    )
    (package / "typo.py").write_text("from zoo.kinds.flatten import KIND as KINDE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"toykinds/typo\.py makes no kind"):
        discovered([str(package)], "toykinds")
    (package / "typo.py").unlink()
    found = discovered([str(package)], "toykinds")
    assert [(k.name, file) for k, file in found.items()] == [
        ("flatten", "toykinds/good.py")
    ]
    assert MODULE_FILES["flatten"] == "zoo/kinds/flatten.py"  # the registry's own


def test_an_elementwise_merge_broadcasts_a_side_of_one_as_keras_does() -> None:
    """A squeeze-and-excite block's ``(1, 1, C)`` weights times ``(H, W, C)``
    images is ``(H, W, C)``; sides that differ without a 1, or two ranks,
    are refused in one sentence."""
    layer = Layer.of("excite", "multiply", inputs=("conv", "weights"))
    shape = KINDS["multiply"].shape
    assert shape(layer, ((4, 4, 8), (1, 1, 8))) == (4, 4, 8)
    assert shape(layer, ((1, 4, 8), (4, 1, 8))) == (4, 4, 8)
    for wrong in (((4, 4, 8), (2, 1, 8)), ((4, 4, 8), (1, 8))):
        with pytest.raises(ValueError, match="or a side of 1 where another's is"):
            shape(layer, wrong)
