"""The SWE reward (paper §4.7, Eq. 2; rules in nemo_cascade/rewards/swe/__init__.py).

Realistic cases come from all 300 SWE-bench Lite golden patches (tests/data/swe), with files rebuilt
from their hunks by tests/unit/swe_fixtures.py; hand-made cases pin each rule; adversarial inputs
check that no model output makes the reward raise; the SWE-bench export is checked with a real
``git apply``.
"""
from __future__ import annotations

import functools
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from nemo_cascade.rewards.swe import (
    MAX_EDITS, MAX_JUDGE_FILES_CHARS, MAX_JUDGE_SECTION_CHARS, MAX_SEQUENCE_ITEMS, GradingCase,
    JudgeGrader, LexicalGrader, PatchError, SWEReward, apply_answer, changed_regions,
    export_swebench_predictions, golden_contents, judge_prompt, lexical_similarity, model_patch,
    normalize_content, reward_batch, swe_reward, validate_label)

from . import swe_fixtures as fx


@functools.lru_cache(maxsize=1)
def instances() -> tuple[fx.Instance, ...]:
    return tuple(fx.load_instances())


def _failures(make_answer, expected: float) -> list[tuple[str, float]]:
    out = []
    for inst in instances():
        score = swe_reward(make_answer(inst), inst.label())
        if score != expected:
            out.append((inst.instance_id, score))
    return out


# ------------------------------------------------------------------ SWE-bench Lite golden patches

def test_fixture_has_all_instances():
    assert len(instances()) == 300
    assert all(inst.files and inst.files != inst.expected for inst in instances())


@pytest.mark.parametrize("make_answer", [
    lambda inst: inst.patch,
    fx.search_replace_answer,
    fx.sloppy_diff_answer,
    lambda inst: fx.sloppy_diff_answer(inst, line_shift=-3),
    lambda inst: ("<think>\nThe bug is in the hunk below.\n</think>\n\n"
                  + fx.search_replace_answer(inst)),
], ids=["git-diff", "search-replace", "sloppy-diff", "sloppy-diff-shift-up", "thinking"])
def test_golden_patch_as_answer_scores_one(make_answer):
    assert _failures(make_answer, 1.0) == []


@pytest.mark.parametrize("make_answer",
                         [lambda inst: inst.patch, fx.search_replace_answer, fx.sloppy_diff_answer],
                         ids=["git-diff", "search-replace", "sloppy-diff"])
def test_applied_golden_patch_gives_the_expected_files(make_answer):
    wrong = [inst.instance_id for inst in instances()
             if apply_answer(make_answer(inst), inst.files) != inst.expected]
    assert wrong == []


def test_golden_patch_with_altered_context_scores_minus_one():
    assert _failures(fx.broken_context_answer, -1.0) == []


def test_search_that_matches_nothing_scores_minus_one():
    def answer(inst):
        return fx.search_replace_answer(inst).replace("<<<<<<< SEARCH\n",
                                                      "<<<<<<< SEARCH\nNOT IN THE FILE\n", 1)
    assert _failures(answer, -1.0) == []


def test_no_op_search_replace_of_every_hunk_scores_zero():
    def answer(inst):  # each hunk's pre-image replaced by itself
        blocks = [f"### {path}\n<<<<<<< SEARCH\n" + "".join(line + "\n" for line in hunk.before)
                  + "=======\n" + "".join(line + "\n" for line in hunk.before) + ">>>>>>> REPLACE"
                  for path, hunks in inst.hunks.items() for hunk in hunks if hunk.before]
        return "\n".join(blocks)
    assert _failures(answer, 0.0) == []


def test_different_plausible_fix_gets_a_lexical_grade_strictly_between_0_and_1():
    grades = {inst.instance_id: swe_reward(fx.alternative_fix_answer(inst), inst.label())
              for inst in instances() if fx.has_added_line(inst)}
    assert len(grades) >= 290
    assert {k: v for k, v in grades.items() if not 0.0 < v < 1.0} == {}


