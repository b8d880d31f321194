"""Fuzz tier, data: random jsonl lines (invalid JSON and UTF-8, wrong types, BOM, CRLF, unescaped
line separators, deep nesting, huge lines), parquet rows with nulls and NaNs, SFT and preference
rows, and the released-dataset schemas. Each source ends as a one-line DataError naming
``file:line`` (and the field), or as rows — and with ``Data.max_bad_rows`` the bad ones are counted:
N rows with K bad give N − K prompts and ``bad_rows == K``, never a silent drop."""
from __future__ import annotations

import codecs
import gzip
import json
import math

import pytest
from hypothesis import given, strategies as st

from nemo_cascade.config import Data
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_prompts, load_sft_examples, read_jsonl
from nemo_cascade.data.preference import load_preference_pairs
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.rewards import DOMAINS, VALIDATORS, get_domain, adapt_row

from .fuzz_budget import fuzz, one_line, ran

MB = 1 << 20


class ByteTokenizer:
    """The loaders only call ``encode``: one id per UTF-8 byte keeps prompt lengths predictable and
    cheap."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(text.encode("utf-8", "surrogatepass"))


TOK = ByteTokenizer()
BIG = 1 << 40  # a prompt limit nothing reaches

# Text JSON writers leave unescaped (ensure_ascii=False) that str.splitlines() would split at.
SEPARATORS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(SEPARATORS + ["a", " ", "é", "\t"]), max_size=8).map("".join))
good_questions = texts.map(lambda t: "q" + t)


# ------------------------------------------------------------ line kinds, each with a known verdict

@st.composite
def lines(draw):
    """``(bytes of one jsonl line without its newline, kind)``: kind is "good" (a valid math row),
    "schema" (valid JSON that fits no math schema), "broken" (unreadable: invalid UTF-8 or JSON, not
    an object) or "blank"."""
    kind = draw(st.sampled_from(["good", "good", "good", "schema", "broken", "blank"]))
    ascii_only = draw(st.booleans())
    if kind == "good":
        row = {"question": draw(good_questions),
               "answer": draw(st.sampled_from(["1", "\\frac12", 3, 2.5]))}
        if draw(st.booleans()):
            row["uid"] = draw(st.one_of(st.text(max_size=5), st.integers()))
        return json.dumps(row, ensure_ascii=ascii_only).encode(), kind
    if kind == "schema":
        row = draw(st.sampled_from([
            {"question": 5, "answer": "1"}, {"question": "q"}, {"question": "q", "answer": None},
            {"question": "q", "answer": [1]}, {"question": "q", "answer": True}, {"answer": "1"},
            {"question": " ", "answer": "1"}, {"question": "q", "answer": "1", "uid": 1.5},
            {"question": "q", "answer": "{"}, {"messages": [], "answer": "1"},
            {"messages": [None], "answer": "1"}]))
        return json.dumps(row, ensure_ascii=ascii_only).encode(), kind
    if kind == "broken":
        text = draw(st.text(alphabet=st.characters(blacklist_characters='"\\\n\r',
                                                   blacklist_categories=["Cs"]),
                            max_size=20))
        return draw(st.sampled_from([
            b"\xff" + text.encode(),                           # invalid UTF-8
            ('{"question": "' + text).encode(),                # unterminated string
            json.dumps([text]).encode(), json.dumps(text).encode(), b"42", b"null",  # not an object
            b"[" * 50_000,                                     # nested past the recursion limit
            b'{"answer": ' + b"7" * 5000 + b"}",               # a number past the int-string limit
            b'{"question": "q", "answer": "1"} trailing',
        ])), kind
    return draw(st.sampled_from([b"", b" ", b"\t", b"\r"])), kind


@st.composite
def jsonl_files(draw):
    """``(file bytes, [(line number, kind)])``, with random CRLF endings and an optional BOM."""
    items = draw(st.lists(lines(), max_size=12))
    crlf = draw(st.booleans())
    body = b"".join(line + (b"\r\n" if crlf else b"\n") for line, _ in items)
    if draw(st.booleans()):
        body = codecs.BOM_UTF8 + body
    return body, [(i, kind) for i, (_, kind) in enumerate(items, 1)]


def _write(tmp_path_factory, data: bytes, suffix: str = ".jsonl"):
    path = tmp_path_factory.mktemp("fuzz") / f"rows{suffix}"
    path.write_bytes(data)
    return path


@fuzz("data.jsonl_lines")
@given(file=jsonl_files())
def test_read_jsonl_reads_every_line_or_names_the_first_bad_one(tmp_path_factory, file):
    ran("data.jsonl_lines")
    data, kinds = file
    path = _write(tmp_path_factory, data)
    readable = [n for n, kind in kinds if kind in ("good", "schema")]
    broken = [n for n, kind in kinds if kind == "broken"]
    try:
        rows = read_jsonl(path)
    except DataError as e:
        assert broken and str(e).startswith(f"{path}:{broken[0]}: ") and one_line(str(e)), str(e)
    else:
        assert not broken and [n for n, _ in rows] == readable
    bad: list = []
    rows = read_jsonl(path, bad=bad)  # collecting: nothing is raised for a line, nothing is lost
    assert [n for n, _ in rows] == readable and [n for n, _ in bad] == broken
    assert all(one_line(m) and m.startswith(f"{path}:{n}: ") for n, m in bad)


@fuzz("data.bad_row_counting")
@given(file=jsonl_files(), slack=st.integers(-1, 1))
def test_bad_rows_are_counted_never_dropped_silently(tmp_path_factory, file, slack):
    """N rows with K bad ones (unreadable or off-schema) under max_bad_rows give N − K prompts and
    bad_rows K; over it, one line naming the first bad row's file:line."""
    ran("data.bad_row_counting")
    data, kinds = file
    path = _write(tmp_path_factory, data)
    good = [n for n, kind in kinds if kind == "good"]
    bad = [n for n, kind in kinds if kind in ("schema", "broken")]
    limit = max(0, len(bad) + slack)
    cfg = Data(source=str(path), max_bad_rows=limit)
    try:
        prompts = load_prompts(cfg, TOK, "no_think", get_domain("math"), BIG,
                               validate_label=VALIDATORS["math"])
    except DataError as e:
        message = str(e)
        assert one_line(message), message
        if len(bad) > limit:
            assert message.startswith(f"{path}:{bad[0]}: "), message
        else:  # every row bad (and allowed) or none at all
            assert not good and message.startswith(f"{path}: no "), message
        return
    assert len(bad) <= limit
    assert len(prompts) == len(good) and prompts.bad_rows == len(bad)


