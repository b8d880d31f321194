"""Evaluation suites without an engine: every suite loads its real data; golden answers score 1 and
wrong ones 0 through the same path a run takes (prompt → ``rewards.Scorer`` → per-sample values);
SWE tasks are rebuilt from golden-patch hunks; HH-RLHF dialogues parse; decoding defaults follow
paper App. B."""
from __future__ import annotations

import pytest

from nemo_cascade import types
from nemo_cascade.evaluate import (SUITES, EvalError, EvalSettings, get_suite, load_items, prepare,
                                   suite_names)
from nemo_cascade.evaluate.runner import _record, decoding_for, suite_metrics
from nemo_cascade.evaluate.suites import SWE_BENCH_LITE_FIXTURE, hh_conversation
from nemo_cascade.evaluate.swe_tasks import load_swe, rebuild_files
from nemo_cascade.rewards import Scorer, swe
from nemo_cascade.rewards.sandbox import SandboxUnavailable, check_available

SIZES = {"ifeval": 541, "ifbench": 300, "gsm8k": 1319, "math500": 500, "aime24": 30, "aime25": 30,
         "humaneval": 164, "mbpp": 500, "rlhf": 2344}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("eval_tok"))


def _bwrap_or_skip():
    try:
        check_available()
    except SandboxUnavailable as e:
        pytest.skip(f"code suites need the sandbox: {e}")


@pytest.mark.parametrize("name", sorted(SIZES))
def test_every_suite_loads_its_real_data(name):
    items, path = load_items(get_suite(name))
    assert len(items) == SIZES[name], path
    assert len({i.uid for i in items}) == len(items)
    for item in items:
        assert (item.messages and item.messages[-1]["role"] == "user"
                and item.messages[-1]["content"].strip())
    assert load_items(get_suite(name), limit=3)[0] == items[:3]


def test_swe_suite_uses_the_fixture_or_the_shared_file_and_every_golden_patch_applies():
    # validate_label applied every golden patch to its rebuilt files
    items = load_swe(SWE_BENCH_LITE_FIXTURE)
    assert len(items) == 300
    assert get_suite("swe").default_data().is_file()
    scores = swe.reward_batch([i.reference for i in items], [i.label for i in items])
    assert scores == [1.0] * 300


def test_rebuild_files_keeps_each_preimage_with_marked_gaps():
    patch = (
        "diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
        "@@ -10,4 +10,4 @@ def f():\n a = 1\n-b = 2\n+b = 3\n c = 3\n d = 4\n"
        "@@ -20,5 +20,6 @@ def g():\n x = 1\n y = 2\n+z = 3\n w = 4\n v = 5\n u = 6\n"
        "--- a/pkg/end.py\n+++ b/pkg/end.py\n@@ -5,2 +5,2 @@\n last = 1\n-tail = 2\n+tail = 3\n"
        "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+new = 1\n")
    files = rebuild_files(patch)
    assert files["pkg/m.py"] == (
        "... lines 1-9 omitted ...\na = 1\nb = 2\nc = 3\nd = 4\n... lines 14-19 omitted ...\n"
        "x = 1\ny = 2\nw = 4\nv = 5\nu = 6\n... lines 25-end omitted ...\n")
    # fewer than 3 trailing context lines: the hunk ends the file, no trailing marker
    assert files["pkg/end.py"] == "... lines 1-4 omitted ...\nlast = 1\ntail = 2\n"
    assert "pkg/new.py" not in files
    label = {"golden_patch": patch, "files": files, "problem_statement": "x"}
    swe.validate_label(label)
    assert swe.swe_reward(f"```diff\n{patch}```", label) == 1.0
    with pytest.raises(EvalError):
        rebuild_files("no diff here")


def test_hh_dialogues_parse_into_alternating_turns():
    assert hh_conversation("\n\nHuman: hi\n\nAssistant: hello\n\nHuman: bye\n\nAssistant: ciao") \
        == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "bye"}, {"role": "assistant", "content": "ciao"}]
    assert hh_conversation("\n\nAssistant: first") is None
    assert hh_conversation("\n\nHuman: a\n\nHuman: b\n\nAssistant: c") is None
    assert hh_conversation("\n\nHuman: a\n\nAssistant: ") is None
    item = load_items(get_suite("rlhf"), limit=1)[0][0]
    assert item.label == {"messages": item.messages} and item.reference


def _values(tok, name: str, uids: list[str] | None, responses_for,
            limit: int = 0) -> dict[str, list[float]]:
    """Per item uid: the per-sample values of ``responses_for(item)`` scored as an evaluation run
    scores them."""
    prep = prepare(name, EvalSettings(limit=limit, data={"swe": str(SWE_BENCH_LITE_FIXTURE)}), tok)
    chosen = [i for i, item in enumerate(prep.items) if uids is None or item.uid in uids]
    groups = []
    for i in chosen:
        texts = responses_for(prep.items[i])
        groups.append(types.PromptGroup(prep.prompts[i], [[0]] * len(texts), [[0.0]] * len(texts),
                                        ["stop"] * len(texts), response_text_G=texts))
    Scorer(prep.suite.domain).score(groups)
    records = [_record(prep, i, g) for i, g in zip(chosen, groups)]
    suite_metrics(prep.suite, records)  # the summary accepts them
    return {r["uid"]: r["values"] for r in records}


@pytest.mark.parametrize("name", ["gsm8k", "math500", "aime24", "aime25"])
def test_math_golden_answers_score_1_and_wrong_ones_0(tok, name):
    values = _values(tok, name, None,
                     lambda item: [item.reference, "The final answer is \\boxed{-12345.678}."],
                     limit=8)
    assert values and all(v == [1.0, 0.0] for v in values.values()), values


