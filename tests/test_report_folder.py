"""What the report folder holds, and what a report reads (issue 61): no file
written through a link planted in the folder; records files that are no
regular file, or too large, refused in one sentence before they are read; a
record holding too long a string, or a time per step out of any physical
range, no record; a record's strings shown as text, never as Markdown or
HTML."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from harness.__main__ import main
from harness.core import jsonl, records
from harness.report import literal, summary
from tests.helpers import record, within
from tests.test_report_html import _external_references
from tests.test_report_summary import MACHINE, _pairs
from tests.test_report_summary import _floors as _summary_floors
from zoo import files

HOSTILE = "![x](http://evil/x.png)<script>alert(1)</script>|a"


def _run(folder: Path, recs: list[records.Record]) -> Path:
    out = folder / "run-20261127-101500-1.jsonl"
    for r in recs:
        records.append(out, r)
    return out


# --- no write through a link ---------------------------------------------------


def test_the_report_replaces_links_in_its_folder_and_leaves_their_targets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    out = _run(tmp_path, _pairs(2.0))
    folder = tmp_path / "report"
    folder.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = {}
    for name in ("report.md", "report.html", "overhead.png"):
        target = outside / name
        target.write_text(f"not yours: {name}\n")
        (folder / name).symlink_to(target)
        planted[name] = target
    assert main(["report", str(out), "--plots", str(folder)]) == 0
    for name, target in planted.items():
        assert target.read_text() == f"not yours: {name}\n"
        written = folder / name
        assert written.is_file()
        assert not written.is_symlink()
    assert (folder / "overhead.png").read_bytes().startswith(b"\x89PNG")
    assert "# What Keras costs" in (folder / "report.md").read_text()
    assert "<html" in (folder / "report.html").read_text()
    assert not list(folder.glob(".*.tmp"))  # no temporary file left
    capsys.readouterr()


def test_a_write_that_fails_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    target.write_text("before\n")

    def fail() -> None:
        with files.replace(target) as handle:
            handle.write(b"half")
            raise RuntimeError("a full disk")

    with pytest.raises(RuntimeError):
        fail()
    assert target.read_text() == "before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    assert files.write_text(target, "after\n").read_text() == "after\n"


def test_a_name_from_a_record_is_one_safe_part_of_a_file_name() -> None:
    assert files.file_name("ffn") == "ffn"
    assert files.file_name("vgg-rysia_2.keras") == "vgg-rysia_2.keras"
    assert files.file_name("../../etc/passwd").startswith("______etc_passwd-")
    assert files.file_name("..").startswith("__-")
    assert files.file_name("").startswith("_-")
    assert len(files.file_name("x" * 500)) == files.NAME_CHARS
    # two names that read alike never share a file
    assert files.file_name("a/b") != files.file_name("a_b") == "a_b"
    assert files.file_name("x" * 500) != files.file_name("x" * 501)


# --- records files that are no regular file, or too large ----------------------


def test_a_fifo_a_device_and_a_folder_are_refused_before_a_byte_is_read(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "run-fifo.jsonl"
    os.mkfifo(fifo)
    folder = tmp_path / "run-folder.jsonl"
    folder.mkdir()
    zero = tmp_path / "run-zero.jsonl"
    zero.symlink_to("/dev/zero")
    with within(10):
        for path, kind in ((fifo, "a FIFO"), (folder, "a folder")):
            with pytest.raises(jsonl.UnreadableFileError) as refused:
                jsonl.read(path)
            assert str(refused.value) == (
                f"{path} is {kind}, not a regular file: it is not read"
            )
        with pytest.raises(ValueError, match="is a symbolic link: it is not followed"):
            records.scan(zero)


def test_a_file_larger_than_the_limit_is_refused_in_one_sentence(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _run(tmp_path, [record("native-torch")])
    monkeypatch.setattr(jsonl, "MAX_FILE_BYTES", 100)
    size = out.stat().st_size
    with pytest.raises(jsonl.UnreadableFileError) as refused:
        records.scan(out)
    assert str(refused.value) == (
        f"{out} is {size:,} bytes, more than the 100 a file read here may have: "
        "it is not read"
    )
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {refused.value}\n"


def test_a_report_beside_a_fifo_and_dev_zero_does_not_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report reads its folder's other runs (run-to-run variation, the
    agreement of commands) and its floors records: a FIFO or a link to
    /dev/zero among them is passed over, never read."""
    out = _run(tmp_path, _pairs(2.0))
    os.mkfifo(tmp_path / "run-00000000-000000-0.jsonl")
    (tmp_path / "run-00000000-000000-1.jsonl").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "floors-20261127-000000.jsonl")
    (tmp_path / "floors-20261127-000001.jsonl").symlink_to("/dev/zero")
    with within(60):
        assert main(["report", str(out), "--format", "markdown"]) == 0
    assert "## The answer" in capsys.readouterr().out


