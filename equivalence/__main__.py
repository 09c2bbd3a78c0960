"""``python -m equivalence``: judge every path against float64, per model.

Per model: every path's worst normwise relative error against a float64 run
of the same case (``equivalence.reference``) for the logits, the loss, the
gradients, the first training step and the whole trajectory (``--steps``
optimizer steps on the same mini-batches), the multiple "m" of a correct
float32 computation's error it needed, whether two evaluations in its process
gave identical bits, and its verdict; every quantity beyond its allowance;
for every failing path, where it parts ways with the float64 reference
(forward, loss, backward or update, and the layer, with each layer's error);
then, as a diagnostic, the pairwise table of the float32 paths.  The LSTM is
checked at a short length (``equivalence.check.SHORT_SEQ_LEN``) as well as the
workload's: at
250 steps its first time steps are forgotten, so a fault there shows only in
a short sequence.  Then, for the models that train on MNIST, the test accuracy
every path reaches on real handwritten digits after each of ``--epochs``
epochs, and the spread across paths.  Numerics are pinned (no TF32, highest
matmul precision, deterministic algorithms) and the settings printed.

Exits 1 on any disagreement, failed path or accuracy spread above
``ACCURACY_SPREAD``, and on a reference implementation found wrong (an odd
one out of the float64 vote, ``ModelReport.reference_sound``) even when
every path it judged passed; 2 on bad arguments.  ``--out`` writes the
verdicts as JSON.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tabulate import tabulate

from equivalence.check import (
    AccuracyReport,
    Case,
    Checker,
    ModelReport,
    missing_framework,
    seq_lens,
    worst_verdict,
)
from equivalence.compare import (
    GRAD_PREFIX,
    TOLERANCES,
    TRAJECTORY_TOLERANCE,
    PairResult,
    step_tolerance,
)
from equivalence.localize import Localization
from equivalence.reference import FLOOR, IMPLEMENTATIONS, MULTIPLE
from equivalence.sensitivity import run_suite
from native.faults import FAULTS
from workers.paths import MODE_PATHS, PATHS, get_path, integer, number, parse_list
from workers.user_model import model_from_file
from zoo import files
from zoo.models import get_spec
from zoo.specs import MODELS, VARIANTS

# 4: the float64 vote (reference, odd one out); 5: per case
# ``reference_sound``, what was wrong with an odd one out
# (``reference_fault``) and the allowances it left thinner (``thinned``);
# 6: per case ``shown_verdicts`` (``infer-only`` where only training failed)
# and ``notes`` (what Keras is known to compute differently, by path)
VERDICT_SCHEMA_VERSION = 6
# Training steps compared by default: two for VGG16, whose trajectories part
# chaotically after that (see TRAJECTORY_TOLERANCE) and whose parameters take
# 60 MB a step per path.
DEFAULT_STEPS = {"vgg16": 2}
STEPS = 10
# Largest spread of final test accuracy (1000 test digits) accepted between
# equivalent paths; see docs/equivalence.md for the measurements.
ACCURACY_SPREAD = 0.01


def _parse_faults(
    items: list[str], allowed: list[str], option: str = "--fault"
) -> dict[str, str]:
    """``PATH:FAULT`` items, each PATH one of ``allowed``."""
    faults = {}
    for item in items:
        path, _, fault = item.partition(":")
        if path not in allowed or fault not in FAULTS:
            raise ValueError(
                f"{option} wants PATH:FAULT with PATH one of {', '.join(allowed)} "
                f"and FAULT one of {', '.join(FAULTS)}; got {item!r}"
            )
        faults[path] = fault
    return faults


def _worst(result: PairResult, keep: Callable[[str], bool]) -> str:
    errors = [e.error for e in result.entries if keep(e.quantity)]
    return f"{max(errors):.1e}" if errors else "-"


def _print_judgements(report: ModelReport) -> None:
    """Per path: worst error against float64 per kind of quantity, its "m",
    its repeatability and verdict."""
    rows = []
    for path in report.verdicts:
        verdict = report.shown_verdict(path)
        result = report.judgements.get(path)
        repeat = report.repeat_errors.get(path)
        row = [path]
        if result is None:
            row += ["-"] * 6
        else:
            row += [
                # a model of several outputs: each one's own too
                _worst(result, lambda q: q.partition(":")[0] == "logits"),
                _worst(result, lambda q: q.partition(":")[0] == "loss"),
                _worst(result, lambda q: q.startswith(GRAD_PREFIX)),
                _worst(result, lambda q: q.startswith("step1/")),
                _worst(result, lambda q: q.startswith("step")),
                f"{report.multiples[path]:.3g}",
            ]
        row.append(
            "-"
            if repeat is None
            else "identical"
            if repeat == 0.0
            else f"differs {repeat:.1e}"
        )
        rows.append([*row, verdict])
    headers = ["path", "logits", "loss", "gradients", "step 1", "trajectory"]
    vote = report.vote
    if vote is not None and vote.reference is not None:
        others = [i for i in vote.agreeing if i != vote.reference]
        print(
            f"error against float64 ({vote.reference}'s float64 run, with which "
            f"{' and '.join(others)} {'agrees' if len(others) == 1 else 'agree'})"
        )
        print(
            f"m: the multiple of (the largest float32 error of "
            f"{', '.join(vote.agreeing)}, a path's own left out, + {FLOOR:.0e}) "
            f"needed, passing up to {MULTIPLE:g}; repeat: a second evaluation in "
            "the same process"
        )
    print(
        tabulate(
            rows, headers=[*headers, "m", "repeat", "verdict"], disable_numparse=True
        )
    )
    fewer = report.thinned()
    if fewer is not None:
        print(f"FEWER BASELINES: {fewer}")
    if report.consulted_perturbed:
        print(
            "PERTURBED RUNS: the float32 baselines alone left a failure or a "
            "split vote, so every allowance above also holds what float64 runs "
            "perturbed at float32's rounding scale moved each quantity "
            "(docs/equivalence.md)"
        )
    for path in report.verdicts:
        for note in report.notes(path):
            print(f"{path}: {note}")


def _print_report(report: ModelReport) -> None:
    print(f"\n== {report.case.describe()} ==")
    if report.reference_error:
        print(f"ERROR: {report.reference_error}")
    elif report.vote is not None and report.vote.sentence:
        print(f"ODD ONE OUT: {report.vote.sentence}")
        if report.odd_localization is not None:
            _print_localization(report.odd_localization)
    _print_judgements(report)
    for path, outcome in report.outcomes.items():
        if report.verdicts.get(path) == "unavailable":
            print(
                f"skipped {path} (its framework is not installed here): {outcome.error}"
            )
        elif not outcome.ok:
            print(f"FAILED {path}: {outcome.error}")
            print(outcome.traceback or outcome.stderr_tail or "")
    for result in report.judgements.values():
        _print_failures(report.case.model, result, 5)
    for localization in report.localizations.values():
        _print_localization(localization)
    rows = []
    for pair in report.pairs:
        worst = pair.worst_grad()
        rows.append(
            [
                f"{pair.a} vs {pair.b}",
                f"{pair.error('logits'):.1e}",
                f"{pair.error('loss'):.1e}",
                f"{worst.error:.1e} ({worst.quantity.removeprefix('grad:')})",
                "" if pair.ok else "beyond the pairwise tolerance",
            ]
        )
    if rows:
        print("pairwise, float32 paths against each other (a diagnostic):")
        print(tabulate(rows, headers=["pair", "logits", "loss", "worst gradient", ""]))
    if report.trajectory_pairs:
        _print_trajectories(report.case.model, report.trajectory_pairs)
    if not report.ok:
        print(f"replay: {report.case.command()}")


def _print_failures(model: str, pair: PairResult, limit: int) -> None:
    for e in pair.failures[:limit]:
        print(
            f"DISAGREE {model}: {pair.a} against {pair.b} on "
            f"{e.quantity.replace('grad:', 'gradient of ')}: error {e.error:.2e} "
            f"> allowed {e.tolerance:.1e}"
        )
    if len(pair.failures) > limit:
        print(f"  ... and {len(pair.failures) - limit} more")


def _print_trajectories(model: str, pairs: list[PairResult]) -> None:
    """Per step, the worst loss and parameter error over all pairs, against
    that step's tolerance: how the difference grows with training."""
    steps = sorted(
        {int(e.quantity.split("/")[0].removeprefix("step")) for e in pairs[0].entries}
    )
    rows = []
    for t in steps:
        prefix = f"step{t}/"
        losses = [
            p.error(f"{prefix}loss")
            for p in pairs
            if any(e.quantity == f"{prefix}loss" for e in p.entries)
        ]
        params = [
            e.error
            for p in pairs
            for e in p.entries
            if e.quantity.startswith(prefix) and e.quantity != f"{prefix}loss"
        ]
        rows.append(
            [
                t,
                f"{max(losses, default=0.0):.1e}",
                f"{max(params, default=0.0):.1e}",
                f"{step_tolerance(model, t):.0e}",
            ]
        )
    print("trajectory, pairwise (worst over all pairs, a diagnostic):")
    print(tabulate(rows, headers=["step", "loss", "parameters", "tolerance"]))


