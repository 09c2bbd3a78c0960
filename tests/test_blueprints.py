"""The shipped blueprints, user blueprints, and one message per kind of error."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.profiles import (
    PROFILES,
    SHIPPED,
    Profile,
    Settings,
    get_profile,
    parse_blueprint,
)
from workers.paths import MODE_PATHS, PATHS, PHASES
from zoo.specs import MODELS, VARIANTS

PAPER_MODELS = ("ffn", "lenet", "vgg16", "lstm")
# The profiles as the shipped files must give them, value for value.
BEFORE = {
    "smoke": Profile(
        name="smoke",
        settings=Settings(
            train_steps=2,
            repeats=1,
            infer_batches=2,
            window_s=0.5,
            warmup_rounds=1,
            pair_window_s=0.3,
            pair_min_blocks=3,
            max_repeats=1,
        ),
        per_model={
            "vgg16": {"batch_size": 8},
            "lstm": {"batch_size": 32},
            "transformer": {"batch_size": 16},
        },
        fresh_worker_per_cell=False,
        peak_s=0.1,
    ),
    "default": Profile(
        name="default",
        settings=Settings(
            train_steps=3,
            repeats=2,
            infer_batches=4,
            window_s=0.3,
            warmup_rounds=1,
            pair_window_s=1.0,
            ratio_target=0.01,
            cell_budget_s=90.0,
            max_repeats=8,
        ),
        per_model={
            "ffn": {
                "train_steps": 50,
                "infer_batches": 20,
                "warmup_runs": 1,
                "infer_batch_sizes": (1, 128),
                "latency": True,
            },
            "user": {"train_steps": 20, "infer_batches": 10, "warmup_runs": 1},
            "lenet": {
                "train_steps": 20,
                "infer_batches": 10,
                "warmup_runs": 1,
                "latency": True,
            },
            "vgg16": {
                "batch_size": 8,
                "train_steps": 2,
                "infer_batches": 1,
                "pair_min_blocks": 3,
            },
            "lstm": {"batch_size": 64, "train_steps": 2, "infer_batches": 2},
            "transformer": {"train_steps": 3, "infer_batches": 2},
        },
        fresh_worker_per_cell=False,
        budget_s=720.0,
        helpers="free",
    ),
    "paper": Profile(
        name="paper",
        # the papers' four models, not the transformer that came after them
        models=PAPER_MODELS,
        settings=Settings(
            train_steps=100,
            repeats=7,
            infer_batches=8,
            window_s=60.0,
            warmup_rounds=3,
            # new with the blueprints: the paper's inference batch-size sweep
            infer_batch_sizes=(1, 16, 128),
        ),
    ),
}

MINIMAL = """
[settings]
train_steps = 3
repeats = 3
infer_batches = 4
window_s = 3.0
warmup_rounds = 1
"""


def test_every_shipped_file_is_listed() -> None:
    folder = resources.files("harness").joinpath("blueprints")
    names = {p.name for p in folder.iterdir() if p.name.endswith(".toml")}
    assert names == {f"{name}.toml" for name in SHIPPED}
    assert list(PROFILES) == list(SHIPPED)


@pytest.mark.parametrize("name", BEFORE)
def test_shipped_blueprint_keeps_the_python_values(name: str) -> None:
    loaded = PROFILES[name]
    assert loaded.model_copy(update={"description": ""}) == BEFORE[name]
    assert loaded.description
    # every reference model by default; the papers' four in `paper`
    assert loaded.models == (PAPER_MODELS if name == "paper" else tuple(MODELS))
    assert loaded.paths == tuple(PATHS)
    assert loaded.phases == PHASES
    assert (loaded.seed, loaded.data) == (1, "synthetic")
    assert loaded.threads == {"intra_op": 1, "inter_op": 1}
    for model in MODELS:
        assert loaded.settings(model) == BEFORE[name].settings(model)


def test_user_blueprint_loads_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    top = """
description = "VGG variants only"
models = ["vgg16", "vgg-rysia"]
paths = ["native-torch", "keras-torch"]
phases = ["infer"]
seed = 7
timeout_s = 60
[threads]
intra_op = 2
"""
    rest = """
