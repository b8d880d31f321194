"""Fuzz tier, verifiers (docs/architecture.md, "Contracts": a verifier never raises on model output;
any string up to 1 MB returns a score in bounded time): random unicode, megabyte strings and
pathological LaTeX into the math verifier; random labels and random or huge text into the
IFEval/IFBench reward; malformed, unicode and huge diffs into the SWE diff parser and reward (and a
round trip: any change, rendered as a diff, applies back to itself); random text into the
code-switch detector. Every call ends in a score in the documented range.

Time: the math verifier's only configured bound is its per-sample timeout
(``MathVerifier.timeout_s``, the worker is killed after it), so each call is checked against
``timeout_s`` per sample in flight plus :data:`RESTART_SLACK_S` for replacing killed workers. The
other verifiers claim linear time without a number; a ``pytest.mark.timeout`` guards them against a
hang, no speed is asserted.
"""
from __future__ import annotations

import logging
import math
import random
import re
import time

import pytest
from hypothesis import given, strategies as st

from nemo_cascade.rewards import language
from nemo_cascade.rewards.ifeval import ALL, ifeval_reward, per_instruction, validate_label
from nemo_cascade.rewards.math import MathVerifier
from nemo_cascade.rewards.swe import (OUTCOMES, PatchError, SWEReward, apply_answer,
                                      normalize_content, render_unified_diff, swe_reward)
from nemo_cascade.rewards.swe.edits import parse_unified_diff

from .fuzz_budget import fuzz, ran

MB = 1 << 20
pytestmark = pytest.mark.timeout(600)  # a hang guard for the whole file, not a speed claim

# ------------------------------------------------------------------ math

TIMEOUT_S = 1.0
WORKERS = 2
RESTART_SLACK_S = 30.0
"""Wall time allowed on top of the per-sample timeouts for the pool to replace killed workers (a
fresh interpreter importing sympy and math-verify: ~1 s idle, several on a loaded 2-core machine)
and to start."""
VERIFIER = MathVerifier(timeout_s=TIMEOUT_S, num_workers=WORKERS)


def _bound(n_items: int) -> float:
    """The configured worst case of a batch: its items' timeouts run ``WORKERS`` at a time."""
    return math.ceil(n_items / WORKERS) * TIMEOUT_S + RESTART_SLACK_S


def _scores(responses, labels) -> list[float]:
    started = time.monotonic()
    scores = VERIFIER.reward_batch(responses, labels)
    elapsed = time.monotonic() - started
    assert elapsed <= _bound(len(responses)), (elapsed, _bound(len(responses)), responses)
    assert all(s in (0.0, 1.0) for s in scores), scores
    return scores


LATEX = [
    "\\boxed{", "{", "}", "\\frac", "\\sqrt", "\\\\", "^", "_", "9", "1", "x", "(", ")", "[", "]",
    "\\left(", "\\right)", "\\infty", "\\pi", "\\cdot", "=", ",", "\\{", "\\}", "$", "\\text{", "%",
    "!", "\\", ".", "</think>", "<think>", "\\begin{pmatrix}", "\\end{pmatrix}", "&", "e^{", "\\ln",
    "\\sin", " "]
latex_soup = st.lists(st.sampled_from(LATEX), max_size=40).map("".join)
answers = st.sampled_from(["1", "0.5", "\\frac{1}{2}", "(1, 2]", "x=5", "\\sqrt{2}", "\\{1,2\\}",
                           "50\\%", "-3", "\\infty", "2\\pi", "9^{9^{9}}"])


@fuzz("math.random_text")
@given(response=st.one_of(st.text(max_size=200), latex_soup,
                          latex_soup.map(lambda s: f"\\boxed{{{s}}}"),
                          st.text(max_size=60).map(lambda s: f"<think>{s}</think>\\boxed{{{s}}}"),
                          st.none(), st.integers(), st.binary(max_size=10)),
       label=st.one_of(answers, st.text(max_size=20), latex_soup))
def test_math_scores_any_text_in_bounded_time(response, label):
    ran("math.random_text")
    _scores([response], [label])