def _print_localization(loc: Localization) -> None:
    if loc.raised and loc.first is None:
        print(
            f"NOT LOCALIZED {loc.path}: {loc.raised}; its forward pass agrees "
            "layer by layer, and it has nothing else to compare"
        )
        return
    where = f"{loc.first}" if loc.first else "no layer beyond tolerance"
    if loc.step is not None:
        where += f" (training step {loc.step})"
    print(f"LOCALIZED {loc.path} against {loc.reference}: first difference in {where}")
    if loc.error:
        print(f"  its forward pass stopped: {loc.error}")
    if loc.raised:
        print(f"  {loc.raised}")
    if loc.contradiction:
        print(f"  CONTRADICTION: {loc.contradiction}")
    rows = [
        [e.stage, e.layer, f"{e.error:.1e}", f"{e.tolerance:.0e}", "" if e.ok else "<-"]
        for e in loc.errors
    ]
    print(tabulate(rows, headers=["stage", "layer", "error", "tolerance", ""]))


def _print_accuracy(report: AccuracyReport) -> None:
    print(f"\n== accuracy: {report.model} on real MNIST digits (1000 test samples) ==")
    rows = [
        [path, *(f"{a:.3f}" for a in curve)] for path, curve in report.curves.items()
    ]
    epochs = max((len(c) for c in report.curves.values()), default=0)
    print(tabulate(rows, headers=["path", *(f"epoch {e + 1}" for e in range(epochs))]))
    for path, outcome in report.outcomes.items():
        if not outcome.ok:
            print(f"{outcome.status.upper()} {path}: {outcome.error}")
    verdict = "ok" if report.spread <= ACCURACY_SPREAD else "TOO WIDE"
    print(
        f"spread of final accuracy across paths: {report.spread:.3f} "
        f"(accepted up to {ACCURACY_SPREAD}: {verdict})"
    )


