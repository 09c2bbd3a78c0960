"""The gallery's table (``examples/gallery_table.py``) on hand-written
verdict files and standard errors, and the gallery's index of examples
(``examples/gallery.py``), read without Keras.  Framework-free; building the
models is ``tests/test_gallery_build.py``'s."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from equivalence.__main__ import VERDICT_SCHEMA_VERSION
from equivalence.check import VERDICT_ORDER
from equivalence.keras_known import KNOWN_BUG

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
PATHS = ("keras-jax", "keras-torch", "native-torch", "native-mxnet")
REFUSAL = (
    "layer 'bidirectional' (Bidirectional) is not one the tool knows; "
    "supported: Dense, Conv1D"
)


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES_DIR / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


table = _load("gallery_table")


def _verdicts(model: str, m: float = 1.2) -> dict[str, Any]:
    """A verdict file as ``python -m equivalence --model --out`` writes it,
    every path passing at ``m`` but native-torch at 1.5 in a second case."""
    case = {
        "case": f"model='{model}-0123456789ab', seed=0, batch_size=16, steps=10",
        "reference": "native-torch",
        "odd_one_out": None,
        "reference_sound": True,
        "reference_fault": None,
        "thinned": None,
        "verdicts": dict.fromkeys(PATHS, "pass"),
        "shown_verdicts": dict.fromkeys(PATHS, "pass"),
        "notes": {},
        "multiples": dict.fromkeys(PATHS, m),
        "localizations": {},
    }
    second = copy.deepcopy(case)
    second["multiples"]["native-torch"] = 1.5
    return {
        "schema_version": VERDICT_SCHEMA_VERSION,
        "created": "2026-11-28T08:00:00+0000",
        "seed": 0,
        "batch_size": 16,
        "faults": {},
        "rule": {"multiple": 10.0, "floor": 1e-7, "implementations": ["native-torch"]},
        "tolerances": {"logits": 1e-5},
        "cases": [case, second],
        "models": {f"{model}-0123456789ab": dict.fromkeys(PATHS, "pass")},
    }


def _folder(tmp_path: Path, **files: dict[str, Any] | str) -> Path:
    """A results folder: ``name.keras`` for each name, and its verdicts (a
    dict) or its standard error (a string)."""
    for name, content in files.items():
        (tmp_path / f"{name}.keras").write_bytes(b"not read")
        if isinstance(content, dict):
            (tmp_path / f"{name}.json").write_text(json.dumps(content))
        else:
            (tmp_path / f"{name}.stderr").write_text(content)
    return tmp_path


def _row(rows: list[Any], name: str) -> Any:
    (found,) = [r for r in rows if r.name == name]
    return found


def test_the_table_reads_what_the_tool_writes() -> None:
    assert VERDICT_SCHEMA_VERSION in table.SCHEMA_VERSIONS
    assert tuple(VERDICT_ORDER) == table.VERDICTS


def test_accepted_refused_and_unrun_models_each_get_their_row(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        cifar10_cnn=_verdicts("cifar10_cnn"),
        bidirectional_lstm_imdb=(
            "some worker log\n"
            f"error: results/bidirectional_lstm_imdb.keras: {REFUSAL}\n"
        ),
        gru_sentiment="Traceback (most recent call last):\nMemoryError\n",
        mine=_verdicts("mine"),
    )
    (folder / "lenet_d2l.keras").write_bytes(b"")  # built, never checked
    examples = table.gallery_examples()
    rows = table.rows(folder, examples)
    # the gallery's order, then a file of the user's own
    assert [r.name for r in rows] == [
        "cifar10_cnn",
        "lenet_d2l",
        "bidirectional_lstm_imdb",
        "gru_sentiment",
        "mine",
    ]
    cnn = _row(rows, "cifar10_cnn")
    assert cnn.status == "accepted"
    assert cnn.all_pass == "yes"
    assert cnn.paths["native-torch"].m == 1.5  # the worst over the cases
    assert cnn.paths["keras-jax"].cell() == "pass 1.2"
    refused = _row(rows, "bidirectional_lstm_imdb")
    assert (refused.status, refused.said) == ("refused", REFUSAL)
    assert refused.all_pass == "-"
    crashed = _row(rows, "gru_sentiment")
    assert crashed.status == "no verdicts"
    assert "MemoryError" in crashed.said
    assert _row(rows, "lenet_d2l").status == "not run"
    text = table.tables(rows, examples, markdown=False)
    assert REFUSAL in text
    assert examples["cifar10_cnn"][0] in text


def test_a_schema_5_file_without_notes_is_read(tmp_path: Path) -> None:
    document = _verdicts("cifar10_cnn")
    document["schema_version"] = 5
    for case in document["cases"]:
        del case["notes"], case["shown_verdicts"]
    rows = table.rows(_folder(tmp_path, cifar10_cnn=document), {})
    assert (rows[0].status, rows[0].all_pass, rows[0].notes) == ("accepted", "yes", {})


def test_a_known_keras_difference_is_listed_and_still_fails(tmp_path: Path) -> None:
    document = _verdicts("gru_sentiment")
    document["models"]["gru_sentiment-0123456789ab"]["keras-jax"] = "fail"
    note = "Keras' Adam on TensorFlow updates an embedding's untouched rows"
    for case in document["cases"]:
        case["notes"] = {"keras-jax": [note]}
    rows = table.rows(_folder(tmp_path, gru_sentiment=document), {})
    assert rows[0].notes == {"keras-jax": [note]}  # once, though in two cases
    assert rows[0].all_pass == "no (keras-jax)"
    assert note in table.tables(rows, {}, markdown=True)


def test_a_failure_the_tool_names_as_a_keras_bug_says_so(tmp_path: Path) -> None:
    document = _verdicts("gru_sentiment")
    document["models"]["gru_sentiment-0123456789ab"]["keras-jax"] = "fail"
    note = f"{KNOWN_BUG}: Keras' Adam squares a sparse gradient per occurrence"
    for case in document["cases"]:
        case["notes"] = {"keras-jax": [note]}
    rows = table.rows(_folder(tmp_path, gru_sentiment=document), {})
    assert rows[0].all_pass == "no (keras-jax: a known Keras bug)"
    assert "fail 1.2 (Keras bug)" in table.tables(rows, {}, markdown=True)


def test_a_failing_path_fails_the_model(tmp_path: Path) -> None:
    document = _verdicts("cifar10_cnn")
    document["models"]["cifar10_cnn-0123456789ab"]["native-mxnet"] = "fail"
    rows = table.rows(_folder(tmp_path, cifar10_cnn=document), {})
    assert rows[0].all_pass == "no (native-mxnet)"
    assert rows[0].paths["native-mxnet"].cell() == "fail 1.2"


def test_a_pass_beyond_its_own_rule_shows_as_failing(tmp_path: Path) -> None:
    """A deliberately wrong verdict: keras-torch says pass at m 25, over the
    file's rule of 10."""
    document = _verdicts("cifar10_cnn")
    document["cases"][1]["multiples"]["keras-torch"] = 25.0
    rows = table.rows(_folder(tmp_path, cifar10_cnn=document), {})
    assert rows[0].all_pass == "no (keras-torch)"
    assert rows[0].paths["keras-torch"].cell() == "FAIL: says pass, m 25 > 10"


