"""`nemo-cascade data prepare`: fixture rows in each released schema (tests/data/prepare) → the
files the recipes read, loaded back through the real loaders; decontamination, HelpSteer pairs, RLHF
filter, manifest, errors."""
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_cascade.config import Data
from nemo_cascade.data.loader import load_prompts, load_sft_examples
from nemo_cascade.data.preference import load_preference_pairs
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.tooling.prepare import PrepareError, prepare_command
from nemo_cascade.tooling.prepare.decontam import EvalIndex, build_index
from nemo_cascade.tooling.prepare.helpsteer import math_or_contest
from nemo_cascade.tooling.prepare.offtopic import pair_row, rewrite_request
from nemo_cascade.rewards import VALIDATORS, get_domain

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "prepare"
GSM8K_Q = json.loads(
    gzip.open(ROOT / "data" / "gsm8k" / "test.jsonl.gz", "rt").readline())["question"]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    manifest, paths = prepare_command("all", out, source_dir=FIXTURES, progress=False)
    return out, manifest, paths


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_recipe_file_is_written_and_loads_through_the_real_loaders(prepared, tok):
    out, manifest, paths = prepared
    assert set(paths) == set(manifest["files"]) and len(paths) == 16
    for path in paths:
        kind, source = manifest["files"][path]["kind"], str(out / path)
        if kind == "sft":
            assert (len(load_sft_examples(Data(source=source), tok, "think", 4096))
                    == manifest["files"][path]["rows"])
        elif kind == "pairs":
            assert (len(load_preference_pairs(Data(source=source), tok, "think"))
                    == manifest["files"][path]["rows"])
        else:
            # call-based code rows (fn_name) load too: the code reward calls the function in the
            # sandbox
            prompts = load_prompts(Data(source=source), tok, "think", get_domain(kind), 4096,
                                   validate_label=VALIDATORS[kind])
            assert len(prompts) == manifest["files"][path]["rows"] and prompts.bad_rows == 0


def test_decontamination_drops_a_planted_gsm8k_question_and_a_9gram_overlap(prepared):
    out, manifest, _ = prepared
    math = manifest["files"]["rl-math/train.jsonl"]
    assert math["dropped"] == {
        "decontaminated:gsm8k": 1, "decontaminated:math500": 1, "duplicate": 1}
    problems = [r["problem"] for r in _rows(out / "rl-math/train.jsonl")]
    assert GSM8K_Q not in problems and not any(p.startswith("A variant:") for p in problems)
    assert manifest["files"]["sft-stage-1/math.jsonl"]["dropped"] == {"decontaminated:gsm8k": 1}
    assert set(manifest["decontamination"]["eval_sets"]) >= {
        "gsm8k", "math500", "aime24", "aime25", "humaneval", "mbpp",
        "ifeval", "ifbench", "swe", "rlhf"}


def test_index_matches_exact_text_and_9grams_but_not_instruction_phrasing():
    index = EvalIndex()
    index.add("toy", [["The quick brown fox jumps over the lazy dog near the river bank today."],
                      ["Add 2 and 3."]])
    index.add("if", [["Write a poem about the sea. Your entire response should be in English, "
                      "and in all lowercase letters. No capital letters are allowed."]],
              wordings=True)
    assert index.match(["add 2 AND 3!"]) == "toy"  # short: exact after normalisation
    assert index.match(["Add 2 and 3 and 4."]) is None
    # one 9-gram
    assert index.match(["Story: the quick brown fox jumps over the lazy dog near a barn."]) == "toy"
    assert index.match(["the quick brown fox jumps over the lazy cat"]) is None  # 8 words in common
    tell = ("Describe a forest. "
            "Your entire response should be in English, and in all lowercase letters.")
    assert index.match([tell]) is None  # the IFEval wording is phrasing, not the item
    assert index.match(["Write a poem about the sea. Keep it short please, for my class."]) is None
    assert index.match(["write a poem about the sea your entire response should be"]) == "if"


