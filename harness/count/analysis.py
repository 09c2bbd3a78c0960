"""What a count run's blocks say: instructions per step per path, where
they execute, how well they repeat, and what Keras adds over native.

Per path and cell (model, phase, batch size), every counted block gives
instructions per step (training) or per mini-batch (inference): its net
count (less the counter's own, ``harness.count.measure.lines``) over its
steps or mini-batches.  A process' figure is the median of its blocks; the
cell's is the median of its processes.  How well counts repeat is said
twice: ``spread`` between processes (max - min over the median of the
process medians) and ``block_spread`` between the blocks of one process
(the widest process).  Non-kernel instructions (interpreter, framework,
system: ``harness.count.callgrind.NON_KERNEL``) are the work an API adds
around the arithmetic; Keras' minus native's is the API's overhead as work.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from harness.count.callgrind import GROUPS, NON_KERNEL

Key = tuple[str, str, str, int]  # model, framework, phase, batch
TOP_ADDED = 8  # functions Keras adds, the most first, per pair


def _spread(values: list[float]) -> float:
    """(max - min) / median: 0 for one value."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0


def _per_step(block: dict[str, Any]) -> dict[str, float]:
    """One block's instructions per step or mini-batch: ``total``, ``work``
    (all but ``spin``), each group, and ``non_kernel`` (less the counter's
    own, which runs in the interpreter and the C runtime)."""
    n = block["per_block"]
    out = {
        "total": block["instructions"] / n,
        "work": (block["instructions"] - block["groups"]["spin"]) / n,
    }
    out.update({g: block["groups"][g] / n for g in GROUPS})
    non_kernel = sum(block["groups"][g] for g in NON_KERNEL) - block["counter"]
    out["non_kernel"] = non_kernel / n
    return out


