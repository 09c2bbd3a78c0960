from __future__ import annotations

from harness.timing import time_inference, time_training


def test_training_times_first_step_apart_then_repeats() -> None:
    calls: list[int] = []
    result = time_training(calls.append, steps=4, repeats=3)
    assert calls == [1, 4, 4, 4]
    assert len(result["step_s"]) == 3
    assert result["first_step_s"] >= 0


def test_inference_warms_up_then_runs_at_least_one_round() -> None:
    calls: list[None] = []
    result = time_inference(
        lambda: calls.append(None), batches_per_round=5, window_s=0.0, warmup_rounds=2
    )
    assert len(calls) == 3  # two warm-up rounds, one timed round
    assert len(result["round_s"]) == 1
    assert result["batches_per_s"] > 0