def test_shipped_index_keeps_ifeval_phrasing_out():
    index = build_index(["ifeval"])
    assert index.stats["ifeval"]["items"] == 541 and index.stats["ifeval"]["common_ngrams"] > 100
    assert index.match(["List three birds. "
                        "You are not allowed to use any commas in your response."]) is None
    # an IFEval item words this instruction its own way, so the 9-gram is indexed; the training
    # prompt states it in a wording of its own instruction: phrasing, not a leak
    ending = ("Finish your response with this exact phrase: "
              "Let me know if you have additional questions.")
    assert index.match([f"Write a blog post about the water cycle. {ending}"]) is None
    assert (index.match([f"Write a blog post about the history of the bicycle. {ending}"])
            == "ifeval"), "the task itself shares a 9-gram with an IFEval item"


def test_the_shipped_if_prompts_lose_only_real_overlaps():
    """Measured on synthetic:if_requests (3,224 train prompts): 366 shared a 9-gram with IFEval
    before the training prompts' own wordings counted as phrasing, 9 now (their task text overlaps
    an item's)."""
    from nemo_cascade.tooling.demo_data.if_prompts import if_requests

    index = build_index(["ifeval"])
    rows = if_requests("train", 0, 0)
    assert len(rows) == 3224 and sum(index.match([r["prompt"]]) is not None for r in rows) < 20


def test_helpsteer_pairs_honour_the_preference_sign_and_drop_ties(prepared):
    out, manifest, _ = prepared
    pairs = {json.dumps(r["prompt"]): r for r in _rows(out / "rm/preference_pairs.jsonl")}
    sleep = pairs[json.dumps([{"role": "user", "content": "Give me a tip for better sleep."}])]
    # -2: response1
    assert (sleep["chosen"], sleep["rejected"]) == ("Keep a regular schedule.", "Sleep is good.")
    hamlet = next(r for r in pairs.values() if isinstance(r["prompt"], list)
                  and len(r["prompt"]) == 3 and "Hamlet" in r["prompt"][0]["content"])
    assert hamlet["chosen"] == "A prince seeks revenge, funnily."  # +3: response2
    assert not any("tea or coffee" in k for k in pairs)  # HelpSteer3 tie
    # correctness breaks it
    assert pairs[json.dumps("Suggest a name for a bakery.")]["chosen"] == "Rise Up Bakery"
    assert pairs[json.dumps("How do I keep basil fresh?")]["rejected"] == "Basil is a herb."
    assert not any("first pet" in k or "validation" in k or "owls" in k for k in pairs)
    sea = next(r for r in pairs.values()
               if isinstance(r["prompt"], list) and r["prompt"][0]["content"] == "Hi")
    assert [m["role"] for m in sea["prompt"]] == ["user", "assistant", "user"]  # <extra_id_1> turns
    assert manifest["files"]["rm/preference_pairs.jsonl"]["dropped"] == {"tie": 2, "unpaired": 1}


def test_rlhf_prompts_leave_out_math_and_competitive_programming(prepared):
    out, manifest, _ = prepared
    text = (out / "rlhf/prompts.jsonl").read_text()
    assert "Solve for x" not in text and "1 ≤ n" not in text and "probability" not in text
    assert "basil" in text and "Hamlet" in text and "validation" not in text
    assert manifest["files"]["rlhf/prompts.jsonl"]["dropped"]["math"] == 3


@pytest.mark.parametrize("text, reason", [
    ("Solve for x: 3x - 5 = 10", "math"), ("Compute $\\frac{1}{2} + \\frac{1}{3}$.", "math"),
    ("How many integers n satisfy n^2 < 50?", "math"),
    ("The first line contains an integer t, the number of test cases.", "competitive_code"),
    ("Given 1 <= n <= 100000, output the sum. Sample Input: 3", "competitive_code"),
    ("Write a 300-word essay about autumn.", None),
    ("Compute the sentiment of this review: great food!", None),
    ("How many people live in Paris?", None),
    ("Fix this React component that renders a list.", None)])
def test_math_or_contest_rule(text, reason):
    assert math_or_contest(text) == reason