latency = true
infer_batch_sizes = [1, 32]
[per_model."vgg-rysia"]
batch_size = 16
window_s = 2
"""
    path.write_text(top + MINIMAL + rest, encoding="utf-8")
    for ref in (path, str(path)):
        profile = get_profile(ref)
        assert profile.name == "mine"
        assert profile.models == ("vgg16", "vgg-rysia")
        assert profile.paths == ("native-torch", "keras-torch")
        assert profile.phases == ("infer",)
        assert (profile.seed, profile.timeout_s) == (7, 60.0)
        assert profile.threads == {"intra_op": 2, "inter_op": 1}
        rysia = profile.settings("vgg-rysia")
        assert (rysia.batch_size, rysia.window_s, rysia.latency) == (16, 2.0, True)
        assert isinstance(rysia.window_s, float)
        assert rysia.infer_batch_sizes == (1, 32)
        assert profile.settings("vgg16").batch_size is None


def test_all_selects_every_model_path_and_phase() -> None:
    text = 'models = "all"\npaths = "all"\nphases = "all"\n' + MINIMAL
    profile = parse_blueprint("x", text)
    assert profile.models == tuple(MODELS)
    assert profile.paths == tuple(PATHS)
    assert profile.phases == PHASES


def _error(text: str, label: str | None = None) -> str:
    with pytest.raises(ValueError, match=r".") as caught:
        parse_blueprint("default", text, label)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_key() -> None:
    assert _error(MINIMAL + "train_step = 2\n") == (
        "default.toml: settings.train_step is not a known key (did you mean "
        "train_steps?); known keys: train_steps, repeats, infer_batches, "
        "window_s, warmup_rounds, warmup_runs, batch_size, infer_batch_sizes, "
        "latency, pair_window_s, pair_min_blocks, ratio_target, cell_budget_s, "
        "max_repeats"
    )


def test_unknown_key_comes_before_the_field_it_misspells() -> None:
    text = MINIMAL.replace("repeats = 3", "repeat = 3")
    assert _error(text).startswith(
        "default.toml: settings.repeat is not a known key (did you mean repeats?)"
    )


def test_setting_outside_its_table() -> None:
    message = _error("repeats = 3\n" + MINIMAL)
    assert message == (
        "default.toml: repeats is not a known key (settings belong in the "
        "[settings] table); known keys: description, models, paths, phases, "
        "seed, data, fresh_worker_per_cell, peak_s, peak_frameworks, timeout_s, "
        "paired, pin_cpus, isolate, budget_s, helpers, threads, "
        "thread_counts, "
        "settings, per_model, count, versions, converge"
    )


def test_name_comes_from_the_file_not_a_key() -> None:
    assert _error('name = "other"\n' + MINIMAL).startswith(
        "default.toml: name is not a known key; known keys: description,"
    )


@pytest.mark.parametrize(
    ("table", "field"), [("", "settings"), ("[per_model.ffn]\n", "per_model.ffn")]
)
def test_warmup_repeats_was_renamed(table: str, field: str) -> None:
    text = MINIMAL + table + "warmup_repeats = 1\n"
    assert _error(text) == (
        f"default.toml: {field}.warmup_repeats was renamed to warmup_runs "
        "(untimed training runs inside one worker process; repeats counts "
        "worker processes)"
    )


def test_warmup_runs_is_read() -> None:
    profile = parse_blueprint("x", MINIMAL + "[per_model.ffn]\nwarmup_runs = 2\n")
    assert profile.settings("ffn").warmup_runs == 2
    assert profile.settings("lenet").warmup_runs == 0


def test_wrong_type() -> None:
    assert _error('timeout_s = "long"\n' + MINIMAL) == (
        'default.toml: timeout_s must be a number > 0 and <= 86400, got "long"'
    )


def test_bool_is_not_an_integer() -> None:
    assert _error(MINIMAL + "[per_model.vgg16]\nrepeats = true\n") == (
        "default.toml: per_model.vgg16.repeats must be an integer from 1 to 1000, "
        "got true"
    )


def test_float_is_not_an_integer() -> None:
    assert _error(MINIMAL.replace("train_steps = 3", "train_steps = 3.0")) == (
        "default.toml: settings.train_steps must be an integer from 1 to 100000, "
        "got 3.0"
    )


def test_integer_stands_for_a_float() -> None:
    profile = parse_blueprint("x", "timeout_s = 60\n" + MINIMAL)
    assert profile.timeout_s == 60.0
    assert isinstance(profile.timeout_s, float)


def test_out_of_range() -> None:
    assert _error(MINIMAL + "[per_model.vgg16]\ntrain_steps = 0\n") == (
        "default.toml: per_model.vgg16.train_steps must be an integer from 1 to "
        "100000, got 0"
    )
    assert _error(MINIMAL.replace("window_s = 3.0", "window_s = 0.0")) == (
        "default.toml: settings.window_s must be a number > 0 and <= 3600, got 0.0"
    )
    assert _error(MINIMAL + "infer_batch_sizes = [1, 0]\n") == (
        "default.toml: settings.infer_batch_sizes must be a list of 1 to 32 "
        "distinct integers from 1 to 65536, got 0"
    )
    assert _error(MINIMAL + "infer_batch_sizes = [1, 1]\n") == (
        "default.toml: settings.infer_batch_sizes must be a list of 1 to 32 "
        "distinct integers from 1 to 65536, got 1 twice"
    )


def test_huge_repeats_are_refused() -> None:
    text = MINIMAL.replace("repeats = 3", f"repeats = {2**63}")
    assert _error(text) == (
        "default.toml: settings.repeats must be an integer from 1 to 1000, "
        "got 9223372036854775808"
    )


def test_a_25_day_timeout_is_refused() -> None:
    assert _error("timeout_s = 2160000\n" + MINIMAL) == (
        "default.toml: timeout_s must be a number > 0 and <= 86400, got 2160000"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "window_s = inf",
            "settings.window_s must be a number > 0 and <= 3600, got inf",
        ),
        (
            "window_s = nan",
            "settings.window_s must be a number > 0 and <= 3600, got nan",
        ),
        (
            "infer_batches = 10001",
            "settings.infer_batches must be an integer from 1 to 10000, got 10001",
        ),
        (
            "warmup_rounds = 1001",
            "settings.warmup_rounds must be an integer from 0 to 1000, got 1001",
        ),
        (
            "warmup_runs = 1001",
            "settings.warmup_runs must be an integer from 0 to 1000, got 1001",
        ),
        (
            "batch_size = 65537",
            "settings.batch_size must be an integer from 1 to 65536, got 65537",
        ),
    ],
)
def test_every_setting_has_an_upper_bound(line: str, message: str) -> None:
    key = line.split(" = ", maxsplit=1)[0]
    text = "\n".join(ln for ln in MINIMAL.splitlines() if not ln.startswith(f"{key} ="))
    assert _error(f"{text}\n{line}\n") == f"default.toml: {message}"


def test_seed_and_threads_have_upper_bounds() -> None:
    assert _error(f"seed = {2**32}\n" + MINIMAL) == (
        "default.toml: seed must be an integer from 0 to 4294967295, got 4294967296"
    )
    assert _error("[threads]\nintra_op = 4097\n" + MINIMAL) == (
        'default.toml: threads.intra_op must be an integer from 1 to 4096 or "auto", '
        "got 4097"
    )


def test_too_many_batch_sizes() -> None:
    sizes = list(range(1, 34))
    message = _error(MINIMAL + f"infer_batch_sizes = {sizes}\n")
    assert message.startswith(
        "default.toml: settings.infer_batch_sizes must be a list of 1 to 32 "
        "distinct integers from 1 to 65536, got [1, 2, 3,"
    )
    assert message.endswith("...")
    assert len(message.split(", got ", 1)[1]) == 80


def test_a_5_mb_string_is_refused_and_cut() -> None:
    text = 'description = "' + "x" * 5_000_000 + '"\n' + MINIMAL
    message = _error(text)
    assert message == (
        "default.toml: description must be a string of at most 500 characters, "
        'got "' + "x" * 76 + "..."
    )


def test_a_100_deep_table_is_refused() -> None:
    keys = ".".join(f"k{i}" for i in range(100))
    assert _error(MINIMAL + f"[per_model.vgg16.{keys}]\n") == (
        "default.toml: per_model.vgg16.k0 is not a known key; known keys: "
        "train_steps, repeats, infer_batches, window_s, warmup_rounds, "
        "warmup_runs, batch_size, infer_batch_sizes, latency, pair_window_s, "
        "pair_min_blocks, ratio_target, cell_budget_s, max_repeats"
    )


def test_too_deep_nesting_is_not_a_traceback() -> None:
    text = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"
    assert _error(text) == "default.toml is not valid TOML: it nests too deeply"


def test_an_overlong_integer_is_not_a_traceback() -> None:
    assert _error("seed = " + "9" * 5000 + "\n" + MINIMAL) == (
        "default.toml is not valid TOML: a number is too long"
    )


def test_an_odd_key_is_quoted_on_one_line() -> None:
    assert _error('"a\\nb" = 1\n' + MINIMAL).startswith(
        'default.toml: "a\\nb" is not a known key; known keys: description,'
    )


def test_missing_required_setting() -> None:
    assert _error(MINIMAL.replace("repeats = 3\n", "")) == (
        "default.toml: settings.repeats is missing; it must be an integer from 1 "
        "to 1000"
    )
    assert _error('description = "no settings"\n') == (
        "default.toml: settings is missing; it must be a table with repeats, and "
        "with train_steps to train and infer_batches, window_s, warmup_rounds to "
        "infer"
    )


def test_not_a_table() -> None:
    assert _error(MINIMAL + "[per_model]\nvgg16 = 3\n") == (
        "default.toml: per_model.vgg16 must be a table, got 3"
    )


def test_unknown_model() -> None:
    known = ", ".join([*MODELS, *VARIANTS])
    assert _error('models = ["ffn", "resnet"]\n' + MINIMAL) == (
        'default.toml: models must be "all" or a non-empty list of distinct names '
        f'from {known}, got "resnet"'
    )
    assert _error(MINIMAL + "[per_model.resnet]\nrepeats = 1\n") == (
        "default.toml: per_model.resnet is not a known model; known models: "
        f"{known}, user"
    )


def test_any_users_model_takes_the_user_table() -> None:
    default = PROFILES["default"]
    mine = default.settings("mine-0123456789ab")  # a name --model FILE gives
    assert (mine.train_steps, mine.infer_batches) == (20, 10)
    assert default.settings("ffn").train_steps == 50  # a model's own table first


def test_empty_list() -> None:
    assert _error("models = []\n" + MINIMAL) == (
        'default.toml: models must be "all" or a non-empty list of distinct names '
        f"from {', '.join([*MODELS, *VARIANTS])}, got []"
    )


def test_unknown_path_and_phase() -> None:
    assert _error('paths = ["native-torch", "native-cobol"]\n' + MINIMAL) == (
        'default.toml: paths must be "all" or a non-empty list of distinct names '
        "from " + ", ".join([*PATHS, *MODE_PATHS]) + ', got "native-cobol"'
    )
    assert _error('phases = ["train", "train"]\n' + MINIMAL) == (
        'default.toml: phases must be "all" or a non-empty list of distinct names '
        'from train, infer, got "train" twice'
    )


def test_unknown_data_and_threads() -> None:
    assert _error('data = "mnist"\n' + MINIMAL) == (
        'default.toml: data must be "synthetic", got "mnist"'
    )
    assert _error("[threads]\ninter_op = 0\n" + MINIMAL) == (
        'default.toml: threads.inter_op must be an integer from 1 to 4096 or "auto", '
        "got 0"
    )
    assert _error("[threads]\nintr_op = 2\n" + MINIMAL) == (
        "default.toml: threads.intr_op is not a known key (did you mean "
        "intra_op?); known keys: intra_op, inter_op"
    )


def test_bad_toml() -> None:
    assert _error("models = [ffn]\n") == (
        "default.toml is not valid TOML: Invalid value (at line 1, column 11)"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.toml"
    with pytest.raises(ValueError, match=r".") as caught:
        get_profile(str(path))
    assert str(caught.value) == (
        f"no blueprint file {str(path)!r}; give the path of an existing .toml "
        "file or a shipped profile (smoke, default, modes, threads, paper, count, "
        "versions, versions-large, converge, converge-all, converge-full)"
    )


def _file_error(path: Path) -> str:
    with pytest.raises(ValueError, match=r".") as caught:
        get_profile(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_user_file_errors_name_its_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(MINIMAL + "batch_size = -1\n", encoding="utf-8")
    assert _file_error(path) == (
        f"{path}: settings.batch_size must be an integer from 1 to 65536, got -1"
    )


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_bytes(bytes(range(256)) * 4)
    assert _file_error(path) == f"{path} is not valid TOML: it is not UTF-8 text"
    path.write_bytes(b"\x00\x01\x02 = 1\n")
    assert _file_error(path) == (
        f"{path} is not valid TOML: Invalid statement (at line 1, column 1)"
    )


def _numbers(schema: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every integer or number in a JSON schema, with where it is."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") in ("integer", "number"):
            found.append((where, schema))
        for key, value in schema.items():
            found += _numbers(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found += _numbers(value, f"{where}[{i}]")
    return found


def test_every_number_in_the_schema_has_both_bounds() -> None:
    numbers = _numbers(Profile.model_json_schema())
    assert len(numbers) >= 15  # the walk found the settings and the top level
    for where, schema in numbers:
        assert "maximum" in schema, where
        assert "minimum" in schema or "exclusiveMinimum" in schema, where


# --- generated blueprints: a profile or one sentence, nothing else ----------------

_SETTING_KEYS = sorted(Settings.model_fields)
_TOP_KEYS = sorted(k for k in Profile.model_fields if k not in ("name", "base"))


def _toml_value(value: Any) -> str:
    """``value`` written as TOML (the few types generated here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf and nan are TOML too
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


_SCALARS = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.booleans()
    | st.text(max_size=12)
    | st.sampled_from([*MODELS, *PATHS, *PHASES, "all", "auto", "x" * 5000])
)
_VALUES = _SCALARS | st.lists(_SCALARS, max_size=4)
_KEYS = st.sampled_from([*_SETTING_KEYS, *_TOP_KEYS, "zz", "warmup_repeats"]) | st.text(
    min_size=1, max_size=8
)


