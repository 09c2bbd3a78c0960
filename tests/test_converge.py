"""``harness converge`` without frameworks: the allowance the ensemble sets
and the verdicts it gives (a deliberately wrong curve caught), the
ensemble's implementations' vote (a fault in one of them named, the others
judging; no majority said), time to
target, the report of a records file, the worker's loop with stand-in
closures, the nudged weights and the command's refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from harness.__main__ import main
from harness.converge import report
from harness.converge.agreement import apart, band, disagreement, reached, vote
from harness.converge.run import nudged
from harness.core.profiles import PROFILES, parse_blueprint
from workers import messages, runs
from workers.paths import get_path
from workers.protocol import Predictor, Runner, Trainer, check_training
from workers.serve import handle
from zoo.arrays import save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.weights import make_weights

ENSEMBLE = [[0.50, 0.70, 0.80], [0.52, 0.71, 0.80], [0.51, 0.69, 0.81]]


def test_the_band_is_the_ensemble_spread_widened_by_its_widest_over_the_run() -> None:
    allowed = band(ENSEMBLE, test_samples=1000)
    assert allowed is not None
    assert allowed.runs == 3
    assert allowed.low[0] == pytest.approx(0.48)
    assert allowed.high[0] == pytest.approx(0.54)
    # a spread of 0.01 at the last epoch, but 0.02 before it
    assert allowed.low[2] == pytest.approx(0.78)
    assert allowed.high[2] == pytest.approx(0.83)
    tight = band([[0.5, 0.6], [0.5, 0.6]], test_samples=200)
    assert tight is not None
    assert tight.low == pytest.approx((0.495, 0.595))
    # runs that agree by luck at epoch 2 do not narrow it
    lucky = band([[0.5, 0.6], [0.52, 0.6]], test_samples=1000)
    assert lucky is not None
    assert (lucky.low[1], lucky.high[1]) == pytest.approx((0.58, 0.62))
    # nor do runs that have not spread yet: their later spread counts early
    late = band([[0.5, 0.6, 0.7], [0.5, 0.6, 0.73]], test_samples=1000)
    assert late is not None
    assert (late.low[0], late.high[0]) == pytest.approx((0.47, 0.53))
    assert band([[0.5]], test_samples=100) is None


def test_a_curve_outside_the_band_is_caught_at_its_first_bad_epoch() -> None:
    allowed = band(ENSEMBLE, test_samples=1000)
    assert allowed is not None
    assert disagreement([0.53, 0.70, 0.80], allowed) is None
    assert disagreement([0.51, 0.70, 0.80, 0.10], allowed) is None  # beyond the band
    wrong = disagreement([0.51, 0.65, 0.80], allowed)
    assert wrong is not None
    assert wrong.startswith("epoch 2: accuracy 0.6500 outside [0.6700, 0.7300]")
    assert disagreement([0.51, 0.70, 0.84], allowed) is not None


def test_time_to_target_sums_the_epochs_up_to_the_first_that_reaches_it() -> None:
    assert reached([0.5, 0.9, 0.95], [2.0, 1.0, 1.0], 0.9) == (2, 3.0)
    assert reached([0.5, 0.8], [2.0, 1.0], 0.9) is None
    assert reached([0.5], [1.0], None) is None


def _record(path: str, accuracy: list[float], **fields: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "model": "ffn",
        "path": path,
        "role": "path",
        "nudge": 0,
        "ensemble_path": "native-torch",
        "source": "test digits",
        "batches_per_epoch": 31,
        "batch_size": 128,
        "train_samples": 3968,
        "test_samples": 1000,
        "target": 0.8,
        "verdict": "pass",
        "status": "ok",
        "accuracy": accuracy,
        "train_s": [1.5] + [0.5] * (len(accuracy) - 1),
        "test_loss": [1.0] * len(accuracy),
        "train_loss": [1.0] * len(accuracy),
        **fields,
    }


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    folder = tmp_path / "converge"
    folder.mkdir()
    file = folder / "converge-20261125T120000.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_the_report_gives_time_to_target_and_catches_a_wrong_path(
    tmp_path: Path,
) -> None:
    records = [
        _record("native-torch", [0.51, 0.70, 0.80]),
        _record("keras-torch", [0.52, 0.70, 0.81]),
        _record("native-jax", [0.40, 0.60, 0.70]),  # deliberately wrong
        _record("keras-jax", [], verdict="fail", status="not-trained"),
        *[
            _record("native-torch", c, role="ensemble", nudge=i)
            for i, c in enumerate(ENSEMBLE, start=1)
        ],
        _record("native-caffe", [0.9, 0.9, 0.9]),  # no such path: skipped
    ]
    found = report.load(report.latest(_write(tmp_path, records)))
    assert found.skipped == 1
    runs_ = found.models["ffn"]
    # a file written before the vote: native-torch alone judges, and says so
    assert runs_.implementations() == ["native-torch"]
    assert len(runs_.curves("native-torch")) == 4  # the plain run and three nudged
    verdicts = {r["path"]: runs_.verdict(r) for r in runs_.paths}
    assert verdicts["native-torch"] == "agrees"
    assert verdicts["keras-torch"] == "agrees"
    assert verdicts["native-jax"].startswith("differs: epoch 1")
    assert verdicts["keras-jax"] == "not-trained"
    assert not found.ok
    table = {row[0]: row for row in report.rows(runs_)}
    assert table["keras-torch"][4] == "2.5"  # 1.5 + 0.5 + 0.5 s to 0.81
    assert table["keras-torch"][5] == "1.00"  # as long as native-torch
    assert table["keras-torch"][6] == 93  # three epochs of 31 steps
    assert table["native-torch"][5] == "-"
    assert table["native-jax"][4] == "not reached"
    assert table["keras-jax"][-1] == "not trained"
    text = report.text(found)
    assert "ensemble of 4 runs on native-torch" in text
    assert "native-torch alone judges: a fault its nudged runs share" in text
    # The answer first: who does not agree, and Keras' time to target.
    answer = text.index("- ffn: ")
    assert answer < text.index("== ffn")
    assert "agree; not: keras-jax, native-jax" in text[answer:]
    assert "over native's: torch 1.00x" in text[answer:]
    assert "differs: epoch 1" in text
    fixed = [r for r in records if r["path"] not in ("native-jax", "keras-jax")]
    (tmp_path / "again").mkdir()
    assert report.load(report.latest(_write(tmp_path / "again", fixed))).ok
    png = report.plot(found, tmp_path / "plots")
    assert png.stat().st_size > 10_000


def test_no_records_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no converge records in"):
        report.latest(tmp_path)
    # a newer run that stopped before its first record is passed over
    folder = _write(tmp_path, [_record("native-torch", [0.5])])
    (folder / "converge-20261126-000000-1.jsonl").touch()
    assert report.latest(folder).name == "converge-20261125T120000.jsonl"


class _Stand:
    """A trainer whose "accuracy" rises by 0.2 an epoch, and a predictor
    whose logits put that share of the test samples on the right class."""

    def __init__(self, poison_at: int | None = None) -> None:
        self.epochs, self.poison_at = 0, poison_at

    def trainer(self) -> Trainer:
        def run(n: int) -> None:
            assert n == 3
            self.epochs += 1

        def check(n: int) -> Any:
            loss = math.nan if self.epochs == self.poison_at else 0.5
            return check_training(loss, {"w": np.array([float(self.epochs)])})

        return Trainer(run, check)

    def predictor(self, params: Any) -> Predictor:
        right = round(min(1.0, 0.2 * params["w"][0]) * 10)
        logits = np.zeros((10, 2))
        logits[np.arange(10) < right, 1] = 1.0
        logits[np.arange(10) >= right, 0] = 1.0
        return Predictor(lambda: [logits[:6], logits[6:]], lambda out: out)


def test_the_worker_loop_trains_epochs_tests_each_and_stops_where_told() -> None:
    labels = np.ones(10, np.int64)
    stand = _Stand()
    answer = runs.converge(stand.trainer(), 3, stand.predictor, labels, epochs=4)
    assert answer.accuracy == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert len(answer.train_s) == 4
    assert answer.nonfinite is None
    stand = _Stand()
    early = runs.converge(stand.trainer(), 3, stand.predictor, labels, 10, stop_at=0.6)
    assert early.accuracy == pytest.approx([0.2, 0.4, 0.6])
    stand = _Stand(poison_at=2)
    broken = runs.converge(stand.trainer(), 3, stand.predictor, labels, epochs=4)
    assert broken.accuracy == pytest.approx([0.2])
    assert broken.nonfinite is not None
    assert "loss nan" in broken.nonfinite
    accuracy, loss = runs.scores(np.array([[2.0, 0.0], [0.0, 2.0]]), np.array([0, 0]))
    assert accuracy == 0.5
    assert loss == pytest.approx(
        (math.log1p(math.exp(-2)) + math.log1p(math.exp(2))) / 2
    )


class _Recorder:
    """Stands in for a framework's runner: trains nothing, remembers the
    learning rate of the spec its closures were built from."""

    framework = "none"

    def __init__(self) -> None:
        self.rates: list[float] = []

    def trainer(self, spec: Any, weights: Any, x: np.ndarray, y: np.ndarray) -> Any:
        self.rates.append(spec.workload.learning_rate)
        return Trainer(lambda n: None, lambda n: check_training(0.5, dict(weights)))

    def predictor(self, spec: Any, weights: Any, x: np.ndarray) -> Any:
        self.rates.append(spec.workload.learning_rate)
        logits = np.zeros((len(x) * x.shape[1], spec.classes), np.float32)
        return Predictor(lambda: [logits], lambda out: out)


@pytest.mark.parametrize("rate", [None, 0.5])
def test_a_converge_request_trains_at_its_learning_rate(
    tmp_path: Path, rate: float | None
) -> None:
    spec = get_spec("ffn")
    x, y = make_batches(spec, 0, 4, 2)
    save_npz(tmp_path / "w.npz", make_weights(spec, 0))
    data = {"x": x, "y": y, "test_x": x, "test_y": y[:, 0].astype(np.int32)}
    save_npz(tmp_path / "d.npz", data)
    request = messages.Converge(
        model="ffn",
        weights=str(tmp_path / "w.npz"),
        data=str(tmp_path / "d.npz"),
        epochs=1,
        learning_rate=rate,
    )
    runner = _Recorder()
    answer = handle(cast(Runner, runner), request, get_path("native-torch"))
    assert isinstance(answer, messages.ConvergeAnswer)
    assert runner.rates == [rate or spec.workload.learning_rate] * 2
    assert get_spec("ffn").workload.learning_rate == 0.01  # the shared spec kept


def test_nudged_weights_move_every_value_by_exactly_the_ulps_asked() -> None:
    weights = {
        "a": np.linspace(-1, 1, 101, dtype=np.float32),
        "b": np.ones(3, np.float32),
    }
    moved = nudged(weights, seed=1)
    for name, w in weights.items():
        steps = np.abs(moved[name].view(np.int32) - w.view(np.int32))
        # one step in the bit pattern, except across zero (+0 to -tiny)
        assert (steps[w != 0] == 1).all(), name
        assert moved[name].dtype == np.float32
    assert not np.array_equal(moved["a"], nudged(weights, seed=2)["a"])
    assert np.array_equal(moved["a"], nudged(weights, seed=1)["a"])
    far = nudged(weights, seed=1, ulps=64)
    steps = np.abs(far["b"].view(np.int32) - weights["b"].view(np.int32))
    assert (steps == 64).all()
    # the same coins: 64 steps the way one step went
    assert (
        np.sign(far["a"] - weights["a"]) == np.sign(moved["a"] - weights["a"])
    ).all()


def test_the_converge_blueprints_set_a_budget_per_model() -> None:
    assert PROFILES["converge"].models == ("ffn", "lenet")
    assert PROFILES["converge"].converge.of("lenet").target == 0.94
    every = PROFILES["converge-all"].converge
    assert every.of("vgg16").train_samples == 128
    assert every.of("vgg16").learning_rate == 0.0001
    assert every.of("lstm").sequence_length == 100
    assert every.of("ffn").test_samples == 1000
    assert PROFILES["converge-full"].converge.of("vgg16").train_samples is None
    with pytest.raises(ValueError, match=r"converge.per_model.lenet.target must be"):
        parse_blueprint(
            "x",
            "models=['ffn']\n[settings]\nrepeats=1\ntrain_steps=1\ninfer_batches=1\n"
            "window_s=1\nwarmup_rounds=1\n[converge.per_model.lenet]\ntarget=1.5",
        )
    with pytest.raises(ValueError, match=r"converge.per_model.vgg16.learning_rate"):
        parse_blueprint(
            "x",
            "models=['vgg16']\n[settings]\nrepeats=1\ntrain_steps=1\n"
            "infer_batches=1\nwindow_s=1\nwarmup_rounds=1\n"
            "[converge.per_model.vgg16]\nlearning_rate=0",
        )


def test_bad_converge_input_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["converge", "--data", str(missing), "--results", str(tmp_path)]) == 2
    assert f"the data folder {missing} does not exist" in capsys.readouterr().err
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    assert (
        main(["converge", "--data", str(tmp_path / "data"), "--results", str(tmp_path)])
        == 2
    )
    assert "train-images-idx3-ubyte(.gz) is missing" in capsys.readouterr().err
    assert main(["converge", "--epochs", "0", "--results", str(tmp_path)]) == 2
    assert "--epochs must be from 1 to 10000" in capsys.readouterr().err
    assert main(["converge", "--models", "vgg16", "--results", str(tmp_path)]) == 2
    assert "has no embedded sample" in capsys.readouterr().err


@pytest.mark.parametrize(
    "damage",
    [
        {"accuracy": None},  # a trained run without its curve
        {"accuracy": [], "train_s": []},  # an empty curve
        {"accuracy": "0.5"},  # a string where a list was
        {"train_s": [1.0, 1.0]},  # two epochs of seconds, three of accuracy
        {"accuracy": [0.5, float("nan"), 0.8]},
        {"batches_per_epoch": "31"},
        {"schema": 2},
    ],
)
def test_a_record_the_report_cannot_read_is_skipped_and_named(
    tmp_path: Path, damage: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    good = [
        _record("native-torch", [0.51, 0.70, 0.80]),
        *[
            _record("native-torch", c, role="ensemble", nudge=i)
            for i, c in enumerate(ENSEMBLE, start=1)
        ],
    ]
    bad = _record("keras-torch", [0.52, 0.70, 0.81])
    bad.update(damage)
    if damage.get("accuracy") is None and "accuracy" in damage:
        del bad["accuracy"]
    file = report.latest(_write(tmp_path, [*good, bad]))
    found = report.load(file)
    assert found.skipped == 1
    assert [r["path"] for r in found.models["ffn"].paths] == ["native-torch"]
    assert "skipped 1 line of" in capsys.readouterr().err
    report.text(found)  # and the table is drawn
    # a file of nothing usable: one sentence, not an empty table
    file.write_text(json.dumps(bad) + "\n" + json.dumps({"schema": 1}) + "\n")
    with pytest.raises(ValueError, match=r"holds no converge records \(2 lines"):
        report.load(file)


# Three implementations' runs (plain first) on 1,000 test samples: torch,
# jax and tensorflow apart by a sample or two, as chaos leaves correct ones.
VOTERS = {
    "native-torch": [
        [0.500, 0.700, 0.800],
        [0.501, 0.701, 0.800],
        [0.500, 0.699, 0.801],
    ],
    "native-jax": [[0.501, 0.700, 0.801], [0.502, 0.701, 0.801], [0.500, 0.700, 0.802]],
    "native-tensorflow": [
        [0.500, 0.701, 0.800],
        [0.501, 0.700, 0.799],
        [0.501, 0.701, 0.800],
    ],
}


def _voted(
    implementations: dict[str, list[list[float]]], paths: dict[str, list[float]]
) -> list[dict[str, Any]]:
    """Records of a run with the vote: each implementation's plain run (as a
    path) and nudged runs, then ``paths``."""
    named = {"ensemble_paths": list(implementations)}
    records = []
    for impl, curves in implementations.items():
        records.append(_record(impl, curves[0], **named))
        records += [
            _record(impl, c, role="ensemble", nudge=n, **named)
            for n, c in enumerate(curves[1:], start=1)
        ]
    records += [_record(p, curve, **named) for p, curve in paths.items()]
    for r in records:
        del r["ensemble_path"]
    return records


def _shifted(curves: list[list[float]], by: float, after: int = 0) -> list[list[float]]:
    """An implementation's runs with a fault they all share: every accuracy
    from epoch ``after`` on moved by ``by``."""
    return [[a + (by if e >= after else 0.0) for e, a in enumerate(c)] for c in curves]


def test_implementations_apart_by_chaos_agree_and_all_judge() -> None:
    decided = vote(VOTERS, 1000)
    assert decided.judges == tuple(VOTERS)
    assert not decided.odd
    assert decided.sentence is None
    assert apart(VOTERS["native-torch"], VOTERS["native-jax"], 1000) is None
    # every path is judged against the judges' runs pooled
    allowed = decided.allowed
    assert allowed is not None
    assert allowed.runs == 9


def test_a_fault_in_one_ensemble_implementation_is_named_and_the_others_judge() -> None:
    # the held-out fault: native PyTorch's accuracy count off by a
    # few samples in every one of its runs (they share its code)
    faulty = {**VOTERS, "native-torch": _shifted(VOTERS["native-torch"], 0.006, 1)}
    decided = vote(faulty, 1000)
    assert decided.judges == ("native-jax", "native-tensorflow")
    assert decided.odd == ("native-torch",)
    assert decided.sentence is not None
    assert decided.sentence.startswith(
        "ODD ONE OUT: native-torch's training or scoring disagrees with "
        "native-jax and native-tensorflow, which agree, from epoch 2"
    )
    assert "every path is judged against native-jax and native-tensorflow" in (
        decided.sentence
    )
    # a path computing correctly agrees; the faulty implementation's own path
    # (its plain run) differs
    assert disagreement([0.501, 0.700, 0.800], decided.allowed) is None
    torch_band = decided.allowed
    assert torch_band is not None
    assert disagreement(faulty["native-torch"][0], torch_band) is not None


def test_no_two_implementations_agreeing_judges_nothing_and_says_so() -> None:
    split = {
        "native-torch": VOTERS["native-torch"],
        "native-jax": _shifted(VOTERS["native-jax"], 0.01),
        "native-tensorflow": _shifted(VOTERS["native-tensorflow"], -0.01),
    }
    decided = vote(split, 1000)
    assert decided.judges == ()
    assert decided.allowed is None
    assert decided.sentence is not None
    assert decided.sentence.startswith(
        "no two of the ensemble's implementations (native-torch, native-jax, "
        "native-tensorflow) agree"
    )
    assert decided.sentence.endswith("so no path can be judged")
    # two that disagree are no majority either
    two = vote({k: split[k] for k in ("native-torch", "native-jax")}, 1000)
    assert two.judges == ()


def test_an_implementation_with_fewer_than_two_runs_cannot_vote() -> None:
    decided = vote(
        {**VOTERS, "native-tensorflow": VOTERS["native-tensorflow"][:1]}, 1000
    )
    assert decided.judges == ("native-torch", "native-jax")
    assert decided.absent == ("native-tensorflow",)
    assert not decided.odd
    assert decided.sentence is not None
    assert "native-tensorflow cannot vote" in decided.sentence


def test_agreement_between_implementations_allows_one_sample_and_never_narrows() -> (
    None
):
    # identical runs one sample apart agree (the floor of one test sample)
    a, b = [[0.5, 0.6], [0.5, 0.6]], [[0.501, 0.601], [0.501, 0.601]]
    assert apart(a, b, 1000) is None
    # two samples apart, where no run spread: they are apart at epoch 1
    c = [[0.502, 0.6], [0.502, 0.6]]
    found = apart(a, c, 1000)
    assert found is not None
    assert found.startswith("from epoch 1")
    # a spread of 3 samples at epoch 1 allows 3 at epoch 2, where they agree
    wide = [[0.497, 0.6], [0.5, 0.6]]
    assert apart(wide, [[0.503, 0.603], [0.503, 0.603]], 1000) is None
    # and a spread that shows only later allows it earlier too: chaos between
    # implementations starts sooner than one implementation's nudges spread
    late = [[0.5, 0.6, 0.7], [0.5, 0.6, 0.703]]
    assert apart(late, [[0.502, 0.6, 0.7], [0.502, 0.6, 0.7]], 1000) is None


# LeNet on the 5,000 real MNIST digits, measured on the AVX-512 host (nox -s
# converge, 2026-11-27): each implementation's plain run and two nudged ones,
# accuracy in test samples of 1,000 over its first ten epochs.  XLA's
# convolutions (JAX) and oneDNN's (PyTorch, TensorFlow) part by 4 samples at
# epoch 3, while each one's nudged runs are still identical there.
LENET = {
    "native-torch": [
        [660, 828, 876, 889, 911, 911, 903, 917, 932, 932],
        [660, 828, 876, 889, 911, 911, 904, 919, 933, 932],
        [660, 828, 876, 889, 913, 911, 903, 918, 932, 933],
    ],
    "native-jax": [
        [659, 830, 880, 889, 913, 908, 904, 918, 932, 934],
        [659, 832, 880, 890, 910, 908, 898, 921, 930, 928],
        [659, 830, 880, 889, 913, 908, 904, 918, 933, 933],
    ],
    "native-tensorflow": [
        [660, 828, 876, 889, 911, 912, 904, 918, 934, 932],
        [660, 828, 876, 889, 911, 911, 904, 919, 933, 933],
        [660, 828, 876, 889, 911, 910, 902, 919, 934, 933],
    ],
}


def test_correct_implementations_that_part_early_are_not_an_odd_one_out() -> None:
    runs_ = {i: [[a / 1000 for a in c] for c in cs] for i, cs in LENET.items()}
    decided = vote(runs_, 1000)
    assert decided.judges == tuple(LENET)
    assert not decided.odd
    # and the paths of either cluster agree with the judges' runs pooled
    jax_cluster = [a / 1000 for a in LENET["native-jax"][0]]
    allowed = decided.allowed
    assert allowed is not None
    assert disagreement(jax_cluster, allowed) is None


def test_the_report_names_a_faulty_ensemble_implementation_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faulty = {**VOTERS, "native-torch": _shifted(VOTERS["native-torch"], 0.006, 1)}
    records = _voted(faulty, {"keras-torch": [0.500, 0.700, 0.801]})
    found = report.load(report.latest(_write(tmp_path, records)))
    runs_ = found.models["ffn"]
    verdicts = {r["path"]: runs_.verdict(r) for r in runs_.paths}
    assert verdicts["keras-torch"] == "agrees"  # the correct paths pass
    assert verdicts["native-jax"] == verdicts["native-tensorflow"] == "agrees"
    assert verdicts["native-torch"].startswith("differs: epoch 2")  # the wrong one
    assert not found.ok
    text = report.text(found)
    assert "ODD ONE OUT: native-torch's training or scoring" in text
    assert "ensemble of 6 runs on native-jax and native-tensorflow" in text
    answer = text[text.index("- ffn: ") :]
    assert answer.index("ODD ONE OUT") < answer.index("== ffn")
    assert found.closing() == (
        "converge FAILED: ffn: the ensemble's native-torch disagreed with the other "
        "implementations, so a judge was wrong; ffn: native-torch did not train or "
        "agree"
    )
    # an odd one out not trained as a path still fails the run
    only = [
        r for r in records if r["path"] != "native-torch" or r["role"] == "ensemble"
    ]
    (tmp_path / "again").mkdir()
    again = report.load(report.latest(_write(tmp_path / "again", only)))
    assert all(
        again.models["ffn"].verdict(r) == "agrees" for r in again.models["ffn"].paths
    )
    assert not again.ok
    assert "native-torch disagreed" in again.closing()
    assert "did not train" not in again.closing()
    # the report command says it last and exits 1
    assert main(["report", "--converge", str(tmp_path / "again" / "converge")]) == 1
    assert capsys.readouterr().out.rstrip().endswith(again.closing())


def test_a_fault_in_a_path_outside_the_ensemble_is_blamed_on_it_alone(
    tmp_path: Path,
) -> None:
    wrong = _shifted([[0.500, 0.700, 0.801]], 0.006, 1)[0]  # Keras' count off
    records = _voted(VOTERS, {"keras-torch": wrong, "keras-jax": [0.501, 0.700, 0.800]})
    found = report.load(report.latest(_write(tmp_path, records)))
    runs_ = found.models["ffn"]
    assert runs_.vote.judges == tuple(VOTERS)
    assert not runs_.vote.odd
    verdicts = {r["path"]: runs_.verdict(r) for r in runs_.paths}
    assert verdicts.pop("keras-torch").startswith("differs: epoch 2")
    assert set(verdicts.values()) == {"agrees"}
    assert not found.ok
    assert found.closing() == (
        "converge FAILED: ffn: keras-torch did not train or agree"
    )
