"""A finding written as a report a Keras maintainer can act on
(``harness fuzz --write DIR``): ``DIR/<id>.md`` and its reproducer
``DIR/<id>.py``; or, where its run shows the tool's own bug (``triage``),
a failing test ``DIR/test_finding_<id>.py`` instead of the page
(``failing_test``), for ``tests/paths/``.

For each finding its smallest model is checked again (seconds: the workers
are up), which gives the values every path computed and the float64
reference's (three hand-written float64 implementations that agree: the
expected values).  ``workers.keras_code`` then writes the model as plain
Keras code with its weights, mini-batches and the expected values as
literals; the script is run on each Keras backend here and its output put
in the report, beside what the check saw on every path.
``harness.versions.correctness`` runs the script on earlier Keras releases
too (``--releases``), and the page gets its section (``releases_section``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tempfile
import textwrap
from collections.abc import Collection
from pathlib import Path

import jinja2
import numpy as np

from equivalence.check import Case, ModelReport
from equivalence.compare import GRAD_PREFIX, Entry
from equivalence.keras_known import KNOWN_BUG
from harness.fuzz.checking import WorkerCheck
from harness.fuzz.findings import Finding
from workers.launch import PROJECT_ROOT
from workers.paths import PATHS, interpreter
from workers.reproducer_error import error
from zoo import files
from zoo.arrays import save_npz
from zoo.kinds import KINDS
from zoo.models import get_spec
from zoo.user_models import STORE_ENV, register, spec_from_document

BACKENDS = ("jax", "tensorflow", "torch")
# A reproducer's error above this is a wrong result (float32 rounding of
# these small models stays below 1e-5; the bugs found move values by 1e-2).
WRONG = 1e-4
SHOWN = 4  # failing quantities shown per finding
FIRST_STEP = "step1/"
SCRIPT_TIMEOUT_S = 300.0
# The most a reproducer (weights and batches as literals) and a page may
# hold when read back: a drawn model's are tens of kilobytes.
SCRIPT_BYTES = 16 * 1024 * 1024
PAGE_BYTES = 32 * 1024 * 1024
_ERROR_LINE = re.compile(r"^(?P<quantity>\S+): error (?P<error>\S+)$")


def _check(check: WorkerCheck, finding: Finding) -> ModelReport:
    name = register("drawn", finding.document, folder=check.store)
    case = Case(name, finding.seed, finding.batch_size, None, 1.0, finding.steps)
    paths = [p for p in finding.paths if p in PATHS]
    return check.checker.check(
        case, paths=[*(paths or PATHS), *check.ready(finding.paths)]
    )


def _shown(report: ModelReport) -> list[str]:
    """The quantities to show: each failing path's first few (outputs,
    gradients, a training step's loss and parameters; not the evaluation's
    loss, which the script does not print), and the gradient of each
    parameter shown after step 1."""
    wanted: dict[str, None] = {}
    for path in sorted(report.verdicts):
        for quantity in report.failing(path)[:SHOWN]:
            wanted[quantity] = None
    keep = [q for q in wanted if q in report.expected]
    keep = [q for q in keep if q != "loss"][:SHOWN]
    # a step-1 parameter's gradient beside it, for ``amplified``
    grads = [_gradient_of(q) for q in keep if q.startswith(FIRST_STEP)]
    return keep + [g for g in grads if g in report.expected and g not in keep]


def run_script(script: Path, backend: str, env: dict[str, str] | None = None) -> str:
    """The reproducer's output on ``backend`` (its error text when it fails;
    ``TIMED OUT`` when it gave no answer in ``SCRIPT_TIMEOUT_S``, which
    says nothing of Keras: found when one reproducer's timeout on a busy
    machine ended ``--write`` with a traceback and the other findings
    unwritten)."""
    try:
        done = subprocess.run(
            [interpreter("jax"), str(script), backend],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            env={**(env or os.environ), "TF_CPP_MIN_LOG_LEVEL": "3"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"TIMED OUT: no answer in {SCRIPT_TIMEOUT_S:g} s"
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"FAILED: {tail[:300]}"
    return done.stdout


def errors_of(output: str) -> dict[str, float]:
    """Each quantity's error in a reproducer's output."""
    found = {}
    for line in output.splitlines():
        match = _ERROR_LINE.match(line.strip())
        if match:
            found[match["quantity"]] = float(match["error"])
    return found


def wrong(output: str) -> bool | None:
    """Whether a reproducer's output shows a wrong value (``None``: it did
    not run)."""
    errors = errors_of(output)
    if not errors:
        return None
    return max(errors.values()) > WRONG


# What a run of the reproducer shows (``triage``), in the order it is read.
VERDICTS = (
    "Keras or its framework",
    "the tool's own",
    "rounding",
    "not shown again",
    "not triaged",
)


def triage(report: ModelReport, outputs: dict[str, str]) -> tuple[str, str]:
    """What a run shows of one finding (issue 80), from the finding's check
    again (``report``) and its plain-Keras reproducer's output on each
    backend (``outputs``, no project code): one of ``VERDICTS`` and the
    sentence that says why, with its figures.

    - **Keras or its framework**: plain Keras on a backend parts from
      float64 beyond ``WRONG`` or raises, or the check names a known Keras
      bug (``equivalence.keras_known``: each has its page and a reproducer
      a test runs);
    - **the tool's own**: plain Keras agrees with float64 on every backend
      and a path of the tool's parts by more than ``WRONG`` or stops: the
      tool's bug (a Keras path's reading of the model, a hand-written native
      path, or that path's framework operator: the sentence names the paths);
    - **rounding**: plain Keras agrees on every backend and every failing
      path of the tool's is within ``WRONG``: the judge's allowance was
      tighter than float32's rounding of this model (the judge's); or every
      failing path parts, of what the reproducer compares, only on
      parameters after a step that scaled float32's rounding of a gradient
      float64 says is 0 to a step (``amplified``), where plain Keras parts
      too;
    - **not shown again**: checked again, every path agrees;
    - **not triaged**: the float64 runs themselves disagree (plain Keras
      cannot say which is wrong), plain Keras parts from float64 on one
      quantity on every backend (Keras' own formula, or a float64 value of
      rounding's size: ``_off_everywhere``), or the reproducer compares none
      of the quantities the paths failed on."""
    failing = {p: report.judgements[p] for p in report.verdicts if report.failing(p)}
    stopped = sorted(p for p, v in report.verdicts.items() if v == "error")
    vote = report.vote
    odd = f"{vote.odd}: {vote.fault}" if vote is not None and vote.odd else ""
    judge = report.reference_error or odd
    plain = {b: errors_of(o) for b, o in outputs.items()}
    rounded = amplified(report, outputs)
    compared = {q for errors in plain.values() for q in errors} - set(rounded)
    tool = {
        p: max(
            _measured(report, p, e) for e in judged.failures if e.quantity in compared
        )
        for p, judged in failing.items()
        if any(e.quantity in compared for e in judged.failures)
    }
    found = _keras_side(report, outputs, [*failing, *stopped], rounded)
    everywhere = _off_everywhere(outputs, rounded)
    if judge:
        answer = (
            "not triaged",
            f"the tool's float64 runs disagree ({judge[:160]}): "
            "a hand-written float64 implementation or its framework's "
            "operator, which plain Keras cannot tell apart",
        )
    elif not failing and not stopped:
        answer = ("not shown again", "checked again, every path agrees with float64")
    elif everywhere:
        answer = (
            "not triaged",
            f"plain Keras on every backend parts from float64 on {everywhere}: "
            "Keras' own formula, or the float64 value (a gradient zero in "
            "exact arithmetic that float64 rounds to a speck, against which "
            "every float32 rounding is far off), which one run cannot tell apart",
        )
    elif found:
        answer = ("Keras or its framework", found)
    elif (
        rounded
        and not tool
        and not stopped
        and all(
            any(e.quantity in rounded for e in j.failures) for j in failing.values()
        )
    ):
        answer = (
            "rounding",
            f"float64 gives {', '.join(q.removeprefix(FIRST_STEP) for q in rounded)} "
            f"a gradient of exactly 0 and plain Keras' is within {WRONG:g} of it "
            "on every backend; a step that divides by the gradient's own size "
            "moves it by float32's rounding, and there every failing path of "
            "the tool's parts, on no other quantity the reproducer compares",
        )
    elif not compared or (not tool and not stopped):
        answer = (
            "not triaged",
            "the reproducer compares none of the quantities the paths failed on",
        )
    else:
        largest = max(_beyond(e, rounded) for e in plain.values() if e)
        silent = [b for b, o in outputs.items() if not errors_of(o)]
        on = (
            f"every backend but {', '.join(silent)}, which gave no answer"
            if silent
            else "every backend"
        )
        agrees = f"plain Keras agrees with float64 on {on} (at most {largest:.1g})"
        off = [f"{p} {e:.2g} off" for p, e in sorted(tool.items()) if e > WRONG]
        off += [f"{p} stopped" for p in stopped]
        answer = (
            ("the tool's own", f"{agrees}, and the tool's {', '.join(off)}")
            if off
            else (
                "rounding",
                f"{agrees}, and every failing path of the tool's "
                f"within {WRONG:g} (at most {max(tool.values()):.1g}): the "
                "judge's allowance was tighter than this model's float32 rounding",
            )
        )
    return answer


def _measured(report: ModelReport, path: str, entry: Entry) -> float:
    """``path``'s error on ``entry``'s quantity as a reproducer measures
    plain Keras' (``workers.reproducer_error``: the difference alone where
    float64 is all zeros), so that the tool's paths and plain Keras are read
    alike (finding 2f8e84f7b7: a gradient float64 says is exactly 0 read 1
    off in the judge's normwise error, relative to the larger side, on
    native TensorFlow and 4e-10 off in plain Keras'); the judge's error where
    the check kept no value of it."""
    expected = report.expected.get(entry.quantity)
    trajectory = report.trajectories.get(path, {})
    value = trajectory.get(
        entry.quantity, report.evaluated.get(path, {}).get(entry.quantity)
    )
    step = re.fullmatch(r"step(\d+)/loss", entry.quantity)
    if step:  # a trajectory's losses, one per step (an evaluation's is one number)
        t, losses = int(step[1]), np.atleast_1d(trajectory.get("loss", []))
        value = losses[t - 1 : t] if len(losses) >= t else None
    if expected is None or value is None or np.size(value) != np.size(expected):
        return entry.error
    return error(np.reshape(value, np.shape(expected)), expected)


def _gradient_of(quantity: str) -> str:
    """``grad:<parameter>`` of a ``step1/<parameter>`` quantity."""
    return GRAD_PREFIX + quantity.removeprefix(FIRST_STEP)


def amplified(report: ModelReport, outputs: dict[str, str]) -> list[str]:
    """The step-1 parameters (``step1/...``) that a normalizing step made of
    float32 rounding: float64 gives the parameter a gradient of exactly 0,
    and on every backend plain Keras' gradient of it agrees with that
    (within ``WRONG``: the difference itself, float64 being all zeros), so
    whatever it moves by is the sign of rounding that Adam's ``m /
    (sqrt(v) + eps)`` (or RMSprop's, Adagrad's) scales to a step (finding
    2f453bff01: a bias gradient of 4.5e-8 against 0 moved a third of a
    step).  Only where the step's gradient is the one compared: no layer of
    the model computes otherwise in a training step (a batch normalization)
    than in the first batch's gradient, its noise silenced."""
    if not report.expected or _trains_otherwise(report):
        return []
    plain = [errors_of(o) for o in outputs.values()]
    if not plain or not all(plain):
        return []
    found = []
    for quantity in sorted(report.expected):
        gradient = _gradient_of(quantity)
        if not quantity.startswith(FIRST_STEP) or gradient not in report.expected:
            continue
        if np.any(report.expected[gradient]):
            continue
        if all(e.get(gradient, np.inf) <= WRONG for e in plain):
            found.append(quantity)
    return found


def _trains_otherwise(report: ModelReport) -> bool:
    spec = get_spec(report.case.model)
    return any(
        KINDS[layer.kind].trains_differently and KINDS[layer.kind].noise is None
        for layer in spec.layers
    )


def _off_everywhere(outputs: dict[str, str], rounded: Collection[str]) -> str:
    """The quantity (with each backend's error) on which plain Keras parts
    from float64 beyond ``WRONG`` on every backend, the one off most; ``""``
    when none is (or a backend did not run): not evidence of one backend's
    bug (finding e30b03fb8f: an attention's query kernel, 1 to 1.7e9 off
    on all three, against a float64 gradient of rounding's size)."""
    plain = [errors_of(o) for o in outputs.values()]
    if len(plain) < 2 or not all(plain):
        return ""
    common = set.intersection(*(set(e) for e in plain)) - set(rounded)
    off = [q for q in sorted(common) if all(e[q] > WRONG for e in plain)]
    if not off:
        return ""
    worst = max(off, key=lambda q: min(e[q] for e in plain))
    figures = ", ".join(f"{b} {errors_of(o)[worst]:.2g}" for b, o in outputs.items())
    return f"{worst} ({figures})"


def _beyond(errors: dict[str, float], rounded: Collection[str]) -> float:
    """The largest of ``errors`` but those of ``rounded`` (``amplified``)."""
    return max((e for q, e in errors.items() if q not in rounded), default=0.0)


def _keras_side(
    report: ModelReport,
    outputs: dict[str, str],
    paths: list[str],
    rounded: Collection[str] = (),
) -> str:
    """Why a finding is Keras' or its framework's (``triage``): each backend
    on which plain Keras raises or is off (but on the quantities of
    ``rounded``: ``amplified``), and the known Keras bug the check names on
    each of ``paths`` that no such backend explains; ``""`` when neither."""
    said, broken = [], set()
    for backend, output in outputs.items():
        errors = {q: e for q, e in errors_of(output).items() if q not in rounded}
        if output.startswith("FAILED"):
            said.append(f"plain Keras on {backend} raises ({output[8:].strip()[:120]})")
        elif errors and max(errors.values()) > WRONG:
            quantity, error = max(errors.items(), key=lambda qe: qe[1])
            said.append(f"plain Keras on {backend} is {error:.2g} off on {quantity}")
        else:
            continue
        broken.add(f"keras-{backend}")
    right = [
        f"{b} {_beyond(errors_of(o), rounded):.1g}"
        for b, o in outputs.items()
        if errors_of(o) and _beyond(errors_of(o), rounded) <= WRONG
    ]
    if said and right:
        said.append(f"within {WRONG:g} on {', '.join(right)}")
    known: dict[str, list[str]] = {}  # a note, once, with every path it is on
    for p in paths:
        if p.split("@", maxsplit=1)[0] not in broken:
            for note in report.notes(p):
                if note.startswith(KNOWN_BUG):
                    known.setdefault(note.removeprefix(KNOWN_BUG + ": "), []).append(p)
    said += [
        f"the check names a known Keras bug on {', '.join(on)}: {note[:200]}"
        for note, on in known.items()
    ]
    return "; ".join(said)


def _script(check: WorkerCheck, finding: Finding, report: ModelReport) -> str:
    """The reproducer's text: ``workers.keras_code`` writes it into a
    scratch folder, whence it is read back through the door (the caller
    writes it beside the page)."""
    shown = _shown(report)
    with tempfile.TemporaryDirectory(prefix="finding-") as scratch:
        expected = Path(scratch) / "expected.npz"
        save_npz(
            expected, {q: np.asarray(report.expected[q], np.float64) for q in shown}
        )
        made = Path(scratch) / "reproducer.py"
        subprocess.run(
            [
                interpreter("jax"),
                "-m",
                "workers.keras_code",
                report.case.model,
                str(finding.seed),
                str(finding.batch_size),
                str(finding.steps),
                str(expected),
                str(made),
            ],
            cwd=PROJECT_ROOT,
            env={**os.environ, STORE_ENV: str(check.store), "KERAS_BACKEND": "jax"},
            check=True,
            capture_output=True,
            timeout=SCRIPT_TIMEOUT_S,
        )
        return files.read_text(made, SCRIPT_BYTES)


def markdown(  # noqa: PLR0917 (what one page shows)
    finding: Finding,
    report: ModelReport,
    script: tuple[str, str],
    outputs: dict[str, str],
    keras_version: str,
    triaged: tuple[str, str],  # triage(report, outputs), computed once by write
) -> str:
    """The report's text; ``script``: the reproducer's file name and text;
    ``triaged``: what its run shows (``triage``).
    The workload is the spec's (a document may leave options to their
    defaults)."""
    w = spec_from_document("finding", finding.document).workload
    name, text = script
    verdict, why = triaged
    paths = finding.signature.split(" | ")[1]
    lines = [
        f"# Finding {finding.id}: {finding.kind}, {paths}",
        "",
        f"**{finding.signature}.** Triage by a run: **{verdict}**: {why}.",
        "",
        f"Found by `python -m harness fuzz`: seen in {finding.seen} drawn "
        f"model{'s' * (finding.seen != 1)} (optimizers "
        f"{', '.join(finding.optimizers)}), shrunk to {finding.layers} layers. "
        f"Batch of {finding.batch_size}, seed {finding.seed}, {finding.steps} "
        f"training step{'s' * (finding.steps != 1)}; {w.optimizer} at "
        f"learning rate {w.learning_rate:g}, loss {w.loss}"
        f"{' from logits' if w.from_logits else ''}.",
        "",
        "## Reproducer",
        "",
        f"`{name}` beside this page: the model in plain Keras, its "
        "weights, mini-batches and the float64 expected values as literals. "
        f"Run on each backend with Keras {keras_version} "
        f"(`python {name} BACKEND`); error = max |Keras - float64| / "
        f"max |float64| (the difference alone where float64 is all zeros), "
        f"wrong above {WRONG:g}:",
        "",
        "| backend | " + " | ".join(_quantities(outputs) or ["output"]) + " |",
        "| --- |" + " --- |" * max(1, len(_quantities(outputs))),
    ]
    for backend, output in outputs.items():
        errors = errors_of(output)
        if not errors:
            lines.append(f"| {backend} | {output.strip()[:120]} |")
            continue
        cells = [
            f"**{errors[q]:.2e}**"
            if errors.get(q, 0) > WRONG
            else f"{errors.get(q, float('nan')):.1e}"
            for q in _quantities(outputs)
        ]
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    lines += ["", "```python", text.rstrip(), "```", ""]
    lines += ["## What the check saw on every path", ""]
    lines += [
        "| path | verdict | where it parts from float64 | worst failing quantity |"
    ]
    lines += ["| --- | --- | --- | --- |"]
    for path, verdict in sorted(report.verdicts.items()):
        loc = report.localizations.get(path)
        where = str(loc.first) if loc is not None and loc.first else ""
        judged = report.judgements.get(path)
        worst = ""
        if judged is not None and judged.failures:
            e = max(judged.failures, key=lambda f: f.error / max(f.tolerance, 1e-30))
            worst = f"{e.quantity}: {e.error:.2e} > allowed {e.tolerance:.1e}"
        lines.append(f"| {path} | {verdict} | {where} | {worst} |")
    notes = {p: n for p, n in ((p, report.notes(p)) for p in report.verdicts) if n}
    for path, said in notes.items():
        lines += ["", f"{path}: {'; '.join(said)}"]
    return "\n".join(lines) + "\n"


def releases_section(
    backend: str, tried: dict[str, bool | None], first: str | None
) -> str:
    """The page's section on releases: each one the reproducer ran on, on
    ``backend``, and the first affected (``harness.versions.correctness``)."""
    words = {None: "cannot run", True: "**wrong**", False: "right"}
    verdict = f"**first affected: {first}**" if first else "no release tried is wrong"
    lines = [
        "",
        "## Releases",
        "",
        f"The reproducer on {backend} over Keras releases (each an overlay of "
        f"`harness bisect`), bisected: {verdict}.",
        "",
        "| release | reproducer |",
        "| --- | --- |",
        *(f"| {release} | {words[answer]} |" for release, answer in tried.items()),
    ]
    return "\n".join(lines) + "\n"


def _quantities(outputs: dict[str, str]) -> list[str]:
    seen: dict[str, None] = {}
    for output in outputs.values():
        for quantity in errors_of(output):
            seen[quantity] = None
    return list(seen)


@functools.cache
def _test_template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("harness", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # Python source, not HTML
    )
    return environment.get_template("finding_test.py.j2")


def failing_test(finding: Finding, report: ModelReport, why: str) -> str:
    """A finding the tool is wrong on as a pytest module for ``tests/paths/``
    (issue 80: "then it is a failing test, not a page"): the finding's model
    and case as literals, checked again on each path that failed or stopped
    (``why``: the triage's sentence, for its docstring)."""
    paths = sorted(p for p, v in report.verdicts.items() if v in ("fail", "error"))
    summary = (
        f"Finding {finding.id} of ``harness fuzz`` ({finding.signature}), "
        f"triaged by a run as the tool's own: {why}."
    )
    # JSON whose quotes inside a string are escapes: none ends the literal
    document = json.dumps(finding.document, indent=4, sort_keys=True)
    return _test_template().render(
        id=finding.id,
        summary=textwrap.fill(summary, 76),
        paths_literal=f"({', '.join(map(json.dumps, paths))}{',' * (len(paths) == 1)})",
        document=document.replace('\\"', "\\u0022"),
        seed=finding.seed,
        batch_size=finding.batch_size,
        steps=finding.steps,
    )


def write(
    finding: Finding, check: WorkerCheck, folder: Path
) -> tuple[Path, tuple[str, str]]:
    """``folder/<id>.md`` and ``folder/<id>.py`` for one finding, each
    written through the door under a name its id must be plain for; the
    page and what its run shows (``triage``).  A finding its run shows to
    be the tool's own gets ``folder/test_finding_<id>.py`` (``failing_test``)
    instead of the page, and that file is returned."""
    files.folder(folder, follow=True)
    page = files.inside(folder, f"{finding.id}.md", "a finding's id")
    script = files.inside(folder, f"{finding.id}.py", "a finding's id")
    report = _check(check, finding)
    text = _script(check, finding, report)
    files.write_text(script, text)
    outputs = {backend: run_script(script, backend) for backend in BACKENDS}
    version = check.checker.workers["keras-jax"].platform.get("keras_version", "?")
    triaged = triage(report, outputs)
    if triaged[0] == "the tool's own":
        test = files.inside(folder, f"test_finding_{finding.id}.py", "a finding's id")
        files.write_text(test, failing_test(finding, report, triaged[1]))
        return test, triaged
    files.write_text(
        page,
        markdown(finding, report, (script.name, text), outputs, str(version), triaged),
    )
    return page, triaged


def add_releases(
    page: Path, backend: str, tried: dict[str, bool | None], first: str | None
) -> None:
    """Append the releases section (``releases_section``) to a page
    ``write`` made: read within its limit, written whole by a rename."""
    text = files.read_text(page, PAGE_BYTES)
    files.write_text(page, text + releases_section(backend, tried, first))


def write_all(
    findings: dict[str, Finding], folder: Path, store: Path
) -> list[tuple[Path, tuple[str, str]]]:
    """Every finding written (``write``), with one set of workers."""
    if not findings:
        return []
    with WorkerCheck(store) as check:
        return [write(f, check, folder) for f in findings.values()]
