"""The real-data loaders on tiny files in each format: what they read is,
byte for byte, what was written; every broken file is refused in one
sentence naming it."""

from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.datafiles import MNIST_NAMES, idx_bytes, write_cifar, write_imdb, write_mnist
from zoo import datasets
from zoo.datasets import DataError, cifar10, imdb, mnist
from zoo.models import get_spec
from zoo.specs import MODELS


@pytest.mark.parametrize("gzipped", [True, False])
def test_mnist_idx_files_read_byte_for_byte(tmp_path: Path, gzipped: bool) -> None:
    written = write_mnist(tmp_path, gzipped=gzipped)
    raw = mnist.read_folder(tmp_path / "mnist")
    for key, array in written.items():
        assert raw[key].dtype == np.uint8
        assert np.array_equal(raw[key], array), key
    split = mnist.load(tmp_path, MODELS["lenet"])
    assert split.train_x.shape == (40, 28, 28, 1)
    assert np.array_equal(
        split.train_x[..., 0], written["train_x"].astype(np.float32) / np.float32(255)
    )
    assert split.train_y.dtype == np.int32
    assert np.array_equal(split.test_y, written["test_y"])
    assert mnist.load(tmp_path, MODELS["ffn"]).test_x.shape == (20, 784)


def _mnist_file(tmp_path: Path, key: str) -> Path:
    return tmp_path / "mnist" / f"{MNIST_NAMES[key]}.gz"


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", r"t10k-labels-idx1-ubyte\(\.gz\) is missing"),
        ("truncated", r"t10k-labels-idx1-ubyte.gz is truncated: 19 bytes of data"),
        ("extra", r"followed by extra bytes"),
        ("cut-gzip", r"truncated or damaged gzip file"),
        ("foreign", r"is not an IDX file of labels"),
        (
            "images-as-labels",
            r"3-dimensional elements .* expected an IDX file of labels",
        ),
        ("label-11", r"holds label 11; MNIST's are 0 to 9"),
    ],
)
def test_broken_mnist_files_are_refused_by_name(
    tmp_path: Path, damage: str, expected: str
) -> None:
    written = write_mnist(tmp_path)
    target = _mnist_file(tmp_path, "test_y")
    labels = written["test_y"]
    if damage == "missing":
        target.unlink()
    elif damage == "truncated":
        target.write_bytes(gzip.compress(idx_bytes(labels)[:-1]))
    elif damage == "extra":
        target.write_bytes(gzip.compress(idx_bytes(labels) + b"\0"))
    elif damage == "cut-gzip":
        target.write_bytes(target.read_bytes()[:-10])
    elif damage == "foreign":
        target.write_bytes(gzip.compress(b"PK\x03\x04 a zip file"))
    elif damage == "images-as-labels":
        target.write_bytes(gzip.compress(idx_bytes(written["test_x"])))
    else:
        target.write_bytes(gzip.compress(idx_bytes(np.full(20, 11, np.uint8))))
    with pytest.raises(DataError, match=expected):
        mnist.load(tmp_path, MODELS["ffn"])


def test_mnist_images_and_labels_must_match_in_number_and_size(tmp_path: Path) -> None:
    written = write_mnist(tmp_path)
    _mnist_file(tmp_path, "test_y").write_bytes(
        gzip.compress(idx_bytes(written["test_y"][:-1]))
    )
    with pytest.raises(DataError, match="20 test images but 19 labels"):
        mnist.load(tmp_path, MODELS["ffn"])
    small = np.zeros((20, 14, 14), np.uint8)
    _mnist_file(tmp_path, "test_x").write_bytes(gzip.compress(idx_bytes(small)))
    with pytest.raises(DataError, match="14x14 images, expected 28x28"):
        mnist.load(tmp_path, MODELS["ffn"])


