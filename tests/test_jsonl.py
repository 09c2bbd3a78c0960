"""One JSON Lines module: how lines are appended, and one reading policy that
records, explain and ops share (torn last line: a warning; a torn line
elsewhere: skipped without a word; JSON of the wrong kind: counted)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core import jsonl
from harness.explain import measure as explain
from harness.ops import report as ops
from zoo import files

ONE = {"kind": "host", "b": 1, "a": 2}
TWO = {"kind": "peak", "path": "native-jax", "flops_per_s": [1e9]}


def _torn(path: Path) -> Path:
    """A crash mid-write, a later append after it, then another crash."""
    path.write_text(
        json.dumps(ONE) + "\n" + json.dumps(TWO)[:12] + "\n" + json.dumps(TWO) + "\n"
        '{"kind": "pe'
    )
    return path


def test_append_writes_whole_lines_in_the_order_asked(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "lines.jsonl"
    jsonl.append(out, ONE)
    jsonl.append(out, ONE, sort_keys=True)
    assert out.read_text().splitlines() == [
        json.dumps(ONE),
        json.dumps(ONE, sort_keys=True),
    ]


def test_append_never_glues_onto_a_torn_line(tmp_path: Path) -> None:
    out = _torn(tmp_path / "lines.jsonl")
    jsonl.append(out, ONE)
    found = jsonl.read(out)
    assert [n for n, _ in found.values] == [1, 3, 5]
    assert found.torn is None


def test_a_write_that_fails_names_the_file_and_the_noun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "lines.jsonl"
    jsonl.append(out, ONE)

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl.os, "write", full)
    with pytest.raises(jsonl.WriteError, match=f"could not write a line to {out}"):
        jsonl.append(out, TWO)
    monkeypatch.undo()
    assert jsonl.read(out).values == [(1, ONE)]  # undone: the file as it was


def test_a_device_or_a_link_is_never_appended_to(tmp_path: Path) -> None:
    with pytest.raises(jsonl.WriteError, match="character device"):
        jsonl.append(Path("/dev/full"), ONE)
    target = tmp_path / "elsewhere.jsonl"
    (tmp_path / "lines.jsonl").symlink_to(target)
    with pytest.raises(jsonl.WriteError, match="symbolic link"):
        jsonl.append(tmp_path / "lines.jsonl", ONE)
    assert not target.exists()


def test_read_skips_torn_lines_and_names_only_the_last(tmp_path: Path) -> None:
    out = _torn(tmp_path / "lines.jsonl")
    found = jsonl.read(out)
    assert found.values == [(1, ONE), (3, TWO)]
    assert (found.torn, found.unreadable) == (4, ())
    assert found.warning() == (
        f"warning: skipped line 4 of {out}, the last: it was cut short (a write "
        "that did not finish, e.g. a crash)"
    )


def test_json_beyond_the_parsers_limits_is_unreadable_not_torn(tmp_path: Path) -> None:
    out = tmp_path / "lines.jsonl"
    out.write_text(json.dumps(ONE) + "\n" + "[" * 100_000 + "\n\n" + "9" * 5000)
    found = jsonl.read(out)
    assert (found.values, found.unreadable, found.torn) == ([(1, ONE)], (2, 4), None)


def test_explain_reads_by_the_same_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _torn(tmp_path / "explain.jsonl")
    assert explain.read(tmp_path) == [ONE, TWO]
    assert capsys.readouterr().err == (
        f"warning: skipped line 4 of {tmp_path / 'explain.jsonl'}, the last: it "
        "was cut short (a write that did not finish, e.g. a crash)\n"
    )


def test_ops_reads_by_the_same_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, a torn line in gate.jsonl stopped the ops report with a traceback.
    gate = tmp_path / "gate.jsonl"
    run = {
        "kind": "run",
        "profile": {"name": "ops"},
        "matmul_peak": {"flops_per_s": 1e9},
        "host": {},
    }
    gate.write_text(
        json.dumps(run)
        + "\n[1, 2]\n"
        + json.dumps(TWO)[:9]
        + "\n"
        + json.dumps(TWO)
        + "\n"
        + json.dumps(TWO)[:9]
    )
    header, verdicts, recs = ops.read(tmp_path)
    assert (header, verdicts, recs) == (run, [], [])
    assert ops._peaks(tmp_path) == {"native-jax": 1e9}
    err = capsys.readouterr().err.splitlines()
    assert err == [  # once each, though the file was read twice
        f"warning: skipped 1 line of {gate} that is JSON but not an ops gate line "
        "(line 2)",
        f"warning: skipped line 5 of {gate}, the last: it was cut short (a write "
        "that did not finish, e.g. a crash)",
    ]


def test_two_runs_started_in_one_second_never_share_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files.time, "strftime", lambda _: "20261126-101010")
    pid = os.getpid()
    first = jsonl.claim(tmp_path / "converge", "converge", ".jsonl")
    second = jsonl.claim(tmp_path / "converge", "converge", ".jsonl")
    assert first.name == f"converge-20261126-101010-{pid}.jsonl"
    assert second.name == f"converge-20261126-101010-{pid}-2.jsonl"
    assert first.is_file()
    assert first.stat().st_size == 0
    # folders the same way, and a name taken by anything is passed over
    (tmp_path / f"count-20261126-101010-{pid}").write_text("another run's")
    folder = jsonl.claim(tmp_path, "count")
    assert folder.is_dir()
    assert folder.name == f"count-20261126-101010-{pid}-2"
