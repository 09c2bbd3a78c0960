"""harness.report.plots: the figures tell what the tables tell, at a glance:
a ratio on a log axis, a cell without a time drawn and named as such, the
Keras and native paths of one framework in two shades of one hue."""

from __future__ import annotations

import colorsys
from pathlib import Path
from typing import Any

import pytest

from harness.core.records import Record
from tests.helpers import record
from workers.paths import PATHS

# ffn: Keras on PyTorch 30 times native, on JAX 1.1 times.  lenet: the gate
# held Keras on TensorFlow back, native JAX failed; only PyTorch timed both.
RECORDS: list[Record] = [
    record("keras-torch", seconds=0.060),
    record("native-torch", seconds=0.002),
    record("keras-jax", seconds=0.0022),
    record("native-jax", seconds=0.002),
    record("keras-torch", model="lenet", seconds=0.004),
    record("native-torch", model="lenet", seconds=0.002),
    record("keras-tensorflow", model="lenet", status="not-timed", equivalence="fail"),
    record("native-tensorflow", model="lenet", seconds=0.003),
    record("keras-jax", model="lenet", seconds=0.003),
    record("native-jax", model="lenet", status="error"),
]


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The figures ``write_plots`` draws of ``RECORDS``, by file name."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from harness.report import plots

    drawn: dict[str, Any] = {}
    real = plots._save

    def keep(plt: Any, fig: Any, path: Path) -> Path:
        drawn[path.name] = fig
        return real(plt, fig, path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_save", keep)
        written = plots.write_plots(RECORDS, tmp_path_factory.mktemp("plots"))
    assert sorted(p.name for p in written) == sorted(drawn)
    return drawn


def _marks(ax: Any) -> dict[str, list[tuple[float, float]]]:
    """The labelled marks of ``ax``: label -> where each points."""
    out: dict[str, list[tuple[float, float]]] = {}
    for text in ax.texts:
        out.setdefault(text.get_text(), []).append(tuple(text.xy))
    return out


def _hls(colour: Any) -> tuple[float, float, float]:
    red, green, blue = colour[:3]
    return colorsys.rgb_to_hls(red, green, blue)


def test_the_ratio_axis_is_logarithmic_in_plain_factors(
    figures: dict[str, Any],
) -> None:
    (ax,) = figures["overhead.png"].axes
    assert ax.get_yscale() == "log"
    label = ax.yaxis.get_major_formatter()
    assert [label(v, 0) for v in (0.5, 1.0, 2.0, 10.0, 30.0)] == [
        "0.5x",
        "1x",
        "2x",
        "10x",
        "30x",
    ]
    low, high = ax.get_ylim()
    assert low < 1.0  # the 1x line and the 30x bar in view
    assert high > 30.0
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.lines)
    # a bar goes from the 1x line to its ratio, so 1.1x stays visible
    torch = next(c for c in ax.containers if c.get_label() == "torch")
    tops = sorted(bar.get_y() + bar.get_height() for bar in torch.patches)
    assert tops == pytest.approx([2.0, 30.0], rel=0.01)
    assert {bar.get_y() for bar in torch.patches} == {1.0}


def test_a_cell_without_a_time_is_marked_where_its_bar_would_be(
    figures: dict[str, Any],
) -> None:
    (ax,) = figures["overhead.png"].axes
    # groups ffn (0), lenet (1); series jax, tensorflow, torch: lenet's
    # tensorflow bar stands at x 1, jax's one slot left of it
    marks = _marks(ax)
    assert marks["held back"] == [pytest.approx((1.0, 1.0))]
    assert marks["failed"] == [pytest.approx((1.0 - 0.8 / 3, 1.0))]
    title = ax.get_title().replace("\n", " ")
    assert "lenet on tensorflow (keras-tensorflow held back)" in title
    assert "lenet on jax (native-jax failed)" in title
    (steps,) = figures["train_step.png"].axes
    assert set(_marks(steps)) == {"held back", "failed"}
    assert "lenet on keras-tensorflow (held back)" in steps.get_title().replace(
        "\n", " "
    )


def test_keras_and_native_of_a_framework_share_its_hue(
    figures: dict[str, Any],
) -> None:
    (ax,) = figures["train_step.png"].axes
    colour = {
        c.get_label(): _hls(c.patches[0].get_facecolor())
        for c in ax.containers
        if c.get_label() in PATHS and c.patches
    }
    for framework in ("jax", "torch"):
        keras, native = colour[f"keras-{framework}"], colour[f"native-{framework}"]
        assert keras[0] == pytest.approx(native[0], abs=1e-6)  # one hue
        assert keras[1] < native[1]  # Keras dark, native light
    assert abs(colour["keras-jax"][0] - colour["keras-torch"][0]) > 0.1
    # the overhead figure's framework has the same hue
    (overhead,) = figures["overhead.png"].axes
    torch = next(c for c in overhead.containers if c.get_label() == "torch")
    assert _hls(torch.patches[0].get_facecolor())[0] == pytest.approx(
        colour["keras-torch"][0], abs=1e-6
    )
    assert "dark: Keras, light: native" in ax.get_legend().get_title().get_text()