def test_loader_fixes_found_by_fuzzing(tmp_path_factory):
    """Each of these once raised a RecursionError / ValueError / TypeError, split a row in two, or
    named no line; each is now a row or a one-line DataError naming file:line."""
    cases = {
        b"[" * 100_000: "1: invalid JSON (nested too deeply)",
        b'{"answer": ' + b"1" * 5000 + b"}": "1: invalid JSON (Exceeds the limit (4300 digits)",
        b'{"question": "ok", "answer": "1"}\n{"a": "\xff"}': "2: invalid UTF-8 (byte 8",
        b'{"messages": [{"role": "user", "content": "x", "mode": ["a"]}], "response": "r"}':
            "1: field 'messages[0].mode' must be 'think' or 'no_think'",
    }
    for data, message in cases.items():
        ran("data.jsonl_lines")
        path = _write(tmp_path_factory, data)
        loader = load_sft_examples if b"response" in data else (
            lambda d, *a: load_prompts(d, TOK, "no_think", get_domain("math"), BIG))
        with pytest.raises(DataError) as e:
            loader(Data(source=str(path)), TOK, "no_think", BIG)
        assert str(e.value).startswith(f"{path}:{message}") and one_line(str(e.value)), str(e.value)
    # a U+2028 / NEL inside a string, a BOM and CRLF endings: one row each, read as written
    rows = [{"question": f"a{sep}b", "answer": "1"} for sep in SEPARATORS]
    data = codecs.BOM_UTF8 + b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\r\n"
                                      for r in rows)
    prompts = load_prompts(Data(source=str(_write(tmp_path_factory, data))), TOK, "no_think",
                           get_domain("math"), BIG)
    assert [p.uid.rsplit(":", 1)[1] for p in prompts] == [str(i) for i in range(1, len(rows) + 1)]


@pytest.mark.parametrize("name, data, message", [
    ("empty", b"", ": no rows (an empty file or data set)"),
    ("blank-lines", b"\n \r\n\t\n", ": no rows (an empty file or data set)"),
    ("all-bad-allowed", b'{"question": "q"}\n',
     ": no usable rows (0 longer than max_prompt_tokens="),
    ("bom-only", codecs.BOM_UTF8, ": no rows"),
    ("a-directory", None, ": cannot read (IsADirectoryError"),
])
def test_empty_and_unreadable_sources_are_one_line(tmp_path, name, data, message):
    ran("data.jsonl_lines")
    path = tmp_path / "rows.jsonl"
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    with pytest.raises(DataError) as e:
        load_prompts(Data(source=str(path), max_bad_rows=1), TOK, "no_think", get_domain("math"),
                     BIG)
    assert str(e.value).startswith(f"{path}{message}") and one_line(str(e.value)), str(e.value)