def test_the_cli_refuses_a_fifo_given_as_the_records_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "run-1.jsonl"
    os.mkfifo(fifo)
    with within(10):
        assert main(["report", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {fifo} ")
    assert err.count("\n") == 1


def test_a_record_with_a_huge_or_too_long_string_is_no_record(
    tmp_path: Path,
) -> None:
    out = _run(
        tmp_path,
        [
            record("native-torch"),
            record("native-torch", model="m" * 10_000_000),  # a 10 MB line
            record("native-torch", model="m" * (records.MAX_NAME_CHARS + 1)),
            record("native-torch", status="error", error="e" * 70_000),
            record(
                "native-torch",
                platform={"machine": {"name": "n" * 300}},
            ),
            record("native-torch", model="m" * records.MAX_NAME_CHARS, repeat=1),
        ],
    )
    found = records.scan(out)
    assert [len(r.model) for r in found.records] == [3, records.MAX_NAME_CHARS]
    assert found.skipped == (2, 3, 4, 5)
    assert "skipped 4 lines" in str(found.warning())


def test_an_over_long_line_is_skipped_unparsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text('{"a": 1}\n' + json.dumps({"b": "x" * 100}) + '\n{"c": 3}\n')
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 50)
    found = jsonl.read(path)
    assert found.values == [(1, {"a": 1}), (3, {"c": 3})]
    assert found.unreadable == (2,)


# --- times per step out of any physical range -------------------------------------


def _floors(results: Path, native_s: float, idiomatic_s: float) -> None:
    _summary_floors(
        results, native_s, idiomatic_s, model="ffn", batch_size=128, spread=0.0
    )


@pytest.mark.parametrize(
    ("native_s", "idiomatic_s"),
    [(1e308, 1e-308), (1e-308, 1e308), (2e6, 0.001), (0.001, 1e-10)],
)
def test_floors_times_out_of_range_are_no_records_and_no_ratio(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    native_s: float,
    idiomatic_s: float,
) -> None:
    _floors(tmp_path, native_s, idiomatic_s)
    assert summary.floors(tmp_path, "box") == {}
    assert "JSON but not a record" in capsys.readouterr().err.replace(
        "records", "a record"
    )
    out = _run(tmp_path, _pairs(2.0))
    assert main(["report", str(out), "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "The baseline's standing" not in text
    assert "inf [" not in text
    assert "nan" not in text


def test_floors_times_in_range_still_make_a_ratio(tmp_path: Path) -> None:
    _floors(tmp_path, 0.002, 0.001)
    (floor,) = summary.floors(tmp_path, "box").values()
    assert floor.ratio == pytest.approx(2.0)


@pytest.mark.parametrize("seconds", [1e308, 1e-308, 0.0])
def test_a_run_record_with_a_step_time_out_of_range_is_no_record(
    tmp_path: Path, seconds: float
) -> None:
    out = _run(
        tmp_path, [record("native-torch"), record("keras-torch", seconds=seconds)]
    )
    found = records.scan(out)
    assert [r.path for r in found.records] == ["native-torch"]
    assert found.skipped == (2,)


# --- a record's strings are text -------------------------------------------------


def _rendered(markdown: str) -> list[tuple[str, str]]:
    """(type, content or src) of every token a permissive renderer (raw HTML
    on, as on GitHub) makes of ``markdown``, inline ones included."""
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    out = []
    for token in parser.parse(markdown):
        for t in [token, *(token.children or [])]:
            out.append((t.type, str(t.attrGet("src") or t.content)))
    return out


def test_a_hostile_model_name_is_literal_text_in_report_md_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    recs = _pairs(3.0, model=HOSTILE)
    recs.append(
        record(
            "keras-jax",
            model=HOSTILE,
            status="crashed",
            error="`boom` <img src=http://evil/y.png>\n| x |",
            platform=MACHINE,
        )
    )
    out = _run(tmp_path, recs)
    folder = tmp_path / "report"
    assert main(["report", str(out), "--plots", str(folder)]) == 0
    capsys.readouterr()
    markdown = (folder / "report.md").read_text()
    assert "<script" not in markdown
    assert "<img" not in markdown
    tokens = _rendered(markdown)
    assert not [t for t in tokens if t[0].startswith("html")]  # no raw HTML
    images = [src for kind, src in tokens if kind == "image"]
    assert images
    assert all(src.endswith(".png") and ":" not in src for src in images)
    texts = "".join(content for kind, content in tokens if kind == "text")
    assert HOSTILE in texts  # the name itself, as text
    # The name's pipe splits no table row: each row has its header's cells.
    for table in markdown.split("\n\n"):
        rows = [line for line in table.splitlines() if line.startswith("|")]
        cells = {len(line.replace("\\|", "").split("|")) for line in rows}
        assert len(cells) <= 1, table
    page = (folder / "report.html").read_text()
    assert "<script" not in page
    assert '<img src="http' not in page
    assert _external_references(page) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|a" in page


def test_literal_markdown_escapes_what_could_render_and_keeps_plain_text() -> None:
    assert literal.markdown("p < 0.05, stacked_lstm, a-b") == (
        "p < 0.05, stacked_lstm, a-b"
    )
    assert literal.markdown("a\nb\r\tc") == "a b  c"
    assert literal.markdown("`x` *y* _z_ ~~s~~ [l](u) |") == (
        "\\`x\\` \\*y\\* \\_z\\_ \\~\\~s\\~\\~ \\[l\\](u) \\|"
    )
    assert literal.markdown("<b> &amp; \\") == "&lt;b> &amp;amp; \\\\"
    assert literal.code("python -m harness x") == "`python -m harness x`"
    assert literal.code("a`b") == "``a`b``"
    assert literal.code("--models <x>") == "--models &lt;x>"


# --- what was trained, under the model's name ----------------------------------


def test_the_report_says_each_user_models_training_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model`` says the step it checks and times before the run; the
    report says it again under the model's name, from the run's store
    (issue 75), and nothing for a model the store does not hold."""
    from zoo import user_models

    document = {
        "input_shape": [8],
        "layers": [
            {"kind": "dense", "name": "base", "units": 4, "trainable": False},
            {"kind": "dense", "name": "head", "units": 3},
        ],
        "workload": {
            "optimizer": "sgd",
            "learning_rate": 0.05,
            "momentum": 0.9,
            "batch_size": 16,
            "clipnorm": 1.0,
        },
    }
    name = user_models.register("mine.toml", document, None, tmp_path / "models")
    recs = [
        record(model=model, path=path, phase="train")
        for model in (name, "ffn")
        for path in ("keras-torch", "native-torch")
    ]
    out = _run(tmp_path, recs)
    assert main(["report", str(out)]) == 0
    said = capsys.readouterr().err
    assert (
        f"{name}: trained with SGD(learning_rate=0.05, momentum=0.9, "
        "nesterov=False, weight_decay=0, clipnorm=1), loss "
        "sparse_categorical_crossentropy from logits, 1 frozen layer (base), "
        "batch 16"
    ) in said, said
    assert "ffn: trained with" not in said
