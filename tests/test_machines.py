"""Machine identity and the report across machines, on synthetic records of two
machines (no framework): a 2-core CPU box ``cpu-a`` and a GPU node ``gpu-b``."""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import socket
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.core import machines, records
from harness.report.analysis import cell_rows, cells
from harness.report.tables import report
from tests.helpers import record
from workers.paths import get_path

CPU_A: dict[str, object] = {
    "name": "cpu-a",
    "hostname": "box.example.org",
    "cpu_model": "AMD EPYC",
    "cpu": "AuthenticAMD family 25 model 1 stepping 1",
    "cpu_isa": "avx avx2 fma",
    "cores": 2,
    "memory_gb": 8.0,
    "accelerator": "none",
}
GPU_B: dict[str, object] = {
    "name": "gpu-b",
    "hostname": "node1",
    "cpu_model": "Intel Xeon",
    "cores": 16,
    "memory_gb": 128.0,
    "accelerator": "NVIDIA H200 (143771 MiB)",
}
# Per machine, (path, phase) -> the three samples of its three repeats, in s.
TIMES = {
    "cpu-a": {
        ("keras-torch", "train"): (0.0030, 0.0031, 0.0029),
        ("native-torch", "train"): (0.0020, 0.0021, 0.0019),
        ("native-jax", "train"): (0.0040, 0.0041, 0.0039),
    },
    "gpu-b": {
        ("keras-torch", "train"): (0.0015, 0.0016, 0.0014),
        ("native-torch", "train"): (0.0005, 0.0006, 0.0004),
        ("keras-torch", "infer"): (0.0010, 0.0011, 0.0009),
    },
}


def _platform(
    machine: dict[str, object], framework: str = "torch"
) -> dict[str, object]:
    """What a run on ``machine`` writes under ``platform``."""
    return {
        "machine": dict(machine),
        "hostname": machine["hostname"],
        "git_revision": "abc",
        "framework_version": {"torch": "2.13.0", "jax": "0.10.2"}[framework],
    }


def _machine_records(machine: dict[str, object]) -> list[records.Record]:
    times = TIMES[str(machine["name"])]
    return [  # one repeat of a lenet cell at batch 8, measured on ``machine``
        record(
            path,
            phase,
            seconds=sample,
            repeat=repeat,
            model="lenet",
            run_id=f"run-{machine['name']}",
            platform=_platform(machine, get_path(path).framework),
        )
        for (path, phase), samples in times.items()
        for repeat, sample in enumerate(samples)
    ]


def _write(out: Path, recs: list[records.Record]) -> Path:
    for r in recs:
        records.append(out, r)
    return out


@pytest.fixture
def result_sets(tmp_path: Path) -> tuple[Path, Path]:
    """A results folder of ``cpu-a`` and a records file of ``gpu-b``."""
    folder = tmp_path / "results-a"
    _write(folder / "run-20260101-000000.jsonl", _machine_records(CPU_A)[:1])
    _write(folder / "run-20260102-000000.jsonl", _machine_records(CPU_A))  # newest
    return folder, _write(tmp_path / "run-b.jsonl", _machine_records(GPU_B))


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["report", *argv, "--format", "json"]) == 0
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return rows


# identity


def test_identity_is_named_by_harness_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_MACHINE", "h200-node.v2")
    found = machines.identity({"torch": "2.13.0"})
    assert found["name"] == "h200-node.v2"
    assert found["hostname"] == socket.gethostname()
    assert found["cores"] >= 1
    assert found["memory_gb"] > 0
    assert found["libraries"] == {"torch": "2.13.0"}
    assert {"cpu_model", "cpu", "cpu_isa", "accelerator", "os", "python"} <= set(found)
    assert records.host_platform()["machine"]["name"] == "h200-node.v2"
    monkeypatch.delenv("HARNESS_MACHINE")
    found = machines.identity()
    assert found["name"] == machines.short_hostname(socket.gethostname())
    assert "libraries" not in found


