"""RL prompt sets through the tokenized data cache (nemo_cascade/data/prompt_cache.py): the same
Prompt objects as loading in memory on the shipped data, the same draws, shares that concatenate to
the whole file, an entry per file content / tokenizer / setting, damaged entries rebuilt, a crashed
build leaving no entry, and Data.max_bad_rows as before."""
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nemo_cascade import config
from nemo_cascade.data import prompt_cache, sft_cache
from nemo_cascade.data.loader import DataError, PromptStream, load_prompts
from nemo_cascade.data.rows import Share
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.rewards import VALIDATORS, training_validator, get_domain

from . import swe_fixtures as fx

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _entries(folder: Path) -> list[str]:
    cache = folder / sft_cache.CACHE_DIR
    return sorted(p.name for p in cache.iterdir() if p.name != "sources") if cache.is_dir() else []


def _math_rows(n: int) -> list[dict]:
    return [{"problem": f"What is {i} + {i % 7}? " + "Think. " * (i % 5), "answer": str(i + i % 7)}
            for i in range(n)]


def _write(path: Path, rows: list, extra: tuple = ()) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in list(rows) + list(extra)))
    return path


def _same(cached, plain) -> None:
    """Same prompts (tokens, labels, uids, user text, mode), same twins, same counts."""
    assert (isinstance(cached, prompt_cache.CachedPrompts)
            and not isinstance(plain, prompt_cache.CachedPrompts))
    assert list(cached) == list(plain) and cached.uids == [p.uid for p in plain]
    assert (cached.alternate is None) == (plain.alternate is None)
    if plain.alternate is not None:
        assert list(cached.alternate) == list(plain.alternate)
    for name in ("dropped_too_long", "dropped_too_short", "dropped_no_context", "bad_rows"):
        assert getattr(cached, name) == getattr(plain, name), name


def _shipped(name: str, tmp_path: Path) -> dict:
    """A shipped data set (or test fixture) copied beside a fresh cache folder, with its domain and
    settings."""
    if name == "gsm8k":  # plain jsonl: read in shares
        with gzip.open(REPO / "data/gsm8k/train.jsonl.gz", "rt") as f:
            lines = [next(f) for _ in range(300)]
        (tmp_path / "gsm8k.jsonl").write_text("".join(lines))
        return dict(path=tmp_path / "gsm8k.jsonl", domain="math", mode="think", style="cascade1",
                    limit=300)
    if name == "mbpp":
        shutil.copy(REPO / "data/mbpp/train.jsonl.gz", tmp_path / "mbpp.jsonl.gz")
        return dict(path=tmp_path / "mbpp.jsonl.gz", domain="code", mode="no_think",
                    style="cascade2", limit=90)
    if name == "ifeval":
        shutil.copy(REPO / "data/ifeval/input_data.jsonl.gz", tmp_path / "ifeval.jsonl.gz")
        return dict(path=tmp_path / "ifeval.jsonl.gz", domain="ifeval", mode="half",
                    style="cascade1", limit=250)
    if name == "if_rlvr":  # ground truth as a Python literal (schemas.if_rlvr_constraints)
        shutil.copy(REPO / "tests/data/ifbench_train/if_rlvr_rows.jsonl",
                    tmp_path / "if_rlvr.jsonl")
        return dict(path=tmp_path / "if_rlvr.jsonl", domain="ifeval", mode="think",
                    style="cascade2", limit=4096)
    # swe: §4.7.1 prompts
    rows = fx.localized_rows(fx.load_instances(), rows=4, max_file_chars=12_000)
    path = _write(tmp_path / "swe.jsonl", [{"uid": r["instance_id"], **r} for r in rows])
    return dict(path=path, domain="swe", mode="think", style="cascade1", limit=16 * 1024)


@pytest.mark.parametrize("name", ["gsm8k", "mbpp", "ifeval", "if_rlvr", "swe"])
def test_cached_prompts_are_the_in_memory_ones(tok, tmp_path, name):
    s = _shipped(name, tmp_path)
    data = config.Data(source=str(s["path"]))
    validator = training_validator(s["domain"], data)

    def load(cache: bool):
        return load_prompts(config.Data(source=str(s["path"]), cache=cache), tok, s["mode"],
                            get_domain(s["domain"]), s["limit"],
                            s["style"], validator)

    plain = load(False)
    first, second = load(True), load(True)  # built, then found
    _same(first, plain)
    _same(second, plain)
    assert len(_entries(tmp_path)) == 1 and len(plain) > 0
    if name in ("gsm8k", "mbpp", "ifeval"):
        assert plain.dropped_too_long > 0  # the limit bites, identically


