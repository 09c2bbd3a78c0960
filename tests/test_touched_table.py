"""The table of what a session touched (``tests/touched.py``): a request
noted by its path, mode, model family, layer kinds, fault and task; an
untouched entry of every kind named.  The session's own table is held
against the registries by ``tests/paths/test_touched.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import touched
from workers import serve
from workers.messages import Evaluate, Paired
from workers.paths import get_path


def test_an_untouched_entry_of_every_kind_is_named() -> None:
    everything = touched.registry()
    for kind in ("paths", "modes", "families", "kinds", "options", "faults", "tasks"):
        table = touched.registry()
        dropped = sorted(getattr(table, kind))[0]
        getattr(table, kind).discard(dropped)
        assert touched.missing(table, lambda entry: None) == {kind: [dropped]}
    assert touched.missing(everything, lambda entry: None) == {}


def test_a_request_is_noted_by_its_path_model_and_fault() -> None:
    table = touched.Table()
    request = {"task": "evaluate", "model": "lenet", "fault": "missing-bias"}
    table.note(["native-jax@layerjit"], request)
    assert table.paths == {"native-jax@layerjit"}
    assert table.modes == {"native-jax in layerjit"}
    assert table.families == {"lenet"}
    assert table.kinds == {"conv2d", "avg_pool", "flatten", "dense"}
    assert "conv2d padding='valid'" in table.options
    assert "conv2d strides='set'" not in table.options
    assert table.faults == {"missing-bias", "a forward fault in native-jax@layerjit"}
    assert table.tasks == {"evaluate"}
    # the narrow VGG16 counts for VGG16's family
    table.note(["native-torch"], {"task": "evaluate", "model": "vgg16-narrow"})
    assert "vgg16" in table.families
    assert "max_pool" in table.kinds
    # the option variants' settings
    table.note(["native-torch"], {"task": "evaluate", "model": "strided-cnn"})
    assert {"conv2d strides='set'", "max_pool padding='same'"} <= table.options


def test_a_worker_logs_each_request_and_the_references_do_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv(serve.REQUEST_LOG_ENV, str(log))
    evaluate = Evaluate(
        model="ffn", weights="w", data="d", out="o", fault="missing-bias"
    )
    serve.log_request(evaluate, get_path("native-torch"), [])
    partner = serve.Served(get_path("keras-torch"), None)  # type: ignore[arg-type]
    paired = Paired(
        model="lstm",
        weights="w",
        data="d",
        phase="train",
        steps=1,
        window_s=0,
        min_blocks=1,
        max_blocks=1,
        seed=0,
    )
    serve.log_request(paired, get_path("native-torch"), [partner])
    monkeypatch.setenv("HARNESS_NATIVE_DTYPE", "float64")  # a reference worker
    serve.log_request(
        Evaluate(model="vgg16", weights="w", data="d", out="o"),
        get_path("native-jax"),
        [],
    )
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["paths"] for line in lines] == [
        ["native-torch"],
        ["native-torch", "keras-torch"],
        ["native-jax"],
    ]
    table = touched.read(log)
    assert table.paths == {"native-torch", "keras-torch"}
    assert table.families == {"ffn", "lstm"}  # not the reference's vgg16
    assert table.faults == {"missing-bias", "a forward fault in native-torch"}
    assert table.tasks == {"evaluate", "paired"}
    assert touched.read(tmp_path / "absent.jsonl") == touched.Table()


class _Config:
    """What ``touched.whole_suite`` reads of a pytest config."""

    def __init__(self, args: list[str], keyword: str = "", lf: bool = False) -> None:
        self.args = args
        self.options = {"keyword": keyword, "markexpr": "", "lf": lf}

    def getoption(self, name: str, default: object = "") -> object:
        return self.options.get(name, default)


def test_only_the_whole_suite_holds_the_table() -> None:
    tests = touched.TESTS
    every = sorted(tests.rglob("test_*.py"))
    assert touched.whole_suite(_Config([str(tests)]), every) is None
    assert touched.whole_suite(_Config([str(tests)]), None) is None
    assert touched.whole_suite(_Config([str(tests.parent)]), None) is None
    # a module left out, a module or a test chosen, a -k
    assert "1 test modules not run" in str(
        touched.whole_suite(_Config([str(tests)]), every[1:])
    )
    chosen = f"{every[0]}::test_x"
    assert "chosen by path" in str(touched.whole_suite(_Config([chosen]), None))
    assert "-k or -m" in str(touched.whole_suite(_Config([str(tests)], "x"), every))
    assert "--lf" in str(touched.whole_suite(_Config([str(tests)], lf=True), None))


def test_a_path_noted_unavailable_is_read_back_beside_the_log(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    assert touched.read_unavailable(log) == {}
    touched.note_unavailable(log, "native-mxnet", "mxnet is not installed")
    touched.note_unavailable(log, "native-mxnet-hybrid", "mxnet is not installed")
    assert touched.read_unavailable(log) == {
        "native-mxnet": "mxnet is not installed",
        "native-mxnet-hybrid": "mxnet is not installed",
    }
    assert not log.exists()  # beside the log, not in it
