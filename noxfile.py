"""Sessions: ``nox -s tests``, ``nox -s bench``, ``nox -s floors``, ``nox -s lint``.

Every session builds its own virtual environment with pip from the project's
own metadata, so a fresh machine needs nothing but ``pip install nox``.
``nox -s bench -- smoke`` picks a profile (default: ``default``).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

RESULTS = "results"


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite (framework-free, native PyTorch, all paths)."""
    session.install("-e", ".[frameworks,test]")
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Equivalence check, then timings, then the report."""
    profile = session.posargs[0] if session.posargs else "default"
    session.install("-e", ".[frameworks]")
    verdicts = f"{RESULTS}/equivalence.json"
    # A disagreement (exit 1) is recorded and shown beside the timings, not fatal.
    session.run("python", "-m", "equivalence", "--out", verdicts, success_codes=[0, 1])
    session.run(
        "python",
        "-m",
        "harness",
        "run",
        "--profile",
        profile,
        "--results",
        RESULTS,
        "--verdicts",
        verdicts,
    )
    session.run("python", "-m", "harness", "report", "--results", RESULTS)


@nox.session
def floors(session: nox.Session) -> None:
    """Each native training step against its framework's idiomatic fast step."""
    profile = session.posargs[0] if session.posargs else "default"
    session.install("-e", ".[frameworks]")
    session.run(
        "python", "-m", "harness", "floors", "--profile", profile, "--results", RESULTS
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff on everything, mypy on the framework-free packages."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
