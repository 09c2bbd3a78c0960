"""harness count, framework-free: callgrind's dumps read, instructions
grouped, blocks analysed, two runs compared, work set against time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.__main__ import main
from harness.cli.count import _extra
from harness.core.profiles import PROFILES
from harness.count import analysis, callgrind, compare
from harness.count.measure import count, count_run, lines

# A dump as callgrind writes it with name compression: main calls helper
# (whose inclusive cost after calls= is helper's, not main's), helper is
# recursive (helper'2), and a function of code with no object file.
DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
cmd: python t.py
part: 2
desc: Trigger: Client Request: ffn/train/b16/r0 0 native-torch

positions: line
events: Ir
summary: 1300

ob=(1) /usr/lib/libpython3.11.so.1.0
fl=(1) ???
fn=(1) main
0 100
cob=(2) /site-packages/torch/lib/libtorch_cpu.so
cfi=(1)
cfn=(2) at::native::add_kernel
calls=2 0
0 700
0 50

ob=(2)
fl=(1)
fn=(2)
0 700

ob=(3) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(1)
fn=(3) malloc
0 200
fn=(4) helper'2
0 20

ob=(4) ???
fl=(1)
fn=(5) 0x000000000badc0de
0 230

ob=(5) /x/jaxlib/libjax_common.so
fl=(1)
fn=(6) Eigen::ThreadPoolTempl<tsl::thread::EigenEnvironment>::GlobalSteal()
0 300
cob=(6) /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
cfn=(7) __tls_get_addr
calls=5 0
0 40
fn=(8) xla::Execute
0 10
cob=(6)
cfn=(7)
calls=1 0
0 8

ob=(6)
fl=(1)
fn=(7)
0 48

totals: 1658
"""


def write_dump(folder: Path, name: str, text: str = DUMP) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_dump_gives_each_function_its_own_instructions(tmp_path: Path) -> None:
    dump = callgrind.read(write_dump(tmp_path, "callgrind.out.1"))
    assert dump.label == "ffn/train/b16/r0 0 native-torch"
    assert dump.total == 1658
    python = "/usr/lib/libpython3.11.so.1.0"
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    assert dump.functions[(python, "main")] == 150  # not the call's 700
    assert (
        dump.functions[
            ("/site-packages/torch/lib/libtorch_cpu.so", "at::native::add_kernel")
        ]
        == 700
    )
    assert dump.functions[(libc, "helper")] == 20  # helper'2 is helper
    assert dump.functions[("???", callgrind.GENERATED)] == 230
    # The polling loop's own 300 and the 40 it called __tls_get_addr for are
    # spin; xla::Execute's call of it (8) is the system's.
    assert dump.groups() == {
        "interpreter": 150,
        "framework": 10,
        "system": 220 + 8,
        "kernel": 930,
        "spin": 340,
    }


def test_a_torn_or_foreign_dump_is_refused(tmp_path: Path) -> None:
    torn = DUMP.replace("0 230\n", "")
    with pytest.raises(callgrind.DumpError, match="add up to 1428"):
        callgrind.read(write_dump(tmp_path, "torn", torn))
    with pytest.raises(callgrind.DumpError, match="no callgrind dump"):
        callgrind.read(write_dump(tmp_path, "foreign", "events: Dr\ntotals: 3\n"))


@pytest.mark.parametrize(
    ("obj", "function", "expected"),
    [
        ("/x/lib/libpython3.11.so.1.0", "_PyEval_EvalFrameDefault", "interpreter"),
        ("/x/bin/python3.11", "main", "interpreter"),
        ("/x/lib/python3.11/lib-dynload/_ctypes.cpython-311.so", "f", "interpreter"),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", "malloc", "system"),
        ("/x/torch/lib/libgomp.so.1", "omp_get_max_threads", "system"),
        ("/x/torch/lib/libtorch_cpu.so", "at::native::add_kernel(x)", "kernel"),
        ("/x/torch/lib/libtorch_cpu.so", "mkl_blas_avx2_sgemm_kernel", "kernel"),
        ("/x/torch/lib/libtorch_cpu.so", "at::_ops::add_Tensor::call", "framework"),
        ("/x/jaxlib/libjax_common.so", "xla::PjRtClient::Execute", "framework"),
        (
            "/x/tensorflow/libtensorflow_framework.so.2",
            "Eigen::internal::gebp",
            "kernel",
        ),
        ("/x/mxnet/libmxnet.so", "mshadow::MapExp", "kernel"),
        ("/x/numpy/_multiarray_umath.so", "FLOAT_add", "kernel"),
        ("/x/numpy/_multiarray_umath.so", "PyArray_NewFromDescr", "framework"),
        ("???", "0x0000000004005a0", "kernel"),
        ("/x/libjax_common.so", "Eigen::RunQueue<T, 1024u>::PopBack()", "spin"),
        ("/x/torch/lib/libgomp.so.1", "gomp_team_barrier_wait_end", "spin"),
    ],
)
def test_each_function_lands_in_its_group(
    obj: str, function: str, expected: str
) -> None:
    assert callgrind.group(obj, function) == expected


