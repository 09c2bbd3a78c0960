"""Operators through real workers: keras.ops on every backend and the
native operators agree with float64 on Hypothesis-drawn cases, a faulty
operator is found and shrunk to a small case, and ``harness ops`` times only
what agreed (a fault keeps its operator off the clock) and writes its
report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from equivalence.operators import OpChecker, search
from harness.ops.measure import operator_paths
from tests.tiers import Sizes, draws_at, full_only
from workers.launch import PROJECT_ROOT, Worker
from workers.messages import OpPrepare, OpPreparedAnswer, OpTime, OpTimeAnswer
from zoo.operators import Case, make_operands

pytestmark = pytest.mark.paths

BACKENDS = ("jax", "tensorflow", "torch")
# The operators whose Keras and native code differ most: products, the
# convolutions' layouts, the written-out cells, the loss, the update, and the
# transformer's: Keras' fused layer normalization and attention against each
# framework's own, attention's heads in two layouts, the embedding's
# gradient a scatter-add; batch normalization (Keras' torch backend takes
# the variance as E[x^2] - E[x]^2, PyTorch's F.batch_norm its own kernel).
OPERATORS = (
    "matmul",
    "conv2d",
    "conv1d",
    "max_pool",
    "layer_norm",
    "batch_norm",
    "embedding",
    "attention",
    "lstm_cell",
    "gru_cell",
    "softmax_cross_entropy",
    "adam",
)


@pytest.fixture(scope="module", params=BACKENDS)
def worker(request: pytest.FixtureRequest) -> Iterator[Worker]:
    paths = operator_paths(request.param)
    with Worker(paths[0], partner=paths[1:]) as w:
        assert w.started, w.failure
        yield w


# Each operator's drawn cases on each path: four in the full tier, the fast
# tier's share of them (tests/tiers.py), as every Hypothesis test's draws.
OPERATOR_DRAWS = draws_at(4)


@pytest.mark.parametrize("op", OPERATORS)
def test_keras_and_native_operators_agree_with_float64(worker: Worker, op: str) -> None:
    with OpChecker(worker) as checker:
        for path in (worker.path.id, *(p.id for p in worker.partners)):
            verdict = search(op, path, checker.evaluate, examples=OPERATOR_DRAWS)
            assert verdict.ok, (verdict.counterexample, verdict.why)
            assert verdict.examples >= OPERATOR_DRAWS


@pytest.mark.parametrize(
    ("fault", "op", "said"),
    [
        ("gemm-transposed", "matmul", "matmul("),
        ("conv-padding", "conv2d", "conv2d("),
        ("attention-unscaled", "attention", "attention("),
    ],
)
def test_a_faulty_operator_is_found_and_shrunk(
    worker: Worker, fault: str, op: str, said: str
) -> None:
    if worker.path.framework != "torch":
        pytest.skip("one backend is enough for the fault's search")
    with OpChecker(worker, fault=fault) as checker:
        verdict = search(op, "native-torch", checker.evaluate, examples=20)
        assert not verdict.ok
        assert verdict.counterexample is not None
        assert verdict.counterexample.startswith(said)
        # a Keras path is never faulted: the same search passes there
        assert search(op, "keras-torch", checker.evaluate, examples=5).ok


def test_a_prepared_closure_is_the_one_timed(worker: Worker, tmp_path: Path) -> None:
    if worker.path.framework != "jax":
        pytest.skip("one backend is enough for the protocol")
    case = Case("relu", (2, 33), "small")
    operands, cotangents = make_operands(case, 0)
    file = tmp_path / "operands.npz"
    from equivalence.operators import write_operands

    write_operands(file, operands, cotangents)
    paths = ["keras-jax", "native-jax"]
    prepared = worker.call(
        OpPrepare(
            op="relu",
            dims=[2, 33],
            operands=str(file),
            paths=paths,
            direction="backward",
            out=str(tmp_path / "out.npz"),
        ),
        120,
    ).answer
    assert isinstance(prepared, OpPreparedAnswer)
    timed = worker.call(
        OpTime(token=prepared.token, window_s=0.01, min_blocks=2), 120
    ).answer
    assert isinstance(timed, OpTimeAnswer)
    assert timed.paths == paths
    assert len(timed.blocks_s) >= 2
    assert all(t > 0 for row in timed.blocks_s for t in row)
    # a token that is not the latest prepare's is refused
    stale = worker.call(OpTime(token="stale", window_s=0.01), 120)
    assert stale.status == "error"
    assert "did not build" in str(stale.error)


def _ops(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "ops",
            "--profile",
            "smoke",
            "--frameworks",
            "torch",
            "--operators",
            "matmul,relu",
            "--results",
            str(tmp_path),
            *extra,
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        check=False,
    )


def _records(tmp_path: Path) -> list[dict]:
    (records,) = tmp_path.glob("ops-*/records.jsonl")
    return [json.loads(line) for line in records.read_text().splitlines()]


@pytest.mark.sized
def test_the_command_times_what_agreed_and_writes_its_report(
    tmp_path: Path, size: Sizes
) -> None:
    full_only(
        size,
        "a second harness ops run end to end, with nothing faulty (21 s); the "
        "fast tier's run below carries a fault and writes the same report",
    )
    done = _ops(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    recs = _records(tmp_path)
    assert {r["status"] for r in recs} == {"ok"}
    assert {r["path"] for r in recs} == {"keras-torch", "native-torch"}
    assert {r["phase"] for r in recs} == {"forward", "backward"}
    assert "Per-call overhead of keras.ops" in done.stdout
    (folder,) = tmp_path.glob("ops-*")
    assert (folder / "ops-matmul.png").exists()
    lines = [json.loads(x) for x in (folder / "gate.jsonl").read_text().splitlines()]
    (peak,) = [x for x in lines if x["kind"] == "peak"]
    assert peak["path"] == "native-torch"
    assert min(peak["flops_per_s"]) > 0


def test_a_faulty_operator_is_not_timed(tmp_path: Path) -> None:
    done = _ops(tmp_path, "--fault", "gemm-transposed")
    assert done.returncode == 1, done.stderr[-2000:]
    recs = _records(tmp_path)
    status = {(r["model"], r["path"]): r["status"] for r in recs}
    assert status[("matmul", "native-torch")] == "not-timed"
    assert status[("matmul", "keras-torch")] == "ok"
    assert status[("relu", "native-torch")] == "ok"  # the fault touches GEMMs only
    assert "matmul on native-torch disagrees" in done.stdout
    # what agreed is timed and reported as in a run without a fault
    assert {r["phase"] for r in recs if r["status"] == "ok"} == {"forward", "backward"}
    assert "Per-call overhead of keras.ops" in done.stdout
    (folder,) = tmp_path.glob("ops-*")
    assert (folder / "ops-relu.png").exists()
    lines = [json.loads(x) for x in (folder / "gate.jsonl").read_text().splitlines()]
    (peak,) = [x for x in lines if x["kind"] == "peak"]
    assert min(peak["flops_per_s"]) > 0


def test_a_bad_option_is_one_sentence(tmp_path: Path) -> None:
    done = _ops(tmp_path, "--fault", "nonsense")
    assert done.returncode == 2
    assert "unknown operator fault 'nonsense'" in done.stderr
    assert "Traceback" not in done.stderr