def test_reward_batch_equals_one_at_a_time():
    sample = instances()[::15]
    responses, labels = [], []
    for inst in sample:
        label = inst.label()  # one label object shared by the group, as in a rollout
        for answer in (inst.patch, fx.broken_context_answer(inst), "",
                       fx.alternative_fix_answer(inst)):
            responses.append(answer)
            labels.append(label)
    assert (reward_batch(responses, labels)
            == [swe_reward(r, lab) for r, lab in zip(responses, labels)])


# ----------------------------------------------------------------- Eq. 2 rules on a hand-made label

FILES = {
    "pkg/mod.py": "def f(x):\n    return x + 1\n\n\ndef g(y):\n    pass\n    return y * 2\n\n\n"
                  "def h():\n    pass\n",
    "pkg/other.py": "A = 1\nB = 2",  # no final newline
}
GOLDEN = """\
diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,4 +1,4 @@
 def f(x):
-    return x + 1
+    return x + 2
 
 
"""
LABEL = {"golden_patch": GOLDEN, "files": FILES,
         "problem_statement": "f(x) should add two, not one."}


def sr(path: str, search: str, replace: str) -> str:
    return f"### {path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


GOLDEN_SR = sr("pkg/mod.py", "    return x + 1\n", "    return x + 2\n")


@pytest.mark.parametrize("answer, expected", [
    (GOLDEN, 1.0),
    (GOLDEN_SR, 1.0),
    ("```python\n" + GOLDEN_SR + "```\nDone.", 1.0),
    # modulo trailing whitespace
    (sr("pkg/mod.py", "    return x + 1   \n", "    return x + 2\t\n"), 1.0),
    (GOLDEN_SR.replace("### pkg/mod.py", "### `./pkg/mod.py`"), 1.0),
    (GOLDEN_SR.replace("### pkg/mod.py", "pkg/mod.py"), 1.0),  # aider style: bare path line
    (GOLDEN_SR.replace("### pkg/mod.py", "### pkg/mod.py\n```python"), 1.0),
    (GOLDEN.replace("a/pkg", "pkg").replace("b/pkg", "pkg"), 1.0),
    (GOLDEN.replace("\n", "\r\n"), 1.0),
    # wrong header numbers and counts
    (GOLDEN.replace("@@ -1,4 +1,4 @@", "@@ -40,9 +40,2 @@"), 1.0),
    # no numbers, unique context
    (GOLDEN.replace("@@ -1,4 +1,4 @@", "@@ @@").replace("\n \n \n", "\n"), 1.0),
    ("", 0.0),
    ("   \n\n", 0.0),
    ("<think>I give up.</think>", 0.0),
    (sr("pkg/mod.py", "    return x + 1\n", "    return x + 1\n"), 0.0),
    # only trailing whitespace
    (sr("pkg/mod.py", "    return x + 1\n", "    return x + 1    \n"), 0.0),
    ("I could not find the bug.", -1.0),
    ("```python\ndef f(x):\n    return x + 2\n```", -1.0),  # a code block is not an edit
    (sr("pkg/missing.py", "A = 1\n", "A = 2\n"), -1.0),
    (sr("pkg/mod.py", "    return x + 3\n", "    return x + 2\n"), -1.0),  # SEARCH not in the file
    (sr("pkg/mod.py", "    pass\n", "    return None\n"), -1.0),  # SEARCH occurs twice
    (sr("pkg/mod.py", "", "    return x + 2\n"), -1.0),  # empty SEARCH
    # no file
    ("<<<<<<< SEARCH\n    return x + 1\n=======\n    return x + 2\n>>>>>>> REPLACE\n", -1.0),
    # unterminated
    ("### pkg/mod.py\n<<<<<<< SEARCH\n    return x + 1\n=======\n    return x + 2\n", -1.0),
    ("### pkg/mod.py\n<<<<<<< SEARCH\n    return x + 1\n>>>>>>> REPLACE\n", -1.0),  # no divider
    (GOLDEN_SR + ">>>>>>> REPLACE\n", -1.0),  # stray REPLACE
    ("### pkg/mod.py\n<<<<<<< SEARCH\n<<<<<<< SEARCH\n"
     "    return x + 1\n=======\n>>>>>>> REPLACE\n", -1.0),
    (GOLDEN.replace(" def f(x):", " def f(y):"), -1.0),  # context does not match
    (GOLDEN.replace("diff --git a/pkg/mod.py b/pkg/mod.py\n"
                    "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n", ""), -1.0),
    (GOLDEN.replace("b/pkg/mod.py", "b/pkg/renamed.py"), -1.0),  # renames are not supported
    ("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n", -1.0),  # header without hunks
    (GOLDEN.replace("@@ -1,4 +1,4 @@", "@@ -1,4 +1,4 @@\n@@ -1,4 +1,4 @@"), -1.0),  # empty hunk
    ("".join(sr("pkg/mod.py", "    return x + 1\n", "    return x + 1\n")
             for _ in range(MAX_EDITS + 1)), -1.0),
    (None, -1.0),
    (b"bytes", -1.0),
])
def test_eq2_cases(answer, expected):
    assert swe_reward(answer, LABEL) == expected


