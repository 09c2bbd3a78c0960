"""Typed requests and answers survive the wire, and a bad message is named."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workers import messages as m

FINITE = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(max_size=20)


def _requests() -> st.SearchStrategy[m.Task]:
    files = {"model": TEXT, "weights": TEXT, "data": TEXT, "fault": st.none() | TEXT}
    count = st.integers(0, 10**6)
    return st.one_of(
        st.builds(m.Evaluate, **files, out=TEXT, batch_index=count),
        st.builds(m.Activations, **files, out=TEXT),
        st.builds(m.Trajectory, **files, out=TEXT),
        st.builds(m.TimedOutputs, **files, out=TEXT, steps=count),
        st.builds(m.Accuracy, **files),
        st.builds(
            m.Converge,
            **files,
            epochs=count,
            stop_at=st.none() | FINITE,
            learning_rate=st.none() | FINITE,
        ),
        st.builds(m.Train, **files, steps=count, runs=count, warmup_runs=count),
        st.builds(
            m.Infer,
            **files,
            window_s=FINITE,
            warmup_rounds=count,
            latency_samples=count,
        ),
        st.builds(m.Floor, **files, steps=count, runs=count),
        st.builds(m.Selfcheck, **files, steps=count, pairs=count),
        st.builds(
            m.OpCheck,
            op=TEXT,
            dims=st.lists(count, max_size=7),
            operands=TEXT,
            fault=st.none() | TEXT,
            path=TEXT,
            out=TEXT,
        ),
        st.builds(
            m.OpPrepare,
            op=TEXT,
            dims=st.lists(count, max_size=7),
            operands=TEXT,
            paths=st.lists(TEXT, max_size=3),
            direction=TEXT,
            out=TEXT,
        ),
        st.builds(
            m.OpTime,
            token=TEXT,
            window_s=FINITE,
            block_s=FINITE,
            min_blocks=count,
            max_blocks=count,
            warmup_blocks=count,
            seed=count,
        ),
        st.builds(m.OpPeak, path=TEXT, size=count, seconds=FINITE, repeats=count),
    )


def test_every_task_has_a_request_type() -> None:
    assert set(m.REQUESTS) == {
        "evaluate",
        "activations",
        "trajectory",
        "timed_outputs",
        "accuracy",
        "converge",
        "train",
        "infer",
        "floor",
        "selfcheck",
        "paired",
        "levels",
        "profile",
        "count",
        "import_model",
        "op_check",
        "op_prepare",
        "op_time",
        "op_peak",
    }


@given(_requests())
def test_a_request_survives_the_wire(request: m.Task) -> None:
    line = json.dumps(m.encode(request))
    assert m.decode_request(json.loads(line)) == request


TRAIN = m.TrainAnswer(
    first_step_s=0.5,
    step_s=[0.25, 0.125],
    usage=[{"user_s": 0.25, "minflt": 3.0}, {"user_s": 0.125, "minflt": 0.0}],
)


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (m.Train(model="ffn", weights="w", data="d", steps=2), TRAIN),
        (
            m.Floor(model="ffn", weights="w", data="d", steps=2, runs=1),
            m.FloorAnswer(path=TRAIN, idiomatic=TRAIN),
        ),
        (
            m.Infer(model="ffn", weights="w", data="d", window_s=1.0, warmup_rounds=1),
            m.InferAnswer(
                first_round_s=0.3,
                warmup_s=0.1,
                round_s=[0.2],
                batches_per_round=2,
                batches_per_s=10.0,
            ),
        ),
        (
            m.Converge(model="ffn", weights="w", data="d", epochs=2),
            m.ConvergeAnswer(
                train_s=[1.5, 0.5],
                accuracy=[0.25, 0.5],
                test_loss=[2.0, None],
                train_loss=[2.5, 1.0],
            ),
        ),
    ],
)
def test_an_answer_survives_the_wire(request_: m.Request, answer: m.Answer) -> None:
    document = json.loads(json.dumps(m.encode(answer)))
    assert "latency_s" not in document  # fields not measured are left out
    assert m.decode_answer(request_, document) == answer


BASE = {"task": "train", "model": "ffn", "weights": "w", "data": "d", "steps": 2}


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({**BASE, "task": "explode"}, "unknown task 'explode'; known tasks: evaluate"),
        ({**BASE, "repeats": 3}, "train: unknown field 'repeats'"),
        ({**BASE, "steps": True}, "train: field 'steps' has the wrong type"),
        ({**BASE, "steps": 2.5}, "train: field 'steps' has the wrong type"),
        ({**BASE, "model": None}, "train: field 'model' has the wrong type"),
        (
            {k: v for k, v in BASE.items() if k != "weights"},
            "train: missing field 'weights'",
        ),
        ([1, 2], "unknown task [1, 2]"),
    ],
)
def test_a_bad_request_is_refused_naming_what_is_wrong(
    document: object, words: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(words)):
        m.decode_request(document)


def test_an_answer_of_the_wrong_shape_is_refused() -> None:
    request = m.Floor(model="ffn", weights="w", data="d", steps=2, runs=1)
    with pytest.raises(ValueError, match="TrainAnswer: missing field 'step_s'"):
        m.decode_answer(request, {"path": {"first_step_s": 1.0}, "idiomatic": {}})


@pytest.mark.parametrize(
    ("usage", "words"),
    [
        ({"user_s": 0.1}, "field 'usage' has the wrong type"),  # not a list
        ([{"user_s": "fast"}], "field 'usage' has the wrong type"),
        ([[0.1, 0.2]], "field 'usage' has the wrong type"),  # no names
    ],
)
def test_usage_of_the_wrong_shape_is_refused(usage: object, words: str) -> None:
    request = m.Train(model="ffn", weights="w", data="d", steps=2)
    document = {"first_step_s": 1.0, "step_s": [0.5], "usage": usage}
    with pytest.raises(ValueError, match=words):
        m.decode_answer(request, document)