def _expr(depth: int) -> st.SearchStrategy:
    leaf = st.one_of(st.integers(-99, 999).map(str),
                     st.sampled_from(["x", "y", "\\pi", "e", "\\infty", "0.5"]))
    if depth == 0:
        return leaf
    sub = _expr(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(sub, sub).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
        sub.map(lambda a: f"\\sqrt{{{a}}}"),
        st.tuples(sub, sub).map(lambda t: f"{{{t[0]}}}^{{{t[1]}}}"),
        st.tuples(sub, st.sampled_from(["+", "-", "\\cdot", ",", "=", "<"]), sub).map("".join),
        sub.map(lambda a: f"\\left({a}\\right)"),
        sub.map(lambda a: f"{a}!"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]}, {t[1]}]"),
    )


latex_exprs = _expr(3)


@fuzz("math.latex_grammar")
@given(answer=latex_exprs, label=st.one_of(latex_exprs, answers), think=st.booleans())
def test_math_scores_generated_latex_in_bounded_time(answer, label, think):
    """Grammatical LaTeX reaches math-verify (sympy) itself: nested fractions, roots, towers of
    powers, factorials, intervals — including the ones sympy cannot finish (killed at the timeout,
    score 0)."""
    ran("math.latex_grammar")
    response = (f"<think>scratch</think>The answer is \\boxed{{{answer}}}." if think
                else f"\\boxed{{{answer}}}")
    score = _scores([response], [label])[0]
    if answer == label:
        assert score == 1.0


PATHOLOGICAL = {
    "power-tower": "\\boxed{9^9^9^9}",
    "braced-power-tower": "\\boxed{9^{9^{9^{9}}}}",
    "factorial-tower": "\\boxed{(10^{10})!!}",
    "deep-frac-300": "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 300 + "}",
    "deep-frac-over-limit": "\\boxed{" + "\\frac{" * 3000 + "1" + "}{2}" * 3000 + "}",
    "deep-sqrt": "\\boxed{" + "\\sqrt{" * 400 + "2" + "}" * 400 + "}",
    "backslash-flood-in-box": "\\boxed{" + "\\\\" * 400 + "}",
    "backslash-flood-1MB": "\\\\" * (MB // 2),
    "unbalanced-open": "\\boxed{" * 200_000,
    "unbalanced-close": "\\boxed{1}" + "}" * 500_000,
    "unbalanced-inside": "\\boxed{{{{{{{{{{{{1}",
    "many-boxes": "\\boxed{1}" * 100_000,
    "1MB-box": "\\boxed{" + "1" * MB + "}",
    "1MB-unicode-box": "\\boxed{" + "".join(chr(0x4E00 + i % 20000) for i in range(MB // 3)) + "}",
    "huge-integer-equal": "\\boxed{" + "9" * 900 + "}",
    "matrix-flood": "\\boxed{\\begin{pmatrix}" + "1&" * 300 + "1\\end{pmatrix}}",
    "think-never-closed": "<think>" + "\\boxed{1}" * 1000,
    "nul-and-surrogates": "\\boxed{\x00\ud800\udfff1}",
}


def test_pathological_latex_scores_zero_within_the_timeout_bound():
    ran("math.random_text", len(PATHOLOGICAL) + 2)
    names = sorted(PATHOLOGICAL)
    scores = _scores([PATHOLOGICAL[n] for n in names], ["1"] * len(names))
    got = dict(zip(names, scores))
    assert got["many-boxes"] == 1.0 and got["unbalanced-close"] == 1.0  # the last complete box is 1
    assert {n for n, s in got.items() if s} == {"many-boxes", "unbalanced-close"}, got
    # the same monsters as references: labels go through str() and the same bounded path
    assert _scores(["\\boxed{1}", "\\boxed{2}"],
                   [PATHOLOGICAL["power-tower"], "9" * 5000]) == [0.0, 0.0]


# ------------------------------------------------------------------ IFEval / IFBench

def _kwarg(arg) -> st.SearchStrategy:
    lo = int(arg.minimum) if arg.minimum is not None else -5
    if arg.kind is int:
        return st.one_of(st.integers(lo, 50),
                         st.sampled_from([lo, 10**9, 2**62]).filter(lambda v: v >= lo))
    if arg.kind is float:
        return st.floats(min_value=arg.minimum or 0.0, max_value=1e6, allow_nan=False)
    if arg.kind is list:
        return st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=3)
    if arg.kind == "regex":
        return st.text(min_size=1, max_size=6).filter(str.strip).map(re.escape)
    if arg.choices:
        return st.sampled_from(arg.choices)
    return st.text(min_size=0, max_size=8)


@st.composite
def ifeval_labels(draw):
    ids = draw(st.lists(st.sampled_from(sorted(ALL)), min_size=1, max_size=3))
    kwargs = []
    for iid in ids:
        kw = {}
        for name, arg in ALL[iid].args.items():
            if arg.optional and draw(st.booleans()):
                continue
            kw[name] = draw(_kwarg(arg))
        kwargs.append(kw)
    return {"prompt": draw(st.text(max_size=30)), "instruction_id_list": ids, "kwargs": kwargs}


MARKUP = [
    "\n", "\n\n", "*", "**", "# ", "## Section 1\n", "* item\n", "- ", "1. ", "P.S. ", "\"", ",",
    ".", "?", "!", "<<title>>", "[name]", "{", "}", "```", "JSON", "SECTION 2", "***", "Mr. ",
    "日本語", "😀", "é", "HELLO", "hello", "\t", "\u2028", "</think>", "<think>", "  ", "word "]
ifeval_text = st.one_of(st.text(max_size=300),
                        st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=10)),
                                 max_size=60).map("".join))


