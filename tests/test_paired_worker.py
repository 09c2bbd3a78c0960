"""Paired measurement: one worker holds a Keras path and its native path and
alternates timed blocks of both (``workers.timing.time_paired``,
``workers.messages.Paired``, ``Worker(..., partner=...)``).

The timing loop is checked with fake closures of known cost on a fake clock
(``tests.helpers.FakeClock``), so its results are exact; the workers
with fake interpreters and, per framework that imports here, with one real
paired worker on ffn and tiny data.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import cast

import pytest

from tests.helpers import FakeClock, fake_clock
from workers import messages as m
from workers.launch import ALLOCATOR_ENV, Worker, _pinned
from workers.paths import get_path
from workers.protocol import Runner
from workers.serve import UNUSED_IMPORTS, _arguments, handle
from workers.timing import time_paired
from zoo.arrays import save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.weights import make_weights


class FakeTrainer:
    """``run(n)``: ``n`` steps of ``step_s`` each on ``clock``, logged."""

    def __init__(
        self, name: str, log: list[tuple[str, int]], clock: FakeClock, step_s: float
    ) -> None:
        self.name, self.log, self.clock, self.step_s = name, log, clock, step_s

    def __call__(self, n: int) -> None:
        self.log.append((self.name, n))
        self.clock.advance(n * self.step_s)


class FakePredictor:
    """``run()``: one round of ``round_s`` on ``clock``, logged."""

    def __init__(
        self, name: str, log: list[str], clock: FakeClock, round_s: float
    ) -> None:
        self.name, self.log, self.clock, self.round_s = name, log, clock, round_s

    def __call__(self) -> None:
        self.log.append(self.name)
        self.clock.advance(self.round_s)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return fake_clock(monkeypatch)


def _train(
    clock: FakeClock, step_s: float = 0.0, **settings: float
) -> tuple[m.PairedAnswer, list[tuple[str, int]]]:
    log: list[tuple[str, int]] = []
    options = {
        "steps": 2,
        "batches_per_round": 1,
        "window_s": 0.0,
        "min_blocks": 3,
        "max_blocks": 200,
        "warmup_runs": 1,
        "seed": 0,
        "slowdown": 1.0,
        **settings,
    }
    answer = time_paired(
        FakeTrainer("keras", log, clock, step_s),
        FakeTrainer("native", log, clock, step_s),
        "train",
        steps=int(options["steps"]),
        batches_per_round=int(options["batches_per_round"]),
        window_s=options["window_s"],
        min_blocks=int(options["min_blocks"]),
        max_blocks=int(options["max_blocks"]),
        warmup_runs=int(options["warmup_runs"]),
        seed=int(options["seed"]),
        slowdown=options["slowdown"],
    )
    return answer, log


# --- the timing loop, on a fake clock -----------------------------------------------
# Times are multiples of powers of two, so that sums and differences of clock
# readings are exact and so are the assertions on them.


def test_first_steps_warmup_then_blocks_in_the_order_reported(
    clock: FakeClock,
) -> None:
    step_s = 2.0**-6
    answer, log = _train(clock, step_s=step_s, steps=2, min_blocks=5, warmup_runs=2)
    # each side's first step alone, then two untimed blocks of each
    assert sorted(log[:2]) == [("keras", 1), ("native", 1)]
    assert sorted(log[2:6]) == [("keras", 2)] * 2 + [("native", 2)] * 2
    timed = log[6:]
    assert len(timed) == 2 * 5
    assert all(n == 2 for _, n in timed)
    for i, keras_first in enumerate(answer.keras_first):
        pair = [name for name, _ in timed[2 * i : 2 * i + 2]]
        assert pair == (["keras", "native"] if keras_first else ["native", "keras"])
    # one step alone, then blocks of two steps reported per step
    assert answer.keras_first_s == answer.native_first_s == step_s
    assert answer.keras_s == answer.native_s == [step_s] * 5


def test_block_counts_obey_min_max_and_window(clock: FakeClock) -> None:
    assert len(_train(clock, window_s=0.0, min_blocks=3)[0].keras_s) == 3
    # blocks of no time never reach the window: max_blocks ends them
    assert len(_train(clock, window_s=60.0, min_blocks=2, max_blocks=4)[0].keras_s) == 4
    # the window is reached by the first block: min_blocks still holds
    assert len(_train(clock, step_s=1.0, window_s=0.5, min_blocks=3)[0].keras_s) == 3
    # a block of each side takes 2 x 2 steps x 1/16 s = 1/4 s: a window of
    # 1.1 s is reached by the fifth (1.25 s), not by the fourth (1 s)
    steps, window = 2, 1.1
    answer, _ = _train(
        clock, step_s=2.0**-4, steps=steps, window_s=window, min_blocks=1
    )
    totals = [
        (k + n) * steps for k, n in zip(answer.keras_s, answer.native_s, strict=True)
    ]
    assert totals == [0.25] * 5
    # blocks were added until the window was reached, and not one more
    assert sum(totals) >= window > sum(totals[:-1])


def test_both_orders_occur_and_a_seed_gives_the_same_orders(clock: FakeClock) -> None:
    settings = {"min_blocks": 200, "max_blocks": 200}
    orders = _train(clock, seed=7, **settings)[0].keras_first
    assert 60 < sum(orders) < 140  # both orders, about evenly
    assert _train(clock, seed=7, **settings)[0].keras_first == orders
    assert _train(clock, seed=8, **settings)[0].keras_first != orders


@pytest.mark.parametrize("slowdown", [1.10, 1.0])
def test_a_slowdown_stretches_the_native_blocks(
    monkeypatch: pytest.MonkeyPatch, slowdown: float
) -> None:
    # Every reading of this clock takes 2^-20 s: the busy wait that stretches
    # a native block reads the clock until it has passed the stretched time.
    read_s = 2.0**-20
    clock = fake_clock(monkeypatch, read_s)
    answer, _ = _train(
        clock, step_s=2.0**-6, steps=1, min_blocks=5, max_blocks=5, slowdown=slowdown
    )
    block_s = 2.0**-6 + read_s  # the step and the reading that starts its region
    assert answer.keras_s == [block_s] * 5
    # the first steps are not stretched
    assert answer.keras_first_s == answer.native_first_s == block_s
    # every native block stretched by the factor, to within two readings
    for t in answer.native_s:
        assert slowdown * block_s <= t < slowdown * block_s + 2 * read_s


def test_inference_is_timed_per_mini_batch(clock: FakeClock) -> None:
    log: list[str] = []
    round_s, steps, batches = 2.0**-6, 3, 4
    answer = time_paired(
        FakePredictor("keras", log, clock, round_s),
        FakePredictor("native", log, clock, round_s),
        "infer",
        steps=steps,
        batches_per_round=batches,
        window_s=0.0,
        min_blocks=3,
        max_blocks=3,
        warmup_runs=1,
        seed=0,
    )
    # one first round each, one warm-up block of `steps` rounds each, 3 blocks
    assert log.count("keras") == log.count("native") == 1 + steps + 3 * steps
    # the first is a whole round, not per batch; a block is per mini-batch
    assert answer.keras_first_s == answer.native_first_s == round_s
    assert answer.keras_s == answer.native_s == [round_s / batches] * 3


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"phase": "predict"}, "unknown phase"),
        ({"steps": 0}, "at least one step"),
        ({"min_blocks": 5, "max_blocks": 2}, "min_blocks <= max_blocks"),
        ({"slowdown": 0.5}, "slowdown"),
        ({"warmup_runs": -1}, "must not be negative"),
    ],
)
def test_settings_it_cannot_honour_are_refused(
    clock: FakeClock, settings: dict[str, float | str], words: str
) -> None:
    options: dict[str, float | str] = {
        "phase": "train",
        "steps": 1,
        "min_blocks": 1,
        "max_blocks": 2,
        "slowdown": 1.0,
        "warmup_runs": 0,
        **settings,
    }
    log: list[tuple[str, int]] = []
    with pytest.raises(ValueError, match=words):
        time_paired(
            FakeTrainer("keras", log, clock, 0.0),
            FakeTrainer("native", log, clock, 0.0),
            str(options["phase"]),
            steps=int(options["steps"]),
            batches_per_round=1,
            window_s=0.0,
            min_blocks=int(options["min_blocks"]),
            max_blocks=int(options["max_blocks"]),
            warmup_runs=int(options["warmup_runs"]),
            seed=0,
            slowdown=float(options["slowdown"]),
        )
    assert log == []


# --- the worker, without a framework ---------------------------------------------


def test_a_paired_request_survives_the_wire() -> None:
    request = m.Paired(
        model="ffn", weights="w", data="d", phase="infer", steps=2, window_s=0.5
    )
    assert m.decode_request(m.encode(request)) == request
    answer = m.PairedAnswer(
        keras_first_s=1.0,
        native_first_s=0.5,
        keras_s=[0.25],
        native_s=[0.125],
        keras_first=[True],
        keras_final_loss=2.5,
    )
    assert m.decode_answer(request, m.encode(answer)) == answer


def test_the_command_line_takes_a_partner() -> None:
    assert _arguments(["keras-torch"]) == ("keras-torch", [], False)
    assert _arguments(["keras-torch", "--partner", "native-torch"]) == (
        "keras-torch",
        ["native-torch"],
        False,
    )
    assert _arguments(
        ["keras-torch", "--deterministic", "--partner", "native-torch"]
    ) == ("keras-torch", ["native-torch"], True)
    assert _arguments(
        ["keras-torch", "--partner", "keras-torch-step", "--partner", "native-torch"]
    ) == ("keras-torch", ["keras-torch-step", "native-torch"], False)
    for bad in ([], ["--partner", "x"], ["keras-torch", "--partner"], ["a", "b"]):
        assert _arguments(bad) is None


def test_a_paired_request_needs_a_partner() -> None:
    request = m.Paired(
        model="ffn", weights="w", data="d", phase="train", steps=1, window_s=0
    )
    runner = cast(Runner, object())
    with pytest.raises(ValueError, match="started with one partner") as e:
        handle(runner, request, get_path("keras-torch"))
    assert str(e.value).count(". ") == 0


def test_a_partner_of_another_framework_is_refused() -> None:
    with pytest.raises(ValueError, match="another path of its framework") as e:
        Worker("keras-torch", partner="native-jax")
    assert str(e.value).count(". ") == 0
    with pytest.raises(ValueError, match="another path"):
        Worker("keras-torch", partner="keras-torch")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_cpus_pin_the_worker_before_it_starts() -> None:
    """The interpreter is started on a small program that pins its process and
    execs the real command line: what that command sees is the pinning."""
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    done = subprocess.run(
        [sys.executable, *_pinned((0,)), "-c", show],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[0]"
    failed = subprocess.run(
        [sys.executable, *_pinned((10**6,)), "-c", show],  # no such CPU
        capture_output=True,
        text=True,
        check=False,
    )
    assert failed.returncode == 1
    message = json.loads(failed.stdout)
    assert message["status"] == "unavailable"  # what a worker says at start-up
    assert "cannot pin the worker to CPUs 1000000" in message["error"]
    assert _pinned(None) == []
    with pytest.raises(ValueError, match="non-empty"):
        Worker("native-torch", cpus=())


# --- real paired workers -----------------------------------------------------------

PAIRS = {
    # the native path first for one of them: the Keras runner still loads first
    "jax": ("keras-jax", "native-jax"),
    "tensorflow": ("native-tensorflow", "keras-tensorflow"),
    "torch": ("keras-torch", "native-torch"),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("paired")
    spec = get_spec("ffn")
    x, y = make_batches(spec, 1, 8, 3)
    save_npz(root / "weights.npz", make_weights(spec, 0))
    save_npz(root / "data.npz", {"x": x, "y": y})
    return {"weights": str(root / "weights.npz"), "data": str(root / "data.npz")}


@pytest.fixture(scope="module", params=list(PAIRS))
def paired(request: pytest.FixtureRequest) -> Iterator[tuple[str, Worker]]:
    framework = request.param
    for module in (framework, "keras"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    primary, partner = PAIRS[framework]
    # torch's worker is pinned to one CPU; the others run where they may
    cpus = (0,) if framework == "torch" else None
    with Worker(primary, start_timeout=120, partner=partner, cpus=cpus) as worker:
        if worker.failure is not None and worker.failure.status == "unavailable":
            pytest.skip(f"{framework} does not start here: {worker.failure.error}")
        assert worker.failure is None, worker.failure
        yield framework, worker


def test_a_paired_worker_describes_both_paths_and_its_cpus(
    paired: tuple[str, Worker],
) -> None:
    framework, worker = paired
    assert worker.partner_platform
    expected = [0] if framework == "torch" else sorted(os.sched_getaffinity(0))
    assert worker.platform["cpu_affinity"] == expected
    assert worker.partner_platform["cpu_affinity"] == expected
    # glibc's allocator as the orchestrator fixed it, in both descriptions
    assert worker.platform["allocator"] == ALLOCATOR_ENV
    assert worker.partner_platform["allocator"] == ALLOCATOR_ENV
    keras_side = (
        worker.platform if worker.path.api == "keras" else worker.partner_platform
    )
    assert keras_side["keras_backend"] == framework
    # the libraries the worker left out, JAX only where it is not its own
    skipped = [name for name, needed in UNUSED_IMPORTS.items() if needed != framework]
    assert worker.platform["skipped_imports"] == skipped
    assert ("jax" in skipped) == (framework != "jax")


@pytest.mark.parametrize("phase", ["train", "infer"])
def test_a_paired_request_times_both_sides(
    paired: tuple[str, Worker], files: dict[str, str], phase: str
) -> None:
    _, worker = paired
    request = m.Paired(
        model="ffn",
        weights=files["weights"],
        data=files["data"],
        phase=phase,
        steps=2,
        window_s=0.05,
        min_blocks=3,
    )
    reply = worker.call(request, timeout=120)
    assert reply.ok, (reply.error, reply.traceback)
    answer = reply.answer
    assert isinstance(answer, m.PairedAnswer)
    assert len(answer.keras_s) == len(answer.native_s) == len(answer.keras_first)
    assert len(answer.keras_s) >= 3
    assert all(t > 0 for t in [*answer.keras_s, *answer.native_s])
    assert answer.keras_first_s > 0
    assert answer.native_first_s > 0
    assert answer.keras_nonfinite is None
    assert answer.native_nonfinite is None
    if phase == "train":
        assert answer.keras_final_loss is not None
        assert answer.native_final_loss is not None
        assert math.isfinite(answer.keras_final_loss)
        assert math.isfinite(answer.native_final_loss)
    else:
        assert answer.keras_final_loss is None
        assert answer.native_final_loss is None