@pytest.mark.parametrize("name", ["humaneval", "mbpp"])
def test_code_golden_solutions_pass_and_wrong_ones_fail(tok, name):
    _bwrap_or_skip()
    wrong = "```python\ndef nothing():\n    return None\n```"
    values = _values(tok, name, None, lambda item: [item.reference, wrong], limit=6)
    assert values and all(v == [1.0, 0.0] for v in values.values()), values


def test_swe_golden_patch_is_correct_and_other_answers_are_not(tok):
    values = _values(tok, "swe", None,
                     lambda item: [item.reference, "", "garbage that is not an edit"], limit=5)
    assert values and all(v == [1.0, 0.0, 0.0] for v in values.values()), values


IFEVAL_CASES = {
    "1001": ("Day one: visit the temple. Day two: walk the garden.", "Day one: visit, then rest."),
    "1051": ("dear friend\nplease go and vote this year.", "Dear friend, please VOTE."),
    "1645": ("SHELDON IS A NAME WITH SEVEN LETTERS AND ONE SMILE", "Sheldon is a name"),
}
IFBENCH_CASES = {
    "280": ("14\n21\n28\n35\n42\n49", "7 14 21 28 35 42 49 56"),
    "296": ("Yes.Everysetisaclass.", "Yes, every set is a class."),
}


@pytest.mark.parametrize("name, cases", [("ifeval", IFEVAL_CASES), ("ifbench", IFBENCH_CASES)])
def test_instruction_following_golden_and_wrong_responses(tok, name, cases):
    values = _values(tok, name, list(cases), lambda item: list(cases[item.uid]))
    assert values == {uid: [1.0, 0.0] for uid in cases}


def test_ifeval_metrics_count_prompts_and_instructions_strict_and_loose(tok):
    prep = prepare("ifeval", EvalSettings(), tok)
    # one instruction: no commas
    i = next(k for k, item in enumerate(prep.items) if item.uid == "1001")
    # strict fails on the comma in "**Plan,**"; loose drops the first line and passes
    texts = ["**Plan, first line**\nDay one: temple. Day two: garden.", "Day one: temple."]
    group = types.PromptGroup(prep.prompts[i], [[0]] * 2, [[0.0]] * 2, ["stop", "length"],
                              response_text_G=texts)
    Scorer("ifeval").score([group])
    m = suite_metrics(prep.suite, [_record(prep, i, group)])
    assert (m["prompt_strict"], m["prompt_loose"]) == (0.5, 1.0)
    assert (m["instruction_strict"], m["instruction_loose"]) == (0.5, 1.0)
    assert m["avg@2"] == 0.5 and m["pass@2"] == 1.0 and m["truncated"] == 0.5


def test_too_long_items_score_zero_and_are_counted(tok):
    prep = prepare("gsm8k", EvalSettings(limit=2, samples=3), tok)
    records = [_record(prep, 0, None), _record(prep, 1, None)]
    m = suite_metrics(prep.suite, records)
    assert m["avg@3"] == 0.0 and m["too_long"] == 2 and m["mean_reward"] is None
    assert records[0]["finish_reasons"] == ["prompt_too_long"] * 3


def test_paper_decoding_defaults_and_overrides():
    d = decoding_for(get_suite("ifeval"), EvalSettings())
    assert (d.temperature, d.top_p, d.samples, d.max_tokens, d.mode) == \
        (0.6, 0.95, 8, 32768, "no_think")
    d = decoding_for(get_suite("aime25"), EvalSettings())
    assert (d.samples, d.max_tokens, d.mode) == (64, 65536, "think")
    d = decoding_for(get_suite("aime25"), EvalSettings(samples=2, max_tokens=64, mode="no_think"))
    assert (d.samples, d.max_tokens, d.mode) == (2, 64, "no_think")
    assert get_suite("swe").samples == 4 and get_suite("rlhf").pairwise
    for bad in (EvalSettings(samples=0), EvalSettings(mode="fast"), EvalSettings(template="jinja"),
                EvalSettings(top_p=0.0)):
        with pytest.raises(EvalError):
            decoding_for(get_suite("gsm8k"), bad)


def test_suite_names():
    assert suite_names("all") == list(SUITES)
    assert suite_names("gsm8k, ifeval,gsm8k") == ["gsm8k", "ifeval"]
    with pytest.raises(EvalError, match="unknown suite.*expected one of"):
        suite_names("gsm8k,nope")


def test_prompts_use_the_training_chat_template_with_the_mode_flag(tok):
    think = prepare("gsm8k", EvalSettings(limit=1), tok)
    plain = prepare("ifeval", EvalSettings(limit=1), tok)
    assert tok.decode(think.prompts[0].prompt_tokens).endswith(
        " /think<|im_end|>\n<|im_start|>assistant\n")
    assert tok.decode(plain.prompts[0].prompt_tokens).endswith(
        " /no_think<|im_end|>\n<|im_start|>assistant\n")
    assert think.prompts[0].domain == "math" and think.prompts[0].label == "18"


def test_model_template_uses_the_checkpoints_own_chat_template(tok):
    from nemo_cascade.data.chat import render

    prep = prepare("gsm8k", EvalSettings(limit=2, template="model"), tok)
    for item, prompt in zip(prep.items, prep.prompts):
        # the tiny tokenizer's template is cascade1 with its default mode (no_think), whatever the
        # suite's mode
        assert prompt.prompt_tokens == tok.encode(render(item.messages, "no_think"),
                                                  add_special_tokens=False)
