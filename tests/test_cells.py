"""The unit of work: the plan (``harness plan``), one unit run alone
(``harness run-cell``), and the same units as a job array through
submitit's local executor, which needs no Slurm (``nox -s cluster`` runs
them through a real one).

Fake workers (shell scripts standing in for the torch interpreter) answer
every request, so no framework is needed; the gate's verdict keys are the
real ones, computed for that environment.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import psutil
import pytest
import submitit.core.core

import harness.bench.run
from harness.__main__ import main
from harness.bench.run import run, run_cell
from harness.bench.slurm import Slurm
from harness.core import gate, records
from harness.core.cells import (
    make_units,
    new_plan,
    read_plan,
    same_cells,
    thread_counts,
    write_plan,
)
from tests.helpers import fake_python, profile

TRAIN = '{"status": "ok", "result": {"first_step_s": 0.1, "step_s": [0.01, 0.02]}}'
ONE = ["--profile", "smoke", "--models", "ffn", "--paths", "native-torch"]


@pytest.fixture
def torch_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake torch interpreter: ready, then one training answer a line."""
    script = fake_python(tmp_path, answer=TRAIN)
    monkeypatch.setenv("HARNESS_PYTHON_TORCH", script)
    monkeypatch.setattr(
        harness.bench.run, "measure_matmul_peak", lambda **_: {"flops_per_s": 1.0}
    )
    return Path(script)


def _pass(
    results: Path, keys: dict[str, dict[str, str]], verdict: str = "pass"
) -> None:
    """The gate's cache, as if it had judged every key ``verdict``."""
    gate._save(
        results / gate.CACHE_NAME,
        {
            key: {"model": m, "path": p, "verdict": verdict, "created": "now"}
            for m, found in keys.items()
            for p, key in found.items()
        },
    )


@pytest.fixture
def passing_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """``harness run``'s gate passes every path, under the real keys."""

    def verify(models: list[str], paths: list[str], results: Path, **kw: Any) -> Any:
        keys = gate.verdict_keys(models, paths, results)
        kw["keys_out"].update(keys)
        _pass(results, keys)
        return {m: dict.fromkeys(paths, "pass") for m in models}

    monkeypatch.setattr(harness.bench.run, "verify", verify)


# --- the plan ------------------------------------------------------------------


def test_units_are_numbered_in_run_order_with_stable_seeds_and_keys() -> None:
    smoke = profile(repeats=2, max_repeats=2)
    keys = {"ffn": {"keras-torch": "k", "native-torch": "n", "native-mxnet": "m"}}
    paths = ["keras-torch", "native-torch", "native-mxnet"]
    units = make_units(smoke, ["ffn"], paths, ["train"], keys)
    assert [u.index for u in units] == [0, 1, 2, 3]
    # each round: the cells timed alone, then the Keras/native pairs
    assert [(u.paths, u.repeat) for u in units] == [
        (("native-mxnet",), 0),
        (("keras-torch", "native-torch"), 0),
        (("native-mxnet",), 1),
        (("keras-torch", "native-torch"), 1),
    ]
    pair = units[1]
    assert pair.verdict_keys == {"keras-torch": "k", "native-torch": "n"}
    name = f"ffn keras-torch|native-torch train b{pair.batch_size}"
    assert pair.name() == name
    # the seed pair processes always had: CRC-32 of seed, repeat and name
    assert pair.seed == zlib.crc32(f"{smoke.seed} 0 {name}".encode())
    assert units[3].seed != pair.seed
    assert make_units(smoke, ["ffn"], paths, ["train"], keys) == units


def test_each_round_rotates_the_order_of_the_paths() -> None:
    smoke = profile(repeats=2, paired=False)
    units = make_units(smoke, ["ffn"], ["native-torch", "native-jax"], ["train"], {})
    assert [u.paths[0] for u in units] == [
        "native-torch",
        "native-jax",
        "native-jax",
        "native-torch",
    ]
    assert all(u.verdict_keys == {u.paths[0]: None} for u in units)


def test_a_rounds_pairs_are_grouped_by_framework_in_a_rotating_order() -> None:
    smoke = profile(repeats=2, max_repeats=2)
    paths = ["keras-jax", "native-jax", "keras-torch", "native-torch"]
    units = make_units(smoke, ["ffn", "lenet"], paths, ["train", "infer"], {})
    frameworks = [(u.repeat, u.paths[0].removeprefix("keras-")) for u in units]
    # one worker per pair and repeat serves every model's cells of that pair
    assert [f for r, f in frameworks if r == 0] == ["jax"] * 4 + ["torch"] * 4
    assert [f for r, f in frameworks if r == 1] == ["torch"] * 4 + ["jax"] * 4
    assert {(u.model, u.phase) for u in units if u.paths[0] == "keras-jax"} == {
        (m, p) for m in ("ffn", "lenet") for p in ("train", "infer")
    }


