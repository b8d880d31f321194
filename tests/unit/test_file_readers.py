"""One reader per file format the training core reads (jsonl rows, metrics.jsonl, an HF folder's
config.json, eval.json, a run's manifest.json, a data cache entry's manifest.json): each ends a
missing or malformed file in one line naming the file and what was expected, as a CascadeError of
the class its callers catch (docs/architecture.md "Command line")."""
import json

import pytest

from nemo_cascade.config import ConfigError
from nemo_cascade.convert.shape import ModelFilesError, load_config_json
from nemo_cascade.data import sft_cache
from nemo_cascade.data.rows import DataError, read_jsonl
from nemo_cascade.errors import CascadeError
from nemo_cascade.tooling.report import ReportError
from nemo_cascade.evaluate.eval_output import read_eval
from nemo_cascade.evaluate.suites import EvalError
from nemo_cascade.runtime.files import FileFormatError, read_json
from nemo_cascade.cascade.lineage import read_manifest, reset_stages, stage_status
from nemo_cascade.cascade.metrics import metric_rows


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert isinstance(err.value, CascadeError) and "\n" not in message, message
    return message


# ---------------------------------------------------------------------------------------- read_json

def test_read_json_names_the_file_and_what_was_expected(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(FileFormatError) as err:
        read_json(path, "a thing")
    assert _one_line(err) == f"{path}: no such file (expected a thing)"
    assert read_json(path, "a thing", missing_ok=True) == {}
    assert read_json(path, "a list", missing_ok=True, expected=list) == []

    path.write_text('{\n  "a": 1,\n  "b": ]\n}')
    with pytest.raises(FileFormatError) as err:
        read_json(path, "a thing")
    assert _one_line(err).startswith(f"{path}: not valid JSON (Expecting value at line 3)")
    assert str(err.value).endswith("expected a thing")

    path.write_text("[1, 2]")
    with pytest.raises(FileFormatError) as err:
        read_json(path, "a thing", missing_ok=True)  # missing_ok tolerates only a missing file
    assert _one_line(err) == f"{path}: expected a thing (a JSON object), got a JSON array"
    assert read_json(path, "a list", expected=list) == [1, 2]

    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(FileFormatError, match=r"not valid UTF-8 \(byte 8\)"):
        read_json(path, "a thing")
    with pytest.raises(FileFormatError,
                       match=r": cannot read \(IsADirectoryError\); expected a thing$"):
        read_json(tmp_path, "a thing")
    path.write_text("[" * 100_000)
    with pytest.raises(FileFormatError, match=r"not valid JSON \(RecursionError\)"):
        read_json(path, "a thing")


def test_read_json_raises_the_callers_class(tmp_path):
    with pytest.raises(ConfigError):
        read_json(tmp_path / "nope.json", "a thing", error=ConfigError)


# -------------------------------------------------------------------------------------------- jsonl

def test_read_jsonl_missing_bad_line_and_wrong_type(tmp_path):
    path = tmp_path / "rows.jsonl"
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    assert _one_line(err) == f"data file not found: {path}"

    path.write_text('{"a": 1}\n\n{"a": \n[1]\n{"a": 2}\n')
    with pytest.raises(DataError) as err:
        read_jsonl(path)
    assert _one_line(err).startswith(f"{path}:3: invalid JSON (Expecting value")
    bad = []
    assert read_jsonl(path, bad=bad) == [(1, {"a": 1}), (5, {"a": 2})]
    assert ([line for line, _ in bad] == [3, 4]
            and bad[1][1] == f"{path}:4: expected a JSON object, got list")
    assert read_jsonl(path, limit=1, bad=[]) == [(1, {"a": 1})]


def test_read_jsonl_raises_the_callers_class(tmp_path):
    path = tmp_path / "suite.jsonl"
    path.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(EvalError, match=rf"^{path}:2: invalid JSON") as err:
        read_jsonl(path, error=EvalError)
    assert not isinstance(err.value, DataError)


def test_metric_rows_drop_only_a_cut_off_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert metric_rows(path, missing_ok=True) == []
    with pytest.raises(DataError, match="not found"):
        metric_rows(path)
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "lo')  # a crash mid-write
    assert metric_rows(path) == [{"step": 0}, {"step": 1}]
    path.write_text('{"step": 0}\n{"step": 1, "lo\n{"step": 2}\n')  # a bad line with more after it
    with pytest.raises(ReportError, match=rf"^{path}:2: invalid JSON"):
        metric_rows(path, error=ReportError)
    path.write_text('{"step": 0}\n{"step": 1, "lo\n')  # terminated: not a cut-off write
    with pytest.raises(DataError, match=rf"^{path}:2: invalid JSON"):
        metric_rows(path)


# --------------------------------------------------------------------------------------- JSON files

def test_config_json_reader(tmp_path):
    path = tmp_path / "config.json"
    with pytest.raises(ModelFilesError) as err:
        load_config_json(path)
    assert _one_line(err) == f"{path}: no such file (expected an HF model folder with config.json)"
    assert load_config_json(tmp_path / "generation_config.json", missing_ok=True) == {}
    path.write_text('{"hidden_size": 8,\n"x": }')
    with pytest.raises(ModelFilesError,
                       match=r"config.json: not valid JSON \(Expecting value at line 2\)"):
        load_config_json(path)
    path.write_text('"qwen3"')
    with pytest.raises(ModelFilesError, match=r"\(a JSON object\), got a JSON string$"):
        load_config_json(path)


def test_eval_json_reader(tmp_path):
    path = tmp_path / "eval.json"
    with pytest.raises(EvalError) as err:
        read_eval(path)
    assert _one_line(err).startswith(f"{path}: no such file (expected an eval.json")
    assert read_eval(path, missing_ok=True) == {}
    path.write_text('{"suites": ')
    with pytest.raises(ReportError,
                       match=r"eval.json: not valid JSON \(Expecting value at line 1\)"):
        read_eval(path, error=ReportError)
    path.write_text(json.dumps({"suites": {}}))
    assert read_eval(path) == {"suites": {}}


def test_run_manifest_reader(tmp_path):
    path = tmp_path / "manifest.json"
    assert stage_status(tmp_path) == ({}, "")  # before the first stage starts
    with pytest.raises(ConfigError,
                       match=r"manifest.json: no such file \(expected the run's manifest"):
        reset_stages(path, ["sft"])
    path.write_text("[]")
    with pytest.raises(ConfigError) as err:
        read_manifest(path)
    assert _one_line(err).endswith("(a JSON object), got a JSON array; restore or delete it")
    path.write_text(json.dumps({"stages": {"sft": {"status": "done"}}, "stopped": "gate"}))
    assert stage_status(tmp_path) == ({"sft": "done"}, "gate")
    reset_stages(path, ["sft"])
    assert read_manifest(path) == {"stages": {"sft": {"status": "pending"}}, "stopped": ""}


def test_cache_entry_manifest_reader(tmp_path):
    with pytest.raises(DataError) as err:
        sft_cache.read_manifest(tmp_path)
    assert _one_line(err).startswith(
        f"{tmp_path / 'manifest.json'}: no such file (expected a data cache entry")
    (tmp_path / "manifest.json").write_text('{"parts": [1,}')
    with pytest.raises(DataError, match="delete the folder to rebuild it$"):
        sft_cache.read_manifest(tmp_path)