@pytest.mark.parametrize(
    "bad", ["", "two words", "x" * 65, "node/7", "..", "nöde"], ids=repr
)
def test_a_bad_machine_name_is_refused_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("HARNESS_MACHINE", bad)
    with pytest.raises(ValueError, match="is no machine name") as caught:
        machines.identity()
    assert "\n" not in str(caught.value)
    monkeypatch.setenv("HARNESS_MACHINE", "x" * 64)  # the longest allowed
    assert machines.identity()["name"] == "x" * 64


def test_the_accelerator_is_none_without_a_working_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert machines.accelerator() == "none"  # no nvidia-smi at all
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771 MiB'\n" * 2)
    smi.chmod(0o755)
    assert machines.accelerator() == "2x NVIDIA H200 (143771 MiB)"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    assert machines.accelerator() == "none"  # installed, but no driver


# Two CPUs that both call themselves "AMD EPYC": /proc/cpuinfo of each (the
# first processor's block, shortened; a second block must not be read).
EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 49
model name\t: AMD EPYC
stepping\t: 0
flags\t\t: fpu sse2 avx fma avx2 sha_ni

processor\t: 1
vendor_id\t: GenuineIntel
"""
EPYC_AVX512 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16
"""


def test_the_cpu_is_told_apart_by_family_model_and_instruction_sets() -> None:
    assert machines.cpu_details(EPYC_AVX2) == {
        "cpu": "AuthenticAMD family 23 model 49 stepping 0",
        "cpu_isa": "avx avx2 fma",
    }
    assert machines.cpu_details(EPYC_AVX512) == {
        "cpu": "AuthenticAMD family 25 model 17 stepping 1",
        "cpu_isa": "avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16",
    }
    assert machines.cpu_details("") == {"cpu": "unknown", "cpu_isa": "unknown"}
    old_cpu = EPYC_AVX2.replace(" avx fma avx2", "")
    assert machines.cpu_details(old_cpu)["cpu_isa"] == "none"


def test_two_hosts_of_one_cpu_name_but_other_instruction_sets_do_not_pool() -> None:
    """The deliberate mistake: the same name and CPU model on both hosts (as
    two sessions' "AMD EPYC" VMs here), one with AVX-512 and one without."""

    def cell(machine: dict[str, object]) -> list[records.Record]:
        run = f"run-{machine['cpu']}"  # one run per host
        return [
            dataclasses.replace(r, run_id=run)
            for r in _machine_records(machine)
            if (r.path, r.phase) == ("keras-torch", "train")
        ]

    avx2 = {**CPU_A, **machines.cpu_details(EPYC_AVX2)}
    avx512 = {**CPU_A, **machines.cpu_details(EPYC_AVX512)}
    assert records.pooling_conflict([*cell(avx512), *cell(avx512)]) is None
    both = [*cell(avx2), *cell(avx512)]
    conflict = records.pooling_conflict(both) or ""
    assert conflict.startswith("platform.machine.cpu ("), conflict
    with pytest.raises(ValueError, match=r"refusing to pool.*platform\.machine\.cpu "):
        cells(both)
    # the same CPU with instruction sets switched off (a VM's CPU model)
    masked = {**avx512, "cpu_isa": avx2["cpu_isa"]}
    conflict = records.pooling_conflict([*cell(avx512), *cell(masked)]) or ""
    assert conflict.startswith("platform.machine.cpu_isa ("), conflict


def test_older_records_are_named_by_their_hostname() -> None:
    old = record(platform={"hostname": "node7.cluster.example.org"})
    assert machines.name_of(old) == "node7"
    assert machines.name_of(dataclasses.replace(old, platform={})) == "unknown"
    assert machines.name_of(record(platform=_platform(GPU_B))) == "gpu-b"
    assert records.environment(old)["platform.machine.name"] == "node7"


# pooling