def test_verdicts_name_the_eq2_branch_of_each_sample():
    responses = [GOLDEN_SR, "", "junk", "<think>no end",
                 sr("pkg/mod.py", "    return x + 1\n", "    return x * 2\n")]
    scores, details = SWEReward(unterminated_score=-0.5).verdicts(responses, [LABEL] * 5)
    assert [d["outcome"] for d in details] == ["matches_golden", "unchanged", "parse_failure",
                                               "unterminated", "graded"]
    assert scores == [1.0, 0.0, -1.0, -0.5, pytest.approx(2 / 3)]


def test_answer_without_think_close_scores_minus_one_by_default_and_is_configurable():
    unfinished = "<think>\nThe fix is\n" + GOLDEN_SR  # the edit sits inside unfinished thinking
    assert swe_reward(unfinished, LABEL) == -1.0
    assert SWEReward(unterminated_score=0.0)(unfinished, LABEL) == 0.0
    assert swe_reward("<think>\nThe fix is\n</think>\n" + GOLDEN_SR, LABEL) == 1.0


def test_only_text_after_think_is_judged():
    # An edit in the thinking does not count; the answer after </think> does.
    assert swe_reward("<think>\n" + GOLDEN_SR + "</think>\nNo change needed.", LABEL) == -1.0
    assert swe_reward("<think>\n" + GOLDEN_SR + "</think>\n", LABEL) == 0.0


def test_blocks_apply_in_order_and_inherit_the_previous_file():
    answer = (sr("pkg/mod.py", "    return x + 1\n", "    return x + 5\n")
              + "<<<<<<< SEARCH\n    return x + 5\n=======\n    return x + 2\n>>>>>>> REPLACE\n")
    assert swe_reward(answer, LABEL) == 1.0


def test_ambiguous_search_resolved_by_more_context():
    assert apply_answer(sr("pkg/mod.py", "    pass\n    return y * 2\n", "    return y * 3\n"),
                        FILES) == {
        "pkg/mod.py": FILES["pkg/mod.py"].replace("    pass\n    return y * 2", "    return y * 3")}


def test_several_dividers_pick_the_reading_whose_search_is_unique():
    files = {"docs/index.rst": "Title\n=======\n\nIntro text.\n"}
    # the RST underline is a divider
    answer = sr("docs/index.rst", "Title\n=======\n", "New title\n=========\n")
    assert apply_answer(answer, files) == {
        "docs/index.rst": "New title\n=========\n\nIntro text.\n"}