def test_cifar_binary_files_read_byte_for_byte(tmp_path: Path) -> None:
    written = write_cifar(tmp_path)
    split = cifar10.load(tmp_path / "cifar-10-batches-bin")
    assert split.train_x.shape == (60, 32, 32, 3)
    assert split.test_x.shape == (12, 32, 32, 3)
    for part in ("train", "test"):
        x = getattr(split, f"{part}_x")
        assert np.array_equal(
            x, written[f"{part}_x"].astype(np.float32) / np.float32(255)
        )
        assert np.array_equal(getattr(split, f"{part}_y"), written[f"{part}_y"])
    # the first record's first red byte is the file's second byte
    first = (tmp_path / "cifar-10-batches-bin" / "data_batch_1.bin").read_bytes()
    assert split.train_y[0] == first[0]
    assert split.train_x[0, 0, 0, 0] == np.float32(first[1]) / np.float32(255)
    assert split.train_x[0, 0, 0, 2] == np.float32(first[1 + 2048]) / np.float32(255)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", r"data_batch_3.bin is missing"),
        ("python-version", r"that is the Python version"),
        ("truncated", r"not a whole number of 3073-byte records"),
        (
            "one-record-short",
            r"hold different numbers of records \(.*data_batch_3.bin 11",
        ),
        ("label", r"holds label 200 in record 0; .* 0 to 9"),
        ("empty", r"is 0 bytes"),
    ],
)
def test_broken_cifar_files_are_refused_by_name(
    tmp_path: Path, damage: str, expected: str
) -> None:
    write_cifar(tmp_path)
    where = tmp_path / "cifar-10-batches-bin"
    target = where / "data_batch_3.bin"
    data = target.read_bytes()
    if damage == "missing":
        target.unlink()
    elif damage == "python-version":
        target.unlink()
        (where / "data_batch_3").write_bytes(b"\x80\x04 a pickle")
    elif damage == "truncated":
        target.write_bytes(data[:-100])
    elif damage == "one-record-short":
        target.write_bytes(data[:-3073])
    elif damage == "label":
        target.write_bytes(bytes([200]) + data[1:])
    else:
        target.write_bytes(b"")
    with pytest.raises(DataError, match=expected):
        cifar10.load(where)


def test_imdb_reviews_become_deterministic_features(tmp_path: Path) -> None:
    texts = write_imdb(tmp_path)
    where = tmp_path / "aclImdb"
    tokens, labels = imdb.reviews(where, "train")
    # neg first, then pos, each in file-name order
    assert labels.tolist() == [0] * 6 + [1] * 6
    assert tokens[0] == imdb.tokens(texts["train/neg/0_2.txt"])
    assert imdb.tokens("It's <br />GREAT, don't-miss 10/10!") == [
        "it's",
        "great",
        "don't",
        "miss",
        "10",
        "10",
    ]
    words = imdb.build_vocabulary(tokens, 3)
    counts: dict[str, int] = {}
    for text in tokens:
        for t in text:
            counts[t] = counts.get(t, 0) + 1
    ranked = sorted(counts, key=lambda w: (-counts[w], w))[:3]
    assert words == {w: i for i, w in enumerate(ranked, start=2)}
    ids = imdb.sequences([["the", "great", "x"], []], {"the": 2, "great": 3}, 4)
    assert ids.tolist() == [[0, 2, 3, 1], [0, 0, 0, 0]]
    assert imdb.sequences([["a", "b", "c"]], {"a": 2, "b": 3, "c": 4}, 2).tolist() == [
        [3, 4]
    ]
    split = imdb.load(where, length=7, vocabulary=5, glove=None, seed=3)
    assert split.train_x.shape == (12, 7, 50)
    assert split.train_x.dtype == np.float32
    again = imdb.load(where, length=7, vocabulary=5, glove=None, seed=3)
    assert np.array_equal(split.train_x, again.train_x)
    table = imdb.table(imdb.build_vocabulary(tokens, 5), seed=3)
    assert not table[0].any()  # padding is zeros
    # shuffled by zoo.datasets.orders, as every dataset is
    order, _ = datasets.orders((12, 12), (None, None), 3, "")
    kept = tokens[int(order[0]) : int(order[0]) + 1]
    first = imdb.sequences(kept, imdb.build_vocabulary(tokens, 5), 7)[0]
    assert np.array_equal(split.train_x[0], table[first])


