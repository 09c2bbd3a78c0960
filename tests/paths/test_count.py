"""harness count through a real worker under callgrind: Keras on PyTorch and
native PyTorch counted in one process, the counts read back and grouped,
and an injected 5% of extra work on one path found by the comparison and
nothing else flagged.  Skipped where valgrind, its header or a C compiler
is missing (``nox -s count`` installs them)."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.core.profiles import parse_blueprint
from harness.count import analysis, compare
from harness.count.measure import count, read
from tests.test_counting import needs_valgrind
from tests.tiers import Sizes, full_only
from workers.completeness import incomplete

pytestmark = [pytest.mark.paths, needs_valgrind]

# ffn inference at batches 1 and 2 (two cells in one process: callgrind
# numbers its dumps over the process), eight mini-batches a round: cells whose
# blocks repeat to some 0.3% (two mini-batches: 4%, what one specialisation
# of the interpreter costs).
BLUEPRINT = """
models = ["ffn"]
phases = ["infer"]
[settings]
repeats = 1
infer_batches = 8
window_s = 0.1
warmup_rounds = 1
[per_model.ffn]
batch_size = 1
infer_batch_sizes = [1, 2]
"""


def _counted(
    results: Path, extra: tuple[str, float] | None, batches: list[int] | None = None
) -> dict:
    blueprint = BLUEPRINT
    if batches is not None:
        blueprint = blueprint.replace("[1, 2]", str(batches))
    out = count(
        parse_blueprint("tiny", blueprint),
        models=["ffn"],
        frameworks=["torch"],
        phases=["infer"],
        results_dir=results,
        processes=1,
        blocks=3,
        extra=extra,
        log=lambda line: None,
    )
    return analysis.cells(read(out))


def _assert_counts_of_both_paths(counted: dict, batches: list[int]) -> None:
    assert not counted["not_counted"], counted["not_counted"]
    rows = {(r["path"], r["batch"]): r for r in counted["paths"]}
    assert set(rows) == {
        (p, b) for p in ("keras-torch", "native-torch") for b in batches
    }
    for batch in batches:
        keras, native = rows["keras-torch", batch], rows["native-torch", batch]
        assert keras["blocks"] == native["blocks"] == 3
        # Keras' predict runs far more Python per mini-batch than a native call.
        assert keras["groups"]["interpreter"] > 10 * native["groups"]["interpreter"]
        assert native["groups"]["kernel"] > 0
    assert all(pair["work_ratio"] > 2 for pair in counted["pairs"])


@pytest.mark.sized
def test_counts_of_both_paths_in_one_process(gated: Path, size: Sizes) -> None:
    # The fast tier's count: one process under callgrind (importing PyTorch
    # there takes some 30 s of the minute it runs); the full tier counts it
    # again beside an injected change, below.
    if size.full_only:
        pytest.skip("the full tier counts both paths in the test below")
    _assert_counts_of_both_paths(_counted(gated, None, batches=[1]), [1])


@pytest.mark.sized
def test_counts_of_both_paths_and_an_injected_change_found(
    gated: Path, size: Sizes
) -> None:
    full_only(size, "an injected change counted in a second callgrind process")
    # The two runs side by side, one per CPU (counts do not move with load),
    # each in a results folder of its own holding the gate's verdicts.
    other = gated.parent / f"{gated.name}-injected"
    shutil.copytree(gated, other)
    # Once in this thread first: what the gate parses is then cached (two
    # threads must not run CPython 3.11's ast.parse at once).
    assert incomplete() is None
    with ThreadPoolExecutor(max_workers=2) as pool:
        plain = pool.submit(_counted, gated, None)
        injected = pool.submit(_counted, other, ("native-torch", 1.05))
        before, after = plain.result(), injected.result()
    _assert_counts_of_both_paths(before, [1, 2])
    assert not after["not_counted"], after["not_counted"]
    found = {(r["path"], r["batch"]): r for r in compare.compare(before, after)}
    for batch in (1, 2):
        injected = found["native-torch", batch]
        assert injected["verdict"] == "changed", found
        assert injected["work_change"] == pytest.approx(0.05, abs=0.01)
        assert injected["groups_moved"]["interpreter"] > 0
        assert found["keras-torch", batch]["verdict"] == "same", found
