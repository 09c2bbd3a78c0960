"""The real-data loaders on tiny files in each format: what they read is,
byte for byte, what was written; every broken file is refused in one
sentence naming it."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from tests.datafiles import MNIST_NAMES, idx_bytes, write_cifar, write_imdb, write_mnist
from zoo import datasets
from zoo.datasets import DataError, cifar10, imdb, mnist
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
    first = imdb.sequences(tokens[:1], imdb.build_vocabulary(tokens, 5), 7)[0]
    assert np.array_equal(split.train_x[0], table[first])


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
    with pytest.raises(DataError, match="line 1 is not a word and 50 numbers"):
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
