"""The gate in front of every timing: a path is timed only once it is shown
to compute what the other paths compute.  It lives with its caller,
``harness.bench.run``, and asks ``equivalence.check`` for the verdicts.

``verify`` returns, per model and path, the verdict of an equivalence check
(``GATE_STEPS`` training steps on small batches, every path against every
other, from the weights the timing uses).  Verdicts are cached in
``<results>/verdicts.json``, each under a key made of everything that could
change the answer:

- the model's spec and the canonical weights' content digest (the weights
  file is first checked against ``zoo.weights.make_weights`` and rebuilt if
  it differs: ``checked_weights``);
- the source of the code that defines the models, runs them and checks them
  (``zoo/``, ``native/``, ``workers/`` with the path registry, the worker loop
  and its numeric settings, ``equivalence/``, and this gate): any edit
  invalidates every verdict, which errs on the safe side;
- the tolerance tables and the float64 judgement's rule;
- the versions of the libraries in the path's environment, read with
  ``importlib.metadata`` by that environment's interpreter;
- the deliberate faults a test injected.

A cached verdict whose key still matches is reused; otherwise every path of
the model is checked again (each against the float64 reference, so the
others' verdicts come at little extra cost).  A cache file of the wrong shape
is set aside and rebuilt.

A float64 vote with an odd one out (a reference implementation found wrong,
or one that could not vote) still judges every path, against the
implementations that agree, and a path that passed is timed; but every
verdict of that model records what was wrong with the reference
(``reference``) and, where the odd one's float32 baseline was dropped from
a path's allowance, on which baselines the allowance rested (``allowance``).
The gate logs both, cached or fresh, and ``harness gate``, ``harness run``
and ``harness report --check`` end non-zero, saying what was wrong
(``wrong_references``): the tool's own judge needs fixing.

The checks run each path's own check tasks (Evaluate, Trajectory), but the
timing runs the closures ``workers.serve`` builds for it (the ``Trainer`` and
``Predictor``; Keras' ``fit`` and ``predict``).  So a path the checks pass is
then asked for what those very closures compute on the gate's batches
(``workers.messages.TimedOutputs``): the parameters after its trainer's
``GATE_STEPS`` steps must match its own checked trajectory after as many
steps, and its predictor's logits its own checked logits of the same
mini-batch (``timed_disagreement``); a path whose timed closures disagree
fails, with the reason logged and cached beside the verdict.

The timing then uses exactly what was checked: ``checked_weights`` and
``checked_batches`` give the files and their content digests, the run sends
the digests with every request, and a worker refuses to time arrays whose
digest differs (``workers.serve``).  Framework-free.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from equivalence.check import (
    VERDICT_ORDER,
    Case,
    Checker,
    ModelReport,
    seq_lens,
    worst_verdict,
)
from equivalence.compare import (
    TOLERANCES,
    TRAJECTORY_TOLERANCE,
    relative_error,
    step_tolerance,
    tolerance,
)
from equivalence.keras_known import KNOWN_BUG
from equivalence.reference import (
    CROSS_CHECK_SHARE,
    FLOOR,
    IMPLEMENTATIONS,
    MULTIPLE,
)
from harness.core import records
from workers.completeness import incomplete
from workers.frameworks import distributions
from workers.launch import PROJECT_ROOT
from workers.messages import ArraysAnswer, TimedOutputs
from workers.paths import PATHS, get_path, interpreter
from zoo import files
from zoo.arrays import digest, load_npz, save_npz
from zoo.data import batches_file, make_batches
from zoo.models import get_spec
from zoo.specs import ModelSpec, masks_of
from zoo.weights import make_weights, weights_file

GATE_STEPS = 2
GATE_BATCH = 4
# The verdict of a path whose forward pass, loss and gradients agree with
# float64 but whose training steps do not (Keras on TensorFlow's Adam on an
# embedding: docs/results/transformer.md): its inference is timed, its
# training is not.
INFER_ONLY = records.INFER_ONLY
INFER_ONLY_SENTENCE = (
    "its forward pass and gradients agree with float64, its optimizer's "
    "update does not, so it is timed for inference only"
)
CACHE_NAME = "verdicts.json"
# The most a verdicts cache may hold: an entry is a few hundred bytes, so a
# cache of every model and path over many edits stays far below it.
CACHE_BYTES = 64 * 1024 * 1024
# The most one of the project's source files (digested into every verdict's
# key) may hold; the largest is well under a megabyte.
SOURCE_BYTES = 16 * 1024 * 1024


def training_checks(spec: ModelSpec) -> str | None:
    """What the verdict of a model whose training pass differs from its
    inference (``zoo.specs.TRAINING_KINDS``) checked of those layers, in one
    sentence for its record; ``None`` for any other model."""
    parts = []
    norms = [layer.name for layer in spec.layers if layer.kind == "batch_norm"]
    if norms:
        parts.append(
            f"batch normalization ({', '.join(norms)}): batch statistics in "
            "training, moving ones in inference, the moving statistics "
            "compared after every step like the weights"
        )
    drops = [
        f"{x.name} at {x.options.rate:g}" for x in spec.layers if x.kind == "dropout"
    ]
    if drops:
        parts.append(
            f"dropout ({', '.join(drops)}): the identity in inference (logits) "
            "and at rate 0 (trajectory and timed closures), and at its rate "
            "in one training pass of every path: kept fraction within "
            "Hoeffding's bound, kept values scaled by 1 / (1 - rate), one "
            "draw along the axes it shares"
        )
    masked = [x for x in spec.noisy_layers() if masks_of(x)]
    if masked:
        named = ", ".join(
            f"{x.name} {m.option} {m.rate:g}"
            for x in masked
            for m in masks_of(x)
            if m.copy == masks_of(x)[0].copy  # a Bidirectional's once
        )
        parts.append(
            f"masks drawn inside a layer ({named}): the identity in inference "
            "(logits) and at rate 0 (trajectory and timed closures), and at "
            "their rates in one training pass of every path: the masks each "
            "path drew, once per sequence (kept fraction within Hoeffding's "
            "bound, kept values scaled by 1 / (1 - rate), gates, heads and "
            "directions drawn apart), and the layer's output recomputed from "
            "them in float64"
        )
    normal = [x for x in spec.noisy_layers() if x.kind != "dropout" and x not in masked]
    if normal:
        named = ", ".join(f"{x.name} ({x.kind.replace('_', ' ')})" for x in normal)
        parts.append(
            f"Gaussian noise ({named}): the identity in inference (logits) and "
            "without noise (trajectory and timed closures), and drawn in one "
            "training pass of every path: the draws' distribution within the "
            "Dvoretzky-Kiefer-Wolfowitz bound of the normal's"
        )
    return "; ".join(parts) or None


CACHE_SCHEMA_VERSION = 1
# What the gate checks beyond the paths' agreement: the timed closures
# against the same path's checked results (part of every verdict's key).
TIMED_CHECK = ("trainer parameters", "predictor logits")
_SOURCES = ("zoo", "native", "workers", "equivalence", "harness/core/gate.py")


def sources_digest(root: Path = PROJECT_ROOT) -> str:
    """SHA-256 over the project's model and check sources (path and bytes),
    each read through ``zoo.files`` (a regular file, no link followed, at
    most ``SOURCE_BYTES``)."""
    sha = hashlib.sha256()
    for entry in _SOURCES:
        base = root / entry
        sources = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for f in sources:
            data = files.read_bytes(f, SOURCE_BYTES)
            sha.update(str(f.relative_to(root)).encode() + b"\0" + data)
    return sha.hexdigest()


def library_versions(python: str) -> dict[str, str | None]:
    """Versions of the libraries that could change results, as installed for
    ``python`` (``None`` where one is not installed): every registered
    framework's distributions (``workers.frameworks.distributions``), so a
    new framework cannot be left out of the verdict key."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "def v(d):\n"
        "    try:\n"
        "        return m.version(d)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{d: v(d) for d in {list(distributions())!r}}}))\n"
    )
    try:
        done = subprocess.run(
            [python, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        versions: dict[str, str | None] = json.loads(done.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        return {"error": f"cannot read versions from {python}: {exc}"}
    return {**versions, "python": python}


def verdict_key(
    model: str,
    path: str,
    weights_sha: str,
    sources: str,
    versions: dict[str, str | None],
    *,
    faults: Mapping[str, str] | None = None,
    reference_versions: Mapping[str, dict[str, str | None]] | None = None,
) -> str:
    """The cache key of one verdict; ``faults``: the deliberate faults the
    check injected, by path (a verdict depends on every path's);
    ``reference_versions``: the library versions of each reference
    implementation's environment (``equivalence.reference``), by
    implementation: they vote on the float64 run that judges the path and
    set its allowances."""
    document = {
        "model": model,
        "spec": repr(get_spec(model)),
        "path": path,
        "weights": weights_sha,
        "sources": sources,
        "tolerances": [TOLERANCES, TRAJECTORY_TOLERANCE],
        "check": [GATE_STEPS, GATE_BATCH, list(TIMED_CHECK)],
        "versions": versions,
        "faults": dict(faults or {}),
        "reference": [
            list(IMPLEMENTATIONS),
            MULTIPLE,
            FLOOR,
            CROSS_CHECK_SHARE,
            dict(reference_versions or {}),
        ],
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: str
    path: str
    verdict: str
    created: str
    reason: str | None = None  # why the timed closures failed it
    checked: str | None = None  # how layers that train differently were checked
    # what was wrong with the float64 reference that judged it (an odd one
    # out of the vote, or no agreement), and the float32 baselines its
    # allowance rested on when the odd one's were dropped; both absent from
    # verdicts cached before they existed
    reference: str | None = None
    allowance: str | None = None

    @field_validator("verdict")
    @classmethod
    def _known(cls, verdict: str) -> str:
        """A verdict the gate gives: a cache saying anything else (a damaged
        or edited file) is not trusted to let a path be timed."""
        if verdict not in VERDICT_ORDER:
            raise ValueError(f"{verdict[:40]!r} is not a verdict the gate gives")
        return verdict


class _Cache(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    schema_version: int
    verdicts: dict[str, _Entry]


def _load(cache: Path, log: Callable[[str], None]) -> dict[str, dict[str, str]]:
    """The cached verdicts by key; none when there is no cache.

    A file that is not a verdicts cache of this version (no regular file, a
    link, larger than ``CACHE_BYTES``, not JSON, not UTF-8, a wrong shape, a
    verdict the gate does not give, an older version) is set aside beside
    itself with a warning, and every verdict is checked again."""
    try:
        text = files.read_bytes(cache, CACHE_BYTES)
    except FileNotFoundError:
        return {}
    except files.Refused as exc:
        return _set_aside(cache, str(exc), log)
    except OSError as exc:
        raise ValueError(f"cannot read {cache}: {exc.strerror or exc}") from None
    try:
        document = _Cache.model_validate_json(text)
        if document.schema_version == CACHE_SCHEMA_VERSION:
            return {
                k: e.model_dump(exclude_none=True) for k, e in document.verdicts.items()
            }
        problem = f"version {document.schema_version}, not {CACHE_SCHEMA_VERSION}"
    except ValidationError as exc:
        problem = _first_problem(exc)
    return _set_aside(cache, problem, log)


def _set_aside(
    cache: Path, problem: str, log: Callable[[str], None]
) -> dict[str, dict[str, str]]:
    """No cached verdicts: ``cache`` (``problem``) renamed beside itself for a
    look, said once in ``log``."""
    aside = cache.with_name(f"{cache.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        cache.replace(aside)
        where = f"set aside as {aside.name}"
    except OSError as exc:
        where = f"left in place ({exc.strerror or exc})"
    log(
        f"warning: {cache} is not a verdicts cache this code reads ({problem}); "
        f"{where}; checking every path again"
    )
    return {}


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _save(cache: Path, entries: dict[str, Any]) -> None:
    """Write the verdicts cache (``zoo.files.write_json``: renamed into
    place, a link there replaced, never followed)."""
    files.folder(cache.parent, follow=True)
    document = {"schema_version": CACHE_SCHEMA_VERSION, "verdicts": entries}
    files.write_json(cache, document, indent=1, sort_keys=True)


# --- the data the timing uses ------------------------------------------------


def checked_weights(spec: ModelSpec, seed: int, cache_dir: Path) -> tuple[Path, str]:
    """The canonical weights file of ``spec`` and ``seed`` and its content
    digest (``zoo.arrays.digest``), the file rebuilt first if what it holds
    is not what ``zoo.weights.make_weights`` makes.  The gate checks these
    weights and keys its verdicts on the digest; a timing worker refuses a
    file whose arrays do not have it."""
    expected = make_weights(spec, seed)
    path = weights_file(spec, seed, cache_dir)
    return path, _checked(path, expected)


def checked_batches(
    spec: ModelSpec, seed: int, batch_size: int, count: int, cache_dir: Path
) -> tuple[Path, str]:
    """``checked_weights`` for the timing's mini-batches (``zoo.data``)."""
    x, y = make_batches(spec, seed, batch_size, count)
    path = batches_file(spec, seed, batch_size, count, cache_dir)
    return path, _checked(path, {"x": x, "y": y})


def _checked(path: Path, expected: dict[str, Any]) -> str:
    want = digest(expected)
    try:
        found = digest(load_npz(path))
    except (OSError, ValueError, zipfile.BadZipFile):
        found = None
    if found != want:
        print(
            f"warning: {path} does not hold what it should (a damaged or "
            "edited cache file); rebuilt",
            file=sys.stderr,
        )
        save_npz(path, expected)
    return want


# --- the timed closures against the checked results -----------------------------

PARAM_PREFIX = "param:"  # a trained parameter in a TimedOutputs file


def timed_disagreement(
    model: str,
    steps: int,
    timed: Mapping[str, np.ndarray],
    trajectory: Mapping[str, np.ndarray],
    evaluated: Mapping[str, np.ndarray],
    *,
    batch_index: int = 0,
) -> str | None:
    """``None`` when a path's timed closures computed what its checks computed,
    else one sentence naming the closure, the quantity and the error.

    The timed trainer's parameters after ``steps`` steps (``timed``,
    ``param:<name>``) are held against the checked trajectory's after as many
    (``step<steps>/<name>``) within ``step_tolerance``, the worst parameter
    named; the timed predictor's logits of mini-batch ``batch_index``
    (``timed["logits"][batch_index]``) against the checked logits of that
    mini-batch (``Evaluate``) within the logits tolerance.  A quantity one
    side lacks counts as an infinite error; a parameter whose training steps
    are rounding noise (``ModelSpec.noise_trained``) is not compared."""
    problems = []
    prefix = f"step{steps}/"
    names = sorted(
        (
            {k.removeprefix(prefix) for k in trajectory if k.startswith(prefix)}
            | {
                k.removeprefix(PARAM_PREFIX)
                for k in timed
                if k.startswith(PARAM_PREFIX)
            }
        )
        - set(get_spec(model).noise_trained())  # rounding noise in every run
    )
    errors = {
        name: _error(timed.get(PARAM_PREFIX + name), trajectory.get(prefix + name))
        for name in names
    }
    step_tol = step_tolerance(model, steps)
    if not errors:
        problems.append(f"the timed trainer left no parameters after {steps} steps")
    else:
        worst = max(errors, key=lambda name: errors[name])
        if errors[worst] > step_tol:
            problems.append(
                f"the timed trainer's parameter {worst} after {steps} steps differs "
                f"from the path's checked trajectory by {errors[worst]:.2e} "
                f"(tolerance {step_tol:.0e})"
            )
    logits = timed.get("logits")
    if logits is not None and len(logits) > batch_index:
        logits = logits[batch_index]
    else:
        logits = None
    error = _error(logits, evaluated.get("logits"))
    logits_tol = tolerance("logits")
    if error > logits_tol:
        problems.append(
            f"the timed predictor's logits of mini-batch {batch_index} differ from "
            f"the path's checked logits by {error:.2e} (tolerance {logits_tol:.0e})"
        )
    return "; ".join(problems) or None


def _error(a: np.ndarray | None, b: np.ndarray | None) -> float:
    return math.inf if a is None or b is None else relative_error(a, b)


def _timed_verdict(
    checker: Checker,
    report: ModelReport,
    path: str,
    weights: Path,
    fault: str | None,
) -> tuple[str, str | None]:
    """The verdict of a path the checks passed, once its timed closures are
    held against what the check saw it compute (``report``'s arrays) on the
    check's batches: ``pass``, else ``fail`` or ``error`` with the reason."""
    case = report.case
    spec = get_spec(case.model)
    data = checker.work / f"gate-{case.model}-batches.npz"
    x, y = make_batches(spec, case.seed, case.batch_size, max(case.steps, 1))
    save_npz(data, {"x": x, "y": y})
    out = checker.work / f"{path}-timed.npz"
    out.unlink(missing_ok=True)
    timed = TimedOutputs(
        model=case.model,
        weights=str(weights),
        data=str(data),
        fault=fault,
        out=str(out),
        steps=case.steps,
    )
    if fault is not None:
        checker.forget(path)
    reply = checker.workers[path].call(timed, checker.timeout)
    if not (isinstance(reply.answer, ArraysAnswer) and out.exists()):
        why = reply.error or reply.status
        return "error", f"its timed trainer and predictor did not run: {why}"
    reason = timed_disagreement(
        case.model,
        case.steps,
        load_npz(out),
        report.trajectories.get(path, {}),
        report.evaluated.get(path, {}),
    )
    return ("fail", reason) if reason else ("pass", None)


def _path_verdict(
    checker: Checker,
    reports: list[ModelReport],
    path: str,
    weights: Path,
    fault: str | None,
) -> tuple[str, str | None]:
    """``path``'s verdict over the gate's ``reports`` and why when it is not
    a pass: the worst of its checks; ``infer-only`` when only its training
    steps failed; a pass (or ``infer-only``) then held against its timed
    closures (``_timed_verdict``)."""
    checked = worst_verdict(r.verdicts.get(path, "error") for r in reports)
    reason = _where(reports, path)
    if checked == "fail" and _trains_wrong_only(reports, path):
        checked = INFER_ONLY
    if checked not in ("pass", INFER_ONLY):
        return checked, reason
    verdict, timed_reason = _timed_verdict(checker, reports[0], path, weights, fault)
    if verdict == "pass" and checked == INFER_ONLY:
        known = [n for r in reports for n in r.notes(path) if n.startswith(KNOWN_BUG)]
        said = "".join(f"; {n}" for n in dict.fromkeys(known))
        return INFER_ONLY, f"{reason}: {INFER_ONLY_SENTENCE}{said}"
    return verdict, timed_reason


def _trains_wrong_only(reports: list[ModelReport], path: str) -> bool:
    """Whether every quantity ``path`` failed on, over every case, is one of
    a training step (``ModelReport.trains_wrong_only``)."""
    judged = all(path in report.judgements for report in reports)
    failing = [q for report in reports for q in report.failing(path)]
    return judged and bool(failing) and all(q.startswith("step") for q in failing)


def _where(reports: list[ModelReport], path: str) -> str | None:
    """Why a path failed, in one sentence: that no two float64 runs agreed,
    the error that stopped one of its checks, or where it first parts from
    the float64 reference (``equivalence.localize``); ``None`` when no check
    says."""
    for report in reports:
        if report.reference_error is not None:
            return report.reference_error
    for report in reports:
        outcome = report.outcomes.get(path)
        if outcome is not None and not outcome.ok and outcome.error:
            first_line = outcome.error.strip().splitlines()[0][:200]
            return f"a check stopped with {first_line}"
    for report in reports:
        found = report.localizations.get(path)
        if found is None or found.first is None:
            continue
        worst = next(
            e
            for e in found.errors
            if (e.stage, e.layer) == (found.first.stage, found.first.layer)
        )
        return (
            f"first parts from float64 at {worst.stage} {worst.layer} (error "
            f"{worst.error:.2e}, allowed {worst.tolerance:.2e}; case "
            f"{report.case.model} batch {report.case.batch_size})"
        )
    return None


def _vote_sentences(reports: list[ModelReport]) -> list[str]:
    """What the float64 runs' votes said beyond "all agree" (an odd one out,
    or no agreement), each once."""
    said = (r.vote.sentence for r in reports if r.vote is not None)
    return [s for s in dict.fromkeys(said) if s is not None]


def _allowance(reports: list[ModelReport], path: str) -> str | None:
    """On which float32 baselines ``path``'s allowance rested where an odd
    one out left it fewer (``equivalence.reference.allowance_note``), once
    per distinct case; ``None`` when every implementation voted."""
    notes = [
        f"its allowance rested on {note} ({r.vote.odd} out of the vote)"
        for r in reports
        if r.vote is not None
        for note in [r.allowance_note(path)]
        if note is not None
    ]
    return "; ".join(dict.fromkeys(notes)) or None


def _log_vote(
    model: str, reports: list[ModelReport], log: Callable[[str], None]
) -> str | None:
    """Log what the float64 votes of ``reports`` found wrong with the
    reference and which allowances that left thinner; returns what was
    wrong, as every verdict of the model records it (``None`` when sound)."""
    wrong = "; ".join(_vote_sentences(reports)) or None
    if wrong is not None:
        log(f"equivalence {reference_line(model, wrong)}")
    said = (r.thinned() for r in reports)
    for fewer in dict.fromkeys(said):
        if fewer is not None:
            log(f"equivalence {model}: {fewer}")
    return wrong


def _log_cached(
    model: str, entries: list[dict[str, str]], log: Callable[[str], None]
) -> None:
    """Log what cached verdicts of ``model`` say beside the verdict: a wrong
    reference once, each path's reason and thinner allowance."""
    for sentence in dict.fromkeys(e["reference"] for e in entries if "reference" in e):
        log(f"equivalence {reference_line(model, sentence)}")
    for entry in entries:
        for field in ("reason", "allowance"):
            if field in entry:
                log(f"equivalence {model}: {entry['path']}: {entry[field]}")


def reference_line(model: str, sentence: str) -> str:
    """How the gate, ``harness run`` and the report say that the float64
    reference which judged ``model`` was found wrong."""
    return f"REFERENCE WRONG for {model}: {sentence}"


def cached(results_dir: Path) -> dict[str, dict[str, str]]:
    """The verdicts cached in ``results_dir`` by key, as the gate reads them
    (its schema: each field of the type it has, a verdict the gate gives);
    empty when there is none.  Only reads: a cache this code cannot read
    says nothing here (the gate sets it aside when it next runs)."""
    try:
        text = files.read_bytes(results_dir / CACHE_NAME, CACHE_BYTES)
        cache = _Cache.model_validate_json(text)
    except (OSError, ValidationError):
        return {}
    if cache.schema_version != CACHE_SCHEMA_VERSION:
        return {}
    return {k: e.model_dump(exclude_none=True) for k, e in cache.verdicts.items()}


def wrong_references(
    results_dir: Path, keys: Mapping[str, Iterable[str | None]]
) -> dict[str, str]:
    """Per model, what the verdicts cached in ``results_dir`` under ``keys``
    (by model) say was wrong with the float64 reference that judged them;
    a model whose reference was sound, or whose verdicts are not cached, is
    left out (:func:`cached`)."""
    entries = cached(results_dir)
    found = {}
    for model, model_keys in keys.items():
        said = [
            entry["reference"]
            for k in model_keys
            if k is not None
            for entry in [entries.get(k)]
            if entry is not None and "reference" in entry
        ]
        if said:
            found[model] = "; ".join(dict.fromkeys(said))
    return found


def _key_inputs(
    paths: list[str],
) -> tuple[list[str], str, dict[str, dict[str, str | None]]]:
    """The paths to check (those asked for: a path's verdict depends on the
    float64 reference, not on the other paths), the sources digest and the
    library versions of every environment, by interpreter.  Refused while a
    registered framework is incomplete: its verdicts could not be trusted."""
    gap = incomplete()
    if gap is not None:
        raise ValueError(gap)
    known = list(dict.fromkeys(paths))
    versions = {
        python: library_versions(python)
        for python in {interpreter(p.framework) for p in PATHS.values()}
    }
    return known, sources_digest(), versions


def _model_keys(
    model: str,
    known: list[str],
    weights_sha: str,
    inputs: tuple[str, dict[str, dict[str, str | None]]],
    faults: Mapping[str, str],
) -> dict[str, str]:
    sources, versions = inputs
    reference = {
        impl: versions[interpreter(get_path(impl).framework)]
        for impl in IMPLEMENTATIONS
    }
    return {
        p: verdict_key(
            model,
            p,
            weights_sha,
            sources,
            versions[interpreter(get_path(p).framework)],
            faults=faults,
            reference_versions=reference,
        )
        for p in known
    }


def verdict_keys(
    models: list[str], paths: list[str], results_dir: Path, *, weights_seed: int = 0
) -> dict[str, dict[str, str]]:
    """The key each (model, path) verdict has in this environment (this code,
    these libraries, the canonical weights), without checking anything:
    what a plan records and ``run-cell`` computes again where it runs."""
    known, sources, versions = _key_inputs(paths)
    out = {}
    for model in models:
        _, weights_sha = checked_weights(
            get_spec(model), weights_seed, results_dir / "cache"
        )
        keys = _model_keys(model, known, weights_sha, (sources, versions), {})
        out[model] = {p: keys[p] for p in paths}
    return out


def cached_verdict(results_dir: Path, key: str) -> tuple[str, str | None] | None:
    """The verdict cached under ``key`` in ``results_dir`` and its reason;
    None when there is none."""
    entry = _load(results_dir / CACHE_NAME, lambda line: None).get(key)
    return None if entry is None else (entry["verdict"], entry.get("reason"))


def verify(
    models: list[str],
    paths: list[str],
    results_dir: Path,
    *,
    weights_seed: int = 0,
    timeout: float = 900.0,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    faults: Mapping[str, str] | None = None,
    checker: Checker | None = None,
    keys_out: dict[str, dict[str, str]] | None = None,
) -> dict[str, dict[str, str]]:
    """The verdict of every (model, path) in ``paths``: cached where still
    valid, else checked now against the float64 reference (only the paths
    asked for are started, with the reference implementations' workers their
    judgement needs), and a passing path's timed closures then against its
    own checked results.  Refused, with one sentence, while a registered
    framework is incomplete (``workers.completeness.incomplete``).

    For tests: ``faults`` injects deliberate faults (``native.faults``) by
    path; ``checker``, an open ``Checker`` to check with, only on the paths
    asked for (left open; by default the gate starts one for those paths and
    closes it).
    ``keys_out`` is filled with every verdict's cache key, by model and path
    (what ``harness.core.cells`` plans with)."""
    faults = dict(faults or {})
    known, sources, versions = _key_inputs(paths)
    cache_file = results_dir / CACHE_NAME
    entries = _load(cache_file, log)
    weights_dir = results_dir / "cache"
    verdicts: dict[str, dict[str, str]] = {}
    own = checker is None
    try:
        for model in models:
            weights, weights_sha = checked_weights(
                get_spec(model), weights_seed, weights_dir
            )
            keys = _model_keys(model, known, weights_sha, (sources, versions), faults)
            if keys_out is not None:
                keys_out[model] = {p: keys[p] for p in paths}
            if all(keys[p] in entries for p in paths):
                verdicts[model] = {p: entries[keys[p]]["verdict"] for p in paths}
                log(f"equivalence {model}: cached verdicts still valid")
                _log_cached(model, [entries[keys[p]] for p in paths], log)
                continue
            log(
                f"equivalence {model}: checking {len(known)} path"
                f"{'s' if len(known) != 1 else ''} ({GATE_STEPS} steps) ..."
            )
            start = time.perf_counter()
            if checker is None:
                checker = Checker(known, cache_dir=weights_dir, timeout=timeout)
            # The workload's length first (the timed closures run it), then
            # for the LSTM a short one too (``equivalence.check.seq_lens``).
            reports = [
                checker.check(
                    Case(model, weights_seed, GATE_BATCH, n, steps=GATE_STEPS),
                    faults=faults,
                    # a checker given may hold more paths (or fewer: those
                    # it lacks are "unchecked")
                    paths=[p for p in known if p in checker.workers],
                )
                for n in seq_lens(model)
            ]
            report = reports[0]
            wrong = _log_vote(model, reports, log)
            if training_checks(get_spec(model)):
                log(f"equivalence {model}: checked {training_checks(get_spec(model))}")
            for p in report.verdicts:
                verdict, reason = _path_verdict(
                    checker, reports, p, weights, faults.get(p)
                )
                if reason is not None:
                    log(f"equivalence {model}: {p} {verdict}: {reason}")
                notes = {
                    "reason": reason,
                    "checked": training_checks(get_spec(model)),
                    "reference": wrong,
                    "allowance": _allowance(reports, p),
                }
                entries[keys[p]] = {
                    "model": model,
                    "path": p,
                    "verdict": verdict,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    **{k: v for k, v in notes.items() if v is not None},
                }
            _save(cache_file, entries)
            verdicts[model] = {
                p: entries[keys[p]]["verdict"] if p in report.verdicts else "unchecked"
                for p in paths
            }
            log(
                f"equivalence {model}: "
                + ", ".join(f"{p} {v}" for p, v in verdicts[model].items())
                + f" ({time.perf_counter() - start:.0f} s)"
            )
    finally:
        if own and checker is not None:
            checker.close()
    return verdicts