def test_a_cached_set_draws_the_same_batches_and_resumes_the_same(tok, tmp_path):
    path = _write(tmp_path / "math.jsonl", _math_rows(40))
    plain, cached = (load_prompts(config.Data(source=str(path), cache=c), tok, "half",
                                  get_domain("math"), 512) for c in (False, True))
    a, b = (PromptStream(p, 3, alternate=p.alternate, epoch_filter=(0.1, 0.01))
            for p in (plain, cached))
    # same fingerprint: a run resumes across cache=true/false
    assert a.state_dict() == b.state_dict()
    for _ in range(7):
        assert a.next_batch(12) == b.next_batch(12)
    b.load_state_dict(a.state_dict())
    assert a.next_batch(30) == b.next_batch(30)


@pytest.mark.parametrize("shares", [2, 3, 7])
def test_shares_concatenate_to_the_whole_file_and_name_absolute_lines(tok, tmp_path, shares):
    rows = _math_rows(30)
    path = _write(tmp_path / "math.jsonl",
                  rows[:17] + [{"problem": "no answer"}] + rows[17:] + [""],
                  extra=["[1]", json.dumps({"problem": "x", "answer": "1", "uid": 2.5})])
    out = tmp_path / "parts"
    out.mkdir()
    data = config.Data(source=str(path), max_bad_rows=3)
    math = get_domain("math")
    summaries = [prompt_cache.tokenize_share(Share(path, k, shares), tok, data, math, "no_think",
                                             "cascade1", 512, None, out) for k in range(shares)]
    assert sum(s["rows"] for s in summaries) == 30 and sum(s["bad_rows"] for s in summaries) == 3
    assert next(s["first_bad"] for s in summaries if s["first_bad"]).startswith(f"{path}:18: ")
    parts, _ = prompt_cache.open_prompts(_publish(out, summaries), "no_think")
    sharded = prompt_cache.CachedPrompts(parts, "math", ("no_think",), np.arange(30))
    whole = load_prompts(config.Data(source=str(path), max_bad_rows=3, cache=False), tok,
                         "no_think", get_domain("math"), 512)
    assert list(sharded) == list(whole) and sharded[20].uid == f"{path}:22"


def _publish(out: Path, summaries: list) -> Path:
    (out / "manifest.json").write_text(json.dumps({"parts": summaries}))
    return out


def test_a_changed_file_tokenizer_or_setting_gets_its_own_entry(tok, tmp_path):
    path = _write(tmp_path / "math.jsonl", _math_rows(8))

    def load(data=None, tokenizer=tok, mode="no_think", limit=512):
        return load_prompts(data or config.Data(source=str(path)), tokenizer, mode,
                            get_domain("math"), limit)

    load()
    load(limit=4096)  # a length limit is applied at load time: the same entry
    assert len(_entries(tmp_path)) == 1
    other = build_tiny_tokenizer(tmp_path / "tok2", ["What is the sum, briefly? " * 3] * 4)
    _same(load(tokenizer=other), load(config.Data(source=str(path), cache=False), tokenizer=other))
    load(config.Data(source=str(path), math_instruction="Box it."))
    load(mode="think")
    assert len(_entries(tmp_path)) == 4
    _write(path, _math_rows(6) + [{"problem": "new", "answer": "1"}])
    changed = load()
    _same(changed, load(config.Data(source=str(path), cache=False)))
    assert changed[-1].label == "1" and len(_entries(tmp_path)) == 5


def test_swe_prompts_are_keyed_by_the_limit_they_were_built_for(tok, tmp_path):
    s = _shipped("swe", tmp_path)
    for limit in (16 * 1024, 24 * 1024):
        got = load_prompts(config.Data(source=str(s["path"])), tok, "think", get_domain("swe"),
                           limit, validate_label=VALIDATORS["swe"])
        _same(got, load_prompts(config.Data(source=str(s["path"]), cache=False), tok, "think",
                                get_domain("swe"), limit,
                                validate_label=VALIDATORS["swe"]))
    assert len(_entries(tmp_path)) == 2