# Every number the command line takes, with its range: a value outside it is
# one sentence, never a worker asked for a billion-row batch.
BOUNDS: dict[str, tuple[float, float]] = {
    "--seed": (0, 2**32 - 1),  # NumPy's seed range
    "--batch-size": (1, 4096),
    "--steps": (0, 1000),
    "--epochs": (0, 100),
    "--seq-len": (1, 10_000),
    "--input-scale": (0, 1_000_000),
    "--timeout": (1, 86_400),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m equivalence",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help="comma-separated model ids (default: the four models)",
    )
    parser.add_argument(
        "--model",
        type=Path,
        action="append",
        metavar="FILE",
        help="your own model instead: a Keras 3 file (.keras) or a [model] "
        "table (.toml); kept by name in results/models; give it again to check "
        "several with one set of workers",
    )
    parser.add_argument(
        "--paths",
        help="comma-separated path ids, modes included (keras-torch@compile); "
        "default: every path in its default mode; all: every mode too",
    )
    parser.add_argument("--seed", type=integer, default=0)
    parser.add_argument("--batch-size", type=integer, default=16)
    parser.add_argument(
        "--steps",
        type=integer,
        default=None,
        help=f"training steps to compare (default {STEPS}, VGG16 "
        f"{DEFAULT_STEPS['vgg16']}; 0: forward and backward only)",
    )
    parser.add_argument(
        "--epochs",
        type=integer,
        default=3,
        help="epochs of the accuracy check on real digits (0: skip it)",
    )
    parser.add_argument("--seq-len", type=integer, default=None, help="LSTM length")
    parser.add_argument(
        "--input-scale", type=number, default=1.0, help="factor on every input"
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="PATH:FAULT",
        help=f"inject a deliberate fault into one native path ({', '.join(FAULTS)})",
    )
    parser.add_argument(
        "--source-fault",
        action="append",
        default=[],
        metavar="IMPLEMENTATION:FAULT",
        help="inject a fault into one reference implementation's code, as an "
        f"edit would ({', '.join(IMPLEMENTATIONS)}): into its path and its "
        "float64 and float32 reference runs",
    )
    parser.add_argument(
        "--fault-suite",
        action="store_true",
        help="instead: inject every deliberate fault into every native path "
        "and report how many are caught and localized",
    )
    parser.add_argument("--out", type=Path, help="write the verdicts to this JSON file")
    parser.add_argument(
        "--timeout",
        type=number,
        default=900.0,
        help="seconds a worker may take for one model",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        models = (
            [model_from_file(file, Path("results") / "models") for file in args.model]
            if args.model
            else parse_list(args.models, [*MODELS, *VARIANTS], "model")
        )
        # Each framework's default mode unless asked: "all" adds every mode.
        paths = parse_list(
            ",".join(PATHS) if args.paths is None else args.paths,
            [*PATHS, *MODE_PATHS],
            "path",
        )
        native = [p for p in paths if get_path(p).api == "native"]
        faults = _parse_faults(args.fault, native)
        source_faults = _parse_faults(
            args.source_fault, list(IMPLEMENTATIONS), "--source-fault"
        )
        for option, (low, high) in BOUNDS.items():
            value = getattr(args, option.removeprefix("--").replace("-", "_"))
            if value is not None and not low <= value <= high:
                raise ValueError(
                    f"{option} must be from {low} to {high}, got {str(value)[:80]}"
                )
        if not args.input_scale > 0:
            raise ValueError("--input-scale must be positive")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"verdicts: error against float64 at most {MULTIPLE:g} x (the largest "
        f"float32 error of {', '.join(IMPLEMENTATIONS)} + {FLOOR:.0e}); three "
        "float64 runs vote on the reference (see equivalence/reference.py)"
    )
    print(
        f"pairwise diagnostic: tolerances {TOLERANCES}; trajectory after step t: "
        f"base * t * growth**(t-1), (base, growth) = {TRAJECTORY_TOLERANCE}"
    )
    if args.fault_suite:
        return _fault_suite(paths, args.timeout)
    reports, accuracies = [], []
    with Checker(paths, timeout=args.timeout, repeat=True) as checker:
        _print_numerics(checker)
        for model in models:
            steps = (
                DEFAULT_STEPS.get(model, STEPS) if args.steps is None else args.steps
            )
            for seq_len in seq_lens(model, args.seq_len):
                start = time.perf_counter()
                case = Case(
                    model, args.seed, args.batch_size, seq_len, args.input_scale, steps
                )
                report = checker.check(case, faults, source_faults)
                _print_report(report)
                print(f"({time.perf_counter() - start:.1f} s)")
                reports.append(report)
        if args.epochs:
            for model in models:
                if get_spec(model).workload.dataset == "mnist":
                    accuracy = checker.accuracy(model, args.epochs, args.seed)
                    _print_accuracy(accuracy)
                    accuracies.append(accuracy)
    if args.out:
        _write_verdicts(args.out, reports, args, {**faults, **source_faults})
    line = _closing(reports, accuracies)
    print(f"\n{line or 'all paths agree'}")
    return 1 if line else 0