def path_rows(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (model, framework, phase, batch, path) of a count run's
    lines: the median instructions per step, per group and non-kernel, the
    spreads, and the functions with the most instructions per step."""
    blocks: dict[tuple[Key, str], dict[int, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for line in lines:
        if line.get("kind") == "block":
            key = (line["model"], line["framework"], line["phase"], line["batch"])
            blocks[(key, line["path"])][line["repeat"]].append(line)
    rows = []
    for (key, path), by_process in sorted(blocks.items()):
        per_process = {
            r: [_per_step(b) for b in bs] for r, bs in sorted(by_process.items())
        }
        medians = {
            r: {k: statistics.median(s[k] for s in steps) for k in steps[0]}
            for r, steps in per_process.items()
        }
        row: dict[str, Any] = {
            "model": key[0],
            "framework": key[1],
            "phase": key[2],
            "batch": key[3],
            "path": path,
            "processes": len(medians),
            "blocks": sum(len(s) for s in per_process.values()),
            "unverified": any(
                b["unverified"] for bs in by_process.values() for b in bs
            ),
            "extra_loops": max(
                b["extra_loops"] for bs in by_process.values() for b in bs
            ),
        }
        for k in ("total", "work", "non_kernel"):
            row[k] = statistics.median(m[k] for m in medians.values())
        row["groups"] = {
            g: statistics.median(m[g] for m in medians.values()) for g in GROUPS
        }
        for k in ("work", "non_kernel"):
            row[f"{k}_spread"] = _spread([m[k] for m in medians.values()])
            row[f"{k}_block_spread"] = max(
                _spread([s[k] for s in steps]) for steps in per_process.values()
            )
        row["functions"] = _functions([b for bs in by_process.values() for b in bs])
        rows.append(row)
    return rows


def _functions(blocks: list[dict[str, Any]]) -> dict[str, float]:
    """Instructions per step of each function kept in the blocks (``group
    object function``), the mean over the blocks (a function not among a
    block's kept ones counts 0 there)."""
    total: dict[str, float] = defaultdict(float)
    for block in blocks:
        for group, obj, function, n in block["functions"]:
            total[f"{group} {obj} {function}"] += n / block["per_block"]
    return {name: v / len(blocks) for name, v in total.items()}


def pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keras against native per (model, framework, phase, batch): the work
    ratio (work: all but spin), the non-kernel instructions Keras adds
    per step, and the functions it adds most to."""
    by_key: dict[Key, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        api = "keras" if row["path"].startswith("keras-") else "native"
        by_key[(row["model"], row["framework"], row["phase"], row["batch"])].setdefault(
            api, row
        )
    out = []
    for key, sides in sorted(by_key.items()):
        if set(sides) != {"keras", "native"}:
            continue
        keras, native = sides["keras"], sides["native"]
        added = {
            name: n - native["functions"].get(name, 0.0)
            for name, n in keras["functions"].items()
        }
        top = sorted(added.items(), key=lambda kv: -kv[1])[:TOP_ADDED]
        out.append(
            {
                "model": key[0],
                "framework": key[1],
                "phase": key[2],
                "batch": key[3],
                "keras": keras["work"],
                "native": native["work"],
                "work_ratio": keras["work"] / native["work"],
                "keras_non_kernel": keras["non_kernel"],
                "native_non_kernel": native["non_kernel"],
                "added_non_kernel": keras["non_kernel"] - native["non_kernel"],
                "added_kernel": keras["groups"]["kernel"] - native["groups"]["kernel"],
                "top_added": [[name, n] for name, n in top if n > 0],
            }
        )
    return out


def cells(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """A count run's analysis: ``paths`` (``path_rows``), ``pairs``, and
    what was not counted."""
    rows = path_rows(lines)
    host = next((line for line in lines if line.get("kind") == "host"), {})
    return {
        "schema": 1,
        "host": host,
        "paths": rows,
        "pairs": pairs(rows),
        "not_counted": [
            line for line in lines if line.get("kind") in ("skipped", "failure")
        ],
    }


def relate(
    found: dict[str, Any], timing: dict[tuple[str, str, str, int], dict[str, float]]
) -> dict[str, Any]:
    """Work against time, where a timing of the same cells exists
    (``timing``: ``harness.report.analysis.cpu_per_step`` of the newest
    ``harness run`` of the profile): per path, instructions per second of
    user CPU time; per pair, Keras' extra wall time per step split into
    extra instructions (at native's rate), a lower instruction rate,
    system time and waiting (wall less user and system time), which add up
    to the extra time.  Instructions are callgrind's (valgrind's CPU has no
    AVX-512), times the host's own."""
    rates = []
    for row in found["paths"]:
        t = timing.get((row["model"], row["path"], row["phase"], row["batch"]))
        if t and t["user_s"] > 0:
            rates.append(
                {
                    "model": row["model"],
                    "path": row["path"],
                    "phase": row["phase"],
                    "batch": row["batch"],
                    "instructions": row["work"],
                    "wall_s": t["wall_s"],
                    "user_s": t["user_s"],
                    "sys_s": t["sys_s"],
                    "wait_s": t["wait_s"],
                    "per_user_s": row["work"] / t["user_s"],
                }
            )
    by_key = {(r["model"], r["path"], r["phase"], r["batch"]): r for r in rates}
    split = []
    for p in found["pairs"]:
        paths = [r["path"] for r in found["paths"] if r["framework"] == p["framework"]]
        keras = next((x for x in paths if x.startswith("keras-")), None)
        native = next((x for x in paths if x.startswith("native-")), None)
        k = by_key.get((p["model"], keras, p["phase"], p["batch"]))
        n = by_key.get((p["model"], native, p["phase"], p["batch"]))
        if k is None or n is None:
            continue
        extra = k["wall_s"] - n["wall_s"]
        more_work = (k["instructions"] - n["instructions"]) / n["per_user_s"]
        split.append(
            {
                "model": p["model"],
                "framework": p["framework"],
                "phase": p["phase"],
                "batch": p["batch"],
                "time_ratio": k["wall_s"] / n["wall_s"],
                "work_ratio": p["work_ratio"],
                "extra_s": extra,
                "instructions_s": more_work,
                "rate_s": k["user_s"] - k["instructions"] / n["per_user_s"],
                "system_s": k["sys_s"] - n["sys_s"],
                "waiting_s": k["wait_s"] - n["wait_s"],
            }
        )
    return {"rates": rates, "split": split}


# --- Markdown -------------------------------------------------------------------


def _m(n: float) -> str:
    """Instructions in millions, three significant figures at least."""
    return f"{n / 1e6:.3f}" if n < 1e8 else f"{n / 1e6:.1f}"


def _pct(x: float) -> str:
    return f"{100 * x:.3f}%"


def markdown(found: dict[str, Any]) -> str:
    """The tables of one count run: the answer (Keras over native, as work)
    first, then the functions Keras adds to, then every path's counts."""
    lines = [
        "## The answer: Keras over native, as work (callgrind instructions)",
        "",
    ]
    lines += [
        f"- {p['model']} {p['phase']} on {p['framework']} b{p['batch']}: Keras runs "
        f"{p['work_ratio']:.2f}x native's instructions, {_m(p['added_non_kernel'])} M "
        "more outside kernels per step"
        for p in found["pairs"]
    ] or ["- no Keras path was counted beside its native path"]
    lines += [
        "",
        "| model | framework | phase | batch | keras M | native M | work ratio | "
        "Keras adds, non-kernel M | Keras adds, kernel M |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in found["pairs"]:
        lines.append(
            f"| {p['model']} | {p['framework']} | {p['phase']} | {p['batch']} | "
            f"{_m(p['keras'])} | {_m(p['native'])} | {p['work_ratio']:.3f} | "
            f"{_m(p['added_non_kernel'])} | {_m(p['added_kernel'])} |"
        )
    for p in found["pairs"]:
        if p["top_added"]:
            lines += [
                "",
                f"Functions Keras adds most to, {p['model']} {p['framework']} "
                f"{p['phase']} b{p['batch']} (thousands of instructions per step):",
                "",
            ]
            lines += [f"- {n / 1e3:.1f}k {name[:140]}" for name, n in p["top_added"]]
    lines += [
        "",
        "## Instructions per step (callgrind)",
        "",
        "Millions of instructions per training step or inference mini-batch; "
        "`work`: all but `spin` (thread pools polling for work); `non-kernel`: "
        "interpreter + framework + system; `spread`: max - min between "
        "processes over the median (non-kernel; `block`: between the blocks "
        "of one process).",
        "",
        "| model | phase | batch | path | work M | kernel M | framework M | "
        "interpreter M | system M | non-kernel M | spin M | spread | block | "
        "processes |",
        "|" + " --- |" * 14,
    ]
    for r in found["paths"]:
        mark = " (unverified)" if r["unverified"] else ""
        mark += " (extra work)" if r["extra_loops"] else ""
        g = r["groups"]
        lines.append(
            f"| {r['model']} | {r['phase']} | {r['batch']} | {r['path']}{mark} | "
            f"{_m(r['work'])} | {_m(g['kernel'])} | {_m(g['framework'])} | "
            f"{_m(g['interpreter'])} | {_m(g['system'])} | {_m(r['non_kernel'])} | "
            f"{_m(g['spin'])} | "
            f"{_pct(r['non_kernel_spread'])} | {_pct(r['non_kernel_block_spread'])} | "
            f"{r['processes']} |"
        )
    lines += _time_markdown(found.get("time") or {"rates": [], "split": []})
    if found["not_counted"]:
        lines += ["", "Not counted:", ""]
        lines += [
            f"- {x['model']} {x['framework']} {x['phase']} b{x['batch']}: {x['why']}"
            for x in found["not_counted"]
        ]
    return "\n".join(lines)


def _time_markdown(time: dict[str, Any]) -> list[str]:
    """The work-against-time tables, or a line saying how to get them."""
    if not time["rates"]:
        return [
            "",
            "No timing of these cells on this machine to set the counts against: "
            "run `python -m harness run --profile PROFILE` with the count run's "
            "profile (`nox -s count` does).",
        ]
    lines = [
        "",
        "## Work against time",
        "",
        "Instructions (callgrind's count) per second of user CPU time (the "
        "newest `harness run` of this profile here):",
        "",
        "| model | path | phase | batch | wall ms | user ms | sys ms | wait ms | "
        "G instructions per user s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in time["rates"]:
        lines.append(
            f"| {r['model']} | {r['path']} | {r['phase']} | {r['batch']} | "
            f"{1e3 * r['wall_s']:.3f} | {1e3 * r['user_s']:.3f} | "
            f"{1e3 * r['sys_s']:.3f} | {1e3 * r['wait_s']:.3f} | "
            f"{r['per_user_s'] / 1e9:.2f} |"
        )
    lines += [
        "",
        "Keras' extra time per step, split: extra instructions at native's "
        "rate, Keras' lower instruction rate, system time, waiting (they add "
        "up to the extra time):",
        "",
        "| model | framework | phase | batch | time ratio | work ratio | extra ms | "
        "instructions | lower rate | system | waiting |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in time["split"]:
        extra = s["extra_s"] or float("nan")
        parts = [
            f"{1e3 * s[k]:.3f} ms ({100 * s[k] / extra:.0f}%)"
            for k in ("instructions_s", "rate_s", "system_s", "waiting_s")
        ]
        lines.append(
            f"| {s['model']} | {s['framework']} | {s['phase']} | {s['batch']} | "
            f"{s['time_ratio']:.2f} | {s['work_ratio']:.2f} | "
            f"{1e3 * s['extra_s']:.3f} | {' | '.join(parts)} |"
        )
    return lines
