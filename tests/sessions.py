"""Not a test: the nox sessions' ``python -m harness`` commands as shipped.

Each session's command sequence is written once, in ``noxfile.py``
(``bench_steps``, ``count_steps``, ``converge_steps``, ``versions_steps``);
the tests load that file and run those very commands, so a combination of
flags a session uses cannot ship without having run.  Framework-free.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def noxfile() -> ModuleType:
    """``noxfile.py`` as a module, loaded once (nox is in the test extra)."""
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_step(step: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One session step as the session runs it: ``python -m harness ARGV`` in
    a process of its own, in ``cwd`` (the session's working folder)."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *step.argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    """A finished step's command and output, for an assertion's message."""
    return (
        f"{' '.join(done.args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
