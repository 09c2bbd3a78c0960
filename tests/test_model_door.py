"""The model door holds (issue 61): the store keeps entries by content and
follows no link, a name that becomes a path is one plain name, a ``.keras``
path that is not a regular file, an archive member that inflates past what
it needs, a non-float32 layer, NaN weights, a nest too deep and ``--model``
beside a blueprint's ``[model]`` are each refused in one sentence."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import keras_on_torch
from zoo import keras_import, user_models
from zoo.specs import VARIANTS
from zoo.weights import make_weights


@pytest.fixture(autouse=True)
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(user_models.STORE_ENV, str(tmp_path / "models"))
    user_models._load.cache_clear()
    return tmp_path / "models"


def _one_sentence(message: str) -> None:
    assert "\n" not in message, message
    assert "Traceback" not in message, message


def _registered(store: Path) -> tuple[str, Path]:
    spec = VARIANTS["strided-cnn"]
    name = user_models.register(
        "cnn.keras", user_models.document_of(spec), make_weights(spec, 2)
    )
    return name, store / name


# --- 1. the store keeps entries by content -----------------------------------------


def test_an_edited_document_or_weights_is_refused_by_name(store: Path) -> None:
    name, entry = _registered(store)
    assert user_models.find(name) is not None
    document = json.loads((entry / "model.json").read_text())
    document["layers"][-1]["units"] = 7  # 7 units for 10
    (entry / "model.json").write_text(json.dumps(document))
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="has been changed since it was stored") as e:
        user_models.find(name)
    assert name in str(e.value)
    _one_sentence(str(e.value))
    # registering the same content again replaces the edited entry
    assert _registered(store)[0] == name
    assert user_models.find(name) is not None

    with np.load(entry / "weights.npz") as data:
        weights = dict(data)
    weights["conv1/kernel"] = weights["conv1/kernel"].copy()
    weights["conv1/kernel"].flat[0] = np.nan
    (entry / "weights.npz").unlink()
    np.savez(entry / "weights.npz", **weights)
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="has been changed since it was stored"):
        user_models.find(name)
    assert _registered(store)[0] == name
    assert user_models.find(name) is not None


def test_a_damaged_entry_is_refused_and_replaced(store: Path) -> None:
    name, entry = _registered(store)
    (entry / "model.json").unlink()  # weights.npz left: the folder is not empty
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="is damaged") as e:
        user_models.find(name)
    _one_sentence(str(e.value))
    assert _registered(store)[0] == name  # no "Directory not empty"
    assert user_models.find(name) is not None
    assert sorted(p.name for p in store.iterdir()) == [name]  # nothing left aside
    (entry / "model.json").write_text("{not json")
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="cannot be read"):
        user_models.find(name)
    assert _registered(store)[0] == name


def test_register_refuses_weights_that_are_not_finite() -> None:
    spec = VARIANTS["strided-cnn"]
    weights = make_weights(spec, 0)
    weights["logits/bias"][0] = np.inf
    with pytest.raises(ValueError, match="parameter logits/bias holds NaN or inf"):
        user_models.register("cnn.keras", user_models.document_of(spec), weights)


def test_a_damaged_remembered_entry_is_read_again(tmp_path: Path) -> None:
    from workers.user_model import model_from_file

    table = tmp_path / "mine.toml"
    document = user_models.document_of(VARIANTS["strided-cnn"])
    table.write_text("[model]\n" + _toml_of(document))
    folder = tmp_path / "kept"
    name = model_from_file(table, folder)
    (folder / name / "model.json").write_text('{"input_shape": [4]}')
    user_models._load.cache_clear()
    assert model_from_file(table, folder) == name  # read again, replaced
    assert user_models.find(name, folder) is not None
    # a remembered file that names a path is not trusted
    (remembered,) = (folder / "files").iterdir()
    remembered.write_text("../../elsewhere\n")
    assert model_from_file(table, folder) == name


def test_an_index_edited_to_name_another_stored_model_is_caught(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workers.user_model import model_from_file

    folder = tmp_path / "kept"
    names = {}
    for variant in ("strided-cnn", "gap-cnn"):
        table = tmp_path / f"{variant}.toml"
        table.write_text(
            "[model]\n" + _toml_of(user_models.document_of(VARIANTS[variant]))
        )
        names[variant] = model_from_file(table, folder)
    assert names["strided-cnn"] != names["gap-cnn"]
    first = tmp_path / "strided-cnn.toml"
    (index,) = [
        p
        for p in (folder / "files").iterdir()
        if p.read_text().strip() == names["strided-cnn"]
    ]
    index.write_text(names["gap-cnn"] + "\n")  # another stored model
    capsys.readouterr()
    assert model_from_file(first, folder) == names["strided-cnn"]
    err = capsys.readouterr().err
    assert f"names stored model {names['gap-cnn']}, which was not stored" in err
    assert index.read_text().strip() == names["strided-cnn"]  # the index repaired


def _toml_of(document: dict[str, Any]) -> str:
    def inline(layer: dict[str, Any]) -> str:
        return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in layer.items()) + "}"

    layers = ",\n  ".join(inline(layer) for layer in document["layers"])
    return f"input_shape = {document['input_shape']}\nlayers = [\n  {layers},\n]\n"


# --- 2. no read or write through a link ----------------------------------------------


def test_the_store_writes_through_no_linked_files_folder(tmp_path: Path) -> None:
    from workers.user_model import model_from_file

    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / "files").symlink_to(outside)
    table = tmp_path / "mine.toml"
    table.write_text(
        "[model]\n" + _toml_of(user_models.document_of(VARIANTS["strided-cnn"]))
    )
    with pytest.raises(ValueError, match="writes through no link") as e:
        model_from_file(table, folder)
    _one_sentence(str(e.value))
    assert list(outside.iterdir()) == []


def test_a_linked_entry_is_refused_and_replaced_not_followed(store: Path) -> None:
    name, entry = _registered(store)
    elsewhere = store.parent / "elsewhere"
    shutil.move(entry, elsewhere)
    entry.symlink_to(elsewhere)
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="is a link; the store follows no links"):
        user_models.find(name)
    assert _registered(store)[0] == name
    assert not entry.is_symlink()
    assert entry.is_dir()
    assert (elsewhere / "model.json").is_file()  # what the link named is left
    # a linked file inside an entry is not read either
    (entry / "model.json").unlink()
    (entry / "model.json").symlink_to(elsewhere / "model.json")
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="cannot be read"):
        user_models.find(name)


# --- 3. a name that becomes a path is one plain name -------------------------------


@pytest.mark.parametrize(
    "name", ["../../x", "..", ".", ".hidden", "a/b", "", "x" * 129, "a b", "/abs"]
)
def test_a_path_like_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not a plain name") as e:
        user_models.plain_name(name, "model")
    _one_sentence(str(e.value))


def test_plain_names_pass_and_stems_are_plain() -> None:
    for name in ("lenet", "vgg-rysia", "mine-0123456789ab", "3.15.1", "a_b.c"):
        assert user_models.plain_name(name, "model") == name
    for file in ("...keras", "../../x.keras", "x" * 300 + ".keras", ".h.toml"):
        stem = user_models.stem_of(file)
        user_models.plain_name(stem, "stem")
        assert len(stem) <= 64


def test_bisect_refuses_a_path_like_model_before_any_folder(tmp_path: Path) -> None:
    from harness.cli.bisect import bisect_command
    from harness.versions import overlay, signals

    args = argparse.Namespace(
        model="../../x",
        path="keras-torch",
        phase="train",
        between=["3.10.0", "3.11.0"],
        profile="count",
        results=tmp_path / "results",
    )
    with pytest.raises(ValueError, match=r"--model '\.\./\.\./x' is not a plain name"):
        bisect_command(args)
    assert not (tmp_path / "results").exists()
    with pytest.raises(ValueError, match="is not a plain name"):
        signals.check(signals.Cell("../x", "keras-torch", "train", "count"))
    with pytest.raises(ValueError, match=r"release '\.\./x' is not a plain name"):
        overlay.prepare("../x", root=tmp_path)
    assert not any(tmp_path.rglob("*.lock"))


# --- 4. a --model path that is not a regular file -------------------------------------


def test_a_folder_fifo_or_device_is_named_for_what_it_is(tmp_path: Path) -> None:
    from workers.user_model import model_from_file

    folder = tmp_path / "dir.keras"
    folder.mkdir()
    fifo = tmp_path / "pipe.keras"
    os.mkfifo(fifo)
    cases = {
        folder: "is a folder",
        fifo: r"is not a regular file \(a FIFO\)",
        Path("/dev/zero"): r"is not a regular file \(a device\)",
        tmp_path / "missing.keras": "no such file",
    }
    for path, message in cases.items():
        with pytest.raises(ValueError, match=message) as e:
            model_from_file(path, tmp_path / "models")
        _one_sentence(str(e.value))
    # the Keras worker's own check says the same, opening nothing
    for path, message in ((folder, "is a folder"), (fifo, "not a regular file")):
        with pytest.raises(ValueError, match=message):
            keras_import.read_config(path)
    with pytest.raises(ValueError, match="not a regular file"):
        keras_import.read_config(Path("/dev/zero"))


# --- 5. archive members by what they inflate to ----------------------------------


def _dense_config(**dense: Any) -> dict[str, Any]:
    layer = {
        "module": "keras.layers",
        "class_name": "Dense",
        "config": {"name": "fc", "units": 4, **dense},
    }
    first = {
        "module": "keras.layers",
        "class_name": "InputLayer",
        "config": {"name": "input", "batch_shape": [None, 8]},
    }
    return {"class_name": "Sequential", "config": {"layers": [first, layer]}}


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _declare(path: Path, member: str, size: int) -> None:
    """Rewrite ``member``'s uncompressed size in the archive's local header
    and central directory (a zip bomb's lie)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    struct.pack_into("<I", data, info.header_offset + 22, size)
    central = data.find(b"PK\x01\x02" + bytes(0), 0)
    while central != -1:
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_len] == member.encode():
            struct.pack_into("<I", data, central + 24, size)
        central = data.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(data))


