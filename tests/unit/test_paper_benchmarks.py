"""The downloaded paper benchmarks: LiveCodeBench v5/v6 windows and sandboxed tests, GPQA-Diamond
and MMLU-Pro letter extraction, ArenaHard verdicts and scores, `data prepare-eval` on hub-layout
fixtures (tests/data/benchmarks), one-line errors for malformed rows and files of another layout."""
from __future__ import annotations

import base64
import json
import pickle
import zlib
from datetime import date
from pathlib import Path

import pytest

from nemo_cascade import types
from nemo_cascade.evaluate import (SUITES, EvalError, EvalSettings, get_suite, load_items, prepare,
                                   suite_names)
from nemo_cascade.evaluate.paper_benchmarks import (GPQA_SEED, LCB_V5, LCB_V6, PREPARED_SUITES,
                                                    gpqa_options, lcb_item)
from nemo_cascade.evaluate.runner import _record, _reward_settings, check_settings, suite_metrics
from nemo_cascade.evaluate.suites import help_lines
from nemo_cascade.rewards import Scorer
from nemo_cascade.rewards.arena import (CONTINUE, SYSTEM_PROMPT, game_battles, parse_verdict,
                                        pooled_score, sample_score)
from nemo_cascade.rewards.code import code_reward
from nemo_cascade.rewards.mcq import LETTERS, extract_letter, mcq_prompt
from nemo_cascade.tooling.prepare.benchmarks import arena_rows, prepare_benchmarks
from nemo_cascade.tooling.prepare.sources import Bad, PrepareError
from tests.unit.test_remote_client import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
HUB = ROOT / "tests" / "data" / "benchmarks"
FILES = {"lcb-v5": "livecodebench/release_v5.jsonl", "lcb-v6": "livecodebench/release_v6.jsonl",
         "gpqa-diamond": "gpqa/gpqa_diamond.jsonl", "mmlu-pro": "mmlu-pro/test.jsonl",
         "arena-hard": "arena-hard/arena-hard-v0.1.jsonl"}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("benchmarks")
    manifest, paths = prepare_benchmarks("all", out, source_dir=HUB)
    return out, manifest, paths


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("bench_tok"))


def _settings(out: Path, **kw) -> EvalSettings:
    return EvalSettings(data={name: str(out / path) for name, path in FILES.items()}, **kw)


def _groups(prep, responses_for) -> list[types.PromptGroup]:
    out = []
    for prompt, item in zip(prep.prompts, prep.items):
        texts = responses_for(item)
        k = len(texts)
        out.append(types.PromptGroup(prompt, [[0]] * k, [[0.0]] * k, ["stop"] * k,
                                     response_text_G=texts))
    return out


def _one_line(err: pytest.ExceptionInfo, *parts: str) -> str:
    message = str(err.value)
    assert "\n" not in message and all(p in message for p in parts), message
    return message