def test_diff_hunk_goes_to_the_duplicate_nearest_its_header_line():
    files = {"a.py": "x = 1\ny = 2\n" + "".join(f"# {i}\n" for i in range(20)) + "x = 1\ny = 2\n"}
    diff = "--- a/a.py\n+++ b/a.py\n@@ -{} +{} @@\n x = 1\n-y = 2\n+y = 3\n"
    near_end = apply_answer(diff.format("21,2", "21,2"), files)["a.py"]
    near_start = apply_answer(diff.format("2,2", "2,2"), files)["a.py"]
    assert near_end.endswith("x = 1\ny = 3\n") and near_end.startswith("x = 1\ny = 2\n")
    assert near_start.startswith("x = 1\ny = 3\n") and near_start.endswith("x = 1\ny = 2\n")
    with pytest.raises(PatchError, match="more than once"):  # no line numbers: must be unique
        apply_answer(diff.format("", "").replace("@@ - + @@", "@@"), files)


def test_diff_hunks_out_of_order_fail():
    files = {"a.py": "".join(f"line {i}\n" for i in range(30))}
    hunk_late = "@@ -21,2 +21,2 @@\n line 20\n-line 21\n+LINE 21\n"
    hunk_early = "@@ -2,2 +2,2 @@\n line 1\n-line 2\n+LINE 2\n"
    assert (apply_answer("--- a/a.py\n+++ b/a.py\n" + hunk_early + hunk_late, files)["a.py"]
            .count("LINE") == 2)
    with pytest.raises(PatchError, match="does not match"):
        apply_answer("--- a/a.py\n+++ b/a.py\n" + hunk_late + hunk_early, files)


def test_header_counts_keep_removed_lines_that_look_like_file_headers():
    files = {"q.sql": "-- keep\n-- old comment\n++ plus\nSELECT 1;\n"}
    diff = ("--- a/q.sql\n+++ b/q.sql\n@@ -1,4 +1,3 @@\n -- keep\n--- old comment\n"
            "+++ new comment\n-++ plus\n SELECT 1;\n")
    assert apply_answer(diff, files) == {"q.sql": "-- keep\n++ new comment\nSELECT 1;\n"}


def test_diff_creates_and_deletes_files():
    create = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+import os\n+X = os.sep\n"
    assert apply_answer(create, FILES) == {"pkg/new.py": "import os\nX = os.sep\n"}
    with pytest.raises(PatchError, match="already exists"):
        apply_answer(create.replace("pkg/new.py", "pkg/mod.py"), FILES)
    delete = ("--- a/pkg/other.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-A = 1\n-B = 2\n"
              "\\ No newline at end of file\n")
    assert apply_answer(delete, FILES) == {"pkg/other.py": None}
    with pytest.raises(PatchError, match="leaves lines"):
        apply_answer("--- a/pkg/other.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-A = 1\n", FILES)
    label = dict(LABEL, golden_patch=create)
    assert swe_reward(create, label) == 1.0
    assert swe_reward(create.replace("os.sep", "os.pathsep"), label) == pytest.approx(2 * 2 / 6)


def test_file_without_final_newline():
    answer = sr("pkg/other.py", "B = 2\n", "B = 3\n")
    # still without, as git would
    assert apply_answer(answer, FILES) == {"pkg/other.py": "A = 1\nB = 3"}
    label = dict(LABEL, golden_patch="--- a/pkg/other.py\n+++ b/pkg/other.py\n@@ -1,2 +1,2 @@\n"
                                     " A = 1\n-B = 2\n\\ No newline at end of file\n"
                                     "+B = 3\n\\ No newline at end of file\n")
    assert swe_reward(answer, label) == 1.0


# ------------------------------------------------------------------ the lexical grade

def test_changed_regions_lists_anchor_removed_and_added_lines():
    before = {"m.py": "a\nb\nc\n"}
    assert changed_regions(before, {"m.py": "a\nB\nc\nd\n"}) == [
        ("m.py", "@@", 1), ("m.py", "-", "b\n"), ("m.py", "+", "B\n"), ("m.py", "@@", 3),
        ("m.py", "+", "d\n")]