def block(
    path: str,
    instructions: float,
    *,
    repeat: int = 0,
    index: int = 0,
    non_kernel: float = 0.5,
    phase: str = "train",
    functions: list[list[Any]] | None = None,
) -> dict[str, Any]:
    """A count.jsonl block line of ffn on PyTorch: ``instructions`` over 10
    steps, ``non_kernel`` of them outside kernels (split alike over the
    three non-kernel groups), and a counter of 0."""
    total = int(instructions)
    outside = int(total * non_kernel)
    return {
        "kind": "block",
        "model": "ffn",
        "framework": "torch",
        "phase": phase,
        "batch": 16,
        "repeat": repeat,
        "path": path,
        "block": index,
        "per_block": 10,
        "instructions": total,
        "counter": 0,
        "groups": {
            "interpreter": outside - 2 * (outside // 3),
            "framework": outside // 3,
            "system": outside // 3,
            "kernel": total - outside,
            "spin": 0,
        },
        "extra_loops": 0,
        "unverified": False,
        "functions": functions or [["interpreter", "libpython", "eval", outside]],
    }


def run_lines(keras: list[float], native: list[float]) -> list[dict[str, Any]]:
    """Two processes, the given per-block instructions in each (the same
    list for both processes)."""
    out: list[dict[str, Any]] = [{"kind": "host", "profile": "count", "host": {}}]
    for repeat in (0, 1):
        for i, (k, n) in enumerate(zip(keras, native, strict=True)):
            out.append(
                block(
                    "keras-torch",
                    k,
                    repeat=repeat,
                    index=i,
                    non_kernel=0.9,
                    functions=[
                        ["interpreter", "libpython", "eval", int(0.8 * k)],
                        ["framework", "libtorch_cpu.so", "dispatch", int(0.05 * k)],
                    ],
                )
            )
            out.append(block("native-torch", n, repeat=repeat, index=i))
    return out


def test_a_path_is_the_median_per_step_with_its_spreads() -> None:
    lines_ = run_lines([8_000_000, 8_100_000, 8_000_000], [2_000_000] * 3)
    lines_[-1]["instructions"] = 2_020_000  # one native block of process 1
    found = analysis.cells(lines_)
    keras, native = found["paths"]
    assert keras["path"] == "keras-torch"
    assert keras["total"] == keras["work"] == 800_000
    assert (keras["blocks"], keras["processes"]) == (6, 2)
    assert keras["work_block_spread"] == pytest.approx(0.0125)
    assert keras["work_spread"] == 0.0
    assert native["total"] == 200_000
    assert native["work_block_spread"] == pytest.approx(0.01)
    assert native["groups"]["kernel"] == 100_000


def test_a_pair_says_the_work_ratio_and_what_keras_adds() -> None:
    (pair,) = analysis.cells(run_lines([8_000_000] * 2, [2_000_000] * 2))["pairs"]
    assert pair["work_ratio"] == pytest.approx(4.0)
    # Keras: 90% of 800k outside kernels, native: 50% of 200k.
    assert pair["added_non_kernel"] == pytest.approx(720_000 - 100_000, abs=1)
    assert pair["added_kernel"] == pytest.approx(80_000 - 100_000, abs=1)
    names = [name for name, _ in pair["top_added"]]
    assert names[0] == "interpreter libpython eval"
    assert "framework libtorch_cpu.so dispatch" in names


def test_compare_flags_a_one_percent_change_and_nothing_unchanged() -> None:
    old = analysis.cells(run_lines([8_000_000, 8_004_000], [2_000_000, 2_000_500]))
    same = analysis.cells(run_lines([8_001_000, 8_003_000], [2_000_200, 2_000_300]))
    rows = compare.compare(old, same)
    assert [r["verdict"] for r in rows] == ["same", "same"]
    more = analysis.cells(run_lines([8_080_000, 8_084_000], [2_000_000, 2_000_500]))
    keras, native = compare.compare(old, more)
    assert (keras["verdict"], native["verdict"]) == ("changed", "same")
    assert keras["work_change"] == pytest.approx(0.01, rel=1e-3)
    assert keras["groups_moved"]["interpreter"] > 0
    assert keras["functions_moved"][0][0] == "interpreter libpython eval"
    text = compare.markdown([keras, native], "count-a", "count-b")
    assert "1 of 2 path counts changed" in text


def test_compare_allows_what_counts_were_seen_to_move() -> None:
    # Processes 2% apart: a 1% change is within three times that.
    noisy = run_lines([8_000_000] * 2, [2_000_000] * 2)
    for line in noisy:
        if line.get("repeat") == 1 and line.get("path") == "keras-torch":
            line["instructions"] = 8_160_000
            line["groups"]["interpreter"] += 160_000
    old = analysis.cells(noisy)
    new = analysis.cells(run_lines([8_160_000] * 2, [2_000_000] * 2))
    keras = compare.compare(old, new)[0]
    assert keras["work_allowance"] == pytest.approx(3 * 0.02, rel=0.02)
    assert keras["verdict"] == "same"
    # One process: its blocks' spread stands in for the processes'.
    row = {
        "framework": "torch",
        "processes": 1,
        "work_spread": 0.0,
        "work_block_spread": 0.004,
        "non_kernel_spread": 0.0,
        "non_kernel_block_spread": 0.0,
    }
    spreads = compare.widest([{"paths": [row]}])
    assert compare.allowance(spreads["torch", "work"]) == pytest.approx(0.012)
    assert compare.allowance(spreads["torch", "non_kernel"]) == compare.FLOOR


def test_a_cell_quiet_by_luck_gets_its_frameworks_widest_spread() -> None:
    # Keras' processes agreed exactly, native's were 1% apart: a 2% move of
    # Keras is within three times what the framework's counts were seen to
    # do, whatever Keras' own two processes happened to say.
    noisy = run_lines([8_000_000] * 2, [2_000_000] * 2)
    for line in noisy:
        if line.get("repeat") == 1 and line.get("path") == "native-torch":
            line["instructions"] = 2_020_000
            line["groups"]["interpreter"] += 20_000
    old = analysis.cells(noisy)
    new = analysis.cells(run_lines([8_160_000] * 2, [2_000_000] * 2))
    keras = compare.compare(old, new)[0]
    assert old["paths"][0]["work_spread"] == 0.0
    assert keras["work_allowance"] == pytest.approx(0.03, rel=0.02)
    assert keras["verdict"] == "same"


def test_work_against_time_adds_up_to_keras_extra_time() -> None:
    found = analysis.cells(run_lines([8_000_000] * 2, [2_000_000] * 2))
    timing = {
        ("ffn", "keras-torch", "train", 16): {
            "wall_s": 0.004,
            "user_s": 0.0032,
            "sys_s": 0.0004,
            "wait_s": 0.0004,
        },
        ("ffn", "native-torch", "train", 16): {
            "wall_s": 0.001,
            "user_s": 0.0009,
            "sys_s": 0.0001,
            "wait_s": 0.0,
        },
    }
    related = analysis.relate(found, timing)
    (split,) = related["split"]
    parts = ("instructions_s", "rate_s", "system_s", "waiting_s")
    assert sum(split[p] for p in parts) == pytest.approx(split["extra_s"])
    assert split["extra_s"] == pytest.approx(0.003)
    # 600k more instructions at native's 200k per 0.9 ms.
    assert split["instructions_s"] == pytest.approx(0.0027)
    assert split["time_ratio"] == pytest.approx(4.0)
    rates = {r["path"]: r["per_user_s"] for r in related["rates"]}
    assert rates["native-torch"] == pytest.approx(200_000 / 0.0009)
    text = analysis.markdown({**found, "time": related})
    assert "Work against time" in text
    # The answer first: Keras' work over native's, before every path's counts.
    answer = text.index("- ffn train on torch b16: Keras runs 4.00x native's")
    assert answer < text.index("## Instructions per step (callgrind)")
    assert "No timing" in analysis.markdown(
        {**found, "time": analysis.relate(found, {})}
    )


def test_a_block_line_is_its_dump_less_the_counter(tmp_path: Path) -> None:
    from workers.messages import CountAnswer

    label = "ffn/train/b16/r0 0 native-torch"
    write_dump(tmp_path, "callgrind.out.1")
    for i in range(3):
        empty = DUMP.replace(label, f"t empty {i}").replace("0 230", "0 0")
        empty = empty.replace("totals: 1658", "totals: 1428")
        write_dump(tmp_path, f"callgrind.out.{i + 2}", empty)
    answer = CountAnswer(
        paths=["native-torch"],
        per_block=10,
        labels=[[label]],
        empty=[f"t empty {i}" for i in range(3)],
        loops=[0],
        nonfinite=[None],
    )
    (line,) = lines(answer, tmp_path, {"model": "ffn"}, unverified=False)
    assert (line["instructions"], line["counter"]) == (1658 - 1428, 1428)
    assert line["groups"]["kernel"] == 930
    missing = CountAnswer(**{**answer.__dict__, "labels": [["not dumped"]]})
    with pytest.raises(ValueError, match="no dump labelled 'not dumped'"):
        lines(missing, tmp_path, {"model": "ffn"}, unverified=False)


def test_count_runs_are_told_from_records_files(tmp_path: Path) -> None:
    run = tmp_path / "count-20261125-000000"
    run.mkdir()
    (run / "count.jsonl").write_text(json.dumps({"kind": "host"}) + "\n")
    assert count_run(run) == run
    assert count_run(run / "count.jsonl") == run
    assert count_run(tmp_path / "run-1.jsonl") is None


@pytest.mark.parametrize(
    "given", ["native-torch", "native-torch:1", "native-torch:3", "nowhere:1.01"]
)
def test_inject_work_takes_a_path_and_a_factor(given: str) -> None:
    assert _extra("native-torch:1.01") == ("native-torch", 1.01)
    with pytest.raises(ValueError, match="--inject-work wants PATH:FACTOR"):
        _extra(given)


def test_extra_work_for_a_path_not_counted_is_refused(tmp_path: Path) -> None:
    # native-torch is a path, but not one of the frameworks counted: the
    # run would have added nothing and said nothing.
    with pytest.raises(ValueError, match="extra work goes to a counted path"):
        count(
            PROFILES["count"],
            models=["ffn"],
            frameworks=["jax"],
            phases=["infer"],
            results_dir=tmp_path,
            processes=1,
            blocks=1,
            extra=("native-torch", 1.01),
        )
    assert not list(tmp_path.glob("count-*"))  # refused before anything ran


@pytest.mark.parametrize(
    "damage",
    [
        {"framework": None},  # a block without its framework
        {"groups": "many"},  # a string where a table was
        {"groups": {"kernel": 5}},  # groups missing
        {"instructions": 0},  # nothing counted: no ratio to take
        {"functions": [["interpreter", "eval", 5]]},
        {"batch": "16"},
    ],
)
def test_a_count_line_the_analysis_cannot_read_is_skipped_and_named(
    tmp_path: Path, damage: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "count-20261125-000000"
    run.mkdir()
    lines = run_lines([1e6, 1e6], [2e5, 2e5])
    bad = {**block("keras-torch", 1e6, repeat=2), **damage}
    if damage.get("framework", "") is None:
        del bad["framework"]
    (run / "count.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in [*lines, bad])
    )
    assert main(["count", "--render", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "skipped 1 line of" in err
    assert "| ffn | torch | train | 16 |" in out  # the pair, from the rest
    # nothing usable: one sentence and a non-zero exit, not an empty table
    (run / "count.jsonl").write_text(json.dumps(bad) + "\n")
    assert main(["count", "--render", str(run)]) == 2
    assert "holds no count lines (1 line of another shape)" in capsys.readouterr().err


def test_a_count_run_that_ended_before_its_first_block_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "count-20261125-000000"
    run.mkdir()
    (run / "count.jsonl").write_text(json.dumps(run_lines([1.0], [1.0])[0]) + "\n")
    assert main(["count", "--render", str(run)]) == 2
    assert "holds no counted block" in capsys.readouterr().err