class _Raised(logging.Handler):
    """Counts the reward's "checker raised" warnings: a checker must not raise on any string
    (spec.py)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def checker_raises():
    handler = _Raised()
    log = logging.getLogger("nemo_cascade.rewards.ifeval.reward")
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


@fuzz("ifeval.random_text")
@given(label=ifeval_labels(), response=ifeval_text)
def test_ifeval_scores_any_text_for_any_valid_label(checker_raises, label, response):
    ran("ifeval.random_text")
    try:
        validate_label(label)
    except ValueError as e:
        # a cross-argument constraint: a one-line load-time error, never a scoring one
        assert "\n" not in str(e)
        return
    before = len(checker_raises.records)
    assert ifeval_reward(response, label) in (0.0, 1.0)
    for loose in (False, True):
        verdicts = per_instruction(response, label, loose=loose)
        assert (len(verdicts) == len(label["instruction_id_list"])
                and all(v in (True, False) for v in verdicts))
    raised = [r.getMessage() for r in checker_raises.records[before:]]
    assert not raised, raised


@fuzz("ifeval.huge_text")
@given(label=ifeval_labels(),
       piece=st.lists(st.sampled_from(MARKUP), min_size=1, max_size=8).map("".join),
       noise=st.integers(0, 2**32))
def test_ifeval_scores_a_megabyte(checker_raises, label, piece, noise):
    ran("ifeval.huge_text")
    try:
        validate_label(label)
    except ValueError:
        return
    rng = random.Random(noise)
    text = "".join(piece if rng.random() < 0.9 else rng.choice(MARKUP)
                   for _ in range(MB // len(piece) + 1))[:MB]
    before = len(checker_raises.records)
    assert ifeval_reward(text, label) in (0.0, 1.0)
    assert not checker_raises.records[before:]


# ------------------------------------------------------------- SWE: diff parser, round trip, reward

FILES = {"pkg/mod.py": "def f(x):\n    return x + 1\n\n\nA = 1\nB = 2\n", "pkg/other.py": "A = 1\n"}
GOLDEN = ("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n def f(x):\n"
          "-    return x + 1\n+    return x + 2\n")
LABEL = {"golden_patch": GOLDEN, "files": FILES, "problem_statement": "f is off by one"}
DIFF_LINES = [
    "--- a/pkg/mod.py", "+++ b/pkg/mod.py", "--- /dev/null", "+++ /dev/null", "+++ b/pkg/new.py",
    "--- pkg/other.py", "+++ pkg/other.py", "--- a/pkg/mod.py\t2024-01-01", "@@ -1,2 +1,2 @@",
    "@@ -0,0 +1 @@", "@@ @@", "@@ -999999999,999999999 +1 @@", "@@ -1 +1 @@ def f(x):",
    " def f(x):", "-    return x + 1", "+    return x + 2", "-A = 1", "+A = 3", "+", "-", " ", "",
    "\\ No newline at end of file", "```diff", "```", "diff --git a/pkg/mod.py b/pkg/mod.py",
    "Index: pkg/mod.py", "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "### pkg/mod.py", "\r",
    "\x00", "\u2028", "\ufeff--- a/pkg/mod.py"]
diff_like = st.lists(st.one_of(st.sampled_from(DIFF_LINES), st.text(max_size=12),
                               st.text(max_size=8).map(lambda s: "+" + s),
                               st.text(max_size=8).map(lambda s: "-" + s)),
                     max_size=30).map("\n".join)


@fuzz("swe.diff_parser")
@given(answer=st.one_of(diff_like, diff_like.map(lambda d: GOLDEN + d),
                        diff_like.map(lambda d: d + GOLDEN), st.text(max_size=200)),
       crlf=st.booleans())
def test_diff_parser_and_apply_give_edits_or_a_patch_error(answer, crlf):
    ran("swe.diff_parser")
    if crlf:
        answer = answer.replace("\n", "\r\n")
    try:
        diffs = parse_unified_diff(answer.replace("\r\n", "\n").split("\n"))
        assert all(h.lines for d in diffs for h in d.hunks)
    except PatchError as e:
        assert "\n" not in str(e)
    try:
        after = apply_answer(answer, FILES)
    except PatchError as e:
        assert "\n" not in str(e)
    else:
        assert all(text is None or isinstance(text, str) for text in after.values())
        assert render_unified_diff(FILES, after) is not None


LINE_POOL = [
    "x = 1", "", "    pass", "-- not a header", "++ nor this", "--- a/pkg/mod.py",
    "+++ b/pkg/mod.py", "@@ -1 +1 @@", "\\ backslash", " lead", "trail  ", "\t", "\x0c", "\u2028",
    "é日😀", "a\rb", "#", "}", "- minus", "+ plus", "diff --git a/x b/x", "```", "A = 1"]
file_lines = st.lists(
    st.one_of(st.sampled_from(LINE_POOL),
              st.text(alphabet=st.characters(blacklist_characters="\n\r",
                                             blacklist_categories=["Cs"]), max_size=10)),
    max_size=25)
file_text = st.tuples(file_lines, st.booleans()).map(
    lambda t: "\n".join(t[0]) + ("\n" if t[1] and t[0] else ""))
PATHS = ["pkg/mod.py", "pkg/other.py", "pkg/new.py", "a/b.py"]


@st.composite
def changes(draw):
    """``(files, after)``: random originals and a random change of them (edits, creations,
    deletions)."""
    files = {p: draw(file_text)
             for p in draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3, unique=True))}
    after = {}
    for path in draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=3, unique=True)):
        if path in files and draw(st.integers(0, 5)) == 0:
            after[path] = None  # delete
        elif path in files:  # mutate some lines
            lines = files[path].split("\n")
            for _ in range(draw(st.integers(1, 4))):
                at = draw(st.integers(0, len(lines)))
                op = draw(st.sampled_from(["insert", "delete", "replace"]))
                new = draw(st.sampled_from(LINE_POOL))
                if op == "insert":
                    lines.insert(at, new)
                elif lines and at < len(lines):
                    lines[at:at + 1] = [] if op == "delete" else [new]
            after[path] = "\n".join(lines)
        else:
            after[path] = draw(file_text.filter(bool))
    return files, after


def _effective(files, after) -> dict:
    """The change modulo trailing whitespace (what the reward compares)."""
    return {p: normalize_content(t) for p, t in after.items() if normalize_content(files.get(p)) !=
            normalize_content(t) or (t is None) != (files.get(p) is None)}


@fuzz("swe.diff_roundtrip")
@given(change=changes())
def test_any_change_rendered_as_a_diff_applies_back_to_itself(change):
    """render_unified_diff → apply_answer is the identity on contents (modulo trailing whitespace)
    for any files and any change, including lines that look like diff headers, hunk markers or '\\
    No newline'."""
    ran("swe.diff_roundtrip")
    files, after = change
    diff = render_unified_diff(files, after)
    if not diff:
        return
    got = apply_answer(diff, files)
    assert _effective(files, got) == _effective(files, after), diff
    label = {"golden_patch": diff, "files": files, "problem_statement": "x"}
    if _effective(files, after):
        assert swe_reward(diff, label) == 1.0