def _closing(reports: list[ModelReport], accuracies: list[AccuracyReport]) -> str:
    """The run's closing line when it failed, else "": the models where a
    path disagrees (``ModelReport.paths_pass``) or the accuracy spread, and
    apart from them the reference implementations found wrong
    (``ModelReport.reference_sound``), which fail the run even when every
    path they judged passed."""
    bad = [r.case.model for r in reports if not r.paths_pass]
    bad += [
        f"{a.model} accuracy"
        for a in accuracies
        if a.spread > ACCURACY_SPREAD
        or any(not o.ok and not missing_framework(p, o) for p, o in a.outcomes.items())
    ]
    wrong = {
        f"in {r.case.model}, {r.vote.fault}": None
        for r in reports
        if r.vote is not None and r.vote.odd is not None
    }
    parts = [f"disagreement in: {', '.join(dict.fromkeys(bad))}"] if bad else []
    if wrong:
        lead = "" if bad else "every path agrees with the float64 reference, but "
        parts.append(
            f"{lead}a reference implementation was found wrong, which fails the "
            f"check: {'; '.join(wrong)}"
        )
    return "; and ".join(parts)


def _fault_suite(paths: list[str], timeout: float) -> int:
    """Every fault into every native path; a native path that cannot start
    fails the suite, unless its optional framework is not installed here
    (then it is named as skipped)."""
    native = [p for p in paths if get_path(p).api == "native"]
    with Checker(paths, timeout=timeout) as checker:
        available, broken = [], []
        for p in native:
            failure = checker.workers[p].failure
            if failure is None:
                available.append(p)
            elif missing_framework(p, failure):
                print(f"skipped {p}, its framework is not installed: {failure.error}")
            else:
                print(f"FAILED {p}: cannot start: {failure.error}")
                broken.append(p)
        results = run_suite(checker, available)
    rows = [
        [
            r.fault,
            r.path,
            r.case.model,
            "yes" if r.caught else "NO",
            str(r.located),
            str(r.expected),
            "yes" if r.localized else "NO",
            _multiple(r.needed),
            _multiple(r.others_needed),
        ]
        for r in results
    ]
    headers = [
        "fault",
        "path",
        "model",
        "caught",
        "localized at",
        "expected",
        "right",
        "m",
        "others' m",
    ]
    print(tabulate(rows, headers=headers))
    caught = sum(r.caught for r in results)
    localized = sum(r.caught and r.localized for r in results)
    print(
        f"\ncaught {caught}/{len(results)}, caught and localized to the right "
        f"layer {localized}/{len(results)}; m: the multiple the faulty path "
        f"needed, others' m: the largest any other path needed (passing up to "
        f"{MULTIPLE:g})"
    )
    return 0 if results and localized == len(results) and not broken else 1