def test_a_model_with_an_embedding_reads_imdb_as_token_ids(tmp_path: Path) -> None:
    write_imdb(tmp_path)
    spec = get_spec("transformer-tiny")  # 50 rows: 48 words and the two reserved
    split = datasets.load(spec, tmp_path, datasets.Options(sequence_length=12))
    assert split.train_x.shape == (12, 12)
    assert split.train_x.dtype == np.int32
    assert split.train_x.min() >= 0
    assert split.train_x.max() < spec.tokens
    # the same ids the features of the LSTM are looked up by
    where = tmp_path / "aclImdb"
    features = imdb.load(where, length=12, vocabulary=48, glove=None, seed=0)
    table = imdb.table(imdb.build_vocabulary(imdb.reviews(where, "train")[0], 48), 0)
    assert np.array_equal(table[split.train_x], features.train_x)
    assert np.array_equal(split.train_y, features.train_y)


def test_imdb_is_cut_before_its_features_are_built_and_the_same(tmp_path: Path) -> None:
    write_imdb(tmp_path)
    where = tmp_path / "aclImdb"
    # all of it in file order, then cut: what loading did before the cut moved
    # in front of the features
    train_tokens, train_y = imdb.reviews(where, "train")
    test_tokens, test_y = imdb.reviews(where, "test")
    words = imdb.build_vocabulary(train_tokens, 5)
    table = imdb.table(words, seed=2)
    whole = datasets.Split(
        table[imdb.sequences(train_tokens, words, 6)],
        train_y,
        table[imdb.sequences(test_tokens, words, 6)],
        test_y,
        source="",
    )
    before = datasets.subset(whole, 4, 3, seed=2)
    cut = imdb.load(where, length=6, vocabulary=5, glove=None, seed=2, samples=(4, 3))
    for part in ("train_x", "train_y", "test_x", "test_y"):
        assert np.array_equal(getattr(cut, part), getattr(before, part)), part
    assert cut.train_x.shape == (4, 6, 50)
    # a length the schema allows, for 8 samples, is only what 8 need ...
    assert (
        imdb.load(
            where, length=10_000, vocabulary=5, glove=None, seed=2, samples=(8, 2)
        ).train_x.nbytes
        == 8 * 10_000 * 50 * 4
    )
    # ... and for every sample, more than a dataset may take: refused unbuilt
    with pytest.raises(DataError, match=r"training features .* would take 4.5 GiB"):
        imdb.load(
            where, length=2_000_000, vocabulary=5, glove=None, seed=2, samples=(12, 2)
        )