def test_an_unavailable_framework_is_counted_not_failed(tmp_path: Path) -> None:
    document = _verdicts("cifar10_cnn")
    document["models"]["cifar10_cnn-0123456789ab"]["native-mxnet"] = "unavailable"
    rows = table.rows(_folder(tmp_path, cifar10_cnn=document), {})
    assert rows[0].all_pass == "yes (1 unavailable)"


def test_a_reference_found_wrong_fails_the_model(tmp_path: Path) -> None:
    document = _verdicts("cifar10_cnn")
    document["cases"][0]["reference_sound"] = False
    rows = table.rows(_folder(tmp_path, cifar10_cnn=document), {})
    assert rows[0].all_pass.startswith("no (a reference implementation")


def _set(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        document = document[key]
    if value is KeyError:
        del document[path[-1]]
    else:
        document[path[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("schema_version",), 4, "schema_version is 4; this table reads"),
        (("schema_version",), "5", "schema_version must be int, not str"),
        (("rule",), KeyError, "rule must be dict, not NoneType"),
        (("rule", "multiple"), True, "rule.multiple must be int or float, not bool"),
        (("rule", "multiple"), 0, "rule.multiple is 0.0; it must be positive"),
        (("cases",), [], "cases is empty"),
        (("cases", 1, "multiples", "keras-jax"), "1.2", "cases[1].multiples['keras"),
        (("cases", 0, "verdicts", "keras-jax"), "passed", "'passed', not one of"),
        (("cases", 0, "reference_sound"), None, "cases[0].reference_sound must be"),
        (("models",), {}, "models holds 0 models; a --model run judges one"),
        (("cases", 0, "notes"), KeyError, "cases[0].notes must be dict"),
        (("cases", 1, "notes"), {"keras-jax": "x"}, "cases[1].notes must be list"),
        (("models",), {"other-0123456789ab": {}}, "names 'other-0123456789ab'"),
        (("models", "cifar10_cnn-0123456789ab", "keras-jax"), 1, "must be str"),
    ],
)
def test_a_malformed_verdict_file_is_refused_naming_its_field(
    tmp_path: Path, path: tuple[Any, ...], value: Any, message: str
) -> None:
    document = _verdicts("cifar10_cnn")
    _set(document, path, value)
    folder = _folder(tmp_path, cifar10_cnn=document)
    with pytest.raises(table.VerdictFileError) as caught:
        table.read_verdicts(folder / "cifar10_cnn.json", "cifar10_cnn")
    said = str(caught.value)
    assert said.startswith(f"{folder / 'cifar10_cnn.json'}: ")
    assert message in said
    assert "\n" not in said


