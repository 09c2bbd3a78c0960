"""harness.report.plots.explain_bars: one stacked-bar PNG per (model, framework) of
where a Keras step's time goes; malformed cells are refused."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.report.plots import explain_bars

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _cell(model: str, framework: str, phase: str, batch: int = 128) -> dict[str, Any]:
    return {
        "model": model,
        "framework": framework,
        "phase": phase,
        "batch": batch,
        "parts": {
            "native": {"us": 310.0, "low": 300.0, "high": 320.0},
            "extra kernels": {"us": 40.0, "low": 20.0, "high": 60.0},
            "layers and optimizer": {"us": 500.0, "low": 450.0, "high": 560.0},
            "fit loop": {"us": 300.0, "low": 250.0, "high": 350.0},
            "input conversion": {"us": 30.0, "low": 10.0, "high": 50.0},
        },
        "total": {"us": 1180.0, "low": 1100.0, "high": 1250.0},
    }


def _is_png(path: Path) -> bool:
    return path.stat().st_size > len(PNG_MAGIC) and path.read_bytes()[:8] == PNG_MAGIC


def test_one_png_per_model_and_framework(tmp_path: Path) -> None:
    cells = [
        _cell(model, framework, phase)
        for model in ("ffn", "cnn")
        for framework in ("torch", "jax")
        for phase in ("infer", "train")
    ]
    written = explain_bars(cells, tmp_path / "plots")
    expected = {
        tmp_path / "plots" / f"explain-{m}-{f}.png"
        for m in ("ffn", "cnn")
        for f in ("torch", "jax")
    }
    assert set(written) == expected
    assert len(written) == 4
    assert all(_is_png(p) for p in written)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(
        p.name for p in expected
    )


def test_missing_part_and_missing_total_are_fine(tmp_path: Path) -> None:
    cell = _cell("ffn", "torch", "train")
    del cell["parts"]["extra kernels"]
    del cell["total"]
    infer = _cell("ffn", "torch", "infer", batch=1024)
    del infer["parts"]["fit loop"]
    (path,) = explain_bars([cell, infer], tmp_path)
    assert path == tmp_path / "explain-ffn-torch.png"
    assert _is_png(path)


def test_negative_part_is_drawn(tmp_path: Path) -> None:
    cell = _cell("ffn", "jax", "train")
    cell["parts"]["fit loop"] = {"us": -120.0, "low": -200.0, "high": -40.0}
    cell["parts"]["input conversion"] = {"us": -5.0, "low": -9.0, "high": 1.0}
    (path,) = explain_bars([cell], tmp_path)
    assert _is_png(path)


def test_empty_list_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "plots"
    assert explain_bars([], out) == []
    assert not out.exists()


@pytest.mark.parametrize(
    "spoil",
    [
        lambda c: c["parts"].__setitem__("native", {"us": "310"}),
        lambda c: c["parts"].__setitem__("native", 310.0),
        lambda c: c["parts"]["fit loop"].__setitem__("low", None),
        lambda c: c["parts"]["fit loop"].__setitem__("us", float("nan")),
        lambda c: c["parts"]["fit loop"].__setitem__("us", True),
        lambda c: c["parts"].__setitem__("fit  loop", {"us": 1.0}),
        lambda c: c.__setitem__("parts", [1.0, 2.0]),
        lambda c: c["total"].__setitem__("us", "a lot"),
        lambda c: c.__delitem__("phase"),
        lambda c: c.__setitem__("batch", 0),
        lambda c: c.update(model="ffn", framework="torch"),  # a second ffn-torch train
    ],
)
def test_malformed_cell_raises_and_writes_nothing(tmp_path: Path, spoil: Any) -> None:
    good = _cell("ffn", "torch", "train")
    bad = copy.deepcopy(_cell("cnn", "jax", "train"))
    spoil(bad)
    with pytest.raises(ValueError, match=r"\S"):
        explain_bars([good, bad], tmp_path / "plots")
    assert not (tmp_path / "plots").exists()