def test_lexical_similarity_values():
    gold = [("p", "@@", 1), ("p", "-", "x\n"), ("p", "+", "y\n")]
    assert lexical_similarity(gold, gold) == 1.0
    assert lexical_similarity(gold[:2] + [("p", "+", "z\n")], gold) == pytest.approx(2 * 2 / 6)
    assert lexical_similarity([("q", "+", "z\n")], gold) == 0.0
    assert lexical_similarity([], []) == 1.0
    # Past the item cap: the multiset Dice coefficient, blind to order (the ratio would count one of
    # three).
    big = [("p", "+", f"{i}\n") for i in range(MAX_SEQUENCE_ITEMS)]
    assert lexical_similarity(big + gold[::-1], gold) == pytest.approx(2 * 3 / (len(big) + 6))
    assert lexical_similarity(big[:10] + gold[::-1], gold) == pytest.approx(2 * 1 / (10 + 6))


def test_wrong_replacement_of_the_right_line_scores_two_thirds():
    assert (swe_reward(sr("pkg/mod.py", "    return x + 1\n", "    return x * 2\n"), LABEL)
            == pytest.approx(2 / 3))
    # The same wrong fix written as a diff scores the same: grades come from contents, not patch
    # text.
    assert swe_reward(GOLDEN.replace("x + 2", "x * 2"), LABEL) == pytest.approx(2 / 3)
    # A change elsewhere shares nothing with the golden one.
    assert swe_reward(sr("pkg/other.py", "A = 1\n", "A = 0\n"), LABEL) == 0.0


# ------------------------------------------------------------------ the judge

class ScriptedJudge:
    """A YesProbability with fixed answers that records its calls (prompts and answer prefix). It
    stands in for a judge *model* so the batching can be checked offline; JudgeClient itself is
    tested against a served model in tests/integration."""

    def __init__(self, answers):
        self.answers, self.calls, self.prefixes = list(answers), [], []

    def p_yes(self, prompts, *, answer_prefix=""):
        self.calls.append(list(prompts))
        self.prefixes.append(answer_prefix)
        return list(self.answers)


def test_judge_prompt_holds_app_c2_elements_in_order():
    """App. C.2: a system turn asking for ``<judgement>YES</judgement>`` /
    ``<judgement>NO</judgement>``, and a user turn with the issue, the relevant files' contents, the
    edit format, the golden and the candidate patch, in that order, the question last."""
    files = {"pkg/b.py": "B_CONTENT = 1\n", "pkg/a.py": "A_CONTENT = 2\n", "pkg/new.py": None}
    system, user = judge_prompt("f adds one", files, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
                                "CANDIDATE DIFF")
    assert (system["role"], user["role"]) == ("system", "user")
    assert ("<judgement>YES</judgement>" in system["content"]
            and "<judgement>NO</judgement>" in system["content"])
    text = user["content"]
    order = ["## Issue", "f adds one", "## Relevant file contents", "### pkg/a.py", "A_CONTENT = 2",
             "### pkg/b.py", "B_CONTENT = 1", "### pkg/new.py", "## Edit format", "unified diff",
             "## Golden patch", "-a\n+b", "## Candidate patch", "CANDIDATE DIFF",
             "<judgement>YES</judgement> or "]
    at = [text.index(piece) for piece in order]
    assert at == sorted(at), [piece for piece, i in zip(order, at)]
    assert text.endswith("<judgement>NO</judgement>.")
    assert "new file" in text[text.index("### pkg/new.py"):text.index("## Edit format")]


def test_judge_prompt_sections_are_bounded():
    long = judge_prompt("issue", {}, "g" * (MAX_JUDGE_SECTION_CHARS + 5), "c")[1]["content"]
    assert "[... 5 more characters cut]" in long and long.endswith("<judgement>NO</judgement>.")
    many = {f"f{i}.py": "x" * MAX_JUDGE_SECTION_CHARS for i in range(10)}
    text = judge_prompt("issue", many, "g", "c")[1]["content"]
    assert (len(text) < MAX_JUDGE_FILES_CHARS + 4 * MAX_JUDGE_SECTION_CHARS
            and "## Candidate patch" in text)