def test_a_thread_sweep_plans_every_cell_at_every_count() -> None:
    assert thread_counts(profile()) == [None]
    assert thread_counts(profile(thread_counts="sweep"), cores=6) == [1, 2, 4, 6]
    assert thread_counts(profile(thread_counts="sweep"), cores=1) == [1]
    smoke = profile(thread_counts=(1, 3), paired=False)
    units = make_units(smoke, ["ffn"], ["native-torch"], ["train"], {})
    assert [u.threads for u in units] == [1, 3]
    assert units[0].name().endswith(" t1")
    assert units[0].seed != units[1].seed


def test_a_plan_survives_its_file(tmp_path: Path) -> None:
    plan = new_plan(
        "7",
        profile(repeats=2),
        models=["ffn", "lenet"],
        paths=["keras-jax", "native-jax"],
        phases=["train", "infer"],
        keys={},
    )
    write_plan(plan, tmp_path / "cells.json")
    assert read_plan(tmp_path / "cells.json") == plan
    assert read_plan(tmp_path / "cells.json").get_profile().digest() == (
        profile(repeats=2).digest()
    )


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no plan file"),
        ("{not json", "is not a plan: it is not JSON"),
        ('{"schema_version": 9}', "is a plan of schema version 9"),
        ('{"schema_version": 1, "units": 3}', "is not a plan this code reads"),
        ("edited", "no longer has the digest it was planned with"),
        ("renumbered", "unit 0 is numbered 5"),
    ],
)
def test_a_bad_plan_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, error: str
) -> None:
    file = tmp_path / "cells.json"
    if content in ("edited", "renumbered"):
        plan = new_plan(
            "7",
            profile(),
            models=["ffn"],
            paths=["native-torch"],
            phases=["train"],
            keys={},
        )
        document = json.loads(plan.model_dump_json())
        if content == "edited":  # a setting changed by hand after planning
            document["profile"]["settings"]["train_steps"] = 999
        else:
            document["units"][0]["index"] = 5
        file.write_text(json.dumps(document))
    elif content is not None:
        file.write_text(content)
    assert main(["run-cell", str(file), "0", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert error in err
    assert err.count("\n") == 1


# --- one unit, alone -------------------------------------------------------------


def _plan(tmp_path: Path, results: Path, *extra: str) -> Path:
    out = tmp_path / "cells.json"
    argv = [
        "plan",
        *ONE,
        "--phases",
        "train",
        "--results",
        str(results),
        "--out",
        str(out),
    ]
    assert main([*argv, *extra]) == 0
    return out


def test_run_cell_times_a_unit_only_under_a_passing_verdict_of_its_key(
    tmp_path: Path, torch_worker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    file = _plan(tmp_path, results)
    plan = read_plan(file)
    (unit,) = plan.units
    key = unit.verdict_keys["native-torch"]
    assert (
        key
        == gate.verdict_keys(["ffn"], ["native-torch"], results)["ffn"]["native-torch"]
    )
    argv = ["run-cell", str(file), "0", "--results", str(results)]

    assert main(argv) == 0  # the gate has not judged it
    (first,) = records.read(results / f"run-{plan.run_id}.jsonl")
    assert (first.status, first.equivalence, first.verified) == (
        "not-timed",
        "unchecked",
        False,
    )
    assert "run 'python -m harness gate' first" in (first.error or "")

    _pass(results, {"ffn": {"native-torch": key}}, "fail")
    assert main(argv) == 0
    assert records.read(results / f"run-{plan.run_id}.jsonl")[-1].status == "not-timed"

    _pass(results, {"ffn": {"native-torch": key}})
    assert main(argv) == 0
    last = records.read(results / f"run-{plan.run_id}.jsonl")[-1]
    assert (last.status, last.equivalence, last.verified, last.repeat) == (
        "ok",
        "pass",
        True,
        0,
    )
    assert last.values["step_s"] == [0.01, 0.02]
    assert last.platform["machine"]["cores"] >= 1
    assert "unit 0: ffn native-torch train" in capsys.readouterr().out


def test_run_cell_refuses_a_verdict_its_environment_would_not_give(
    tmp_path: Path, torch_worker: Path
) -> None:
    """A plan whose key is not what this environment computes (a node with
    other code or libraries) times nothing, even under a passing verdict."""
    results = tmp_path / "results"
    file = _plan(tmp_path, results)
    document = json.loads(file.read_text())
    document["units"][0]["verdict_keys"]["native-torch"] = "0" * 64
    file.write_text(json.dumps(document))
    _pass(results, {"ffn": {"native-torch": "0" * 64}})
    (record,) = run_cell(file, 0, results)
    assert (record.status, record.equivalence) == ("not-timed", "stale")
    assert "the verdict key differs" in (record.error or "")


def test_run_cell_refuses_a_unit_the_plan_has_not(
    tmp_path: Path, torch_worker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _plan(tmp_path, tmp_path)
    assert main(["run-cell", str(file), "1", "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: {file} has units 0 to 0, not 1\n"


def test_a_local_run_and_its_units_run_one_by_one_give_the_same_cells(
    tmp_path: Path, torch_worker: Path, passing_gate: None
) -> None:
    here = tmp_path / "here"
    out = run(
        profile(repeats=2, paired=False),
        models=["ffn"],
        paths=["native-torch", "keras-torch"],
        phases=["train"],
        results_dir=here,
    )
    local = records.read(out)
    plan_path = out.with_name(out.name.replace(".jsonl", ".cells.json"))
    plan = read_plan(plan_path)
    assert len(plan.units) == len(local) == 4
    # elsewhere: the same plan, unit by unit, into another results folder
    there = tmp_path / "there"
    _pass(there, {"ffn": dict(plan.units[0].verdict_keys | plan.units[1].verdict_keys)})
    for unit in plan.units:
        run_cell(plan_path, unit.index, there)
    apart = records.read(there / out.name)
    assert same_cells(local, apart) == []
    # and a difference is found: a cell missing, a cell settled otherwise
    assert same_cells(local, apart[:-1]) == [
        f"{apart[-1].model} {apart[-1].path} train b{apart[-1].batch_size} repeat 2: "
        "only in the first"
    ]
    failed = [
        *apart[:-1],
        records.Record(**{**apart[-1].__dict__, "status": "crashed"}),
    ]
    assert "('ok', 'pass', True" in same_cells(local, failed)[0]


# --- a job array, through submitit's local executor ---------------------------


def _killing(monkeypatch: pytest.MonkeyPatch, times: int) -> list[str]:
    """Kill the first submitted task's process ``times`` times, as a node
    failure would: it ends without a result."""
    killed: list[str] = []
    real = Slurm._submit

    def submit(self: Slurm, executor: Any, units: list[Any], context: Any) -> Any:
        jobs = real(self, executor, units, context)
        if len(killed) < times:
            job = next(iter(jobs))
            task = psutil.Process(job._process.pid)  # the task and all it started
            for process in [*task.children(recursive=True), task]:
                process.kill()
            killed.append(str(job.job_id))
        return jobs

    monkeypatch.setattr(Slurm, "_submit", submit)
    # submitit waits 15 s for a finished task's result file (a slow shared
    # file system); here the file system is local, as in submitit's own tests
    monkeypatch.setattr(submitit.core.core.Job, "_results_timeout_s", 1)
    return killed


def test_a_task_killed_under_the_array_is_submitted_again(
    tmp_path: Path,
    torch_worker: Path,
    passing_gate: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    killed = _killing(monkeypatch, times=1)
    executor = Slurm("local", max_parallel=2, cluster="local")
    out = run(
        profile(repeats=2, paired=False),
        models=["ffn"],
        paths=["native-torch"],
        phases=["train"],
        results_dir=tmp_path,
        executor=executor,
    )
    assert len(killed) == 1
    final = records.final(records.read(out))
    assert [
        (r.repeat, r.status, r.verified) for r in sorted(final, key=lambda r: r.repeat)
    ] == [
        (0, "ok", True),
        (1, "ok", True),
    ]
    booked = [(j["unit"], j["then"]) for j in executor.jobs]
    assert booked.count((0, "resubmitted")) == 1
    assert sorted(booked) == [(0, ""), (0, "resubmitted"), (1, "")]


def test_a_task_that_keeps_failing_is_recorded_as_an_error(
    tmp_path: Path,
    torch_worker: Path,
    passing_gate: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _killing(monkeypatch, times=1)
    out = run(
        profile(repeats=1, paired=False),
        models=["ffn"],
        paths=["native-torch"],
        phases=["train"],
        results_dir=tmp_path,
        executor=Slurm("local", attempts=1, cluster="local"),
    )
    (record,) = records.read(out)
    assert record.status == "error"
    assert "infrastructure, 1 attempts" in (record.error or "")
    counts, _ = records.outcome([record])
    assert counts == {"error": 1}