def test_corrupt_and_truncated_gzip_are_one_line(tmp_path):
    good = gzip.compress(b'{"question": "q", "answer": "1"}\n' * 1000)
    for name, data in (("truncated", good[:len(good) // 2]),
                       ("garbage", b"\x1f\x8b" + b"\x00" * 64), ("not-gzip", b"plain text")):
        ran("data.jsonl_lines")
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(data)
        with pytest.raises(DataError) as e:
            read_jsonl(path)
        assert (str(e.value).startswith(f"{path}: cannot read (")
                and one_line(str(e.value))), str(e.value)


def test_huge_lines_are_read_or_named(tmp_path):
    """A 5 MB row is read (and its prompt dropped as too long, counted); 5 MB of garbage names its
    line."""
    ran("data.jsonl_lines", 2)
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b'{"question": "q", "answer": "1"}\n' + json.dumps(
        {"question": "x" * (5 * MB), "answer": "1"}).encode() + b"\n")
    prompts = load_prompts(Data(source=str(path)), TOK, "no_think", get_domain("math"), 4096)
    assert len(prompts) == 1 and prompts.dropped_too_long == 1
    path.write_bytes(b'{"question": "q", "answer": "1"}\n{"question": "' + b"x" * (5 * MB) + b"\n")
    with pytest.raises(DataError, match=rf"^{path}:2: invalid JSON \(Unterminated string"):
        load_prompts(Data(source=str(path)), TOK, "no_think", get_domain("math"), 4096)


# ----------------------------------------------------------------- SFT and preference rows (strict)

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                      st.text(max_size=8))
messages = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["system", "user", "assistant"]), "content": texts},
            optional={"mode": st.one_of(st.sampled_from(["think", "no_think"]), json_leaf)}),
        json_leaf), max_size=4)
turns = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user"]), "content": texts},
    optional={"mode": st.one_of(st.sampled_from(["think", "no_think"]), json_leaf,
                                st.lists(json_leaf, max_size=1))}),
    min_size=1, max_size=3).map(lambda ms: [*ms, {"role": "user", "content": "q"}])
well_formed_rows = st.one_of(  # everything right but, maybe, a turn's mode
    st.fixed_dictionaries({"messages": turns, "response": texts}),
    st.fixed_dictionaries({"prompt": turns, "chosen": texts, "rejected": texts}))
chat_rows = well_formed_rows | st.fixed_dictionaries({}, optional={
    "question": st.one_of(good_questions, json_leaf),
    "prompt": st.one_of(good_questions, messages, json_leaf),
    "messages": st.one_of(messages, json_leaf), "response": st.one_of(texts, json_leaf),
    "chosen": st.one_of(texts, json_leaf), "rejected": st.one_of(texts, json_leaf),
    "uid": json_leaf})


@fuzz("data.sft_and_preference_rows")
@given(rows=st.lists(chat_rows, min_size=1, max_size=5),
       kind=st.sampled_from(["sft", "preference"]),
       style=st.sampled_from(["cascade1", "cascade2"]), mode=st.sampled_from(["think", "no_think"]))