def test_judge_grades_only_the_undecided_samples_in_one_call():
    judge = ScriptedJudge([0.25, 1.7])
    reward = SWEReward(JudgeGrader(judge))
    responses = [GOLDEN_SR, sr("pkg/mod.py", "    return x + 1\n", "    return x * 2\n"), "",
                 "garbage", sr("pkg/other.py", "A = 1\n", "A = 0\n")]
    # 1.7 clamped to 1
    assert reward.reward_batch(responses, [LABEL] * 5) == [1.0, 0.25, 0.0, -1.0, 1.0]
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 2
    # P(YES) is read at the verdict, after the tag (App. C.2)
    assert judge.prefixes == ["<judgement>"]
    first = judge.calls[0][0][1]["content"]
    assert LABEL["problem_statement"] in first
    assert "-    return x + 1\n+    return x + 2\n" in first  # golden, as a canonical diff
    assert "-    return x + 1\n+    return x * 2\n" in first  # candidate (given as search/replace)
    assert FILES["pkg/mod.py"].rstrip() in first  # the touched file's contents before the patches
    assert "pkg/other.py" not in first  # a file neither patch touches is not shown
    assert "+A = 0" in judge.calls[0][1][1]["content"]


def test_judge_is_not_called_when_eq2_decides_everything():
    judge = ScriptedJudge([])
    assert SWEReward(JudgeGrader(judge)).reward_batch([GOLDEN_SR, "", "nonsense"],
                                                      [LABEL] * 3) == [1.0, 0.0, -1.0]
    assert judge.calls == []


def test_judge_answering_the_wrong_number_of_scores_is_an_error():
    with pytest.raises(RuntimeError, match="2 scores for 1 prompts"):
        JudgeGrader(ScriptedJudge([0.5, 0.5])).grade(
            [GradingCase("issue", {"a": "x\n"}, {"a": "y\n"}, {"a": "z\n"})])


def test_lexical_grader_is_the_default():
    assert isinstance(SWEReward().grader, LexicalGrader)


# ------------------------------------------------------------------ labels

@pytest.mark.parametrize("label, message", [
    ("not a dict", "expected a dict"),
    ({"files": FILES, "problem_statement": "p"}, "'golden_patch' must be a string"),
    (dict(LABEL, problem_statement=None), "'problem_statement' must be a string"),
    (dict(LABEL, files=["pkg/mod.py"]), "'files' must be a dict"),
    (dict(LABEL, files={"pkg/mod.py": 3}), "'files' must be a dict"),
    (dict(LABEL, golden_patch="not a patch"), "golden_patch does not apply"),
    (dict(LABEL, golden_patch=GOLDEN.replace("x + 1", "x + 9")), "golden_patch does not apply"),
    (dict(LABEL, golden_patch=sr("pkg/mod.py", "    return x + 1\n", "    return x + 1\n")),
     "changes nothing"),
    (dict(LABEL, golden_patch=""), "changes nothing"),
])
def test_malformed_labels_raise_one_line(label, message):
    with pytest.raises(ValueError, match=message) as err:
        validate_label(label)
    assert "\n" not in str(err.value) and str(err.value).startswith("swe label:")


def test_bad_label_in_a_batch_names_its_index():
    with pytest.raises(ValueError, match=r"labels\[1\]: swe label: 'files'"):
        reward_batch(["", ""], [LABEL, dict(LABEL, files=None)])


def test_golden_contents_and_valid_fixture_labels():
    assert golden_contents(LABEL) == {
        "pkg/mod.py": normalize_content(FILES["pkg/mod.py"].replace("x + 1", "x + 2"))}
    for inst in instances()[::10]:
        validate_label(inst.label())


# ------------------------------------------------------------------ adversarial model output