def _table(keys: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(keys, _VALUES, max_size=4)


@st.composite
def _blueprints(draw: st.DrawFn) -> str:
    lines = [
        f"{json.dumps(k)} = {_toml_value(v)}"
        for k, v in draw(_table(st.sampled_from(_TOP_KEYS) | _KEYS)).items()
        if k not in ("settings", "per_model")
    ]
    if draw(st.booleans()):
        lines.append("[settings]")
        settings = draw(_table(st.sampled_from(_SETTING_KEYS) | _KEYS))
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in settings.items()]
    for model, table in draw(
        st.dictionaries(st.sampled_from([*MODELS, "nope"]), _table(_KEYS), max_size=2)
    ).items():
        lines.append(f"[per_model.{model}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@given(text=_blueprints())
def test_any_blueprint_is_a_profile_or_one_sentence(text: str) -> None:
    try:
        profile = parse_blueprint("gen", text)
    except ValueError as exc:
        message = str(exc)
        assert message.startswith("gen.toml")
        assert "\n" not in message
        assert len(message) < 1000  # no 5 MB value quoted back
    else:
        assert profile.name == "gen"
        for model in profile.models:
            settings = profile.settings(model)
            assert 1 <= settings.repeats <= 1000


def test_the_modes_blueprint_times_every_mode_of_every_path_unpaired() -> None:
    modes = PROFILES["modes"]
    assert set(modes.paths) == {*PATHS, *MODE_PATHS}
    assert not modes.paired  # modes of one framework are compared unpaired
    assert modes.models == tuple(MODELS)
    assert modes.phases == PHASES


def test_a_blueprint_refuses_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match=r"paths\[0\]|paths must be"):
        parse_blueprint("x", 'paths = ["keras-torch@xla"]\n' + MINIMAL)