def test_sft_and_preference_rows_load_whole_or_name_file_line(tmp_path_factory, rows, kind,
                                                              style, mode):
    ran("data.sft_and_preference_rows")
    path = _write(tmp_path_factory, b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    cfg = Data(source=str(path))
    try:
        if kind == "sft":
            out = load_sft_examples(cfg, TOK, mode, BIG, style)
            assert len(out) == len(rows)  # strict: every row or an error
        else:
            out = load_preference_pairs(cfg, TOK, mode, style)
            assert len(out) + out.dropped_ties == len(rows)
    except DataError as e:
        message = str(e)
        assert one_line(message) and message.startswith(f"{path}"), message
        assert message.startswith(f"{path}:") or "no usable" in message, message


# ---------------------------------------------------------- released-dataset schemas + label checks

SCHEMA_KEYS = sorted({
    "prompt", "question", "problem", "messages", "answer", "label", "instruction_id_list", "kwargs",
    "tests", "input_output", "test_code", "test_list", "test_setup_code", "entry_point", "code",
    "time_limit", "text", "golden_patch", "patch", "relevant_file_contents", "files",
    "problem_statement", "uid"})
json_values = st.recursive(
    json_leaf | st.just(float("nan")) | st.just(float("inf")),
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)
field_values = st.one_of(
    json_values, good_questions, messages,
    st.sampled_from([
        "[" * 3000, '{"inputs": [1], "outputs": [2]}', '{"inputs": [1], "outputs": []}',
        '[{"path": "a.py", "content": "x"}]', '{"a.py": 1}', "assert f(1) == 2", "def f(:",
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n", "7" * 5000]),
    st.lists(st.sampled_from(["keywords:existence", "length_constraints:number_words", "nope"]),
             max_size=2),
    st.lists(
        st.dictionaries(st.sampled_from(["keywords", "num_words", "relation", "N"]),
                        json_values | st.sampled_from(["at least", "less than"]), max_size=2),
        max_size=2))
schema_rows = st.dictionaries(st.sampled_from(SCHEMA_KEYS), field_values, max_size=6)


@fuzz("data.schemas")
@given(domain=st.sampled_from(sorted(DOMAINS)), row=schema_rows)
def test_schemas_and_label_checks_raise_only_one_line_value_errors(domain, row):
    ran("data.schemas")
    try:
        messages, label = adapt_row(domain, row, "f.jsonl:7")
    except SchemaError as e:
        assert str(e).startswith("f.jsonl:7: ") and one_line(str(e)), str(e)
        return
    # what the loader templates next must accept what adapt returned
    assert render(messages, "think")
    try:
        VALIDATORS[domain](label)
    except ValueError as e:  # the loader reports it as f"{where}: {e}"
        assert one_line(str(e)), str(e)


def test_schema_fixes_found_by_fuzzing():
    cases = [
        ("code", {"prompt": "p", "test_list": 5}, "field 'test_list' must be a list of strings"),
        ("code", {"prompt": "p", "test_list": ["assert f(1)", 2]},
         "field 'test_list' must be a list of strings"),
        ("code", {"prompt": "p", "test_list": ["assert f(1)"], "test_setup_code": 3},
         "'test_setup_code'"),
        ("code", {"prompt": "p", "test_code": 5}, "field 'test_code' must be a string, got int"),
        ("code", {"prompt": "p", "input_output": "[" * 100_000},
         "'input_output' is a string but not JSON"),
        ("swe", {"prompt": "p", "golden_patch": "x", "relevant_file_contents": "[" * 100_000},
         "not JSON"),
        ("math", {"prompt": "p", "answer": float("nan")},
         "field 'answer' must be a finite number, got nan"),
        ("math", {"prompt": "p", "answer": float("inf")},
         "field 'answer' must be a finite number, got inf"),
    ]
    for domain, row, message in cases:
        ran("data.schemas")
        with pytest.raises(SchemaError) as e:
            adapt_row(domain, row, "f:1")
        assert message in str(e.value) and str(e.value).startswith("f:1: "), str(e.value)
    for value in (float("inf"), float("nan")):  # IFEval kwargs: int(inf) raised OverflowError
        ran("data.schemas")
        with pytest.raises(ValueError, match="must be a finite number"):
            VALIDATORS["ifeval"]({"instruction_id_list": ["length_constraints:number_words"],
                                  "kwargs": [{"num_words": value, "relation": "at least"}]})


# ----------------------------------------------------- parquet rows (the released datasets' format)

@fuzz("data.parquet_rows")
@given(problems=st.lists(st.one_of(st.none(), good_questions, st.just("")), min_size=1, max_size=6),
       answers=st.data())
def test_parquet_rows_with_nulls_and_nans_are_counted(tmp_path_factory, problems, answers):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ran("data.parquet_rows")
    numeric = answers.draw(st.booleans())
    values = answers.draw(st.lists(
        st.one_of(st.none(), st.sampled_from([math.nan, math.inf, -math.inf, 1.0]), st.floats())
        if numeric else st.one_of(st.none(), st.sampled_from(["1", "", "{", "\\frac12"])),
        min_size=len(problems), max_size=len(problems)))
    path = tmp_path_factory.mktemp("pq") / "rows.parquet"
    pq.write_table(pa.table({"problem": pa.array(problems, pa.string()),
                             "answer": pa.array(values, pa.float64() if numeric else pa.string())}),
                   path)

    def is_good(p, a):
        if p is None or not p.strip() or a is None:
            return False
        return math.isfinite(a) if numeric else a.strip() != "" and a != "{"
    good = sum(is_good(p, a) for p, a in zip(problems, values))
    cfg = Data(source=str(path), max_bad_rows=len(problems))
    try:
        prompts = load_prompts(cfg, TOK, "no_think", get_domain("math"), BIG,
                               validate_label=VALIDATORS["math"])
    except DataError as e:
        assert good == 0 and one_line(str(e)), str(e)
        return
    assert len(prompts) == good and prompts.bad_rows == len(problems) - good
