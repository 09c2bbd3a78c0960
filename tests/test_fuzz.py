"""``harness fuzz`` without workers: the draw covers the vocabulary and makes
valid models, outcomes are classified and named, and a campaign shrinks two
stand-in bugs (the sparse-gradient optimizers on TensorFlow, the padded
average pool on PyTorch) to models of at most three layers, keeps them, and
does not report them again when it resumes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings

from equivalence.keras_known import KNOWN, KNOWN_BUG
from harness.fuzz import checking
from harness.fuzz.campaign import Campaign, Tally, _Spent
from harness.fuzz.draw import (
    DRAWS,
    MERGES,
    NOT_DRAWN,
    POOLS,
    Drawn,
    cut_first_layer,
    drawn_models,
    vocabulary,
)
from harness.fuzz.findings import (
    FINDINGS,
    SIGHTINGS,
    Outcome,
    classify,
    finding_id,
    known_bugs,
    read_findings,
    signature,
)
from harness.fuzz.report import errors_of, wrong
from harness.versions.correctness import first_affected
from native.faults import Location
from workers.launch import PROJECT_ROOT, Reply
from workers.paths import MODE_PATHS, PATHS
from zoo.kinds import KINDS, merge
from zoo.kinds.base import INPUT, Kind, no_options
from zoo.specs import ModelSpec, input_of
from zoo.user_models import spec_from_document

PASS = dict.fromkeys(PATHS, "pass")
HEADS = ("flatten", "global_avg_pool", "global_max_pool")


def _module_file(kind: Kind) -> str:
    """The file of the ``zoo.kinds`` module that makes ``kind``."""
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("zoo.kinds.") or module is None:
            continue
        held = (getattr(module, "KIND", None), *getattr(module, "KINDS", ()))
        if any(k is kind for k in held):
            return name.replace(".", "/") + ".py"
    return kind.shape.__module__.replace(".", "/") + ".py"


def _undrawn(kinds: Mapping[str, Kind]) -> list[str]:
    """Each kind the fuzzer's vocabulary (read from ``kinds``) never draws
    and that says not why, with the file to open."""
    known = vocabulary(kinds)
    drawn = {n for n, d in known.draws.items() if d.ranks}
    covered = drawn | set(known.merges) | set(known.not_drawn)
    return [
        f"{name} (open {_module_file(kind)}: set draw= and draw_ranks=, or not_drawn=)"
        for name, kind in kinds.items()
        if name not in covered
    ]


def test_every_kind_is_drawn_or_says_why_not() -> None:
    missing = _undrawn(KINDS)
    assert not missing, (
        f"kinds the fuzzer never draws: {'; '.join(missing)}.  A kind's module "
        "holds its fuzz draw (zoo.kinds.base.Kind.draw, on a Pick); "
        'docs/extending.md, "Adding a layer kind"'
    )
    known = vocabulary(KINDS)
    assert (known.draws, known.not_drawn) == (DRAWS, NOT_DRAWN)
    # what draw.py listed by hand before the kinds' modules held their draws
    # the order is the registry's; the draw sorts the kinds it chooses from
    assert (
        set(known.pools)
        == set(POOLS)
        == {
            "avg_pool",
            "max_pool",
            "avg_pool1d",
            "max_pool1d",
        }
    )
    assert known.merges == MERGES == tuple(merge.CLASSES)
    assert "dot_attention" in DRAWS
    assert "embedding" in NOT_DRAWN


def test_an_undrawn_kind_is_named_with_its_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a newcomer's kind, registered but given no draw (nor a reason)
    module = ModuleType("zoo.kinds.newcomer")
    module.KIND = dataclasses.replace(  # type: ignore[attr-defined]
        KINDS["rescaling"], name="newcomer", draw=None, draw_ranks=()
    )
    monkeypatch.setitem(sys.modules, "zoo.kinds.newcomer", module)
    monkeypatch.setitem(KINDS, "newcomer", module.KIND)
    assert _undrawn(KINDS) == [
        "newcomer (open zoo/kinds/newcomer.py: set draw= and draw_ranks=, "
        "or not_drawn=)"
    ]
    # a draw on no rank of input is never drawn either; a reason is enough
    rankless = dataclasses.replace(module.KIND, draw=no_options)
    monkeypatch.setitem(KINDS, "newcomer", rankless)
    assert len(_undrawn(KINDS)) == 1
    excused = dataclasses.replace(module.KIND, not_drawn="a stand-in")
    monkeypatch.setitem(KINDS, "newcomer", excused)
    assert _undrawn(KINDS) == []


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn_models())
def test_every_drawn_model_is_valid(drawn: Drawn) -> None:
    spec = spec_from_document("drawn", drawn.document)
    assert spec.classes >= 1
    assert set(drawn.modes) <= set(MODE_PATHS)
    assert drawn.batch_size >= 1
    assert drawn.steps >= 0


@pytest.mark.parametrize(
    ("shape", "shown"),
    [
        ("several outputs", lambda spec: spec.several_outputs),
        ("two inputs", lambda spec: bool(spec.more_inputs)),
        ("an output per step", lambda spec: any(len(h.shape) == 2 for h in spec.heads)),
        (
            "an output per pixel",
            lambda spec: any(len(h.shape) == 3 for h in spec.heads),
        ),
    ],
)
def test_the_draw_makes_models_of_every_shape(
    shape: str, shown: Callable[[ModelSpec], bool]
) -> None:
    """Issue 78: besides one row from one input, the draw ends models as a
    tagger, a U-Net or a multi-task model ends, and feeds a second input;
    each a valid model (Hypothesis' ``find`` fails when none is drawn)."""
    found = find(
        drawn_models(),
        lambda drawn: shown(spec_from_document("drawn", drawn.document)),
        settings=settings(
            database=None,
            derandomize=True,
            max_examples=500,
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert shown(spec_from_document("drawn", found.document)), shape


def test_the_shapes_drawn_are_as_docs_user_models_says() -> None:
    """docs/user_models.md's table of the shapes the draw makes, from its
    script (derandomized: the same counts on every run)."""
    done = subprocess.run(
        [sys.executable, "docs/results/shapes/fuzz_shapes.py"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    counts = json.loads(done.stdout)
    page = (PROJECT_ROOT / "docs" / "user_models.md").read_text()
    for shape in (
        "two outputs",
        "two inputs",
        "an output per step",
        "an output per pixel",
    ):
        assert counts[shape] > 0, shape
        rows = [line for line in page.splitlines() if line.startswith(f"| {shape}")]
        assert rows, shape
        assert rows[0].endswith(f"| {counts[shape]} |"), (rows[0], counts[shape])


def _outcome(
    failing: dict[str, str], where: tuple[str, str] = ("update", "embedding")
) -> Outcome:
    verdicts = {**PASS, **failing}
    located = {p: where for p, v in failing.items() if v == "fail"}
    errors = {p: "RuntimeError: boom" for p, v in failing.items() if v == "error"}
    return Outcome(verdicts, located, errors)


@pytest.mark.parametrize(
    ("failing", "expected"),
    [
        ({}, ""),
        ({"keras-tensorflow": "fail"}, "one Keras backend"),
        ({"keras-torch": "fail", "keras-torch@compile": "fail"}, "one Keras backend"),
        ({"native-mxnet-hybrid": "error"}, "one native path"),
        ({"keras-jax": "fail", "native-jax": "fail"}, "one framework"),
        (dict.fromkeys(PATHS, "fail"), "every path"),
        ({"keras-jax": "fail", "native-torch": "fail"}, "several paths"),
    ],
)
def test_outcomes_are_classified_by_the_paths_that_part(
    failing: dict[str, str], expected: str
) -> None:
    assert classify(_outcome(failing)) == expected


def test_the_judge_and_the_tool_come_first() -> None:
    judged = Outcome(dict.fromkeys(PATHS, "error"), judge="no two float64 runs agree")
    assert classify(judged) == "the judge"
    assert classify(Outcome({}, tool="TypeError in check: x")) == "the tool"


def test_a_signature_names_paths_stage_and_kind_not_the_model() -> None:
    one = _outcome({"keras-tensorflow": "fail"}, ("update", "embedding"))
    two = _outcome({"keras-tensorflow": "fail"}, ("update", "embedding"))
    other = _outcome({"keras-tensorflow": "fail"}, ("forward", "avg_pool1d"))
    assert signature(one) == signature(two)
    assert signature(one) != signature(other)
    assert "update at embedding" in signature(one)
    stopped = _outcome({"native-torch": "error"})
    assert "stopped: RuntimeError" in signature(stopped)
    with_mode = _outcome(
        {"keras-tensorflow": "fail", "keras-tensorflow@xla": "fail"},
        ("update", "embedding"),
    )
    assert signature(with_mode) == signature(one)


def _unlocalized(failing: list[str]) -> Outcome:
    """What ``checking.outcome_of`` keeps of a check of lenet in which
    keras-torch failed on ``failing`` and the localizer placed nothing."""
    report = SimpleNamespace(
        case=SimpleNamespace(model="lenet"),
        localizations={},
        verdicts={**PASS, "keras-torch": "fail"},
        outcomes={},
        reference_error=None,
        vote=None,
        failing=lambda path: failing if path == "keras-torch" else [],
        notes=lambda path: [],
    )
    return checking.outcome_of(report)  # type: ignore[arg-type]


def test_an_unlocalized_finding_is_placed_by_the_quantities_it_failed_on() -> None:
    """Issue 80: a signature ending in "not localized" was one finding for
    every layer and stage a path could fail at.  Now the earliest stage and
    layer the failing quantities name place it: two such failures at
    different layers or stages are two findings, two at the same one (other
    steps, later layers too) one."""
    update = _unlocalized(["step1/fc1/kernel", "step2/logits/bias"])
    again = _unlocalized(["step2/fc1/kernel", "step2/logits/kernel"])
    other_layer = _unlocalized(["step1/conv2/kernel"])
    other_stage = _unlocalized(["grad:fc1/kernel", "step1/conv1/bias"])
    assert signature(update).endswith("| not localized: update at dense kernel")
    assert signature(update) == signature(again)
    assert signature(other_layer).endswith("not localized: update at conv2d kernel")
    assert signature(other_stage).endswith("not localized: backward at dense kernel")
    assert signature(_unlocalized(["logits", "loss"])).endswith("forward at logits")
    # nothing to place it by: as before
    assert signature(_unlocalized([])).endswith("| not localized")


def test_a_float64_run_voted_out_is_placed_where_it_parts() -> None:
    """Found this stop: "the judge | float64 runs | native-tensorflow" named
    every cause of that run's being voted out as one finding (d8b231ec1c:
    an embedding and GRU model in one campaign, a leaky ReLU's float32 slope
    in the next).  The odd run's place, by layer kind, is in the signature."""

    def voted_out(layer: str | None) -> Outcome:
        odd = SimpleNamespace(first=Location("forward", layer) if layer else None)
        report = SimpleNamespace(
            case=SimpleNamespace(model="lenet"),
            localizations={},
            verdicts=PASS,
            outcomes={},
            reference_error=None,
            vote=SimpleNamespace(odd="native-tensorflow", fault="computed in float32"),
            odd_localization=odd,
            failing=lambda path: [],
            notes=lambda path: [],
        )
        return checking.outcome_of(report)  # type: ignore[arg-type]

    at_fc1, at_fc2 = signature(voted_out("fc1")), signature(voted_out("fc2"))
    assert at_fc1 == "the judge | float64 runs | native-tensorflow forward at dense"
    assert at_fc1 == at_fc2  # the same kind of layer: one finding
    assert signature(voted_out("conv1")).endswith("native-tensorflow forward at conv2d")
    assert signature(voted_out(None)).endswith("| float64 runs | native-tensorflow")


# --- a campaign on stand-ins ---------------------------------------------------


def _kinds(document: dict[str, Any]) -> list[str]:
    return [entry["kind"] for entry in document["layers"]]


def stand_in(drawn: Drawn) -> Outcome:
    """Two bugs as the real checks show them: Keras on TensorFlow trains a
    token embedding wrong with every optimizer but SGD, and Keras on
    PyTorch averages a padded ``same`` 1-D pool wrong."""
    doc = drawn.document
    failing: dict[str, str] = {}
    where = ("", "")
    if (
        "embedding" in _kinds(doc)
        and doc["workload"]["optimizer"] != "sgd"
        and drawn.steps
    ):
        failing["keras-tensorflow"] = "fail"
        where = ("update", "embedding")
    elif any(
        e["kind"] in ("avg_pool", "avg_pool1d") and e.get("padding") == "same"
        for e in doc["layers"]
    ):
        failing["keras-torch"] = "fail"
        where = ("forward", "avg_pool")
    return _outcome(failing, where)


def _campaign(
    folder: Path,
    budget: float,
    check: Callable[[Drawn], Outcome] = stand_in,
    draw_seed: int | None = None,
) -> Campaign:
    ticks = itertools.count()
    return Campaign(
        folder,
        budget,
        check,
        say=lambda line: None,
        clock=lambda: float(next(ticks)),
        draw_seed=draw_seed,
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # a dense layer on every step: no row layer needed
        ("keras-tensorflow", ["embedding", "dense"]),
        ("keras-torch", ["avg_pool1d", "flatten", "dense"]),
    ],
)
def test_the_draw_shrinks_a_bug_to_the_layers_that_show_it(
    path: str, expected: list[str]
) -> None:
    """Hypothesis' shrinking over the drawn models, alone and deterministic:
    each stand-in bug shrinks to the layers that show it (a layer is one
    draw, so a whole layer can be left out), the fewest steps and the
    smallest batch."""
    smallest = find(
        drawn_models(),
        lambda drawn: path in stand_in(drawn).failing,
        settings=settings(
            database=None,
            derandomize=True,
            max_examples=3000,
            suppress_health_check=list(HealthCheck),
        ),
    )
    assert _kinds(smallest.document) == expected
    assert smallest.batch_size == 1
    assert smallest.steps == (1 if path == "keras-tensorflow" else 0)
    assert not smallest.modes


@pytest.fixture(scope="module")
def campaigned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tally]:
    """A folder after one campaign on the stand-ins, and its tally: its draws
    fixed (``draw_seed``), since how far a shrink gets depends on them (a
    clean clone's CI drew from the clock once and kept 3 steps, not 1)."""
    folder = tmp_path_factory.mktemp("fuzz")
    return folder, _campaign(folder, 6000, draw_seed=0).run()


def test_a_campaign_shrinks_both_stand_in_bugs_and_keeps_them(
    campaigned: tuple[Path, Tally],
) -> None:
    folder, tally = campaigned
    found = read_findings(folder)
    by_path = {f.signature.split(" | ")[1]: f for f in found.values()}
    assert set(by_path) == {"keras-tensorflow", "keras-torch"}, found
    assert len(tally.new) == 2
    for finding in found.values():
        assert finding.kind == "one Keras backend"
        # nothing left but what shows the bug: the embedding a token model
        # starts with, the pool, the head (a flatten or global pool, the
        # outputs): three layers, four for a pool over embedded tokens
        kinds = _kinds(finding.document)
        needed = {"embedding", "avg_pool", "avg_pool1d", *HEADS, "dense"}
        assert set(kinds) <= needed, finding.document
        assert finding.layers <= 3 + (kinds[0] == "embedding" and "avg" in kinds[1])
    embedding = by_path["keras-tensorflow"]
    assert _kinds(embedding.document)[0] == "embedding"
    assert embedding.steps == 1  # the fewest steps that still show it
    assert "adam" in embedding.optimizers or len(embedding.optimizers) > 1
    assert {"avg_pool", "avg_pool1d"} & set(_kinds(by_path["keras-torch"].document))
    assert (folder / FINDINGS).read_text().count("\n") >= 2


def test_a_resumed_campaign_does_not_report_known_findings_again(
    campaigned: tuple[Path, Tally],
) -> None:
    folder, _ = campaigned
    first = read_findings(folder)
    tally = _campaign(folder, 300).run()
    assert not tally.new
    assert set(read_findings(folder)) == set(first)
    assert tally.models > 0


def test_a_model_drawn_again_is_not_checked_again(tmp_path: Path) -> None:
    """Each round draws Hypothesis' simplest models again, and replays and
    shrinks failing ones: a model (with its case) checked once in a
    campaign is answered from its remembered outcome, not checked, counted
    or sighted again; a resumed campaign checks anew."""
    checked: dict[str, int] = {}

    def counted(drawn: Drawn) -> Outcome:
        key = json.dumps(dataclasses.asdict(drawn), sort_keys=True)
        checked[key] = checked.get(key, 0) + 1
        return stand_in(drawn)

    tally = _campaign(tmp_path, 3000, counted, 1).run()
    assert tally.models == len(checked) == sum(checked.values())
    assert tally.models > 20
    first = len(checked)
    _campaign(tmp_path, 300, counted, 1).run()
    assert max(checked.values()) > 1  # the next campaign's own check
    assert len(checked) >= first


def test_a_finding_named_as_a_known_keras_bug_is_kept_but_not_shrunk(
    tmp_path: Path,
) -> None:
    """Issue 80: shrinking findings the check names as known Keras bugs
    (every Nadam model fails on Keras' PyTorch backend, somewhere new each
    time) spent most of a 10-minute campaign on pages already written.  Such
    a finding is kept at its first model and never raised again (never
    shrunk nor cut); one failing path it does not name is shrunk as before."""
    sentence = f"{KNOWN_BUG}: {KNOWN[0].sentence}"

    def noted(drawn: Drawn, paths: tuple[str, ...]) -> Outcome:
        outcome = stand_in(drawn)
        notes = {p: [sentence] for p in outcome.failing if p in paths}
        return dataclasses.replace(outcome, notes=notes)

    named = _campaign(tmp_path / "named", 3000, lambda d: noted(d, PATHS), 1)
    named.run()
    found = read_findings(tmp_path / "named")
    assert found
    assert named.known == set(found)
    assert not named.raised  # no finding was raised: nothing shrunk
    assert all(known_bugs(f) == [KNOWN[0].name] for f in found.values())
    # the torch stand-in unnamed: it alone is shrunk
    half = _campaign(
        tmp_path / "half", 3000, lambda d: noted(d, ("keras-tensorflow",)), 1
    )
    half.run()
    by_path = {
        f.signature.split(" | ")[1]: i
        for i, f in read_findings(tmp_path / "half").items()
    }
    assert set(half.raised) == {by_path["keras-torch"]}
    assert half.known == {by_path["keras-tensorflow"]}
    assert not Outcome({"keras-torch": "fail"}, notes={"keras-torch": ["other"]}).known


def test_every_sighting_is_counted_and_campaigns_sharing_a_folder_add_up(
    tmp_path: Path,
) -> None:
    """Issue 80: the findings file's count was written only when a model was
    smaller or brought a new optimizer (4 where the campaign saw 7).  Every
    checked model that shows a finding is a sighting now, and two campaigns
    in one folder add theirs up (as tasks sharing a folder would)."""
    shown: dict[str, int] = {}

    def counted(drawn: Drawn) -> Outcome:
        outcome = stand_in(drawn)
        if outcome.found:
            ident = finding_id(signature(outcome))
            shown[ident] = shown.get(ident, 0) + 1
        return outcome

    for draw_seed in (1, 2):
        _campaign(tmp_path, 3000, counted, draw_seed).run()
    found = read_findings(tmp_path)
    assert shown
    assert {i: f.seen for i, f in found.items()} == shown
    assert any(n > 1 for n in shown.values())


def test_a_sighting_line_of_another_shape_is_skipped_and_named(
    campaigned: tuple[Path, Tally], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sightings line is read as data from anyone: one whose id is not ten
    hex digits (``../x``) or has no optimizer is skipped, named on stderr,
    and not counted."""
    folder, _ = campaigned
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (FINDINGS, SIGHTINGS):
        (copy / name).write_bytes((folder / name).read_bytes())
    before = {i: f.seen for i, f in read_findings(copy).items()}
    ident = next(iter(before))
    with (copy / SIGHTINGS).open("a") as out:
        out.write(json.dumps({"id": "../../etc/x", "optimizer": "adam"}) + "\n")
        out.write(json.dumps({"id": ident}) + "\n")
        out.write(json.dumps({"id": ident, "optimizer": "sgd"}) + "\n")
    after = read_findings(copy)
    assert "skipped" in capsys.readouterr().err
    assert after[ident].seen == before[ident] + 1
    assert "sgd" in after[ident].optimizers


def test_a_campaign_stops_at_its_budget(tmp_path: Path) -> None:
    tally = _campaign(tmp_path, 30).run()
    # three clock reads a model: about ten models, never thirty
    assert 0 < tally.models < 30


def test_a_budget_spent_while_shrinking_several_findings_ends_quietly(
    tmp_path: Path,
) -> None:
    """Found by a 20-minute campaign: the budget ran out while Hypothesis
    shrank four findings, it raised the group of the four ``_Spent``, and
    the campaign ended in a traceback instead of its summary."""

    def spent_while_shrinking(drawn: Drawn) -> Outcome:
        raise BaseExceptionGroup("4 distinct failures", [_Spent(), _Spent()])

    said: list[str] = []
    ticks = itertools.count()
    campaign = Campaign(
        tmp_path,
        10,
        spent_while_shrinking,
        say=said.append,
        clock=lambda: float(next(ticks)),
    )
    tally = campaign.run()
    assert not tally.interrupted
    assert not [line for line in said if line.startswith("round ended")]


# --- cutting the front: what Hypothesis cannot shrink ----------------------------

# The padded-pool finding as a fresh campaign left it: a 1x1 convolution with
# stride 2 makes the 4x5 input on which the pool pads one side alone.
POOL_FOUND = {
    "input_shape": [7, 9, 1],
    "layers": [
        {"kind": "conv2d", "name": "conv2d_1", "filters": 2, "kernel_size": 1,
         "strides": 2, "padding": "valid"},
        {"kind": "avg_pool", "name": "avg_pool_2", "pool_size": 3, "padding": "same"},
        {"kind": "flatten", "name": "head_flatten", "inputs": ["avg_pool_2"]},
        {"kind": "dense", "name": "outputs", "units": 1},
    ],
    "workload": {"optimizer": "sgd", "learning_rate": 0.01,
                 "loss": "mean_squared_error", "batch_size": 1},
}  # fmt: skip


def uneven_pool(drawn: Drawn) -> Outcome:
    """The padded pool as PyTorch really shows it: only where ``same``
    padding is uneven, which depends on the size of the pool's input (4x5
    shows it, 7x9 does not), and with a window of three (two hides it)."""
    spec = spec_from_document("drawn", drawn.document)
    for layer in spec.layers:
        o = layer.options
        if layer.kind != "avg_pool" or o.padding != "same" or o.pool_size < 3:
            continue
        stride = o.stride
        for side in input_of(spec, layer.name)[:2]:
            padding = (-(-side // stride) - 1) * stride + o.pool_size - side
            if padding % 2:
                return _outcome({"keras-torch": "fail"}, ("forward", "avg_pool"))
    return _outcome({})


def _found(tmp_path: Path, check: Any, document: dict[str, Any]) -> Campaign:
    """A campaign whose one finding is ``document``'s, as a round left it."""
    campaign = Campaign(tmp_path, 100, check, say=lambda line: None)
    ident, _ = campaign._checked(Drawn(document, 0, 1, 0, ()))
    assert ident, "the stand-in does not see the finding's model"
    return campaign


def test_a_finding_is_cut_to_start_where_its_first_layer_ended(
    tmp_path: Path,
) -> None:
    """The real padded-pool finding stopped at four layers: without the
    convolution the pool's input is 7x9 and the bug hides.  Cut, the model
    starts on the convolution's 4x5 output: three layers, kept in the file."""
    assert uneven_pool(Drawn(POOL_FOUND, 0, 1, 0, ())).failing
    campaign = _found(tmp_path, uneven_pool, POOL_FOUND)
    (ident,) = campaign.findings
    campaign.cut_front(ident)
    finding = read_findings(tmp_path)[ident]
    assert _kinds(finding.document) == ["avg_pool", "flatten", "dense"]
    assert finding.document["input_shape"] == [4, 5, 2]
    assert finding.layers == 3


def test_a_cut_that_loses_the_finding_is_not_kept(tmp_path: Path) -> None:
    """A bug that needs the convolution: the cut model does not show it, so
    the finding keeps its four layers (and the cut model was checked)."""

    def needs_conv(drawn: Drawn) -> Outcome:
        if "conv2d" in _kinds(drawn.document):
            return uneven_pool(drawn)
        return _outcome({})

    campaign = _found(tmp_path, needs_conv, POOL_FOUND)
    (ident,) = campaign.findings
    campaign.cut_front(ident)
    assert campaign.tally.models == 2
    assert read_findings(tmp_path)[ident].layers == 4


def test_a_cut_is_refused_where_it_would_change_the_model() -> None:
    cut = cut_first_layer(POOL_FOUND)
    assert cut is not None
    assert cut["input_shape"] == [4, 5, 2]
    assert POOL_FOUND["layers"][0]["kind"] == "conv2d"  # the document is untouched
    # a later layer that takes the first one by name takes the input instead
    named = {**POOL_FOUND, "layers": [dict(e) for e in POOL_FOUND["layers"]]}
    named["layers"][1]["inputs"] = ["conv2d_1"]
    assert cut_first_layer(named)["layers"][0]["inputs"] == [INPUT]  # type: ignore[index]
    # a branch from the input: the input would change under it
    branch = {**POOL_FOUND, "layers": [dict(e) for e in POOL_FOUND["layers"]]}
    branch["layers"][1]["inputs"] = [INPUT]
    assert cut_first_layer(branch) is None
    tokens = {
        "input_shape": [4],
        "layers": [
            {"kind": "embedding", "name": "embedding", "input_dim": 3, "output_dim": 2},
            {"kind": "flatten", "name": "head_flatten"},
            {"kind": "dense", "name": "outputs", "units": 1},
        ],
        "workload": POOL_FOUND["workload"],
    }
    assert cut_first_layer(tokens) is None  # token ids are not an embedding's output


# --- the report's parts ---------------------------------------------------------


def test_a_reproducers_errors_are_read_and_judged() -> None:
    output = "logits: error 2.5e-08\nstep1/embedding/embeddings: error 0.414\n"
    assert errors_of(output) == {
        "logits": 2.5e-08,
        "step1/embedding/embeddings": 0.414,
    }
    assert wrong(output) is True
    assert wrong("logits: error 3e-07\n") is False
    assert wrong("FAILED: ImportError: no keras") is None


@pytest.mark.parametrize("first", range(6))
def test_the_first_affected_release_is_found_by_bisection(first: int) -> None:
    releases = [f"3.{i}.0" for i in range(6)]
    asked: list[str] = []

    def affected(release: str) -> bool:
        asked.append(release)
        return releases.index(release) >= first

    found, tried = first_affected(releases, affected)
    assert found == releases[first]
    assert len(asked) <= 4  # log2 of six, and the newest first
    assert all(tried[r] == (releases.index(r) >= first) for r in tried)


def test_releases_that_cannot_run_are_skipped_toward_newer_ones() -> None:
    releases = ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0"]

    def affected(release: str) -> bool | None:
        return None if release in ("3.0.0", "3.1.0", "3.2.0") else True

    found, tried = first_affected(releases, affected)
    assert found == "3.3.0"
    assert tried["3.2.0"] is None


def test_an_unaffected_newest_release_means_none() -> None:
    found, tried = first_affected(["3.0.0", "3.1.0"], lambda r: False)
    assert found is None
    assert tried == {"3.1.0": False}


class _Checker:
    """A checker whose workers did not start, as ``Checker`` reports it."""

    def __init__(self, paths: list[str], timeout: float) -> None:
        self.workers = {
            p: SimpleNamespace(
                failure=Reply("unavailable", error=f"cannot start python for {p}")
            )
            for p in paths
        }
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_campaign_that_cannot_start_a_path_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Found by running it where the frameworks were missing: every model
    then "failed" at once, hundreds a second.  Now one sentence, before any
    model is drawn; MXNet alone may be missing."""
    monkeypatch.setattr(checking, "Checker", _Checker)
    with pytest.raises(ValueError, match="cannot start keras-jax"):
        checking.WorkerCheck(tmp_path)
    monkeypatch.setattr(checking, "PATHS", {"native-mxnet": None})
    monkeypatch.setattr(checking, "MODE_PATHS", {})
    assert checking.WorkerCheck(tmp_path).restarts == 0


def test_a_reproducers_error_is_absolute_where_float64_is_all_zeros() -> None:
    """Found triaging issue 80's campaigns: a gradient float64 says is zero
    gave 0/0 (NaN, read as "within") on JAX and PyTorch and x/0 (inf) on
    TensorFlow; the error is now the largest difference itself there."""
    import inspect

    import numpy as np

    from workers.reproducer_error import error

    space: dict[str, Any] = {"np": np}
    exec(inspect.getsource(error), space)  # as the reproducers hold it
    zeros = np.zeros(3)
    assert space["error"](zeros, zeros) == 0.0
    assert space["error"]([0.0, 0.25, 0.0], zeros) == 0.25
    assert space["error"]([1.0, 2.0], np.array([1.0, 4.0])) == 0.5