def test_a_config_is_read_by_what_it_inflates_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.dumps(_dense_config()).encode()
    monkeypatch.setattr(keras_import, "MAX_CONFIG_BYTES", 1 << 20)
    bomb = _archive(
        tmp_path / "bomb.keras",
        {"config.json": config + b" " * (4 << 20), "model.weights.h5": b"x"},
    )
    with pytest.raises(ValueError, match="larger than"):
        keras_import.read_config(bomb)
    _declare(bomb, "config.json", 300)  # says 300 bytes, inflates to 4 MiB
    with pytest.raises(ValueError, match=r"config\.json") as e:
        keras_import.read_config(bomb)
    _one_sentence(str(e.value))
    # an honest archive reads as before
    ok = _archive(
        tmp_path / "ok.keras", {"config.json": config, "model.weights.h5": b"x"}
    )
    assert keras_import.read_config(ok)["class_name"] == "Sequential"


def test_a_weights_member_beyond_what_the_parameters_need_is_refused(
    tmp_path: Path,
) -> None:
    config = _dense_config()
    spec = user_models.spec_from_document(
        "user model", keras_import.document_from_config(config)
    )
    limit = keras_import.weights_limit(spec)
    assert limit == keras_import.WEIGHTS_PER_VALUE * (8 * 4 + 4) + (
        keras_import.WEIGHTS_SLACK
    )
    text = json.dumps(config).encode()
    fine = _archive(
        tmp_path / "fine.keras", {"config.json": text, "model.weights.h5": bytes(4096)}
    )
    keras_import.check_weights_member(fine, spec)
    big = _archive(
        tmp_path / "big.keras",
        {"config.json": text, "model.weights.h5": bytes(limit + 1)},
    )
    with pytest.raises(ValueError, match=r"model\.weights\.h5 is .* bytes, more than"):
        keras_import.check_weights_member(big, spec)
    _declare(big, "model.weights.h5", 4096)  # the directory lies
    with pytest.raises(ValueError, match=r"model\.weights\.h5") as e:
        keras_import.check_weights_member(big, spec)
    _one_sentence(str(e.value))


