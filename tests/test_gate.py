"""The gate's cache key changes with everything that could change a verdict;
its cache is read only when it has the right shape (an older one without the
reference notes included); and a float64 reference implementation found
wrong is in every verdict it caches."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from equivalence.check import VERDICT_ORDER, Case, ModelReport
from equivalence.reference import Vote
from harness.__main__ import main as harness_main
from harness.core import gate
from harness.core.gate import (
    CACHE_NAME,
    CACHE_SCHEMA_VERSION,
    _load,
    _vote_sentences,
    _where,
    checked_batches,
    checked_weights,
    library_versions,
    sources_digest,
    training_checks,
    verdict_key,
    wrong_references,
)
from tests.helpers import JUDGED_PATHS, judged
from workers.launch import Reply
from zoo.arrays import digest, load_npz, save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.weights import make_weights


def _key(**changes: object) -> str:
    args: dict[str, object] = {
        "model": "ffn",
        "path": "native-torch",
        "weights_sha": "w",
        "sources": "s",
        "versions": {"torch": "2.13.0"},
    }
    args.update(changes)
    return verdict_key(**args)  # type: ignore[arg-type]


def test_a_path_left_unjudged_says_why() -> None:
    # No two float64 runs agreed: every path is an error, and the reason
    # the gate logs and caches is the vote's sentence, never nothing.
    sentence = "no two float64 runs of native-torch, ... agree"
    report = ModelReport(
        Case("lenet"),
        outcomes={"keras-jax": Reply("ok")},
        verdicts={"keras-jax": "error"},
        vote=Vote(None, (), sentence=sentence),
        reference_error=sentence,
    )
    assert _where([report], "keras-jax") == sentence
    assert _vote_sentences([report, report]) == [sentence]
    # an odd one out is logged too; a vote where all agree says nothing
    odd = Vote("native-jax", ("native-jax", "native-tensorflow"), "native-torch", "x")
    agreed = Vote("native-torch", ("native-torch", "native-jax"))
    reports = [ModelReport(Case("lenet"), vote=v) for v in (odd, agreed)]
    assert _vote_sentences(reports) == ["x"]
    assert _where(reports, "keras-jax") is None


def test_the_key_depends_on_model_path_weights_sources_and_versions() -> None:
    base = _key()
    assert _key() == base
    assert _key(model="lenet") != base
    assert _key(path="keras-torch") != base
    assert _key(weights_sha="other") != base
    assert _key(sources="edited") != base
    assert _key(versions={"torch": "2.14.0"}) != base
    # every reference implementation's environment is part of it
    jax = {"native-jax": {"jax": "0.10.2"}}
    assert _key(reference_versions=jax) != base
    assert _key(reference_versions={"native-jax": {"jax": "0.10.3"}}) != _key(
        reference_versions=jax
    )


def test_editing_a_model_source_or_the_path_registry_changes_the_digest(
    tmp_path: Path,
) -> None:
    for folder in ("zoo", "native", "workers", "equivalence", "harness/core"):
        (tmp_path / folder).mkdir(parents=True)
    model = tmp_path / "native" / "lenet.py"
    model.write_text("padding = 'same'\n")
    registry = tmp_path / "workers" / "paths.py"
    registry.write_text("PATHS = ['native-torch']\n")
    (tmp_path / "harness" / "core" / "gate.py").write_text("")
    before = sources_digest(tmp_path)
    assert sources_digest(tmp_path) == before
    model.write_text("padding = 'valid'\n")
    assert sources_digest(tmp_path) != before
    model.write_text("padding = 'same'\n")
    assert sources_digest(tmp_path) == before
    registry.write_text("PATHS = ['native-torch', 'native-torch-compile']\n")
    assert sources_digest(tmp_path) != before


def test_library_versions_are_read_by_the_environment_itself() -> None:
    versions = library_versions(sys.executable)
    assert versions["numpy"]
    assert versions["python"] == sys.executable
    assert "error" in library_versions("/no/such/python")


# --- a verdicts cache of the wrong shape ----------------------------------------

_GOOD_ENTRY = {
    "model": "ffn",
    "path": "native-torch",
    "verdict": "pass",
    "created": "t",
}

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _documents() -> st.SearchStrategy[Any]:
    """Verdict caches of every wrong shape: any JSON at all, the right
    envelope around wrong entries, and right entries with a field broken."""
    broken_entry = st.fixed_dictionaries(
        {k: st.just(v) for k, v in _GOOD_ENTRY.items()}
    ).flatmap(
        lambda entry: st.sampled_from(sorted(entry)).flatmap(
            lambda key: _JSON.map(lambda value: {**entry, key: value})
        )
    )
    envelope = st.fixed_dictionaries(
        {
            "schema_version": st.just(CACHE_SCHEMA_VERSION),
            "verdicts": st.dictionaries(st.text(max_size=4), _JSON | broken_entry),
        }
    )
    return _JSON | envelope


def _is_valid(document: Any) -> bool:
    if not (
        isinstance(document, dict) and set(document) == {"schema_version", "verdicts"}
    ):
        return False
    entries = document["verdicts"]
    return (
        type(document["schema_version"]) is int
        and document["schema_version"] == CACHE_SCHEMA_VERSION
        and isinstance(entries, dict)
        and all(
            isinstance(e, dict)
            and set(e) == set(_GOOD_ENTRY)
            and all(isinstance(v, str) for v in e.values())
            and e["verdict"] in VERDICT_ORDER  # a verdict the gate gives
            for e in entries.values()
        )
    )


@given(document=_documents())
def test_a_cache_of_the_wrong_shape_is_set_aside_never_a_traceback(
    document: Any,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / CACHE_NAME
        cache.write_text(json.dumps(document))
        lines: list[str] = []
        entries = _load(cache, lines.append)
        if _is_valid(document):
            assert entries == document["verdicts"]
            assert lines == []
        else:
            assert entries == {}
            (line,) = lines
            assert line.startswith(f"warning: {cache} is not a verdicts cache")
            assert "set aside as verdicts.json.bad-" in line
            assert not cache.exists()  # set aside, so the gate rebuilds it


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe binary \x00", b"{", b"[]", b'{"schema_version": 0}', b"null"],
)
def test_unreadable_caches_are_set_aside(tmp_path: Path, content: bytes) -> None:
    cache = tmp_path / CACHE_NAME
    cache.write_bytes(content)
    lines: list[str] = []
    assert _load(cache, lines.append) == {}
    assert len(lines) == 1
    (aside,) = tmp_path.glob("verdicts.json.bad-*")
    assert aside.read_bytes() == content  # kept for a look, not deleted


def test_no_cache_is_no_warning(tmp_path: Path) -> None:
    lines: list[str] = []
    assert _load(tmp_path / CACHE_NAME, lines.append) == {}
    assert lines == []


# --- the data the timing uses ------------------------------------------------------


def test_a_damaged_weights_or_batches_file_is_rebuilt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = get_spec("ffn")
    path, want = checked_weights(spec, 0, tmp_path)
    assert want == digest(make_weights(spec, 0))
    good = path.read_bytes()
    weights = load_npz(path)
    weights[sorted(weights)[0]].flat[0] += 1.0  # one edited value
    save_npz(path, weights)
    assert checked_weights(spec, 0, tmp_path) == (path, want)
    assert "does not hold what it should" in capsys.readouterr().err
    assert path.read_bytes() == good
    path.write_bytes(b"garbage")  # not even a zip file
    assert checked_weights(spec, 0, tmp_path) == (path, want)
    assert path.read_bytes() == good

    data, want = checked_batches(spec, 1, 4, 2, tmp_path)
    x, y = make_batches(spec, 1, 4, 2)
    assert want == digest({"x": x, "y": y})
    save_npz(data, {"x": x, "y": (y + 1) % spec.classes})  # labels shifted
    assert checked_batches(spec, 1, 4, 2, tmp_path) == (data, want)
    assert digest(load_npz(data)) == want


def test_the_verdict_key_follows_the_weights_content() -> None:
    spec = get_spec("ffn")
    a = digest(make_weights(spec, 0))
    b = digest(make_weights(spec, 1))
    assert _key(weights_sha=a) != _key(weights_sha=b)


def test_the_record_says_how_layers_that_train_differently_were_checked() -> None:
    checked = training_checks(get_spec("bn-dropout-cnn"))
    assert checked is not None
    assert "batch normalization (conv_norm, fc_norm)" in checked
    assert "dropout (drop at 0.25)" in checked
    assert "Hoeffding" in checked
    assert training_checks(get_spec("ffn")) is None


# --- a reference implementation found wrong ---------------------------------------


class _Judging:
    """A stand-in ``equivalence.check.Checker`` for the gate: every case
    judged on stand-in arrays (``tests.helpers.judged``), ``odd``'s float64
    run computed in float32; no worker."""

    def __init__(self, odd: str | None) -> None:
        self.odd = odd
        self.workers = dict.fromkeys(JUDGED_PATHS)

    def check(self, case: Case, **kwargs: Any) -> ModelReport:
        return judged(case, tuple(kwargs["paths"]), odd=self.odd)


class _NotAsked:
    workers = dict.fromkeys(JUDGED_PATHS)

    def check(self, case: Case, **kwargs: Any) -> ModelReport:
        raise AssertionError("a cached verdict was checked again")


@pytest.mark.parametrize("odd", [None, "native-torch"])
def test_a_wrong_reference_is_in_every_verdict_the_gate_caches(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    odd: str | None,
) -> None:
    monkeypatch.setattr(gate, "library_versions", lambda python: {"python": python})
    # the timed closures' check asks a worker: here they agree
    monkeypatch.setattr(gate, "_timed_verdict", lambda *args: ("pass", None))
    lines: list[str] = []
    keys: dict[str, dict[str, str]] = {}
    paths = list(JUDGED_PATHS)
    found = gate.verify(
        ["ffn"], paths, tmp_path, log=lines.append, checker=_Judging(odd), keys_out=keys
    )
    # every correct path is judged and passes (and is timed) either way
    assert found == {"ffn": dict.fromkeys(paths, "pass")}
    entries = json.loads((tmp_path / CACHE_NAME).read_text())["verdicts"]
    cached = {entries[keys["ffn"][p]]["path"]: entries[keys["ffn"][p]] for p in paths}
    wrong = wrong_references(tmp_path, {"ffn": keys["ffn"].values()})
    # ``harness gate`` (from the cache now) fails on it, saying what was wrong
    command = ["gate", "--profile", "smoke", "--models", "ffn"]
    command += ["--paths", ",".join(paths), "--results", str(tmp_path)]
    assert harness_main(command) == (0 if odd is None else 1)
    printed = capsys.readouterr().out.splitlines()
    if odd is None:
        assert not any("REFERENCE WRONG" in line for line in printed)
        assert all(
            "reference" not in e and "allowance" not in e for e in cached.values()
        )
        assert wrong == {}
        assert not any("REFERENCE WRONG" in line for line in lines)
        return
    sentences = {e["reference"] for e in cached.values()}
    (sentence,) = sentences
    assert sentence.startswith(
        "native-torch's float64 run computed in float32 (a dtype fault, not its "
        "model code)"
    )
    assert wrong == {"ffn": sentence}
    assert printed[-1] == f"REFERENCE WRONG for ffn: {sentence}"
    assert cached["native-jax"]["allowance"] == (
        "its allowance rested on native-tensorflow's float32 baseline alone "
        "(native-torch out of the vote)"
    )
    assert "allowance" not in cached["native-torch"]  # never had its own
    assert f"equivalence REFERENCE WRONG for ffn: {sentence}" in lines
    assert any(
        line.startswith("equivalence ffn: with native-torch out") for line in lines
    )
    # from the cache, it is said again
    again: list[str] = []
    gate.verify(["ffn"], paths, tmp_path, log=again.append, checker=_NotAsked())
    assert f"equivalence REFERENCE WRONG for ffn: {sentence}" in again
    assert (
        "equivalence ffn: native-jax: its allowance rested on native-tensorflow's "
        "float32 baseline alone (native-torch out of the vote)"
    ) in again


def test_a_verdicts_cache_from_before_the_reference_notes_still_reads(
    tmp_path: Path,
) -> None:
    cache = tmp_path / CACHE_NAME
    old = {"k": {**_GOOD_ENTRY, "reason": "why"}}
    cache.write_text(
        json.dumps({"schema_version": CACHE_SCHEMA_VERSION, "verdicts": old})
    )
    lines: list[str] = []
    assert _load(cache, lines.append) == old
    assert lines == []
    assert wrong_references(tmp_path, {"ffn": ["k", None, "unknown"]}) == {}
    noted = {"k": {**_GOOD_ENTRY, "reference": "x is wrong"}}
    cache.write_text(
        json.dumps({"schema_version": CACHE_SCHEMA_VERSION, "verdicts": noted})
    )
    assert wrong_references(tmp_path, {"ffn": ["k"]}) == {"ffn": "x is wrong"}
    # a note of the wrong type is no cache this code reads: never trusted,
    # and left for the gate to set aside
    broken = {"k": {**_GOOD_ENTRY, "reference": 7}}
    cache.write_text(
        json.dumps({"schema_version": CACHE_SCHEMA_VERSION, "verdicts": broken})
    )
    assert wrong_references(tmp_path, {"ffn": ["k"]}) == {}
    assert cache.exists()
    assert _load(cache, lines.append) == {}
    assert "verdicts.k.reference" in lines[0]