def test_nodes_of_one_machine_type_pool_and_two_machines_do_not() -> None:
    node1 = _machine_records(GPU_B)
    node2 = [
        dataclasses.replace(
            r,
            run_id="run-node2",
            platform={**r.platform, "machine": {**GPU_B, "hostname": "node2"}},
        )
        for r in node1
    ]
    assert records.pooling_conflict([*node1, *node2]) is None
    pooled = cells([*node1, *node2])[("lenet", "keras-torch", "train", 8)]
    assert pooled.summary is not None
    assert pooled.summary.n == 6
    both = [*node1, *_machine_records(CPU_A)]
    assert "platform.machine.name ('gpu-b' vs 'cpu-a')" in (
        records.pooling_conflict(both) or ""
    )
    with pytest.raises(ValueError, match="refusing to pool"):
        cells(both)


def test_a_file_of_two_machines_is_reported_per_machine(tmp_path: Path) -> None:
    mixed = _write(
        tmp_path / "run-1.jsonl", _machine_records(CPU_A) + _machine_records(GPU_B)
    )
    text = report(mixed, "table", "overhead")
    assert "machine cpu-a\n=============" in text
    assert "machine gpu-b\n=============" in text
    assert text.index("machine gpu-b") < text.index("cells side by side")
    assert "gpu-b/cpu-a" in text
    markdown = report(mixed, "markdown", "overhead")
    assert "# machine cpu-a" in markdown
    rows = json.loads(report(mixed, "json", "cells"))
    assert {(r["machine"], r["path"], r["phase"]) for r in rows} == {
        (name, path, phase) for name, times in TIMES.items() for path, phase in times
    }
    # One machine: the report as it always was, without machine headings.
    alone = _write(tmp_path / "run-2.jsonl", _machine_records(CPU_A))
    text = report(alone, "table", "overhead")
    assert "machine cpu-a\n" not in text
    assert "side by side" not in text
    assert json.loads(report(alone, "json", "cells")) == cell_rows(
        _machine_records(CPU_A)
    )


