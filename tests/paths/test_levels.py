"""The levels of ``harness explain`` through real workers: each Keras level
is a path the gate checks (timed closures included, a fault in one caught),
one worker serves all four levels of a framework and times and profiles
them in alternation, and the command writes its tables and plot."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from equivalence.check import Checker
from harness.core.gate import checked_batches, checked_weights, verify
from workers.launch import PROJECT_ROOT, Worker
from workers.messages import Levels, LevelsAnswer, Profile, ProfileAnswer
from workers.paths import LEVEL_PATHS, LEVELS, levels_of
from zoo.models import get_spec

pytestmark = pytest.mark.paths

# Every level path passes the gate; the faults go into PyTorch's.
LEVEL_IDS = list(LEVEL_PATHS)
TORCH_LEVELS = ["keras-torch-resident", "keras-torch-step"]


def test_every_keras_backend_has_every_level() -> None:
    for framework in ("jax", "tensorflow", "torch"):
        paths = levels_of(framework)
        assert paths[0] == f"keras-{framework}"
        assert paths[-1] == f"native-{framework}"
        assert [LEVEL_PATHS[p].level for p in paths[1:-1]] == ["resident", "step"]
    assert set(LEVELS) == {"fit", "resident", "step"}


@pytest.fixture(scope="module")
def level_checker(checker: Checker) -> Checker:
    with Checker(LEVEL_IDS, references_from=checker) as c:
        yield c


def _gate(
    checker: Checker,
    results: Path,
    faults: dict[str, str] | None = None,
    paths: list[str] = LEVEL_IDS,
) -> tuple[dict[str, str], list[str]]:
    lines: list[str] = []
    verdicts = verify(
        ["ffn"], paths, results, log=lines.append, faults=faults, checker=checker
    )
    return verdicts["ffn"], lines


def test_the_levels_pass_the_gate_like_any_path(
    level_checker: Checker, verdicts: Path
) -> None:
    passed, lines = _gate(level_checker, verdicts)
    assert passed == dict.fromkeys(LEVEL_IDS, "pass"), lines


def test_a_fault_in_a_levels_timed_closure_fails_it_at_the_gate(
    level_checker: Checker, tmp_path: Path
) -> None:
    faults = {
        "keras-torch-step": "timed-train-lr",
        "keras-torch-resident": "timed-infer-bfloat16",
    }
    verdicts, lines = _gate(level_checker, tmp_path, faults, TORCH_LEVELS)
    assert verdicts == dict.fromkeys(TORCH_LEVELS, "fail"), lines
    said = " ".join(lines)
    assert "keras-torch-step fail: the timed trainer's parameter" in said
    assert "keras-torch-resident fail: the timed predictor's logits" in said


def test_one_worker_times_and_profiles_every_level(tmp_path: Path) -> None:
    spec = get_spec("ffn")
    weights, weights_digest = checked_weights(spec, 0, tmp_path)
    data, data_digest = checked_batches(spec, 1, 8, 3, tmp_path)
    files = {
        "model": "ffn",
        "weights": str(weights),
        "weights_digest": weights_digest,
        "data": str(data),
        "data_digest": data_digest,
    }
    paths = levels_of("torch")
    with Worker(paths[0], start_timeout=120, partner=paths[1:]) as worker:
        assert worker.failure is None, worker.failure
        assert [p["keras_level"] for p in worker.partner_platforms[:2]] == [
            "resident",
            "step",
        ]
        for phase in ("train", "infer"):
            reply = worker.call(
                Levels(
                    **files,
                    phase=phase,
                    steps=2,
                    window_s=0,
                    min_blocks=3,
                    max_blocks=3,
                    seed=1,
                ),
                timeout=300,
            )
            answer = reply.answer
            assert isinstance(answer, LevelsAnswer), reply.error
            assert answer.paths == paths
            assert len(answer.blocks_s) == 3
            assert all(len(row) == 4 and min(row) > 0 for row in answer.blocks_s)
            assert answer.nonfinite == [None] * 4
        reply = worker.call(
            Profile(**files, targets=paths, phase="train", steps=2, rounds=2),
            timeout=300,
        )
    answer = reply.answer
    assert isinstance(answer, ProfileAnswer), reply.error
    assert answer.paths == paths
    assert answer.profiler.startswith("torch.autograd.profiler")
    for r in range(2):
        for k in range(4):
            assert 0 < answer.kernel_s[r][k] <= answer.wall_s[r][k]
    # Every level's matrix products are seen, with calls.  Not their rank:
    # the order is by time, which a busy machine reshuffles (a CI run saw
    # them fall out of the first three once).
    for names, calls in zip(answer.op_names, answer.op_calls, strict=True):
        assert "aten::mm" in names
        assert calls[names.index("aten::mm")] > 0


def test_explain_writes_its_tables_and_plot(gated: Path) -> None:
    # the levels' verdicts are the session's (test above), so explain's gate
    # finds them cached
    tmp_path = gated
    command = [
        sys.executable,
        "-m",
        "harness",
        "explain",
        "--profile",
        "smoke",
        "--models",
        "ffn",
        "--frameworks",
        "torch",
        "--phases",
        "train",
        "--processes",
        "2",
        "--batch-sizes",
        "8",  # and the profile's own batch size (ffn: 128)
        "--results",
        str(tmp_path),
    ]
    done = subprocess.run(
        command, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = tmp_path.glob("explain-*")
    cells = json.loads((run / "explain.json").read_text())["cells"]
    (cell,) = cells
    assert cell["paths"] == levels_of("torch")
    timed = {"native", "layers and optimizer", "fit loop", "input conversion"}
    # Extra kernels are split out unless the profiler slowed the step or
    # native level by more than 1.5x (a busy machine can), which it says.
    profiled = {"extra kernels"} if "distorted" not in cell["profile"] else set()
    assert set(cell["parts"]) == timed | profiled, cell["profile"].get("distorted")
    assert {"keras-torch", "native-torch", "one_sided"} <= set(cell["profile"])
    assert cell["processes"] == 2
    assert cell["sweep"]["batches"] == [8, 128]
    assert "### ffn train on torch" in done.stdout
    assert (run / "explain-ffn-torch.png").stat().st_size > 0
    # Progress: the timed requests, then the profiled ones.
    assert re.search(r"^\[1/4 .*\] explain ffn torch train b", done.stderr, re.M)
    assert re.search(r"^\[1/1 .*\] explain ffn torch train profiled", done.stderr, re.M)


def test_explain_refuses_bad_options_in_one_line(tmp_path: Path) -> None:
    for bad, said in (
        (["--frameworks", "cntk"], "unknown framework cntk"),
        (["--batch-sizes", "4,x"], "--batch-sizes takes integers"),
        (["--batch-sizes", "4,4"], "names a batch size twice"),
        (["--processes", "0"], "--processes must be"),
        (["--render", str(tmp_path)], "holds no explain.jsonl"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "harness", "explain", *bad],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert said in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
