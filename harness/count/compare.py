"""Two count runs side by side: which paths' instructions per step changed
beyond what counts repeat to, and where.

A path's count is flagged when its work (every instruction but thread
pools' polling) or its non-kernel instructions per step moved by more than
its allowance: ``MARGIN`` times the larger of
the two runs' spreads between processes (``harness.count.analysis``), and
never less than ``FLOOR``.  A run of one process has no spread between
processes: its blocks' spread stands in.  For a flagged path the groups
(interpreter, framework, system, kernel) and the functions that moved most
are named.
"""

from __future__ import annotations

from typing import Any

from harness.count.callgrind import GROUPS

MARGIN = 3.0  # times the measured spread
FLOOR = 0.001  # 0.1%: never flag less, however well counts repeated
MOVED_FUNCTIONS = 3  # functions named per flagged path


def _spread(row: dict[str, Any], key: str) -> float:
    if row["processes"] > 1:
        return float(row[f"{key}_spread"])
    return float(row[f"{key}_block_spread"])


def allowance(old: dict[str, Any], new: dict[str, Any], key: str) -> float:
    """The relative change of ``key`` (``work``, ``non_kernel``) that the
    two rows' own repeatability explains."""
    return max(FLOOR, MARGIN * max(_spread(old, key), _spread(new, key)))


def _key(row: dict[str, Any]) -> tuple[str, str, str, int]:
    return row["model"], row["path"], row["phase"], row["batch"]


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per path and cell counted in both analyses
    (``harness.count.analysis.cells``): the change of work and non-kernel
    instructions per step, the allowance, ``changed`` or ``same``, and for
    a change the groups and functions that moved."""
    before = {_key(r): r for r in old["paths"]}
    out = []
    for row in new["paths"]:
        was = before.get(_key(row))
        if was is None:
            continue
        found: dict[str, Any] = {
            "model": row["model"],
            "path": row["path"],
            "phase": row["phase"],
            "batch": row["batch"],
        }
        flagged = False
        for key in ("work", "non_kernel"):
            change = row[key] / was[key] - 1.0 if was[key] else 0.0
            allowed = allowance(was, row, key)
            found[f"{key}_change"] = change
            found[f"{key}_allowance"] = allowed
            flagged |= abs(change) > allowed
        found["verdict"] = "changed" if flagged else "same"
        found["groups_moved"] = {g: row["groups"][g] - was["groups"][g] for g in GROUPS}
        moved = {
            name: row["functions"].get(name, 0.0) - was["functions"].get(name, 0.0)
            for name in {*row["functions"], *was["functions"]}
        }
        found["functions_moved"] = [
            [name, n]
            for name, n in sorted(moved.items(), key=lambda kv: -abs(kv[1]))[
                :MOVED_FUNCTIONS
            ]
        ]
        out.append(found)
    return out


def markdown(rows: list[dict[str, Any]], old: str, new: str) -> str:
    """The comparison as Markdown."""
    if not rows:
        return f"{old} and {new} counted no path and cell in common."
    lines = [
        f"## Instructions per step: {new} against {old}",
        "",
        "| model | path | phase | batch | work | non-kernel | allowance | "
        "verdict | groups moved (k per step) | functions moved most (k per step) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        groups = functions = ""
        if r["verdict"] == "changed":
            groups = ", ".join(
                f"{g} {n / 1e3:+.1f}"
                for g, n in sorted(
                    r["groups_moved"].items(), key=lambda kv: -abs(kv[1])
                )
                if abs(n) >= 0.5
            )
            functions = "; ".join(
                f"{name.split(' ', 2)[-1][:60]} {n / 1e3:+.1f}"
                for name, n in r["functions_moved"]
            )
        lines.append(
            f"| {r['model']} | {r['path']} | {r['phase']} | {r['batch']} | "
            f"{100 * r['work_change']:+.3f}% | {100 * r['non_kernel_change']:+.3f}% | "
            f"{100 * r['non_kernel_allowance']:.3f}% | {r['verdict']} | {groups} | "
            f"{functions} |"
        )
    changed = sum(r["verdict"] == "changed" for r in rows)
    lines += [
        "",
        f"{changed} of {len(rows)} path counts changed beyond their allowance.",
    ]
    return "\n".join(lines)