def test_a_glove_file_gives_its_words_their_vectors(tmp_path: Path) -> None:
    write_imdb(tmp_path)
    glove = tmp_path / "glove.txt"
    glove.write_text(
        "great " + " ".join(["0.5"] * 50) + "\nzzz " + " ".join(["1"] * 50) + "\n"
    )
    tokens, _ = imdb.reviews(tmp_path / "aclImdb", "train")
    words = imdb.build_vocabulary(tokens, 10)
    table = imdb.table(words, seed=0, glove=glove)
    assert np.array_equal(table[words["great"]], np.full(50, 0.5, np.float32))
    assert np.array_equal(
        table[words["film"]], imdb.table(words, seed=0)[words["film"]]
    )
    glove.write_text("great " + " ".join(["0.5"] * 49) + "\n")
    with pytest.raises(DataError, match="line 1 is not a word and 50 finite numbers"):
        imdb.table(words, seed=0, glove=glove)


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        ("nan", "a NaN, an inf or a number beyond float32"),
        ("inf", "a NaN, an inf or a number beyond float32"),
        ("1e39", "a NaN, an inf or a number beyond float32"),
        ("x", "could not convert"),
    ],
)
def test_a_glove_vector_that_is_not_finite_is_refused_by_line(
    tmp_path: Path, number: str, expected: str
) -> None:
    write_imdb(tmp_path)
    glove = tmp_path / "glove.txt"
    good = "film " + " ".join(["0.5"] * 50) + "\n"
    glove.write_text(good + "great " + " ".join(["0.5"] * 49 + [number]) + "\n")
    tokens, _ = imdb.reviews(tmp_path / "aclImdb", "train")
    words = imdb.build_vocabulary(tokens, 10)
    with pytest.raises(DataError, match=rf"glove.txt line 2 is not .*{expected}"):
        imdb.table(words, seed=0, glove=glove)
    glove.write_bytes(good.encode() + b"caf\xe9 " + b" ".join([b"1"] * 50))
    with pytest.raises(DataError, match=r"glove\.txt line 2 is not UTF-8 text"):
        imdb.table(words, seed=0, glove=glove)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("no-test", r"test/neg is missing"),
        ("partial", r"holds 6 positive and 5 negative reviews"),
        ("binary", r"3_2.txt is not UTF-8 text"),
        ("no-folder", r"aclImdb is missing"),
    ],
)
def test_broken_imdb_folders_are_refused_by_name(
    tmp_path: Path, damage: str, expected: str
) -> None:
    write_imdb(tmp_path)
    where = tmp_path / "aclImdb"
    if damage == "no-test":
        for f in (where / "test" / "neg").iterdir():
            f.unlink()
        (where / "test" / "neg").rmdir()
    elif damage == "partial":
        (where / "train" / "neg" / "5_2.txt").unlink()
    elif damage == "binary":
        (where / "train" / "neg" / "3_2.txt").write_bytes(b"\xff\xfe\x00bad")
    else:
        where = tmp_path / "elsewhere" / "aclImdb"
    with pytest.raises(DataError, match=expected):
        imdb.load(where, length=5, vocabulary=10, glove=None, seed=0)


def test_loading_by_model_cuts_seeded_subsets_and_whole_batches(tmp_path: Path) -> None:
    write_mnist(tmp_path, train=40, test=20)
    options = datasets.Options(train_samples=30, test_samples=10, seed=1)
    split = datasets.load(MODELS["ffn"], tmp_path, options)
    assert split.train_x.shape == (30, 784)
    assert split.test_y.shape == (10,)
    assert np.array_equal(
        split.train_x, datasets.load(MODELS["ffn"], tmp_path, options).train_x
    )
    other = datasets.load(
        MODELS["ffn"], tmp_path, datasets.Options(train_samples=30, seed=2)
    )
    assert not np.array_equal(split.train_y, other.train_y)
    with pytest.raises(DataError, match="has 40 training samples, fewer than the 50"):
        datasets.load(MODELS["ffn"], tmp_path, datasets.Options(train_samples=50))
    x, y = datasets.batched(split.train_x, split.train_y, 8)
    assert x.shape == (3, 8, 784)
    assert np.array_equal(y.reshape(-1), split.train_y[:24])
    with pytest.raises(DataError, match="do not fill one mini-batch of 64"):
        datasets.batched(split.train_x, split.train_y, 64)
    padded = datasets.padded(split.test_x, 4)
    assert padded.shape == (3, 4, 784)
    assert np.array_equal(padded.reshape(12, 784)[:10], split.test_x)
    assert np.array_equal(padded.reshape(12, 784)[10:], split.test_x[:2])
    assert datasets.padded(split.test_x[:3], 8).shape == (1, 8, 784)


def test_datasets_without_an_embedded_sample_need_a_folder(tmp_path: Path) -> None:
    with pytest.raises(
        DataError, match="vgg16 trains on cifar10, which has no embedded"
    ):
        datasets.load(MODELS["vgg16"], None)
    with pytest.raises(DataError, match=r"the data folder .* does not exist"):
        datasets.load(MODELS["ffn"], tmp_path / "nowhere")
    write_imdb(tmp_path)
    split = datasets.load(MODELS["lstm"], tmp_path, datasets.Options(sequence_length=9))
    assert split.train_x.shape == (12, 9, 50)
    write_cifar(tmp_path)
    assert datasets.load(MODELS["vgg16"], tmp_path).train_x.shape == (60, 32, 32, 3)