def _jsonl(tmp_path: Path, rows: list[dict], name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ------------------------------------------------------------------------------------ prepare-eval

def test_prepare_eval_writes_each_benchmark_in_its_layout_with_its_version(prepared):
    out, manifest, paths = prepared
    assert paths == list(FILES.values())
    uids = {name: [i.uid for i in load_items(get_suite(name), out / path)[0]]
            for name, path in FILES.items()}
    # v5 reads release_v5 only: abc390_b (2025-01-25) lies in v5's dates but came with test6.jsonl
    assert uids["lcb-v5"] == ["abc367_a", "3345", "3400"]
    # abc404_a (2025-05-10) is after v6's window
    assert uids["lcb-v6"] == ["abc367_a", "3345", "3400", "abc390_b", "3500"]
    assert uids["gpqa-diamond"] == ["recFixture001", "recFixture002", "recFixture003"]
    assert uids["mmlu-pro"] == ["70", "71", "72"]  # the test split, not validation
    assert len(uids["arena-hard"]) == 3
    entry = manifest["files"]["livecodebench/release_v5.jsonl"]
    assert entry["dropped"] == {"outside_window": 4} and entry["version"] == str(LCB_V5)
    assert [Path(f).name for f in entry["sources"][0]["files"]] == [
        f"test{k}.jsonl" for k in ("", 2, 3, 4, 5)]
    v6 = manifest["files"]["livecodebench/release_v6.jsonl"]["version"]
    assert "release_v6" in v6 and "[2024-08-01, 2025-05-01)" in v6
    row = json.loads((out / FILES["arena-hard"]).read_text().splitlines()[0])
    assert row["baseline_model"] == "gpt-4-0314" and row["baseline"].startswith("def reverse")


def test_prepare_eval_stops_at_a_bad_source_row_in_one_line(tmp_path):
    src = tmp_path / "hub" / "Idavidrein" / "gpqa"
    src.mkdir(parents=True)
    (src / "gpqa_diamond.csv").write_text("Question,Incorrect Answer 1,Record ID\nWhy?,no,rec1\n")
    with pytest.raises(PrepareError) as err:
        prepare_benchmarks("gpqa-diamond", tmp_path / "out", source_dir=tmp_path / "hub")
    _one_line(err, "gpqa_diamond.csv#1", "'Correct Answer'")
    (src / "gpqa_diamond.csv").unlink()
    with pytest.raises(PrepareError) as err:
        prepare_benchmarks("gpqa-diamond", tmp_path / "out", source_dir=tmp_path / "hub")
    _one_line(err, "no file gpqa_diamond.csv of Idavidrein/gpqa")
    with pytest.raises(PrepareError) as err:
        prepare_benchmarks("gpqa", tmp_path / "out")
    _one_line(err, "data prepare-eval gpqa: unknown benchmark 'gpqa'")


def test_arena_rows_join_questions_to_baseline_answers_in_either_layout():
    old_q = {"question_id": "q1", "category": "arena-hard-v0.1", "cluster": "c",
             "turns": [{"content": "Hi?"}]}
    old_a = {"question_id": "q1", "model_id": "gpt-4-0314",
             "choices": [{"index": 0, "turns": [{"content": "Yo"}]}]}
    new_q = {"uid": "q2", "category": "arena-hard-v0.1", "cluster": "c", "prompt": "Why?"}
    rows = list(arena_rows([("f:1", old_a), ("f:2", old_q), ("f:3", new_q)]))
    assert rows[0] == ("f:2", {"uid": "q1", "category": "arena-hard-v0.1", "cluster": "c",
                               "prompt": "Hi?", "baseline_model": "gpt-4-0314", "baseline": "Yo"})
    assert isinstance(rows[1][1], Bad) and "question q2 has no answer" in rows[1][1].message


# ------------------------------------------------------------------------------------ LiveCodeBench

def _lcb_row(**over) -> dict:
    public = [{"input": "", "output": "1\n", "testtype": "stdin"}]
    row = {"question_id": "x1", "question_content": "Print 1.", "starter_code": "",
           "contest_date": "2024-08-01T00:00:00", "public_test_cases": json.dumps(public),
           "private_test_cases": json.dumps([]), "metadata": "{}"}
    return {**row, **over}


@pytest.mark.parametrize("day, in_v5, in_v6", [
    ("2024-07-31", False, False), ("2024-08-01", True, True), ("2025-01-31", True, True),
    ("2025-02-01", False, True), ("2025-04-30", False, True), ("2025-05-01", False, False)])
def test_lcb_windows_are_half_open_contest_date_ranges(day, in_v5, in_v6):
    row = _lcb_row(contest_date=f"{day}T00:00:00")
    assert (lcb_item(LCB_V5)(row, "f:1", 1) is not None) == in_v5
    assert (lcb_item(LCB_V6)(row, "f:1", 1) is not None) == in_v6
    assert (LCB_V5.start, LCB_V5.end) == (date(2024, 8, 1), date(2025, 2, 1))
    assert (LCB_V6.start, LCB_V6.end) == (date(2024, 8, 1), date(2025, 5, 1))


def _solution(method: str, body: str) -> str:
    return f"class Solution:\n    def {method}:\n        {body}"


SOLUTIONS = {
    "abc367_a": "a, b = map(int, input().split())\nprint(a + b)",
    "3345": _solution("sumEven(self, nums)", "return sum(x for x in nums if x % 2 == 0)"),
    "3400": _solution("smallestK(self, nums, k)", "return sorted(nums)[:k]"),
    "abc390_b": "input()\nprint(max(map(int, input().split())))",
    "3500": _solution("countVowels(self, s)", "return sum(c in 'aeiou' for c in s)"),
}
WRONG = {  # each passes the public tests and fails a private one
    "abc367_a": "print(7)",
    "3345": _solution("sumEven(self, nums)", "return 6 if nums else 1"),
    # 4 where [4] is expected: APPS would unwrap the list, LiveCodeBench compares exactly
    "3400": _solution("smallestK(self, nums, k)",
                      "r = sorted(nums)[:k]\n        return r[0] if k == 1 else r"),
    "abc390_b": "print(5)",
    "3500": _solution("countVowels(self, s)", "return 2"),
}


def _fenced(code: str) -> str:
    return f"<think>plan</think>\n```python\n{code}\n```"


def test_lcb_programs_run_against_public_and_private_tests_in_the_sandbox(prepared, tok):
    from nemo_cascade.rewards.sandbox import SandboxUnavailable, check_available

    try:
        check_available()
    except SandboxUnavailable as e:
        pytest.skip(f"code suites need the sandbox: {e}")
    out, _, _ = prepared
    prep = prepare("lcb-v6", _settings(out, mode="think"), tok)
    answers = lambda item: [_fenced(SOLUTIONS[item.uid]), _fenced(WRONG[item.uid])]  # noqa: E731
    groups = Scorer("code").score(_groups(prep, answers))
    scores = {item.uid: g.rewards_G for item, g in zip(prep.items, groups)}
    assert scores == {uid: [1.0, 0.0] for uid in SOLUTIONS}
    label = next(i.label for i in prep.items if i.uid == "3400")
    assert label["class_name"] == "Solution" and label["wrapped_single"] is False
    assert label["call_tests"][0] == {"args": [[3, 1, 2], 2], "output": [1, 2]}
    assert code_reward(_fenced(WRONG["3400"]), {**label, "wrapped_single": True}) == 1.0


def _packed(value) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


FUNCTIONAL = json.dumps([{"input": "1", "output": "1", "testtype": "functional"}])
STDIN = json.dumps([{"input": "1", "output": "1", "testtype": "stdin"}])


@pytest.mark.parametrize("over, field", [
    ({"contest_date": None}, "'contest_date'"),
    ({"contest_date": "last spring"}, "'contest_date' is not an ISO date"),
    ({"private_test_cases": "%%%"}, "'private_test_cases' is neither JSON nor"),
    # a pickled object (not a JSON string) needs a class loaded: refused, never run
    ({"private_test_cases": _packed(date(2020, 1, 1))}, "'private_test_cases' is neither JSON nor"),
    ({"public_test_cases": FUNCTIONAL, "private_test_cases": STDIN}, "all stdin or all functional"),
    ({"public_test_cases": FUNCTIONAL, "private_test_cases": "[]"}, "names no 'func_name'"),
    ({"public_test_cases": json.dumps([{"input": "1", "output": "1"}])}, "testtype"),
    ({"question_content": 3}, "'question_content'"),
])
def test_lcb_malformed_rows_are_one_line_errors_naming_file_line_and_field(tmp_path, over, field):
    path = _jsonl(tmp_path, [_lcb_row(), _lcb_row(**over)])
    with pytest.raises(EvalError) as err:
        get_suite("lcb-v6").load(path)
    _one_line(err, f"{path}:2", field)


def test_lcb_file_of_another_release_or_layout_is_refused(tmp_path):
    early = _jsonl(tmp_path, [_lcb_row(contest_date="2023-06-01T00:00:00")], "early.jsonl")
    with pytest.raises(EvalError) as err:
        get_suite("lcb-v5").load(early)
    _one_line(err, str(early), "no problem with a contest_date in [2024-08-01, 2025-02-01)",
              "release_v5")
    mmlu_rows = _jsonl(tmp_path, [{"question_id": 1, "question": "q", "options": ["a", "b"],
                                   "answer": "A"}])
    with pytest.raises(EvalError) as err:
        get_suite("lcb-v5").load(mmlu_rows)
    _one_line(err, f"{mmlu_rows}:1", "'contest_date'")


def test_lcb_private_tests_in_the_release_s_compressed_form_are_read(tmp_path):
    private = [{"input": "", "output": "1\n", "testtype": "stdin"},
               {"input": "x", "output": "1\n", "testtype": "stdin"}]
    row = _lcb_row(private_test_cases=_packed(json.dumps(private)))
    (item,) = get_suite("lcb-v5").load(_jsonl(tmp_path, [row]))
    assert [t["input"] for t in item.label["tests"]] == ["", "", "x"]
    assert item.label["time_limit"] == 6.0


# --------------------------------------------------------------------------------- multiple choice

@pytest.mark.parametrize("response, letter", [
    ("Reasoning...\nAnswer: C", "C"),
    ("**Answer:** (B)", "B"),
    ("Final Answer: $D$", "D"),
    ("so the answer is (J).", "J"),
    ("The correct answer is: B.", "B"),
    ("Thus \\boxed{\\text{A}}.", "A"),
    ("\\boxed{(E)}", "E"),
    ("Answer: B\nOn reflection, Answer: C", "C"),        # the last one counts
    ("Answer: C ... the answer is \\boxed{A}", "A"),     # last by position, whichever form
    ("<think>Answer: A</think>Answer: B", "B"),          # only the text after </think>
    ("<think>Answer: A", None),                          # thinking never ended: no answer
    ("Answer: All of them", None),                       # a word, not a letter
    ("the answer is a bit long", None),                  # lower case never counts
    ("Answer: K", None),                                 # not an option letter
])
def test_mcq_letter_extraction_rule(response, letter):
    assert extract_letter(response, 10) == letter


def test_mcq_letters_beyond_the_item_s_options_do_not_count():
    assert extract_letter("Answer: B\nAnswer: E", 4) == "B"
    assert extract_letter("Answer: E", 4) is None


def _gpqa_row(k: int) -> dict:
    return {"Question": f"Q{k}?", "Correct Answer": f"right{k}", "Incorrect Answer 1": f"w1-{k}",
            "Incorrect Answer 2": f"w2-{k}", "Incorrect Answer 3": f"w3-{k}",
            "Record ID": f"rec{k}"}


def test_gpqa_options_are_shuffled_per_record_with_the_seed_whatever_the_file_order(tmp_path):
    rows = [_gpqa_row(k) for k in range(12)]
    load = get_suite("gpqa-diamond").load
    forward = {i.uid: i for i in load(_jsonl(tmp_path, rows, "a.jsonl"))}
    backward = {i.uid: i for i in load(_jsonl(tmp_path, rows[::-1], "b.jsonl"))}
    assert all(forward[u].messages == backward[u].messages for u in forward)
    assert len({i.label["answer"] for i in forward.values()}) > 1, "the right one is not always A"
    for k, row in enumerate(rows):
        options, letter = gpqa_options(row, "f:1")
        assert sorted(options) == sorted(v for c, v in row.items() if "Answer" in c)
        assert options[LETTERS.index(letter)] == f"right{k}"
        assert forward[f"rec{k}"].messages[0]["content"] == mcq_prompt(f"Q{k}?", options)
    assert GPQA_SEED == 0


def _next_letter(label: dict) -> str:
    return LETTERS[(LETTERS.index(label["answer"]) + 1) % label["choices"]]


def test_mcq_suites_score_the_right_letter_1_and_report_answered(prepared, tok):
    out, _, _ = prepared
    for name in ("gpqa-diamond", "mmlu-pro"):
        prep = prepare(name, _settings(out), tok)
        groups = Scorer("mcq").score(_groups(prep, lambda item: [
            item.reference, f"Answer: {_next_letter(item.label)}", "no idea"]))
        records = [_record(prep, i, g) for i, g in enumerate(groups)]
        assert all(r["values"] == [1.0, 0.0, 0.0] for r in records), name
        metrics = suite_metrics(prep.suite, records)
        assert metrics["avg@3"] == pytest.approx(1 / 3)
        assert metrics["answered"] == pytest.approx(2 / 3)


BAD_ROWS = [
    ("gpqa-diamond", {**_gpqa_row(0), "Correct Answer": None}, "'Correct Answer'"),
    ("gpqa-diamond", {**_gpqa_row(0), "Correct Answer": " "}, "'Correct Answer' is empty"),
    ("gpqa-diamond", {k: v for k, v in _gpqa_row(0).items() if k != "Record ID"}, "'Record ID'"),
    ("mmlu-pro", {"question_id": 1, "question": "q", "options": "A) x B) y", "answer": "A"},
     "'options' must be a list"),
    ("mmlu-pro", {"question_id": 1, "question": "q", "options": ["x", "y"], "answer": "C"},
     "'answer' must be one of"),
    ("mmlu-pro", {"question_id": 1, "question": "q", "options": ["x", "y"], "answer": "A",
                  "answer_index": 1}, "disagree"),
    ("mmlu-pro", {"question": "q", "options": ["x", "y"], "answer": "A"}, "'question_id'"),
    ("arena-hard", {"uid": "u", "prompt": "Hi"}, "'baseline'"),
]


@pytest.mark.parametrize("suite, row, field", BAD_ROWS)
def test_malformed_multiple_choice_and_arena_rows_are_one_line_errors(tmp_path, suite, row, field):
    path = _jsonl(tmp_path, [row])
    with pytest.raises(EvalError) as err:
        get_suite(suite).load(path)
    _one_line(err, f"{path}:1", field)


# ------------------------------------------------------------------------------------ ArenaHard

@pytest.mark.parametrize("judgment, expected", [
    ("My final verdict is: [[A>B]]", ("A>B", False)),
    ("[[B>>A]] ... so again [[B>>A]]", ("B>>A", False)),
    ("Assistant B is clearly better.", (None, True)),    # no label: ask again
    ("first [[A>B]], then [[B>A]]", (None, False)),     # two labels: no verdict
    ("[[A<B]]", (None, False)),                         # not one of v0.1's five labels
    ("[A>B]", (None, True)),                            # single brackets are no label in v0.1
])
def test_arena_verdict_parsing(judgment, expected):
    assert parse_verdict(judgment) == expected


def test_arena_battles_read_the_verdict_from_the_model_s_side_in_both_orders():
    # game 1: the baseline is A; game 2: the model is A
    assert game_battles(("B>>A", "A>B")) == [1.0, 1.0, 1.0, 1.0]
    assert game_battles(("A>>B", "B>>A")) == [0.0] * 6
    assert game_battles(("A=B", None)) == [0.5]
    assert sample_score(("B>A", "B>A")) == 0.5  # position bias: one win, one loss
    assert sample_score((None, None)) is None
    # pooled: every battle weighs alike (a strong verdict three times), unlike per-answer means
    assert pooled_score([("A>>B", "A=B"), ("B>A", "A>B")]) == pytest.approx((0.5 + 2) / 6)


def _judge_says(text: str) -> tuple[int, bytes]:
    message = {"role": "assistant", "content": text}
    return 200, json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


JUDGMENTS = ["[[B>>A]]", "A looks better.", "Final: [[A>B]]", "[[A>B]] or maybe [[B>A]]", "[[A=B]]"]


def test_arena_suite_asks_the_judge_in_both_orders_and_once_more_without_a_label(prepared, tok):
    out, _, _ = prepared
    script = {"/v1/chat/completions": [_judge_says(j) for j in JUDGMENTS]}
    with ScriptedServer(script) as judge:
        settings = _settings(out, judge_url=judge.url, workers=1, limit=2)
        prep = prepare("arena-hard", settings, tok)
        responses = {prep.items[0].uid: ["<think>hmm</think> My answer."],
                     prep.items[1].uid: ["<think>never finished"]}
        scorer = Scorer("arena", _reward_settings(prep.suite, settings))
        groups = scorer.score(_groups(prep, lambda item: responses[item.uid]))
        sent = [body["messages"] for _, body in judge.requests]
        temperatures = {body["temperature"] for _, body in judge.requests}
    assert [g.rewards_G for g in groups] == [[1.0], [0.5]]
    first, second, again = sent[0], sent[1], sent[2]
    baseline = prep.items[0].reference
    assert first[0]["content"] == SYSTEM_PROMPT and temperatures == {0.0}
    assert first[1]["content"].index(baseline) < first[1]["content"].index("My answer.")
    assert second[1]["content"].index("My answer.") < second[1]["content"].index(baseline)
    assert again[2:] == [{"role": "assistant", "content": "A looks better."},
                         {"role": "user", "content": CONTINUE}]
    # the unfinished thinking response is an empty answer for the judge
    assert "<|The Start of Assistant B's Answer|>\n\n<|The End" in sent[3][1]["content"]
    records = [_record(prep, i, g) for i, g in enumerate(groups)]
    assert [r["values"] for r in records] == [[1.0], [0.5]]
    metrics = suite_metrics(prep.suite, records)
    assert metrics["arena_hard_score"] == pytest.approx(4.5 / 5)
    assert metrics["games_without_verdict"] == 1


def test_arena_suite_needs_a_judge_before_any_model_loads():
    with pytest.raises(EvalError) as err:
        check_settings(["arena-hard"], EvalSettings())
    _one_line(err, "arena-hard", "--judge-url")
    settings = EvalSettings(judge_url="http://judge:8000")
    assert _reward_settings(get_suite("arena-hard"), settings).judge_url == "http://judge:8000"
    assert _reward_settings(get_suite("gpqa-diamond"), settings).judge_url == ""


# ------------------------------------------------------------------------------- registry, outputs

def test_prepared_suites_are_named_not_in_all_and_listed_in_help():
    assert suite_names("all") == list(SUITES) and not set(PREPARED_SUITES) & set(SUITES)
    assert suite_names("lcb-v5,arena-hard") == ["lcb-v5", "arena-hard"]
    lines = help_lines()
    for name, suite in PREPARED_SUITES.items():
        assert get_suite(name) is suite and sum(line.startswith(f"{name}: ") for line in lines) == 1
        assert suite.data_version and suite.yarn_factor == 2.0
    samples = [get_suite(n).samples for n in ("lcb-v5", "lcb-v6", "gpqa-diamond", "mmlu-pro")]
    assert samples == [8, 8, 8, 1]
    assert get_suite("arena-hard").max_tokens == 32768 and get_suite("lcb-v6").max_tokens == 65536


def test_a_missing_benchmark_file_names_the_command_that_downloads_it(tmp_path, monkeypatch):
    import nemo_cascade.evaluate.paper_benchmarks as pb

    monkeypatch.setattr(pb, "BENCHMARKS", tmp_path)  # a folder without the prepared files
    with pytest.raises(EvalError) as err:
        load_items(get_suite("gpqa-diamond"))
    _one_line(err, "data file not found",
              "nemo-cascade data prepare-eval gpqa-diamond --out data/benchmarks")


def test_code_label_wrapped_single_must_be_a_bool():
    label = {"call_tests": [{"args": [1], "output": [1]}], "fn_name": "f", "wrapped_single": "no"}
    with pytest.raises(ValueError, match="'wrapped_single' must be true or false"):
        code_reward("```python\ndef f(x):\n    return x\n```", label)


def test_the_gate_asks_its_judge_for_arena_hard(tmp_path):
    """gate.judge_url: preflight names it when the gate has arena-hard without one; the gate's
    settings carry it to the suite's reward; doctor waits for it."""
    from dataclasses import replace

    from nemo_cascade import config
    from nemo_cascade.cascade.forgetting import Gate
    from nemo_cascade.cascade.preflight import check_stage_needs
    from nemo_cascade.tooling import doctor_servers

    cfg = config.Cascade(name="t", run_root=str(tmp_path), gate=config.Gate(suites=("arena-hard",)),
                         stages=(config.Stage(name="sft", kind="sft", steps=1),))
    with pytest.raises(config.ConfigError) as err:
        check_stage_needs(cfg)
    assert str(err.value) == ("gate.suites: arena-hard needs a judge LM behind an "
                              "OpenAI-compatible chat route: set gate.judge_url")
    judged = replace(cfg, gate=replace(cfg.gate, judge_url="http://judge:8000"))
    # past the judge: the data is next
    with pytest.raises(config.ConfigError, match="prepare-eval"):
        check_stage_needs(judged)
    settings = Gate.settings_for(judged)
    assert _reward_settings(get_suite("arena-hard"), settings).judge_url == "http://judge:8000"
    missing = replace(cfg, gate=replace(cfg.gate, judge_url=f"file:{tmp_path / 'none.url'}"))
    rows = doctor_servers.check_servers(missing, wait=0.1)
    assert [(r.status, r.check) for r in rows] == [("FAIL", "judge server")]
    assert rows[0].fix == "start it (vllm serve MODEL) or correct gate.judge_url"