def test_plots_of_several_machines_go_to_a_folder_each(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    mixed = _write(
        tmp_path / "run-1.jsonl", _machine_records(CPU_A) + _machine_records(GPU_B)
    )
    assert main(["report", str(mixed), "--plots", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "machine-cpu-a" / "train_step.png").is_file()
    assert (tmp_path / "plots" / "machine-gpu-b" / "train_step.png").is_file()
    assert "# machine gpu-b" in (tmp_path / "plots" / "report.md").read_text()


# report --machines


def test_machines_side_by_side_cells(
    result_sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, file_b = result_sets
    rows = _json(capsys, "--machines", str(folder), str(file_b), "--table", "cells")
    by_cell = {(r["path"], r["phase"]): r for r in rows}
    keras = by_cell["keras-torch", "train"]
    assert (keras["cpu-a_ms"], keras["gpu-b_ms"], keras["gpu-b/cpu-a"]) == (
        3.0,
        1.5,
        0.5,
    )
    native = by_cell["native-torch", "train"]
    assert (native["cpu-a_ms"], native["gpu-b_ms"], native["gpu-b/cpu-a"]) == (
        2.0,
        0.5,
        0.25,
    )
    # each machine's CI is the one its own cell row gives
    (own,) = [
        r
        for r in cell_rows(_machine_records(GPU_B))
        if (r["path"], r["phase"]) == ("keras-torch", "train")
    ]
    assert (keras["gpu-b_ci_low_ms"], keras["gpu-b_ci_high_ms"]) == (
        own["ci_low_ms"],
        own["ci_high_ms"],
    )
    assert keras["cpu-a_ci_low_ms"] <= 3.0 <= keras["cpu-a_ci_high_ms"]
    # a cell one machine lacks has no time there and no ratio
    only_a, only_b = by_cell["native-jax", "train"], by_cell["keras-torch", "infer"]
    assert (only_a["cpu-a_ms"], only_a["gpu-b_ms"], only_a["gpu-b/cpu-a"]) == (
        4.0,
        None,
        None,
    )
    assert (only_b["cpu-a_ms"], only_b["gpu-b_ms"], only_b["gpu-b/cpu-a"]) == (
        None,
        1.0,
        None,
    )


def test_machines_overhead_and_machines_tables(
    result_sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, file_b = result_sets
    (torch_train,) = [
        r
        for r in _json(capsys, "--machines", str(folder), str(file_b))
        if (r["framework"], r["phase"]) == ("torch", "train")
    ]
    assert (torch_train["cpu-a_overhead"], torch_train["gpu-b_overhead"]) == (1.5, 3.0)
    table = _json(capsys, "--machines", str(folder), str(file_b), "--table", "machines")
    assert table == [
        {
            "machine": "cpu-a",
            "cpu_model": "AMD EPYC",
            "cpu": "AuthenticAMD family 25 model 1 stepping 1",
            "cpu_isa": "avx avx2 fma",
            "cores": 2,
            "memory_gb": 8.0,
            "accelerator": "none",
            "frameworks": "jax 0.10.2, torch 2.13.0",
        },
        {
            "machine": "gpu-b",
            "cpu_model": "Intel Xeon",
            "cpu": None,
            "cpu_isa": None,
            "cores": 16,
            "memory_gb": 128.0,
            "accelerator": "NVIDIA H200 (143771 MiB)",
            "frameworks": "torch 2.13.0",
        },
    ]


def test_machines_text_shows_a_dash_where_a_machine_has_no_time(
    result_sets: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, file_b = result_sets
    assert main(["report", "--machines", str(folder), str(file_b)]) == 0
    text = capsys.readouterr().out
    assert "run-20260102-000000.jsonl" in text  # the folder's newest run
    (jax_line,) = [line for line in text.splitlines() if "native-jax" in line]
    assert jax_line.split()[:6] == ["lenet", "native-jax", "train", "8", "4", "3.9–4.1"]
    assert jax_line.split()[6:] == ["-", "-", "-"]
    assert "NVIDIA H200 (143771 MiB)" in text
    argv = ["report", "--machines", str(folder), str(file_b), "--format", "csv"]
    assert main(argv) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    overhead = {(r["framework"], r["phase"]): r["gpu-b_overhead"] for r in rows}
    assert overhead == {("torch", "train"): "3.0"}  # the only ratio measured


def test_machines_errors_are_one_sentence(
    result_sets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, file_b = result_sets
    (tmp_path / "empty").mkdir()
    for argv, said in [
        ([str(tmp_path / "gone"), str(file_b)], "gone does not exist; give a records"),
        ([str(tmp_path / "empty"), str(file_b)], "empty holds no run-*.jsonl"),
        (
            [str(folder), str(folder / "run-20260101-000000.jsonl")],
            "--machines found one machine (cpu-a) in ",
        ),
        ([str(folder), str(file_b), "--compare", "a", "b"], "takes its result sets"),
    ]:
        assert main(["report", "--machines", *argv]) == 2
        err = capsys.readouterr().err
        assert said in err
        assert err.startswith("error: ")
        assert err.count("\n") == 1


def test_two_machines_claiming_one_name_are_refused(
    result_sets: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The deliberate mistake: a second result set named cpu-a, but another
    CPU.  Its samples must not be pooled with cpu-a's."""
    folder, _ = result_sets
    impostor = {**CPU_A, "hostname": "other", "cpu_model": "Intel Xeon"}
    recs = [
        dataclasses.replace(r, run_id="run-impostor")
        for r in _machine_records(impostor)
    ]
    claimed = _write(tmp_path / "run-impostor.jsonl", recs)
    assert main(["report", "--machines", str(folder), str(claimed)]) == 2
    err = capsys.readouterr().err
    assert "refusing to pool the records of lenet keras-torch train b8" in err
    assert "platform.machine.cpu_model ('AMD EPYC' vs 'Intel Xeon')" in err
    assert "different HARNESS_MACHINE names" in err


def test_machines_does_not_import_records() -> None:
    # records imports machines (a record's identity); the other way round
    # would be a circle, so machines reads records through a protocol.
    tree = ast.parse(Path(machines.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {m for m in imported if m and m.startswith("harness")}
