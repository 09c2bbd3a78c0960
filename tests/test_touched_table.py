"""The table of what a session touched (``tests/touched.py``): a request
noted by its path, mode, model family, layer kinds, fault and task; an
untouched entry of every kind named.  The session's own table is held
against the registries by ``tests/paths/test_touched.py``."""

from __future__ import annotations

from tests import touched
from workers.messages import Evaluate


def test_an_untouched_entry_of_every_kind_is_named() -> None:
    everything = touched.registry()
    for kind in ("paths", "modes", "families", "kinds", "faults", "tasks"):
        table = touched.registry()
        dropped = sorted(getattr(table, kind))[0]
        getattr(table, kind).discard(dropped)
        assert touched.missing(table, lambda entry: None) == {kind: [dropped]}
    assert touched.missing(everything, lambda entry: None) == {}


def test_a_request_is_noted_by_its_path_model_and_fault() -> None:
    table = touched.Table()
    request = Evaluate(
        model="lenet", weights="w", data="d", out="o", fault="missing-bias"
    )
    table.note(["native-jax@layerjit"], request)
    assert table.paths == {"native-jax@layerjit"}
    assert table.modes == {"native-jax in layerjit"}
    assert table.families == {"lenet"}
    assert table.kinds == {"conv2d", "avg_pool", "flatten", "dense"}
    assert table.faults == {"missing-bias in native-jax@layerjit"}
    assert table.tasks == {"evaluate"}
    # the narrow VGG16 counts for VGG16's family
    table.note(
        ["native-torch"], Evaluate(model="vgg16-narrow", weights="w", data="d", out="o")
    )
    assert "vgg16" in table.families
    assert "max_pool" in table.kinds