# --- 6. a layer that is not float32 -------------------------------------------------


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "float16", "bfloat16"])
def test_a_layer_that_is_not_float32_is_refused(policy: str) -> None:
    as_policy = {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": policy},
        "registered_name": None,
    }
    for dtype in (as_policy, policy):
        with pytest.raises(ValueError, match=f"'fc' has dtype policy '{policy}'") as e:
            keras_import.document_from_config(_dense_config(dtype=dtype))
        _one_sentence(str(e.value))
    float32 = {**as_policy, "config": {"name": "float32"}}
    keras_import.document_from_config(_dense_config(dtype=float32))


# --- 7. Keras' refusal keeps its reason ---------------------------------------------


def test_keras_refusal_keeps_its_useful_lines() -> None:
    exc = TypeError(
        "Sequential could not be deserialized properly. Please ensure that...\n\n"
        "config={'module': 'keras'}\n\n"
        "Exception encountered: Could not locate class 'Mine'.\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 3, in <module>\n'
        "    boom()\n"
        "ValueError: the real reason\n"
    )
    reason = keras_import.keras_reason(exc)
    _one_sentence(reason)
    assert reason.startswith("Sequential could not be deserialized properly.")
    assert "Could not locate class 'Mine'" in reason
    assert "the real reason" in reason
    assert "File " not in reason
    assert "boom()" not in reason
    long = keras_import.keras_reason(ValueError("why " * 1000))
    assert len(long) <= keras_import.MAX_REASON_CHARS
    assert keras_import.keras_reason(ValueError()) == "ValueError"