@pytest.mark.parametrize("damage", ["truncate", "delete", "manifest"])
def test_a_damaged_entry_is_rebuilt_not_read(tok, tmp_path, damage):
    path = _write(tmp_path / "math.jsonl", _math_rows(12))
    want = list(load_prompts(config.Data(source=str(path), cache=False), tok, "no_think",
                             get_domain("math"), 512))
    load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512)
    entry = tmp_path / sft_cache.CACHE_DIR / _entries(tmp_path)[0]
    if damage == "truncate":
        tokens = entry / "part-0.tokens"
        tokens.write_bytes(tokens.read_bytes()[:-8])
    elif damage == "delete":
        (entry / "part-0.meta").unlink()
    else:
        (entry / "manifest.json").write_text("{")
    got = load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512)
    assert list(got) == want and len(_entries(tmp_path)) == 1


class Crash(BaseException):
    """Stands for the process dying mid-build (not an error the loader handles)."""


def test_a_build_that_dies_midway_publishes_nothing(tok, tmp_path):
    # more than one batch written before the crash
    path = _write(tmp_path / "math.jsonl", _math_rows(700))
    state = {"rows": 0, "crash": True}

    def dies_at_row_600(label):
        state["rows"] += 1
        if state["crash"] and state["rows"] == 600:
            raise Crash()

    with pytest.raises(Crash):
        load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512,
                     validate_label=dies_at_row_600)
    assert _entries(tmp_path) == []  # neither an entry nor its temporary folder
    state["crash"] = False
    got = load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512,
                       validate_label=dies_at_row_600)
    assert list(got) == list(load_prompts(config.Data(source=str(path), cache=False), tok,
                                          "no_think", get_domain("math"), 512))
    assert len(_entries(tmp_path)) == 1


def test_a_refused_row_stops_loading_and_caches_nothing(tok, tmp_path):
    # an IFBench *test* id (§4.4.2): refused unless allow_eval_instructions
    rows = [{"prompt": "Count to three. Use exactly 2 numbers.",
             "instruction_id_list": ["count:numbers"], "kwargs": [{"N": 2}]}]
    path = _write(tmp_path / "if.jsonl", rows)
    validator = training_validator("ifeval", config.Data(source=str(path)), "stages.if.data")
    messages = []
    for cache in (False, True):
        with pytest.raises(DataError) as e:
            load_prompts(config.Data(source=str(path), cache=cache), tok, "no_think",
                         get_domain("ifeval"), 512,
                         validate_label=validator)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and messages[0].startswith(f"{path}:1: ")
    assert _entries(tmp_path) == []


@pytest.mark.parametrize("cache", [False, True])
def test_max_bad_rows_skips_and_counts_then_names_the_first(tok, tmp_path, cache):
    rows = _math_rows(6)
    path = _write(tmp_path / "math.jsonl",
                  rows[:2] + [{"problem": "no answer"}, "{not json", {"answer": "1"}] + rows[2:])
    got = load_prompts(config.Data(source=str(path), max_bad_rows=3, cache=cache), tok, "no_think",
                       get_domain("math"), 512)
    assert len(got) == 6 and got.bad_rows == 3
    with pytest.raises(DataError) as e:
        load_prompts(config.Data(source=str(path), max_bad_rows=2, cache=cache), tok, "no_think",
                     get_domain("math"), 512)
    assert (str(e.value).startswith(f"{path}:3: ")
            and str(e.value).endswith("(3 bad rows; data.max_bad_rows=2)"))


def test_labels_json_cannot_store_exactly_are_loaded_in_memory(tok, tmp_path):
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    table = pa.table({"question": ["1 + 1?", "2 + 2?"],
                      "label": pa.array([[("a", 2)], [("b", 4)]],
                                        type=pa.map_(pa.string(), pa.int64()))})
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path)
    got = load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512)
    assert not isinstance(got, prompt_cache.CachedPrompts) and got[0].label == [("a", 2)]
    assert _entries(tmp_path) == []


def test_a_change_to_the_code_that_builds_prompts_gets_its_own_entry(tok, tmp_path, monkeypatch):
    """The label check's module stands for every module the key hashes (schemas, chat, math_prompt,
    ...)."""
    import importlib

    path = _write(tmp_path / "math.jsonl", _math_rows(4))
    module = tmp_path / "lib" / "my_check.py"
    module.parent.mkdir()
    module.write_text("def check(label):\n    pass\n")
    monkeypatch.syspath_prepend(str(module.parent))
    check = importlib.import_module("my_check").check
    load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512,
                 validate_label=check)
    load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512,
                 validate_label=check)
    assert len(_entries(tmp_path)) == 1
    module.write_text("def check(label):\n    pass  # edited\n")
    load_prompts(config.Data(source=str(path)), tok, "no_think", get_domain("math"), 512,
                 validate_label=check)
    assert len(_entries(tmp_path)) == 2
