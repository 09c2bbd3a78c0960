"""A bisection's write-up: ``bisect.md`` (every release visited, with its
figure) and, where a release changed the cell, ``finding-<cell>.md``, a
report a Keras maintainer can act on: the releases on each side, the
figures, the functions whose instructions moved, the machine and library
versions, and a reproducer that needs Keras and the backend only
(``harness.versions.reproducer``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from harness.core.profiles import get_profile
from harness.core.records import host_platform
from harness.report.summary import explained
from harness.versions.bisect import Bisection, Part
from harness.versions.overlay import UNDER, Overlay, prepare, size
from harness.versions.reproducer import REPEATS, STEPS, script
from harness.versions.signals import Cell, counted_rows, harness_in, measured_s
from workers.launch import PROJECT_ROOT
from zoo import files
from zoo.models import get_spec

TOP = 12  # functions listed per finding


def summary(cell: Cell, found: Bisection, out: Path, elapsed_s: float) -> str:
    """``bisect.md``: the verdict, each release visited, the cost (the
    releases' measuring times as each was measured, so a resumed bisection
    counts what earlier runs of it spent; ``elapsed_s``: this run's)."""
    times = [measured_s(out / f"keras-{r}") for r in found.order]
    known = [t for t in times if t is not None]
    unknown = len(times) - len(known)
    spent = f"measuring {sum(known) / 60:.1f} min" + (
        f" ({unknown} release{'s' * (unknown != 1)} measured before times were kept)"
        if unknown
        else ""
    )
    disk = sum(
        size(PROJECT_ROOT / UNDER / f"keras-{r}" / "site")
        for r in found.order
        if (PROJECT_ROOT / UNDER / f"keras-{r}" / "site").is_dir()
    )
    lines = [
        f"# Bisection of {cell.model} {cell.phase} on {cell.path} ({cell.signal})",
        "",
        f"**{found.verdict()}**",
        "",
        f"{len(found.releases)} releases from {found.releases[0]} to "
        f"{found.releases[-1]}; {found.visits} visited, in this order: "
        f"{', '.join(found.order)}; {spent}, this run {elapsed_s / 60:.1f} "
        "min; overlays "
        f"{disk / 1e6:.0f} MB on disk; profile {cell.profile}; runs in {out}.",
        "",
        "| release | figure [range] | |",
        "| --- | --- | --- |",
    ]
    for release in found.releases:
        f = found.figures.get(release)
        if f is not None:
            lines.append(f"| {release} | {f.text()} | {f.note} |")
    if found.parts:
        lines += [
            "",
            "| part | from | to | kind | share of the net change (over 100% "
            "where others go the other way) |",
        ]
        lines.append("| --- | --- | --- | --- | --- |")
        for n, p in enumerate(found.parts, 1):
            lines.append(
                f"| {n} | {p.before.release} {p.before.text()} | "
                f"{p.after.release} {p.after.text()} | {p.kind} | {p.share:.0%} |"
            )
    return "\n".join(lines) + "\n"


def moved_functions(
    cell: Cell, part: Part, out: Path
) -> list[tuple[str, float, float]]:
    """The functions whose instructions per step moved most between the two
    sides of ``part`` (callgrind's, grouped as ``harness count`` groups
    them): (function, before, after), the largest change first."""
    sides = []
    for figure in (part.before, part.after):
        rows = counted_rows(cell, out / f"keras-{figure.release}")
        sides.append({} if rows is None else rows[cell.path].get("functions", {}))
    before, after = sides
    names = set(before) | set(after)
    moved = [(n, float(before.get(n, 0.0)), float(after.get(n, 0.0))) for n in names]
    moved.sort(key=lambda m: -abs(m[2] - m[1]))
    return moved[:TOP]


def run_reproducer(
    reproducer: Path, overlay: Overlay, *args: str
) -> dict[str, Any] | None:
    """The reproducer's JSON line in ``overlay`` (None where it failed)."""
    done = subprocess.run(
        [overlay.python, str(reproducer), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=overlay.environment(),
        cwd=reproducer.parent,
        check=False,
    )
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return found if isinstance(found, dict) else None


def moved_calls(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[tuple[str, int, int]]:
    """The Keras functions whose calls per loop moved most between two
    ``--calls`` lines: (file:function, before, after), largest change
    first."""
    if not before or not after:
        return []
    b, a = before.get("calls", {}), after.get("calls", {})
    moved = [(n, int(b.get(n, 0)), int(a.get(n, 0))) for n in set(a) | set(b)]
    moved = [m for m in moved if m[1] != m[2]]
    moved.sort(key=lambda m: (-abs(m[2] - m[1]), m[0]))
    return moved[:TOP]


def explain_cell(
    cell: Cell, overlay: Overlay, out: Path, machine: str
) -> dict[str, Any] | None:
    """``harness explain``'s analysis of the cell (at the profile's batch
    size) in ``overlay``, run into ``out/explain/keras-<release>`` unless a
    run of this machine is there already; None where it did not run (its
    gate failed, say)."""
    folder = (out / "explain" / f"keras-{overlay.release}").absolute()
    found = explained(folder, machine).get((cell.model, cell.framework, cell.phase))
    if found is None:
        settings = get_profile(cell.profile).settings(cell.model)
        batch = settings.batch_size or get_spec(cell.model).workload.batch_size
        harness_in(
            overlay,
            "explain",
            *("--profile", cell.profile, "--models", cell.model),
            *("--frameworks", cell.framework, "--phases", cell.phase),
            *("--batch-sizes", str(batch), "--results", str(folder)),
        )
        found = explained(folder, machine).get((cell.model, cell.framework, cell.phase))
    return None if found is None else found[1]


Span = tuple[float, float, float]  # microseconds: value, low, high


def explained_parts(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[tuple[str, Span | None, Span | None]]:
    """The Keras step's parts (``harness explain``'s, microseconds with their
    intervals) on each side, the whole step first, then by the size of their
    change; a part one side lacks is None there."""
    if not before and not after:
        return []

    def span(cell: dict[str, Any] | None, part: str) -> Span | None:
        if not cell:
            return None
        f = cell["total"] if part == "step" else cell["parts"].get(part)
        return (
            None if f is None else (float(f["us"]), float(f["low"]), float(f["high"]))
        )

    def moved(row: tuple[str, Span | None, Span | None]) -> float:
        b, a = row[1], row[2]
        return abs((a[0] if a else 0.0) - (b[0] if b else 0.0))

    names = {*(before or {}).get("parts", {}), *(after or {}).get("parts", {})}
    rows = sorted(
        ((n, span(before, n), span(after, n)) for n in names),
        key=lambda r: (-moved(r), r[0]),
    )
    return [("step", span(before, "step"), span(after, "step")), *rows]


def _explain_lines(cell: Cell, sides: list[Overlay], out: Path) -> list[str]:
    machine = str((host_platform().get("machine") or {}).get("name"))
    rows = explained_parts(*(explain_cell(cell, o, out, machine) for o in sides))
    if not rows:
        return [
            "## Where the step's time goes",
            "",
            f"`harness explain` did not run in either overlay (see {out / 'explain'}).",
            "",
        ]

    def ms(s: Span | None) -> str:
        return (
            "-"
            if s is None
            else f"{s[0] / 1e3:.3f} [{s[1] / 1e3:.3f}, {s[2] / 1e3:.3f}]"
        )

    def change(b: Span | None, a: Span | None) -> str:
        return "-" if a is None or b is None else f"{(a[0] - b[0]) / 1e3:+.3f}"

    lines = [
        "## Where the step's time goes (`harness explain`, before and after)",
        "",
        "Each side's Keras step taken apart by `harness explain` in its overlay, "
        "milliseconds with their 95% intervals (time: whatever else ran on this "
        f"machine shows in it; the runs are in {out / 'explain'}):",
        "",
        "| part | before, ms | after, ms | change, ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {n} | {ms(b)} | {ms(a)} | {change(b, a)} |" for n, b, a in rows]
    return [*lines, ""]


def _main_part(found: Bisection) -> Part:
    return max(found.parts, key=lambda p: abs(p.share))


def write(cell: Cell, found: Bisection, out: Path, python: str) -> Path:
    """``finding-<cell>.md`` and the reproducer beside it; the finding's
    path."""
    part = _main_part(found)
    host = host_platform()
    reproducer = out / f"reproduce-{cell.name}.py"
    files.write_text(reproducer, script(cell, prepare(part.before.release, python)))
    lines = [
        f"# Keras {part.after.release}: {cell.model} {cell.phase} on "
        f"{cell.framework} changed",
        "",
        found.verdict() + ".",
        "",
        f"- before: keras {part.before.release}, {_figure(cell, part.before)}",
        f"- after: keras {part.after.release}, {_figure(cell, part.after)}",
        f"- every release measured: {', '.join(found.order)} (bisect.md)",
        f"- machine: {_machine(host)}",
        f"- libraries besides Keras: {_libraries(cell)}",
        "",
    ]
    if cell.signal == "instructions":
        lines += [
            "## What moved (callgrind, instructions per step of the Keras path)",
            "",
            "| function | before | after | change |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, b, a in moved_functions(cell, part, out):
            lines.append(
                f"| `{name[:120]}` | {b / 1e3:,.1f}k | {a / 1e3:,.1f}k | "
                f"{(a - b) / 1e3:+,.1f}k |"
            )
        lines.append("")
    sides = [prepare(part.before.release, python), prepare(part.after.release, python)]
    lines += _explain_lines(cell, sides, out)
    timed = [run_reproducer(reproducer, o) for o in sides]
    calls = moved_calls(*(run_reproducer(reproducer, o, "--calls") for o in sides))
    if calls:
        lines += [
            f"## Which Keras functions (calls in one loop of {STEPS} steps, "
            "cProfile, the reproducer's `--calls`)",
            "",
            "| Keras file:function | before | after | change |",
            "| --- | ---: | ---: | ---: |",
        ]
        lines += [f"| `{n}` | {b} | {a} | {a - b:+d} |" for n, b, a in calls]
        lines.append("")
    lines += [
        "## The reproducer on its own",
        "",
        "Run here, in the two overlays (median seconds per step of "
        f"{REPEATS} loops, this machine, whatever else ran):",
        "",
    ]
    lines += [
        f"- keras {o.release}: "
        + (f"{t['seconds_per_step'] * 1e3:.2f} ms" if t else "did not run")
        for o, t in zip(sides, timed, strict=True)
    ]
    lines += [
        "",
        "## Reproduce it with Keras and the backend only",
        "",
        "```sh",
        f"python -m venv keras-{part.before.release} && "
        f"keras-{part.before.release}/bin/pip install keras=={part.before.release} "
        f"{_backend_pin(cell)} numpy",
        f"python -m venv keras-{part.after.release} && "
        f"keras-{part.after.release}/bin/pip install keras=={part.after.release} "
        f"{_backend_pin(cell)} numpy",
        f"keras-{part.before.release}/bin/python {reproducer.name}",
        f"keras-{part.after.release}/bin/python {reproducer.name}",
        "```",
        "",
        f"The script ({reproducer.name}, beside this file) builds the model, "
        "times one loop and prints seconds per step; with `--calls` it counts "
        "Keras' Python function calls in one step (cProfile), which differ "
        "between the two releases where the interpreter's share is the change.",
    ]
    path = out / f"finding-{cell.name}.md"
    files.write_text(path, "\n".join(lines) + "\n")
    return path


def _figure(cell: Cell, figure: Any) -> str:
    unit = (
        "instructions per step of the Keras path"
        if cell.signal == "instructions"
        else "Keras/native time ratio"
    )
    return f"{figure.text()} {unit} {figure.note}".strip()


def _machine(host: dict[str, Any]) -> str:
    machine = host.get("machine") or {}
    return ", ".join(
        str(v)
        for v in (
            machine.get("cpu_model"),
            machine.get("cpu"),
            machine.get("cpu_isa"),
            f"{machine.get('cores')} cores",
            host.get("python") and f"Python {host.get('python')}",
        )
        if v
    )


def _libraries(cell: Cell) -> str:
    from harness.versions.matrix import project_pins

    pins = project_pins()
    return json.dumps({k: v for k, v in pins.items() if k != "keras"}) + (
        f" ({_backend_pin(cell)})"
    )


def _backend_pin(cell: Cell) -> str:
    from harness.versions.matrix import project_requirements

    wanted = {"torch": "torch==", "tensorflow": "tensorflow-cpu==", "jax": "jax=="}
    prefix = wanted[cell.framework]
    return " ".join(r for r in project_requirements() if r.startswith(prefix))