MB = 1 << 20
_ADVERSARIAL = {
    "1MB-one-line": lambda: "x" * MB,
    "1MB-of-lines": lambda: "word and more words\n" * (MB // 20),
    "1MB-of-spaces": lambda: " " * MB,
    "1MB-of-newlines": lambda: "\n" * MB,
    "100k-search-markers": lambda: "### pkg/mod.py\n" + "<<<<<<< SEARCH\n" * 100_000,
    "100k-well-formed-blocks": lambda: GOLDEN_SR * 100_000,
    "100k-dividers": lambda: "### pkg/mod.py\n<<<<<<< SEARCH\n    return x + 1\n"
                             + "=======\n" * 100_000 + ">>>>>>> REPLACE\n",
    "million-hunk-headers": lambda: "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
                                    + "@@ -1 +1 @@\n" * 1_000_000,
    "million-hunks": lambda: "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
                             + "@@ -1 +1 @@\n-a\n+b\n" * 1_000_000,
    "100k-file-headers": lambda: "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n" * 100_000,
    "1MB-digits-in-header": lambda: "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -" + "9" * MB
                                    + " +1 @@\n-a\n+b\n",
    "huge-hunk-counts": lambda: GOLDEN.replace("@@ -1,4 +1,4 @@",
                                               "@@ -1,999999999 +1,999999999 @@"),
    "1MB-replacement": lambda: sr("pkg/mod.py", "    return x + 1\n",
                                  "    return x + 2\n" * (MB // 18)),
    "1MB-blank-replacement": lambda: sr("pkg/mod.py", "    return x + 1\n", "\n" * MB),
    "1MB-search": lambda: sr("pkg/mod.py", "y\n" * (MB // 2), "z\n"),
    "100k-path-lines": lambda: "### pkg/nothing.py\n" * 100_000 + GOLDEN_SR,
    "nested-think": lambda: "<think>" * 100_000 + "</think>" * 100_000,
    "unicode-and-nul": lambda: "\x00\u2028\ud800" * 100_000 + GOLDEN_SR,
    "conflict-markers-in-prose": lambda: ("<<<<<<< HEAD\nours\n=======\ntheirs\n"
                                          ">>>>>>> branch\n") * 10_000,
}


@pytest.mark.parametrize("name", sorted(_ADVERSARIAL))
def test_adversarial_output_scores_without_raising(name):
    response = _ADVERSARIAL[name]()
    score = swe_reward(response, LABEL)
    assert isinstance(score, float) and -1.0 <= score <= 1.0
    assert isinstance(model_patch(response, FILES), str)


_FRAGMENTS = ["<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "### pkg/mod.py", "### pkg/other.py",
              "pkg/mod.py", "--- a/pkg/mod.py", "+++ b/pkg/mod.py", "--- /dev/null",
              "+++ /dev/null", "+++ b/pkg/new.py", "--- a/pkg/other.py", "@@ -1,4 +1,4 @@",
              "@@ -0,0 +1 @@", "@@ @@", "@@ -3 +3 @@", "@@ -1,2 +0,0 @@", " def f(x):",
              "-    return x + 1", "+    return x + 2", "    return x + 1", "    pass", "", " ",
              "-", "+", "\\ No newline at end of file", "```", "```diff", "A = 1", "-A = 1",
              "-B = 2", "+X", "<think>", "</think>", "diff --git a/x b/x", "\r", "\t"]


def test_random_mixtures_of_edit_syntax_never_raise():
    rng = random.Random(0)
    seen = set()
    for _ in range(3000):
        response = "\n".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 25)))
        if rng.random() < 0.3:  # a cut-off real edit followed by noise
            response = rng.choice([GOLDEN, GOLDEN_SR])[:rng.randint(0, 200)] + response
        score = swe_reward(response, LABEL)
        assert isinstance(score, float) and -1.0 <= score <= 1.0, response
        assert isinstance(model_patch(response, FILES), str)
        seen.add(score if score in (-1.0, 0.0, 1.0) else "graded")
    assert seen == {-1.0, 0.0, 1.0, "graded"}  # the mixtures reach every branch of Eq. 2


def test_adversarial_scores_are_the_rule_ones():
    assert swe_reward(_ADVERSARIAL["100k-well-formed-blocks"](), LABEL) == -1.0  # past MAX_EDITS
    # counts ignored when they do not fit
    assert swe_reward(_ADVERSARIAL["huge-hunk-counts"](), LABEL) == 1.0
    # the path line is the last one
    assert swe_reward(_ADVERSARIAL["100k-path-lines"](), LABEL) == 1.0
    # Dice past the item cap
    assert 0.0 <= swe_reward(_ADVERSARIAL["1MB-replacement"](), LABEL) < 0.01


# ------------------------------------------------------------------ SWE-bench export

def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_export_writes_swebench_jsonl_that_git_applies(tmp_path):
    # Every instance in its own directory of one repository, so one `git apply` checks all patches.
    repo = tmp_path / "repo"
    repo.mkdir()
    assert _git(repo, "init", "-q").returncode == 0
    rows, expected = [], {}
    for k, inst in enumerate(instances()):
        inst = inst.under(f"i{k}")
        answer = fx.search_replace_answer(inst) if k % 2 else fx.sloppy_diff_answer(inst)
        rows.append({"instance_id": inst.instance_id, "model_name_or_path": "nemo-cascade-test",
                     "response": answer, "files": inst.files})
        expected.update(inst.expected)
        for path, text in inst.files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    # Special shapes: a file without final newline, a created and a deleted file, an unparseable
    # answer.
    (repo / "special").mkdir()
    for path, text in FILES.items():
        (repo / "special" / Path(path).name).write_text(text)
    special_files = {f"special/{Path(p).name}": t for p, t in FILES.items()}
    special = ("--- a/special/other.py\n+++ b/special/other.py\n@@ -1,2 +1,2 @@\n"
               " A = 1\n-B = 2\n+B = 3\n"
               "--- /dev/null\n+++ b/special/new.py\n@@ -0,0 +1 @@\n+NEW = True\n"
               "--- a/special/mod.py\n+++ /dev/null\n@@ -1,11 +0,0 @@\n"
               + "".join("-" + line for line in FILES["pkg/mod.py"].splitlines(keepends=True)))
    rows.append({"instance_id": "special", "model_name_or_path": "m", "response": special,
                 "files": special_files})
    rows.append({"instance_id": "garbage", "model_name_or_path": "m", "response": "no idea",
                 "files": special_files})
    out = tmp_path / "predictions.jsonl"
    assert export_swebench_predictions(out, rows) == len(rows)

    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert ([set(r) for r in records]
            == [{"instance_id", "model_name_or_path", "model_patch"}] * len(rows))
    assert [r["instance_id"] for r in records] == [row["instance_id"] for row in rows]
    assert records[-1]["model_patch"] == ""
    patches = [r["model_patch"] for r in records[:-1]]
    assert all(p.startswith("diff --git a/") and "\n--- " in p and "\n+++ " in p for p in patches)
    assert "+B = 3\n\\ No newline at end of file\n" in patches[-1]

    all_patches = tmp_path / "all.patch"
    all_patches.write_text("".join(patches))
    check = _git(repo, "apply", "--check", str(all_patches))
    assert check.returncode == 0, check.stderr[:2000]
    assert _git(repo, "apply", str(all_patches)).returncode == 0
    assert {p: (repo / p).read_text() for p in expected} == expected
    assert (repo / "special/other.py").read_text() == "A = 1\nB = 3"
    assert (repo / "special/new.py").read_text() == "NEW = True\n"
    assert not (repo / "special/mod.py").exists()


def test_model_patch_of_an_unfinished_or_failed_answer_is_empty():
    assert model_patch("<think>never closed " + GOLDEN_SR, FILES) == ""
    assert model_patch(sr("pkg/mod.py", "not there\n", "x\n"), FILES) == ""
    assert model_patch(GOLDEN_SR, FILES).startswith(
        "diff --git a/pkg/mod.py b/pkg/mod.py\n--- a/pkg/mod.py\n")


def test_export_rejects_rows_missing_fields(tmp_path):
    with pytest.raises(ValueError, match=r"rows\[0\]: missing \['files', 'response'\]"):
        export_swebench_predictions(tmp_path / "p.jsonl",
                                    [{"instance_id": "x", "model_name_or_path": "m"}])