def _bomb(path: Path, header: bytes, zeros: int) -> None:
    """A gzip file of ``header`` and then ``zeros`` zero bytes, compressed a
    chunk at a time (the test itself never holds them)."""
    with gzip.open(path, "wb") as out:
        out.write(header)
        chunk = bytes(2**20)
        for _ in range(zeros // len(chunk)):
            out.write(chunk)


def test_hostile_mnist_files_are_refused_before_memory_is_spent(
    tmp_path: Path,
) -> None:
    write_mnist(tmp_path)
    labels = _mnist_file(tmp_path, "test_y")
    # a gzip bomb behind an honest header: read up to the 21st byte, no further
    _bomb(labels, idx_bytes(np.arange(20, dtype=np.uint8) % 10), 64 * 2**20)
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="followed by extra bytes"):
            mnist.read(labels, "test_y")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak  # 64 MiB unpacked would be 64x this
    # a header that claims 2^31 images: refused unread
    images = _mnist_file(tmp_path, "train_x")
    images.write_bytes(
        gzip.compress(bytes([0, 0, 8, 3]) + struct.pack(">3I", 2**31, 28, 28))
    )
    with pytest.raises(DataError, match=r"would take 1568.0 GiB in memory"):
        mnist.read(images, "train_x")
    # a sparse 64 GiB file (no disk spent) behind a 20-label header
    labels.unlink()
    plain = labels.with_suffix("")
    plain.write_bytes(idx_bytes(np.zeros(20, np.uint8)))
    with plain.open("r+b") as f:
        f.truncate(64 * 2**30)
    with pytest.raises(DataError, match=r"is 68,719,476,736 bytes, more than the"):
        mnist.read(plain, "test_y")  # refused by its size, before a byte is read


@pytest.mark.parametrize("where", ["folder", "fifo", "flat"])
def test_a_misplaced_mnist_file_is_named_for_what_it_is(
    tmp_path: Path, where: str
) -> None:
    write_mnist(tmp_path)
    target = _mnist_file(tmp_path, "test_y")
    target.unlink()
    if where == "folder":
        target.mkdir()
        expected = r"t10k-labels-idx1-ubyte.gz is a folder; MNIST's"
    elif where == "fifo":
        os.mkfifo(target)
        expected = r"t10k-labels-idx1-ubyte.gz is not a regular file"
    else:
        for f in (tmp_path / "mnist").iterdir():
            f.rename(tmp_path / f.name)
        (tmp_path / "mnist").rmdir()
        (tmp_path / "mnist").mkdir()
        expected = r"is in .*: MNIST's files go in its mnist/ folder"
    with pytest.raises(DataError, match=expected):
        mnist.load(tmp_path, MODELS["ffn"])


@pytest.mark.parametrize("damage", ["no-test-images", "one-label", "sparse"])
def test_degenerate_or_oversized_datasets_are_refused(
    tmp_path: Path, damage: str
) -> None:
    if damage == "no-test-images":
        write_mnist(tmp_path, test=0)
        with pytest.raises(DataError, match="holds no images"):
            datasets.load(MODELS["ffn"], tmp_path)
    elif damage == "one-label":
        written = write_mnist(tmp_path)
        _mnist_file(tmp_path, "train_y").write_bytes(
            gzip.compress(idx_bytes(np.full(len(written["train_y"]), 3, np.uint8)))
        )
        with pytest.raises(DataError, match="every training label is 3"):
            datasets.load(MODELS["ffn"], tmp_path)
    else:
        write_cifar(tmp_path)
        batch = tmp_path / "cifar-10-batches-bin" / "data_batch_2.bin"
        with batch.open("r+b") as f:
            f.truncate(3073 * 2**21)  # whole records, 6 GiB, sparse
        with pytest.raises(
            DataError,
            match=r"data_batch_2.bin, as its size on disk says, would take 6.0 GiB",
        ):
            datasets.load(MODELS["vgg16"], tmp_path)