def test_sft_rows_carry_their_thinking_mode(prepared):
    out, manifest, _ = prepared
    rows = _rows(out / "sft-stage-1/general.jsonl")
    modes = [[m.get("mode") for m in r["messages"] if m["role"] == "user"] for r in rows]
    assert modes == [["think"], ["no_think"], ["no_think"], ["no_think", "think"]]
    # the flag moved into "mode"
    assert rows[2]["messages"][0]["content"] == "Write a haiku about rain."
    assert manifest["files"]["sft-stage-1/general.jsonl"]["modes"] == {"think": 2, "no_think": 2}
    tool_row = _rows(out / "sft-stage-2/tool_calling.jsonl")[0]
    tool = tool_row["messages"]  # as the template takes them: rendered as a served model sees them
    assert tool_row["tools"][0]["name"] == "get_weather"
    assert [m["role"] for m in tool] == ["user", "assistant", "tool", "user", "assistant"]
    assert tool[1]["tool_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert "mode" not in tool[2] and tool[3]["mode"] == "think"


def test_if_rows_split_by_taxonomy_and_code_rows_keep_call_based_tests(prepared):
    out, manifest, _ = prepared
    ifeval, ifbench = (_rows(out / f"rl-if/{n}_taxonomy.jsonl") for n in ("ifeval", "ifbench"))
    assert [r["instruction_id_list"] for r in ifeval] == [["punctuation:no_comma"],
                                                          ["detectable_format:title"]]
    # the IF-RLVR rows (IFEval and IFBench-Train ids) go to the second sub-stage; an IFBench *test*
    # id would leak into the IFBench evaluation and is dropped, as is an id no checker implements
    # (§4.4.2)
    assert sorted(r["instruction_id_list"][0] for r in ifbench) == [
        "change_case:english_lowercase", "copy:repeat_phrase", "punctuation:punctuation_dot"]
    dropped = manifest["files"]["rl-if/ifbench_taxonomy.jsonl"]["dropped"]
    assert dropped["unsupported_instruction"] == 1 and dropped["evaluation_only_instruction"] == 1
    code = manifest["files"]["rl-code/train.jsonl"]
    assert (code["call_based"] == 1
            and code["dropped"] == {"duplicate": 1, "interactive": 1, "no_tests": 1})
    assert "agentica-org/DeepCoder-Preview-Dataset:lcbv5" not in code["rows_per_source"]
    rows = _rows(out / "rl-code/train.jsonl")
    assert rows[0]["time_limit"] == 2.0 and rows[1]["input_output"]["fn_name"] == "square"


def test_manifest_sha256_matches_and_a_second_run_skips_finished_files(prepared, tmp_path, caplog):
    out, manifest, _ = prepared
    for path, entry in manifest["files"].items():
        assert hashlib.sha256((out / path).read_bytes()).hexdigest() == entry["sha256"]
    copy = tmp_path / "data"
    shutil.copytree(out, copy)
    (copy / "rl-math/train.jsonl").write_text("{}\n")  # no longer what the manifest says: redone
    before = {p: (copy / p).stat().st_mtime_ns for p in manifest["files"]}
    caplog.set_level("INFO")
    again, _ = prepare_command("all", copy, source_dir=FIXTURES, progress=False)
    changed = [p for p in manifest["files"] if (copy / p).stat().st_mtime_ns != before[p]]
    assert changed == ["rl-math/train.jsonl"]
    assert (again["files"]["rl-math/train.jsonl"]["sha256"]
            == manifest["files"]["rl-math/train.jsonl"]["sha256"])
    assert "rl-swe/train.jsonl: up to date" in caplog.text


def _with_bad_math_row(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(FIXTURES / "nvidia" / "Nemotron-Cascade-RL-Math",
                    src / "nvidia" / "Nemotron-Cascade-RL-Math")
    with open(src / "nvidia/Nemotron-Cascade-RL-Math/train.jsonl", "a") as f:
        f.write(json.dumps({"problem": "What is 2 + 2?", "solution": "4"}) + "\n")
    return src


def test_a_malformed_source_row_is_one_line_or_a_counted_skip(tmp_path):
    src = _with_bad_math_row(tmp_path)
    with pytest.raises(PrepareError) as e:
        prepare_command("rl-math", tmp_path / "out", source_dir=src, progress=False)
    assert "train.jsonl:7: expected field 'answer'" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "out" / "rl-math" / "train.jsonl").exists()  # nothing half-written
    assert not list((tmp_path / "out" / "rl-math").iterdir())
    manifest, _ = prepare_command("rl-math", tmp_path / "out", source_dir=src, max_bad_rows=1,
                                  progress=False)
    entry = manifest["files"]["rl-math/train.jsonl"]
    assert (entry["bad_rows"] == 1 and entry["rows"] == 3
            and "train.jsonl:7" in entry["first_bad_row"])


def test_cli_errors_are_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "nemo_cascade.tooling.cli", "data", "prepare"]
    bad = subprocess.run(cli + ["rl-math", "--out", str(tmp_path / "a"),
                                "--source-dir", str(_with_bad_math_row(tmp_path))],
                         capture_output=True, text=True, env=env)
    offline = subprocess.run(cli + ["rl-math", "--out", str(tmp_path / "b")],
                             capture_output=True, text=True, env=env)
    unknown = subprocess.run(cli + ["rl-maths", "--out", str(tmp_path / "c")],
                             capture_output=True, text=True, env=env)
    (tmp_path / "a-file").write_text("")
    on_a_file = subprocess.run(cli + ["all", "--out", str(tmp_path / "a-file" / "d"),
                                      "--source-dir", str(tmp_path)],
                               capture_output=True, text=True, env=env)
    for proc in (bad, offline, unknown, on_a_file):
        assert (proc.returncode == 2
                and proc.stderr.count("nemo-cascade: error:") == 1), proc.stderr[-2000:]
    assert "expected field 'answer'" in bad.stderr
    assert ("nvidia/Nemotron-Cascade-RL-Math: cannot download" in offline.stderr
            and "--source-dir" in offline.stderr)
    assert "unknown stage 'rl-maths'" in unknown.stderr
    assert (f"--out {tmp_path / 'a-file' / 'd'}: {tmp_path / 'a-file'} is a file; "
            "expected a folder") in on_a_file.stderr