def test_a_verdict_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, cifar10_cnn="")
    (folder / "cifar10_cnn.json").write_text('{"schema_version": 5,')
    with pytest.raises(table.VerdictFileError, match="cannot be read as JSON"):
        table.read_verdicts(folder / "cifar10_cnn.json", "cifar10_cnn")


def test_the_command_shows_an_unreadable_file_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = _verdicts("lenet_d2l")
    del broken["cases"]
    folder = _folder(tmp_path, cifar10_cnn=_verdicts("cifar10_cnn"), lenet_d2l=broken)
    markdown = tmp_path / "out" / "gallery.md"
    assert table.main([str(folder), "--markdown", str(markdown)]) == 1
    out, err = capsys.readouterr()
    assert "unreadable" in out
    assert err.strip() == (
        f"error: {folder / 'lenet_d2l.json'}: cases must be list, not NoneType"
    )
    written = markdown.read_text()
    title, url = table.gallery_examples()["cifar10_cnn"]
    assert f"[{title}]({url})" in written
    assert written.startswith("## The gallery: 2 models (1 accepted, 1 unreadable)")


def test_the_command_exits_0_on_a_readable_folder(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        cifar10_cnn=_verdicts("cifar10_cnn"),
        bidirectional_lstm_imdb=f"error: {REFUSAL}\n",
    )
    assert table.main([str(folder)]) == 0
    assert table.main([str(tmp_path / "nowhere")]) == 2


def test_the_gallery_index_is_read_without_keras() -> None:
    """``EXAMPLES`` and ``GALLERY`` come from one decorator, and loading the
    module imports no framework (a process of its own: this one may have)."""
    code = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("g", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
assert list(m.EXAMPLES) == list(m.GALLERY), "one registry"
loaded = [f for f in ("keras", "tensorflow", "torch", "jax") if f in sys.modules]
assert not loaded, loaded
print(len(m.EXAMPLES))
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES_DIR / "gallery.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 28


def test_every_gallery_model_names_its_example() -> None:
    gallery = _load("gallery")
    assert len(gallery.GALLERY) >= 28
    for name, (title, url) in gallery.EXAMPLES.items():
        assert title.strip(), name
        assert url.startswith("https://"), name
        doc = gallery.GALLERY[name].__doc__
        assert doc.startswith(f"{title} ({url}). "), name
        assert len(doc) > len(title) + len(url) + 6, f"{name} says nothing of itself"


class _Saved:
    """A stand-in for a Keras model: ``save`` writes a few bytes."""

    def save(self, path: Path) -> None:
        path.write_bytes(b"a model")

    def count_params(self) -> int:
        return 1


def test_the_gallery_saves_through_no_link_and_refuses_a_file_as_its_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    gallery = _load("gallery")
    name = next(iter(gallery.GALLERY))
    monkeypatch.setitem(gallery.GALLERY, name, _Saved)
    outside = tmp_path / "outside.keras"
    outside.write_bytes(b"the user's own")
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{name}.keras").symlink_to(outside)
    assert gallery.main([str(out), name]) == 0
    assert outside.read_bytes() == b"the user's own"  # the link replaced, not followed
    assert (out / f"{name}.keras").read_bytes() == b"a model"
    assert not (out / f"{name}.keras").is_symlink()
    capsys.readouterr()
    assert gallery.main([str(outside), name]) == 2
    assert capsys.readouterr().err == (
        f"error: {outside} is a file, not a folder: nothing is written there\n"
    )


def test_a_failure_named_as_a_keras_difference_by_design_says_so(
    tmp_path: Path,
) -> None:
    """A failure the notes name as what Keras computes on purpose (Keras on
    TensorFlow's unclipped cross-entropy) is not called a bug."""
    document = _verdicts("gru_sentiment")
    document["models"]["gru_sentiment-0123456789ab"]["keras-jax"] = "fail"
    note = f"{KNOWN_BUG}: Keras on TensorFlow never clips (by design; docs/...)"
    for case in document["cases"]:
        case["notes"] = {"keras-jax": [note]}
    rows = table.rows(_folder(tmp_path, gru_sentiment=document), {})
    assert rows[0].all_pass == "no (keras-jax: a Keras difference by design)"
    assert "fail 1.2 (Keras by design)" in table.tables(rows, {}, markdown=True)