def _multiple(m: float) -> str:
    """An "m" for a table: "-" for a path that was not judged (it stopped)."""
    return "-" if math.isnan(m) else f"{m:.3g}"


def _print_numerics(checker: Checker) -> None:
    print("pinned numerics per path:")
    for path, worker in checker.workers.items():
        pinned = worker.platform.get("numerics")
        failure = worker.failure.error if worker.failure else None
        print(f"  {path}: {pinned if pinned is not None else failure}")


def _combined_verdicts(reports: list[ModelReport]) -> dict[str, dict[str, str]]:
    """Per model and path, the worst verdict over the model's cases."""
    combined: dict[str, dict[str, list[str]]] = {}
    for r in reports:
        for path, verdict in r.verdicts.items():
            combined.setdefault(r.case.model, {}).setdefault(path, []).append(verdict)
    return {
        model: {p: worst_verdict(v) for p, v in paths.items()}
        for model, paths in combined.items()
    }


def _write_verdicts(
    out: Path,
    reports: list[ModelReport],
    args: argparse.Namespace,
    faults: dict[str, str],
) -> None:
    document = {
        "schema_version": VERDICT_SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seed": args.seed,
        "batch_size": args.batch_size,
        "faults": faults,
        "rule": {
            "multiple": MULTIPLE,
            "floor": FLOOR,
            "implementations": list(IMPLEMENTATIONS),
        },
        "tolerances": TOLERANCES,
        "cases": [
            {
                "case": r.case.describe(),
                "reference": r.vote.reference if r.vote else None,
                "odd_one_out": r.vote.odd if r.vote else None,
                "reference_sound": r.reference_sound,
                "reference_fault": r.vote.fault if r.vote else None,
                "thinned": r.thinned(),
                "verdicts": r.verdicts,
                "shown_verdicts": {p: r.shown_verdict(p) for p in r.verdicts},
                "notes": {p: r.notes(p) for p in r.verdicts if r.notes(p)},
                "multiples": r.multiples,
                "localizations": {
                    p: str(loc.first) for p, loc in r.localizations.items()
                },
            }
            for r in reports
        ],
        "models": _combined_verdicts(reports),
    }
    files.folder(out.parent, follow=True)
    files.write_json(out, document, indent=2)


if __name__ == "__main__":
    sys.exit(main())