@fuzz("swe.reward")
@given(response=st.one_of(diff_like, st.text(max_size=300),
                          st.tuples(st.sampled_from(["", "<think>", "<think>x</think>"]),
                                    diff_like).map("".join),
                          st.none(), st.integers()))
def test_swe_reward_is_a_score_in_range_for_any_response(response):
    ran("swe.reward")
    scores, details = SWEReward().verdicts([response], [LABEL])
    assert (-1.0 <= scores[0] <= 1.0 and math.isfinite(scores[0])
            and details[0]["outcome"] in OUTCOMES)


def test_huge_and_unicode_diffs_score_in_range():
    cases = {
        "1MB-unicode-hunk": "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n-def f(x):\n+"
                            + "日\u2028" * (MB // 2),
        "1MB-of-context": "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n"
                          + " def f(x):\n" * (MB // 11),
        "bom-and-crlf": "\ufeff" + GOLDEN.replace("\n", "\r\n"),
        "nul-in-path": GOLDEN.replace("pkg/mod.py", "pkg/mod.py\x00"),
        "cr-only-endings": GOLDEN.replace("\n", "\r"),
        "100k-files": "".join(f"--- a/f{i}.py\n+++ b/f{i}.py\n@@ -1 +1 @@\n-a\n+b\n"
                              for i in range(100_000)),
    }
    for name, response in cases.items():
        ran("swe.reward")
        score = swe_reward(response, LABEL)
        assert -1.0 <= score <= 1.0, name
    assert swe_reward(cases["bom-and-crlf"], LABEL) in (-1.0, 1.0)


# ------------------------------------------------------------- code-switch detector and its penalty

@fuzz("language.code_switch")
@given(text=st.one_of(st.text(max_size=200),
                      st.lists(st.sampled_from([
                          "$", "$$", "`", "```", "\\(", "\\)", "\\[", "\\]", "\\frac", "中文", "ab",
                          "\n", "Привет", "α", "𝑥", " "]), max_size=40).map("".join)),
       script=st.sampled_from(sorted(language.EXPECTED_SCRIPTS)),
       rewards=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=4),
       penalty=st.one_of(st.none(), st.floats(-10, 10), st.just(language.BATCH_MIN_MINUS_10)),
       rule=st.sampled_from(language.CODE_SWITCH_RULES))
def test_code_switch_detector_and_penalty_on_any_text(text, script, rewards, penalty, rule):
    ran("language.code_switch")
    foreign, letters = language.foreign_letter_counts(text, script)
    assert 0 <= foreign <= letters
    flag = language.is_code_switched(text, script)
    assert flag in (True, False)
    # the same text as a prompt: data, never an error
    allowed = language.reply_scripts(text, rule, script)
    assert allowed is None or "latin" in allowed
    echo = language.is_code_switched_reply(text, text, rule, script)
    # a prompt's own language passes
    assert echo in (True, False) and not (rule == "prompt_language" and echo)
    out = language.apply_code_switch_penalty(rewards, [flag] * len(rewards), penalty)
    assert len(out) == len(rewards) and all(math.isfinite(r) for r in out)


def test_swe_fixes_found_by_fuzzing():
    """A hunk of only '\\ No newline' markers was read as an edit that changes nothing (0 instead of
    Eq. 2's −1 for a malformed hunk); the diff render_unified_diff writes for deleting or creating
    an empty file had no hunk, and applying it failed ("without any hunk")."""
    ran("swe.diff_parser", 3)
    marker_only = "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n\\ No newline at end of file"
    assert swe_reward(marker_only, LABEL) == -1.0
    files = {"pkg/empty.py": "", "pkg/mod.py": "A = 1\n"}
    for after in ({"pkg/empty.py": None}, {"pkg/new.py": ""},
                  {"pkg/empty.py": None, "pkg/mod.py": "A = 2\n"}):
        diff = render_unified_diff(files, after)
        assert apply_answer(diff, files) == after, diff
    # headers alone, no /dev/null: still nothing
    with pytest.raises(PatchError, match="without any hunk"):
        apply_answer("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n", files)
    with pytest.raises(PatchError, match="leaves lines"):  # a hunkless deletion of a non-empty file
        apply_answer("--- a/pkg/mod.py\n+++ /dev/null\n", files)
