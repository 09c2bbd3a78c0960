"""Reading records back: typed, version-checked, malformed lines counted."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.__main__ import main
from harness.core import records
from harness.report.analysis import cell_rows
from tests.helpers import record


def _line(**changes: Any) -> str:
    """A record as one JSON line, with fields replaced (or, for None, removed)."""
    data = dataclasses.asdict(record())
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The CLI's error for ``argv``, checked to be one line and no traceback."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1
    assert "Traceback" not in captured.err
    return captured.err


def test_records_come_back_typed_and_equal(tmp_path: Path) -> None:
    out = tmp_path / "run-1.jsonl"
    every_table = record(settings={"steps": 3}, platform={"git_revision": "abc"})
    written = [every_table, record("keras-torch", repeat=2)]
    for r in written:
        records.append(out, r)
    assert records.read(out) == written
    found = records.scan(out)
    assert (found.records, found.skipped, found.warning()) == (written, (), None)


@pytest.mark.parametrize(
    ("version", "says"),
    [
        (5, "has schema_version 5, newer than the versions this code reads (1 to 4)"),
        (99, "has schema_version 99, newer than"),
        ("three", "has schema_version 'three', not one of the versions this code"),
        (0, "has schema_version 0, not one of the versions this code reads (1 to 4)"),
        (True, "has schema_version True, not one of"),
        (3.0, "has schema_version 3.0, not one of"),
        (None, "has schema_version None, not one of"),
    ],
)
def test_a_newer_or_unknown_version_is_refused_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: object, says: str
) -> None:
    data = dataclasses.asdict(record())
    data["schema_version"] = version
    bad = _write(tmp_path / "run-new.jsonl", [_line(), json.dumps(data), _line()])
    with pytest.raises(ValueError, match="schema_version") as caught:
        records.read(bad)
    assert str(caught.value).startswith(f"{bad} line 2 ")
    assert says in str(caught.value)
    err = _one_error(capsys, ["report", str(bad)])
    assert err == f"error: {caught.value}\n"
    good = _write(tmp_path / "run-good.jsonl", [_line()])
    assert str(bad) in _one_error(capsys, ["report", "--compare", str(good), str(bad)])


def test_a_newer_version_says_where_to_read_it(tmp_path: Path) -> None:
    bad = _write(tmp_path / "run-5.jsonl", [_line(schema_version=5)])
    with pytest.raises(ValueError, match="report it with the harness that wrote it"):
        records.read(bad)


def test_a_newer_version_is_refused_even_with_fields_this_code_does_not_know(
    tmp_path: Path,
) -> None:
    data = dataclasses.asdict(record()) | {"schema_version": 5, "energy_j": 1.0}
    bad = _write(tmp_path / "run-5.jsonl", [json.dumps(data)])
    with pytest.raises(ValueError, match="line 1 has schema_version 5"):
        records.read(bad)


NOT_RECORDS = [
    "[" * 100_000,  # nested beyond the JSON reader's recursion limit
    _line(batch_size=0).replace('"batch_size": 0', '"batch_size": ' + "9" * 5000),
    "[1, 2]",  # not an object
    '"a string"',
    "null",
    '{"model": "ffn"}',  # no schema_version, no fields
    _line(status=None),  # a required field missing
    _line(energy_j=1.0),  # a field no version has
    _line(batch_size="8"),  # wrong types
    _line(batch_size=True),
    _line(verified="yes"),
    _line(summary=[]),
    _line(error=3),
]


def test_json_lines_that_are_not_records_are_skipped_and_counted(
    tmp_path: Path,
) -> None:
    lines = [_line(), *NOT_RECORDS, _line(repeat=1)]
    out = _write(tmp_path / "run-1.jsonl", lines)
    found = records.scan(out)
    assert [r.repeat for r in found.records] == [0, 1]
    assert found.skipped == tuple(range(2, 2 + len(NOT_RECORDS)))
    assert found.warning() == (
        f"warning: skipped {len(NOT_RECORDS)} lines of {out} that are JSON but "
        "not records (lines 2, 3, 4, 5, 6, ...)"
    )
    assert records.read(out) == found.records


def test_one_skipped_line_is_named(tmp_path: Path) -> None:
    out = _write(tmp_path / "run-1.jsonl", [_line(), "[]"])
    assert records.scan(out).warning() == (
        f"warning: skipped 1 line of {out} that is JSON but not a record (line 2)"
    )


def test_the_report_warns_once_about_skipped_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _write(tmp_path / "run-1.jsonl", [_line(), "[1]", _line(), '{"a": 1}'])
    assert main(["report", str(out)]) == 0
    captured = capsys.readouterr()
    assert "native-torch" in captured.out
    assert captured.err == (
        f"warning: skipped 2 lines of {out} that are JSON but not records "
        "(lines 2, 4)\n"
    )
    old = _write(tmp_path / "run-0.jsonl", [_line(), _line()])
    assert main(["report", "--compare", str(old), str(out), "--format", "json"]) == 0
    assert capsys.readouterr().err.count("warning: skipped 2 lines") == 1


def test_plots_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    out = _write(tmp_path / "run-1.jsonl", [_line(), "[1]"])
    assert main(["report", str(out), "--plots", str(tmp_path / "plots")]) == 0
    assert capsys.readouterr().err.count("warning: skipped 1 line") == 1


def test_a_file_of_only_non_records_holds_no_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _write(tmp_path / "run-1.jsonl", ["[1]"])
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"warning: skipped 1 line of {out} that is JSON but not a record (line 1)",
        f"error: {out} holds no records; give a run-*.jsonl written by "
        "'python -m harness run'",
    ]


def test_torn_lines_are_skipped_the_last_one_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A crash mid-write, then a resumed run that appended after it, then
    # another crash: torn lines in the middle and at the end.  The one in the
    # middle is history, skipped without a word; the last one is news.
    out = tmp_path / "run-1.jsonl"
    out.write_text(_line() + "\n" + _line()[:40] + "\n" + _line() + "\n" + _line()[:9])
    found = records.scan(out)
    assert (len(found.records), found.skipped, found.torn) == (2, (), 4)
    torn = (
        f"warning: skipped line 4 of {out}, the last: it was cut short (a write "
        "that did not finish, e.g. a crash)"
    )
    assert found.warnings() == [torn]
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().err == torn + "\n"
    assert len(records.read(out)) == 2
    assert len(records.read(out)) == 2  # a second read says nothing new
    assert capsys.readouterr().err == torn + "\n"
    records.append(out, record())  # a resume closes the torn line
    assert records.scan(out).warnings() == []
    assert len(records.read(out)) == 3


def test_a_whole_last_line_that_is_no_json_is_no_torn_line(tmp_path: Path) -> None:
    # Only a write cut short leaves a last line without its newline.
    out = _write(tmp_path / "run-1.jsonl", [_line(), "{not json"])
    found = records.scan(out)
    assert (len(found.records), found.skipped, found.warnings()) == (1, (), [])


def test_a_status_this_code_does_not_know_is_read_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _write(
        tmp_path / "run-1.jsonl",
        [
            _line(),
            _line(status="ok-partial", repeat=1),
            _line(status="ok-partial", repeat=2),
            _line(status="paused", repeat=3),
        ],
    )
    found = records.scan(out)
    assert [r.status for r in found.records] == [
        "ok",
        "ok-partial",
        "ok-partial",
        "paused",
    ]
    warning = (
        f"warning: {out} has records of a status this code does not know: "
        "'ok-partial' (lines 2, 3); 'paused' (line 4); they are read as not ok "
        "(it knows ok, not-timed, diverged, error, crashed, timeout, unavailable)"
    )
    assert found.warnings() == [warning]
    assert len(records.read(out)) == 4
    assert len(records.read(out)) == 4  # once per file, however often read
    assert capsys.readouterr().err == warning + "\n"
    assert main(["report", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == warning + "\n"
    assert "native-torch" in captured.out
    _, line = records.outcome(found.records)
    assert line == "4 cell repeats: 1 ok, 2 ok-partial, 1 paused"
    assert records.scan(_write(tmp_path / "run-2.jsonl", [_line()])).warnings() == []


@pytest.mark.parametrize(
    "content",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\xff",
        (_line() + "\n").encode() + b"\xff\xfe\n",
    ],
)
def test_a_binary_file_gives_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    bad = tmp_path / "run-1.jsonl"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="not UTF-8 text"):
        records.read(bad)
    err = _one_error(capsys, ["report", str(bad)])
    assert err.startswith(f"error: {bad} is not a records file: it is not UTF-8")


def test_version_1_and_2_records_still_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Version 1 had neither ``verified`` nor ``repeat``, version 2 no ``repeat``.
    v1 = _line(schema_version=1, verified=None, repeat=None, path="keras-torch")
    v2 = _line(schema_version=2, repeat=None)
    out = _write(tmp_path / "run-old.jsonl", [v1, v2, _line(repeat=1)])
    old, older, new = records.read(out)
    assert (old.schema_version, old.verified, old.repeat) == (1, False, 0)
    assert (older.schema_version, older.verified, older.repeat) == (2, True, 0)
    assert (new.schema_version, new.repeat) == (4, 1)
    rows = {r["path"]: r for r in cell_rows([old, older, new])}
    assert rows["keras-torch"]["mark"] == "unverified"  # before the gate
    assert (rows["native-torch"]["mark"], rows["native-torch"]["n"]) == (None, 2)
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().err == ""


def test_a_resume_counts_the_typed_records_it_finds(tmp_path: Path) -> None:
    from harness.bench.run import Cell, _open

    out = _write(
        tmp_path / "run-7.jsonl",
        [
            _line(schema_version=2, repeat=None),
            _line(repeat=1),
            _line(repeat=2, status="crashed"),
            _line(repeat=2, status="not-timed", path="keras-torch"),
        ],
    )
    run_id, path, done = _open(tmp_path, out)
    assert (run_id, path) == ("7", out)
    native = Cell("ffn", "native-torch", "train", 8)
    keras = Cell("ffn", "keras-torch", "train", 8)
    assert done == {(native, 0): 1, (native, 1): 1, (keras, 2): 1}


# --- any line at all: one sentence or a report, never a traceback ---------------

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_FIELDS = sorted(f.name for f in dataclasses.fields(records.Record))


def _hostile_line() -> st.SearchStrategy[str]:
    """A good record with one field set to any JSON value, with a field of its
    summary, values or platform set to any JSON value, any JSON line, or any
    text."""
    field_replaced = st.builds(
        lambda key, value: _line(**{key: value}), st.sampled_from(_FIELDS), _JSON
    )
    nested = st.builds(
        lambda table, key, value: _line(**{table: {key: value}}),
        st.sampled_from(["summary", "values", "platform", "settings"]),
        st.sampled_from(["median_step_s", "step_s", "git_revision", "steps", "x"]),
        _JSON,
    )
    return st.one_of(
        st.just(_line()),
        field_replaced,
        nested,
        _JSON.map(json.dumps),
        st.text(max_size=20).filter(lambda t: "\n" not in t and "\r" not in t),
    )


@given(lines=st.lists(_hostile_line(), min_size=1, max_size=4))
def test_any_records_file_gives_a_report_or_one_sentence(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = _write(Path(tmp) / "run-h.jsonl", lines)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["report", str(out), "--table", "cells"])
        text = err.getvalue()
        assert "Traceback" not in text
        assert code in (0, 2), text
        if code == 2:
            assert text.splitlines()[-1].startswith("error: ")
        # a skipped-lines warning, an unknown-status warning, an error
        assert len(text.splitlines()) <= 3