def test_parquet_sources_stream_like_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(FIXTURES / "nvidia/Nemotron-Cascade-RL-Math/train.jsonl")
    folder = tmp_path / "src" / "nvidia" / "Nemotron-Cascade-RL-Math" / "data"
    folder.mkdir(parents=True)
    for r in rows:
        r["answer"] = str(r["answer"])  # one column type
    pq.write_table(pa.Table.from_pylist(rows), folder / "train-00000-of-00001.parquet",
                   row_group_size=2)
    manifest, _ = prepare_command("rl-math", tmp_path / "out", source_dir=tmp_path / "src",
                                  progress=False)
    assert manifest["files"]["rl-math/train.jsonl"]["rows"] == 3
    assert manifest["files"]["rl-math/train.jsonl"]["sources"][0]["rows_read"] == 6


def test_off_topic_pair_building():
    messages = rewrite_request("How do I repot a cactus?")
    assert (messages[0]["role"] == "user"
            and messages[0]["content"].endswith("Request:\nHow do I repot a cactus?"))
    assert "slightly different" in messages[0]["content"]
    row = pair_row("How do I repot a cactus?", "<think>hm</think>How do I repot an orchid?",
                   "Use gloves...", "Orchids need bark...")
    assert row["chosen"] == "Use gloves..." and row["rejected"] == "Orchids need bark..."
    assert row["rewritten_prompt"] == "How do I repot an orchid?"
    assert pair_row("Q?", "Q?", "a", "b").reason == "rewrite_unchanged"
    assert pair_row("Q?", "R?", "a", "<think>unfinished").reason == "empty_generation"


def test_documented_prepare_commands_name_real_stages_and_flags(capsys):
    import re
    import shlex

    from nemo_cascade.tooling.cli import main
    from nemo_cascade.tooling.prepare import STAGES

    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "docs" / "recipes.md").read_text(), re.S)
    lines = [line.split("#")[0] for b in blocks for line in b.splitlines()
             if "data prepare" in line]
    assert {shlex.split(line)[3] for line in lines} == set(STAGES) | {"all"}
    with pytest.raises(SystemExit):
        main(["data", "prepare", "--help"])
    text = capsys.readouterr().out
    for line in lines:
        for flag in (w for w in shlex.split(line) if w.startswith("--")):
            assert flag in text, f"docs/recipes.md: `{line}`: no {flag}"
