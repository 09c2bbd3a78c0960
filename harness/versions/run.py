"""``python -m harness versions``: the profile in one environment per
combination of releases, each gated on its own.

For each combination (``harness.versions.matrix``), in the matrix' order:
its environment is built or reused (``harness.versions.environments``), then
that environment's interpreter runs ``python -m harness run`` with the
profile into ``<results>/versions/<slug>/``: the float64 equivalence gate
first, in that environment (a Keras that computes something else fails
there, localized as usual, and is not timed), then the paired timings.  With
``count``, ``python -m harness count`` follows in the same environment.

``<results>/versions/versions.jsonl`` gets one line per combination as it
ends: its releases, its interpreter, whether it ran (``ok``), could not be
built (``unavailable``, with pip's reason) or stopped (``failed``), and each
path's verdict.  A crash loses no combination already done, and a second run
reuses every environment and every cached verdict that still holds.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from harness.core import gate, jsonl, validated
from harness.core.profiles import Profile
from harness.core.records import Record, scan
from harness.versions.environments import Environment, prepare
from harness.versions.matrix import Combination
from workers.launch import PROJECT_ROOT
from workers.paths import get_path

MANIFEST = "versions.jsonl"
FOLDER = "versions"
# Interpreters the user may have pointed paths at: inside a combination every
# path of these frameworks runs with the combination's own interpreter.
_OWN_INTERPRETER = ("JAX", "TENSORFLOW", "TORCH")


def folder(results: Path) -> Path:
    """Where ``versions`` writes: ``<results>/versions``."""
    return results / FOLDER


def _child_environment() -> dict[str, str]:
    env = dict(os.environ)
    for name in _OWN_INTERPRETER:
        env.pop(f"HARNESS_PYTHON_{name}", None)
    return env


def _harness(python: str, *args: str) -> int:
    """``python -m harness ARGS`` in the checkout, its output shown as it comes."""
    done = subprocess.run(
        [python, "-m", "harness", *args],
        cwd=PROJECT_ROOT,
        env=_child_environment(),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.returncode


def verdicts(out: Path) -> dict[str, dict[str, str]]:
    """Per path of the newest run in ``out``: its equivalence verdict and,
    for a path the gate held back, why: the reason the gate cached beside the
    verdict (``harness.core.gate``), else its records' first error."""
    runs = sorted(out.glob("run-*.jsonl"))
    if not runs:
        return {}
    found: dict[str, dict[str, str]] = {}
    records: list[Record] = scan(runs[-1]).records
    for r in records:
        seen = found.setdefault(r.path, {"equivalence": r.equivalence})
        if r.equivalence not in ("pass", seen["equivalence"]):
            seen["equivalence"] = r.equivalence
        if r.error and "reason" not in seen and r.status != "ok":
            seen["reason"] = r.error.splitlines()[0][:300]
    for path, why in _gate_reasons(out).items():
        if path in found and found[path]["equivalence"] != "pass":
            found[path]["reason"] = why
    return found


def _gate_reasons(out: Path) -> dict[str, str]:
    """The newest reason the gate cached in ``out`` for each path, with its
    model (``ffn: ...``); nothing for a cache that cannot be read
    (``harness.core.gate.cached``: read as the gate reads it, each field
    checked)."""
    newest = sorted(
        (e for e in gate.cached(out).values() if e.get("reason")),
        key=lambda e: e["created"],
    )
    return {e["path"]: f"{e['model']}: {e['reason']}"[:300] for e in newest}


def _line(env: Environment, status: str, out: Path, **more: Any) -> dict[str, Any]:
    c = env.combination
    return {
        "slug": c.slug,
        "label": c.label,
        "release": c.release,
        "varied": list(c.varied),
        "python": env.python,
        "status": status,
        "reason": env.reason,
        "notes": env.notes,
        "folder": out.name,
        **more,
    }


def run_versions(
    profile: Profile,
    profile_arg: str,
    combinations: list[Combination],
    results: Path,
    *,
    count: bool = False,
    allow_unverified: bool = False,
    log: Callable[[str], None] = print,
) -> int:
    """Run ``profile`` in every combination's environment; 0 when every one
    ran (whatever its verdicts), 1 when one was unavailable or failed."""
    base = folder(results)
    manifest = base / MANIFEST
    worst = 0
    frameworks = sorted({get_path(p).framework for p in profile.paths})
    for number, combination in enumerate(combinations, 1):
        log(f"[{number}/{len(combinations)}] {combination.label}")
        env = prepare(combination, log=log)
        out = (base / combination.slug).absolute()
        if env.python is None:
            log(f"{combination.label}: unavailable: {env.reason}")
            jsonl.append(manifest, _line(env, "unavailable", out), noun="line")
            worst = 1
            continue
        common = ["--profile", profile_arg, "--results", str(out)]
        extra = ["--allow-unverified"] if allow_unverified else []
        status = _harness(env.python, "run", *common, *extra)
        if status in (0, 1) and count:
            counted = _harness(
                env.python,
                "count",
                *common,
                *extra,
                "--frameworks",
                ",".join(frameworks),
            )
            status = max(status, counted)
        outcome = "ok" if status in (0, 1) else "failed"
        if outcome == "failed":
            env.reason = f"harness exited with status {status} (its messages above)"
            worst = 1
        line = _line(env, outcome, out, verdicts=verdicts(out))
        jsonl.append(manifest, line, noun="line")
    return worst


class _Verdict(validated.Schema):
    equivalence: str
    reason: str | None = None


class ManifestLine(validated.Schema):
    """What ``report --versions`` reads of a manifest line (:func:`_line`)."""

    slug: str
    label: str
    status: str
    folder: str
    reason: str | None = None
    notes: list[str] | None = None
    release: dict[str, str] = Field(default_factory=dict)
    varied: list[str] = Field(default_factory=list)
    verdicts: dict[str, _Verdict] | None = None

    @field_validator("folder")
    @classmethod
    def _inside(cls, folder: str) -> str:
        """A folder of the versions folder itself: one plain name, so that
        a line can never send the report outside it."""
        if not folder or folder in (".", "..") or "/" in folder or "\\" in folder:
            raise ValueError("not a folder of the versions folder")
        return folder


def outcomes(base: Path) -> list[dict[str, Any]]:
    """The newest line of each combination in ``base``'s manifest, in the
    order combinations were first run (:class:`ManifestLine`: other lines
    skipped and named on stderr).

    Raises FileNotFoundError when ``base`` holds no manifest, ValueError
    when it holds no line the report can read."""
    manifest = base / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(
            f"no {MANIFEST} in {base}; run 'python -m harness versions' first"
        )
    newest: dict[str, dict[str, Any]] = {}
    for line in validated.objects(
        manifest, ManifestLine, ("a manifest line", "manifest lines")
    ):
        newest[line["slug"]] = line
    return list(newest.values())
