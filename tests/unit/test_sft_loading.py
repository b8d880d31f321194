"""SFT loading at scale: the tokenized cache (same tokens as loading without it, reused, sharded,
atomic), tool conversations, and Data.max_bad_rows in the SFT and preference loaders."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from nemo_cascade.config import Data
from nemo_cascade.data import sft_cache
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_sft_blend, load_sft_examples
from nemo_cascade.data.preference import load_preference_pairs
from nemo_cascade.data.rows import Share
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _rows(n):
    """Plain, multi-turn and tool-calling SFT rows, with non-ASCII text and separators inside
    strings."""
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append({"question": f"What is {i} + {i}? é\u2028", "response": f"{2 * i}"})
        elif kind == 1:
            out.append({"messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": f"Count to {i}", "mode": "think"},
                                     {"role": "assistant",
                                      "content": " ".join(map(str, range(i % 7)))}]})
        else:
            out.append({"tools": json.dumps(TOOLS), "messages": [
                {"role": "user", "content": f"Add {i} and 1"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"type": "function",
                                 "function": {"name": "add",
                                              "arguments": f'{{"a": {i}, "b": 1}}'}}]},
                {"role": "tool", "content": str(i + 1)},
                {"role": "assistant", "content": f"It is {i + 1}."}]})
    return out


def _write(path, rows, extra=()):
    lines = [json.dumps(r, ensure_ascii=False) for r in rows] + list(extra)
    path.write_text("\n".join(lines) + "\n")
    return path


def _entries(folder):
    return sorted(p.name for p in (folder / sft_cache.CACHE_DIR).iterdir() if p.name != "sources")


def test_cached_load_equals_loading_without_cache(tok, tmp_path):
    path = _write(tmp_path / "sft.jsonl", _rows(60))
    for mode, style in (("think", "cascade1"), ("no_think", "cascade2")):
        plain = load_sft_examples(Data(source=str(path), cache=False), tok, mode, 90, style)
        first = load_sft_examples(Data(source=str(path)), tok, mode, 90, style)
        second = load_sft_examples(Data(source=str(path)), tok, mode, 90, style)
        assert (isinstance(first, sft_cache.TokenizedSFT)
                and isinstance(second, sft_cache.TokenizedSFT))
        assert 0 < plain.dropped_too_long < 60  # the limit bites, identically
        for got in (first, second):
            assert list(got) == list(plain)
            assert ((got.dropped_too_long, got.dropped_too_short)
                    == (plain.dropped_too_long, plain.dropped_too_short))
    # one entry per (mode, style); the second load of each made none
    assert len(_entries(tmp_path)) == 2


def test_the_cache_follows_the_file_content_not_its_mtime(tok, tmp_path):
    rows = _rows(12)
    path = _write(tmp_path / "sft.jsonl", rows)
    before = list(load_sft_examples(Data(source=str(path)), tok, "think", 4096))
    os.utime(path, ns=(1, 1))  # touched, same bytes: the hash is checked and finds the same entry
    assert list(load_sft_examples(Data(source=str(path)), tok, "think", 4096)) == before
    assert len(_entries(tmp_path)) == 1
    _write(path, rows[:6] + [{"question": "new", "response": "row"}])
    changed = load_sft_examples(Data(source=str(path)), tok, "think", 4096)
    assert len(changed) == 7 and list(changed) == list(
        load_sft_examples(Data(source=str(path), cache=False), tok, "think", 4096))
    assert len(_entries(tmp_path)) == 2


def test_a_different_tokenizer_or_template_gets_its_own_entry(tok, tmp_path):
    path = _write(tmp_path / "sft.jsonl", _rows(6))
    other = build_tiny_tokenizer(tmp_path / "tok2", ["Add and count, briefly. " * 3] * 4)
    load_sft_examples(Data(source=str(path)), tok, "think", 512)
    got = load_sft_examples(Data(source=str(path)), other, "think", 512)
    assert list(got) == list(
        load_sft_examples(Data(source=str(path), cache=False), other, "think", 512))
    load_sft_examples(Data(source=str(path)), tok, "think", 512, "chatml")
    assert len(_entries(tmp_path)) == 3


@pytest.mark.parametrize("shares", [2, 3, 7])
def test_shares_concatenate_to_the_whole_file_and_name_absolute_lines(tok, tmp_path, shares):
    rows = _rows(40)
    path = _write(tmp_path / "sft.jsonl", rows[:25] + [{"response": "no prompt"}] + rows[25:],
                  extra=["", "[1]"])
    out = tmp_path / "parts"
    out.mkdir()
    summaries = [
        sft_cache.tokenize_share(Share(path, k, shares), tok, "think", "cascade1", "all", out)
        for k in range(shares)]
    assert sum(s["rows"] for s in summaries) == 40 and sum(s["bad_rows"] for s in summaries) == 2
    firsts = [s["first_bad"] for s in summaries if s["first_bad"]]
    assert firsts[0].startswith(f"{path}:26: expected field 'question'")
    (out / "manifest.json").write_text(json.dumps({"parts": summaries}))
    sharded, _ = sft_cache.open_entry(out)
    whole = load_sft_examples(Data(source=str(path), cache=False, max_bad_rows=2), tok, "think",
                              1 << 20)
    assert list(sharded) == list(whole)


def test_a_read_only_data_folder_caches_under_the_fallback(tok, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = _write(data / "sft.jsonl", _rows(9))
    # nothing can be created beside the data
    (data / sft_cache.CACHE_DIR).write_text("not a folder")
    run = tmp_path / "run" / "data_cache"
    got = load_sft_examples(Data(source=str(path)), tok, "think", 512, cache_fallback=run)
    assert (isinstance(got, sft_cache.TokenizedSFT)
            and any(p.suffix != ".json" for p in run.iterdir()))
    # no fallback: tokenized in memory
    nowhere = load_sft_examples(Data(source=str(path)), tok, "think", 512)
    assert list(nowhere) == list(got) and not isinstance(nowhere, sft_cache.TokenizedSFT)


def test_a_failed_build_leaves_no_entry_and_no_temporary_folder(tok, tmp_path):
    path = tmp_path / "sft.jsonl.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00not really gzip")
    with pytest.raises(DataError, match=r"sft\.jsonl\.gz: cannot read"):
        load_sft_examples(Data(source=str(path)), tok, "think", 512)
    assert _entries(tmp_path) == []


def test_tool_conversation_trains_on_the_calls(tok, tmp_path):
    rows = _rows(3)
    path = _write(tmp_path / "sft.jsonl", [rows[2]])
    for cache in (False, True):
        (prompt, call, result, response), = load_sft_examples(Data(source=str(path), cache=cache),
                                                              tok, "think", 1024)
        messages = rows[2]["messages"][:-1]
        assert tok.decode(prompt + call + result) == render(messages, "think", tools=TOOLS)
        assert "<tools>\n" + json.dumps(TOOLS[0]) in tok.decode(prompt)
        assert tok.decode(call) == (
            '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 1}}\n</tool_call>'
            "<|im_end|>")
        assert tok.decode(response) == "It is 3.<|im_end|>"
    # the turn to learn is the call itself
    last_call = dict(rows[2], messages=rows[2]["messages"][:2])
    _write(path, [last_call])
    (_, response), = load_sft_examples(Data(source=str(path)), tok, "think", 1024)
    assert tok.decode(response) == ('<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 1}}\n'
                                    "</tool_call><|im_end|>")


@pytest.mark.parametrize("cache", [False, True])
def test_sft_max_bad_rows_skips_and_counts_then_names_the_first(tok, tmp_path, cache):
    rows = _rows(6)
    bad = [{"question": "q", "response": 5}, "{not json",
           {"messages": [{"role": "user", "content": "1"},
                         {"role": "assistant", "content": "x",
                          "tool_calls": [{"name": "f", "arguments": 3}]}]}]
    lines = ([json.dumps(r) for r in rows[:2]]
             + [b if isinstance(b, str) else json.dumps(b) for b in bad]
             + [json.dumps(r) for r in rows[2:]])
    path = tmp_path / "sft.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = load_sft_examples(Data(source=str(path), max_bad_rows=3, cache=cache), tok, "think", 1024)
    assert len(got) == 6 and got.bad_rows == 3
    with pytest.raises(DataError) as e:
        load_sft_examples(Data(source=str(path), max_bad_rows=2, cache=cache), tok, "think", 1024)
    assert str(e.value) == (
        f"{path}:3: field 'response' must be a string (3 bad rows; data.max_bad_rows=2)")
    with pytest.raises(DataError,
                       match=rf"^{path}:5: field 'messages\[1\].tool_calls\[0\]' expected"):
        _write(path, rows[:4] + [bad[2]])
        load_sft_examples(Data(source=str(path), cache=cache), tok, "think", 1024)


def test_preference_max_bad_rows(tok, tmp_path):
    good = {"prompt": "2 + 2?", "chosen": "4", "rejected": "5"}
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join([json.dumps(good), json.dumps({"prompt": "x", "chosen": "4"}), "[]",
                               json.dumps(good)]) + "\n")
    pairs = load_preference_pairs(Data(source=str(path), max_bad_rows=2), tok, "no_think")
    assert len(pairs) == 2 and pairs.bad_rows == 2
    with pytest.raises(DataError) as e:
        load_preference_pairs(Data(source=str(path), max_bad_rows=1), tok, "no_think")
    assert str(e.value) == (f"{path}:2: expected field 'rejected' (a response string) "
                            "(2 bad rows; data.max_bad_rows=1)")


def test_blend_repeats_sources_without_copying(tok, tmp_path):
    a = _write(tmp_path / "a.jsonl", _rows(4))
    b = _write(tmp_path / "b.jsonl", _rows(5)[2:])
    blend = load_sft_blend((Data(source=str(a)), Data(source=str(b), repeat=3)), tok, "think", 1024)
    plain_a = list(load_sft_examples(Data(source=str(a), cache=False), tok, "think", 1024))
    plain_b = list(load_sft_examples(Data(source=str(b), cache=False), tok, "think", 1024))
    assert list(blend) == plain_a + plain_b * 3 and blend[-1] == plain_b[-1]
    assert np.array_equal([len(e[0]) for e in blend[:4]], [len(e[0]) for e in plain_a])


def test_the_cache_switch_leaves_the_stage_hash_alone():
    """Cached or not, the same tokens: switching it for an interrupted stage must not block its
    resume."""
    from dataclasses import replace

    from nemo_cascade.config import Stage
    from nemo_cascade.cascade.lineage import config_hash

    sft = Stage(name="sft", kind="sft", data=Data(source="a.jsonl"))
    assert config_hash(replace(sft, data=Data(source="a.jsonl", cache=False))) == config_hash(sft)