def test_cifar_and_imdb_files_put_flat_say_where_they_go(tmp_path: Path) -> None:
    write_cifar(tmp_path)
    cifar = tmp_path / "cifar-10-batches-bin"
    for f in cifar.iterdir():
        f.rename(tmp_path / f.name)
    with pytest.raises(DataError, match=r"go in its cifar-10-batches-bin/ folder"):
        cifar10.load(cifar)
    write_imdb(tmp_path)
    for part in ("train", "test"):
        (tmp_path / "aclImdb" / part).rename(tmp_path / part)
    with pytest.raises(DataError, match=r"IMDB's folders go in its aclImdb/ folder"):
        imdb.load(tmp_path / "aclImdb", length=5, vocabulary=10, glove=None, seed=0)


# --- a user's own arrays (--model FILE --data ARRAYS.npz) ---------------------------


def _user_spec(**workload: Any) -> Any:
    from zoo import user_models

    document = {
        "input_shape": [6],
        "layers": [{"kind": "dense", "units": 3}],
        "workload": workload,
    }
    return user_models.spec_from_document("mine-0123456789ab", document)


def _arrays(path: Path, **changed: Any) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.standard_normal((20, 6)),
        "y_train": rng.integers(0, 3, 20),
        "x_test": rng.standard_normal((8, 6)).astype(np.float32),
        "y_test": rng.integers(0, 3, 8).astype(np.uint8),
        **changed,
    }
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def test_a_users_arrays_become_a_split(tmp_path: Path) -> None:
    spec = _user_spec()
    split = datasets.load(spec, _arrays(tmp_path / "a.npz"), datasets.Options(10, 4))
    assert split.train_x.shape == (10, 6)
    assert split.train_x.dtype == np.float32
    assert split.test_y.dtype == np.int32
    assert len(split.test_y) == 4


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"y_test": None}, "has no y_test"),
        (
            {"x_train": np.zeros((20, 5))},
            r"shape \(20, 5\); mine-0123456789ab needs \(N, 6\)",
        ),
        ({"y_train": np.zeros((20, 1), np.int64)}, r"needs \(N,\)"),
        ({"y_train": np.zeros(20)}, "y_train is float64; it must hold integer"),
        ({"x_test": np.zeros((8, 6), complex)}, "x_test is complex128"),
        ({"y_train": np.zeros(19, np.int64)}, "x_train has 20 samples, y_train 19"),
        ({"y_test": np.full(8, 3)}, r"labels outside 0..2"),
        ({"x_train": np.full((20, 6), np.nan)}, "NaN or inf"),
    ],
)
def test_a_users_bad_arrays_are_one_sentence(
    tmp_path: Path, changed: dict[str, Any], message: str
) -> None:
    with pytest.raises(datasets.DataError, match=message):
        datasets.load(_user_spec(), _arrays(tmp_path / "a.npz", **changed))


def test_converge_refuses_a_model_that_trains_on_no_class_ids(tmp_path: Path) -> None:
    spec = _user_spec(loss="mean_squared_error")
    with pytest.raises(datasets.DataError, match="trains on mean_squared_error"):
        datasets.load(spec, _arrays(tmp_path / "a.npz"))


def test_a_users_arrays_are_refused_before_allocation_and_without_pickle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _user_spec()
    pickled = tmp_path / "p.npz"
    np.savez(
        pickled,
        x_train=np.array([{"a": 1}] * 20, dtype=object),
        y_train=np.zeros(20, int),
        x_test=np.zeros((8, 6)),
        y_test=np.zeros(8, int),
    )
    with pytest.raises(datasets.DataError, match="Python objects"):
        datasets.load(spec, pickled)
    with pytest.raises(datasets.DataError, match=r"ARRAYS\.npz"):
        datasets.load(spec, None)  # a user's model has no embedded data
    (tmp_path / "t.npz").write_text("text")
    with pytest.raises(datasets.DataError, match=r"not an \.npz"):
        datasets.load(spec, tmp_path / "t.npz")
    monkeypatch.setattr(datasets, "USER_MAX_BYTES", 500)  # the split takes 784 B
    with pytest.raises(datasets.DataError, match="more than the"):
        datasets.load(spec, _arrays(tmp_path / "a.npz"))