# --- 8. a nest too deep ------------------------------------------------------------


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_model_nested_too_deep_is_one_sentence(tmp_path: Path) -> None:
    from workers.user_model import model_from_file

    deep = tmp_path / "deep.toml"
    deep.write_text("[model]\ninput_shape = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match="nests too deeply") as e:
        model_from_file(deep, tmp_path / "models")
    _one_sentence(str(e.value))
    document = user_models.document_of(VARIANTS["strided-cnn"])
    document["layers"][1]["inputs"] = _deep(100_000)
    with pytest.raises(ValueError, match="nests tables and lists more than"):
        user_models.spec_from_document("mine", document)
    config = _dense_config()
    config["config"]["layers"][1]["config"]["extra"] = _deep(100)
    with pytest.raises(ValueError, match="nested more than"):
        keras_import._check_depth(Path("x.keras"), config)
    archive = _archive(
        tmp_path / "deep.keras",
        {"config.json": b"[" * 100_000 + b"]" * 100_000, "model.weights.h5": b""},
    )
    with pytest.raises(ValueError, match=r"nests too deeply|not an object"):
        keras_import.read_config(archive)


def test_a_stored_entry_nested_too_deep_is_refused(store: Path) -> None:
    name, entry = _registered(store)
    (entry / "model.json").write_text("[" * 100_000 + "]" * 100_000)
    user_models._load.cache_clear()
    with pytest.raises(ValueError, match="cannot be read") as e:
        user_models.find(name)
    _one_sentence(str(e.value))


# --- 9. --model beside a blueprint's [model] ------------------------------------------


def test_model_and_a_blueprint_with_its_own_model_are_refused(tmp_path: Path) -> None:
    from harness.cli.common import selection

    blueprint = tmp_path / "mine.toml"
    blueprint.write_text(
        'phases = ["train"]\n[settings]\ntrain_steps = 2\nrepeats = 1\n[model]\n'
        + _toml_of(user_models.document_of(VARIANTS["strided-cnn"]))
    )
    other = tmp_path / "other.toml"
    other.write_text(blueprint.read_text())
    args = argparse.Namespace(
        profile=str(blueprint),
        models=None,
        model=other,
        paths=None,
        phases=None,
        results=tmp_path / "results",
    )
    with pytest.raises(ValueError, match=r"its \[model\] table\) and --model") as e:
        selection(args)
    _one_sentence(str(e.value))
    assert "mine.toml" in str(e.value)
    assert "other.toml" in str(e.value)
    args.profile = "default"  # a blueprint of known models: --model is the model
    _, models, _, _ = selection(args)
    assert models[0].startswith("other-")


# --- through Keras (a process of its own) ----------------------------------------


SAVE = """
import sys
import keras
import numpy as np
out = sys.argv[1]
def small(dtype=None):
    return keras.Sequential([
        keras.Input((8,)),
        keras.layers.Dense(4, name="hidden", dtype=dtype),
        keras.layers.Dense(3, name="logits"),
    ])
model = small()
kernel = model.get_layer("hidden").kernel
value = keras.ops.convert_to_numpy(kernel)
value[0, 0] = np.nan
kernel.assign(value)
model.save(out + "/nan.keras")
small("mixed_bfloat16").save(out + "/half.keras")
small().save(out + "/good.keras")
"""


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("keras", "torch")),
    reason="Keras on PyTorch is not installed",
)
def test_a_keras_file_with_nan_weights_or_a_half_policy_is_refused(
    tmp_path: Path,
) -> None:
    from workers.user_model import model_from_file

    keras_on_torch(["-c", SAVE, str(tmp_path)], tmp_path)
    folder = tmp_path / "models"
    # the half policy is refused from the config, before Keras is started
    with pytest.raises(ValueError, match="'hidden' has dtype policy 'mixed_bfloat16'"):
        model_from_file(tmp_path / "half.keras", folder)
    # a weights member swapped for garbage: Keras' reason, in one line
    good = tmp_path / "good.keras"
    with zipfile.ZipFile(good) as archive:
        config = archive.read("config.json")
    broken = _archive(
        tmp_path / "broken.keras",
        {"config.json": config, "model.weights.h5": b"not hdf5"},
    )
    with pytest.raises(ValueError, match="Keras cannot load") as e:
        model_from_file(broken, folder)
    _one_sentence(str(e.value))
    assert len(str(e.value)) < 800
    with pytest.raises(ValueError, match="parameter hidden/kernel holds NaN") as e:
        model_from_file(tmp_path / "nan.keras", folder)
    _one_sentence(str(e.value))
