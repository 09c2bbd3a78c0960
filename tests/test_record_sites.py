"""Every place that writes a record (run, a failed Slurm unit, ops, floors)
writes the fields and values it always did, driven here without a framework:
each record is compared with one spelled out field by field."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.bench import floors
from harness.bench.measure import Measuring, _held_back_because
from harness.bench.slurm import failed_unit
from harness.core import placement, records
from harness.core.cells import Cell, new_plan
from harness.core.placement import of_profile
from harness.core.profiles import get_profile
from harness.ops.measure import _Run, get_ops_profile
from workers.launch import Reply
from workers.messages import FloorAnswer, TrainAnswer, encode
from zoo.models import get_spec
from zoo.operators import Case

HOST = {"hostname": "box", "cpu_model": "test cpu", "machine": {"name": "box"}}
WORKER = {"framework_version": "9.9", "device": "cpu"}
STEP = TrainAnswer(first_step_s=0.5, step_s=[0.002, 0.003, 0.004])


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(records, "host_platform", lambda: dict(HOST))
    monkeypatch.setattr(placement, "usable", lambda: [0, 1, 2, 3])
    return HOST


def _plan() -> Any:
    return new_plan(
        "7",
        get_profile("smoke"),
        models=["ffn"],
        paths=["native-torch"],
        phases=["train"],
        keys={},
    )


def test_a_run_record_is_what_it_was(tmp_path: Path, host: dict[str, Any]) -> None:
    plan = _plan()
    profile = plan.get_profile()
    out = tmp_path / "run-7.jsonl"
    measuring = Measuring(plan, profile, out, tmp_path / "cache", dict(host))
    cell = Cell("ffn", "native-torch", "train", 8)
    written = measuring.held_back(cell, 2, "fail")
    want = records.Record(
        run_id="7",
        profile=profile.name,
        profile_digest=profile.digest(),
        model="ffn",
        path="native-torch",
        framework="torch",
        api="native",
        phase="train",
        status="not-timed",
        batch_size=8,
        equivalence="fail",
        verified=False,
        repeat=2,
        platform={**host, "threads": of_profile(profile).record()},
        settings={},
        error=_held_back_because("fail"),
    )
    assert written == want
    assert records.read(out) == [want]
    # A thread sweep's cell: the count is in its settings and its threads.
    swept = measuring.held_back(Cell("ffn", "keras-jax", "infer", 4, 3), 0, "pass")
    assert (swept.framework, swept.api, swept.settings) == (
        "jax",
        "keras",
        {"threads": 3},
    )
    assert swept.platform == {**host, "threads": of_profile(profile, 3).record()}


def test_a_failed_slurm_unit_record_is_what_it_was(tmp_path: Path) -> None:
    plan = _plan()
    profile = plan.get_profile()
    out = tmp_path / "run-7.jsonl"
    failed_unit(plan, plan.units[0], "Slurm job 1 ended FAILED", out)
    (found,) = records.read(out)
    assert found == records.Record(
        run_id="7",
        profile=profile.name,
        profile_digest=profile.digest(),
        model="ffn",
        path="native-torch",
        framework="torch",
        api="native",
        phase="train",
        status="error",
        batch_size=plan.units[0].batch_size,
        equivalence="unknown",
        repeat=0,
        settings={},
        error="Slurm job 1 ended FAILED",
    )


def test_an_ops_record_is_what_it_was(tmp_path: Path, host: dict[str, Any]) -> None:
    profile = get_ops_profile("smoke")
    case = Case("relu", (4, 16), "elements-64")
    where = placement.place({"intra_op": 1, "inter_op": 1})
    threads = {k: v for k, v in where.record().items() if k != "env"}
    run = _Run(
        profile,
        tmp_path,
        [case],
        peak={"flops_per_s": 1e9},
        where=where,
        fault=None,
        log=print,
    )
    run.records.platforms = {"native-jax": dict(WORKER)}
    run.records.write(case, "forward", "native-jax", 1, "not-timed", error="no search")
    values = {"block_s": [1e-5, 2e-5]}
    run.records.write(
        case,
        "forward",
        "keras-jax",
        0,
        "ok",
        equivalence="pass",
        values=values,
        summary={"median_call_s": 2e-5},
    )
    held, timed = records.read(tmp_path / "records.jsonl")
    settings = {
        "case": "elements-64",
        "dims": case.named,
        "window_s": profile.window_s,
        "block_s": profile.block_s,
        "min_blocks": profile.min_blocks,
        "fault": None,
    }
    common = {
        "run_id": tmp_path.name,
        "profile": "ops-smoke",
        "model": "relu",
        "framework": "jax",
        "phase": "forward",
        "batch_size": 4,
        "settings": settings,
    }
    assert held == records.Record(
        **common,
        path="native-jax",
        api="native",
        status="not-timed",
        equivalence="unavailable",
        verified=False,
        repeat=1,
        platform={
            **host,
            **WORKER,
            "matmul_peak_flops": 1e9,
            "threads": threads,
        },
        error="no search",
    )
    assert timed == records.Record(
        **common,
        path="keras-jax",
        api="keras",
        status="ok",
        equivalence="pass",
        verified=True,
        repeat=0,
        values=values,
        summary={"median_call_s": 2e-5},
        platform={**host, "matmul_peak_flops": 1e9, "threads": threads},
    )


class _Worker:
    """A native worker that answers a floor request without a framework."""

    platform = WORKER

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, request: Any, timeout: float) -> Reply:
        if request.model == "lenet":
            return Reply("crashed", error="gone")
        return Reply("ok", answer=FloorAnswer(path=STEP, idiomatic=STEP))


def test_a_floors_record_is_what_it_was(
    tmp_path: Path, host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(floors, "Worker", _Worker)
    monkeypatch.setattr(floors, "weights_file", lambda *a: Path("weights.npz"))
    monkeypatch.setattr(floors, "batches_file", lambda *a: Path("batches.npz"))
    profile = get_profile("smoke")
    out, _ = floors.floors(
        profile,
        models=["ffn", "lenet"],
        frameworks=["torch"],
        results_dir=tmp_path,
        runs=3,
    )
    found = records.read(out)
    assert [(r.path, r.api, r.status) for r in found] == [
        ("native-torch", "path", "ok"),
        ("idiomatic-torch", "idiomatic", "ok"),
        ("native-torch", "path", "crashed"),
        ("idiomatic-torch", "idiomatic", "crashed"),
    ]
    steps = profile.settings("ffn").train_steps
    assert found[0] == records.Record(
        run_id=out.stem.removeprefix("floors-"),
        profile=profile.name,
        model="ffn",
        path="native-torch",
        framework="torch",
        api="path",
        phase="train",
        status="ok",
        batch_size=profile.settings("ffn").batch_size
        or get_spec("ffn").workload.batch_size,
        equivalence="not checked",
        values=encode(STEP),
        summary={"median_step_s": 0.003},
        settings={"steps": steps, "runs": 3},
        platform={**host, **WORKER},
    )
    assert dataclasses.replace(found[3], error=None) == records.Record(
        run_id=found[0].run_id,
        profile=profile.name,
        model="lenet",
        path="idiomatic-torch",
        framework="torch",
        api="idiomatic",
        phase="train",
        status="crashed",
        batch_size=found[3].batch_size,
        equivalence="not checked",
        settings={"steps": profile.settings("lenet").train_steps, "runs": 3},
        platform={**host, **WORKER},
    )
    assert found[3].error == "gone"
