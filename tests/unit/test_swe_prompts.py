"""SWE RL repair prompts built as paper §4.7.1 builds them (nemo_cascade/data/swe_prompts.py): its
two variants, the ground-truth files only and the ground truth plus localized noisy files up to the
stage's prompt limit (at most 5 files, shuffled), one per instance drawn by instance and seed; an
instance whose noisy files do not fit falls back to the ground truth alone, and is dropped only when
that does not fit either — so the 8B's 16K → 24K input curriculum (T13, T20) changes what each
noisy-variant instance shows.

The pure builder is checked with characters as tokens; the loader path with the project's tiny
tokenizer on rows made from SWE-bench Lite golden patches (tests/unit/swe_fixtures.py
``localized_rows``).
"""
from __future__ import annotations

import functools
import json
import random
import re

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_prompts
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.data.swe_prompts import PromptBudget, build_repair_prompt, render_repair_prompt
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.rewards import VALIDATORS, get_domain, adapt_row
from nemo_cascade.rewards.swe import swe_reward

from . import swe_fixtures as fx

K = 1024
ISSUE = "Calling f() crashes with a KeyError when the cache is empty."
TRUTH = {"pkg/cache.py": "CACHE = {}\n\n\ndef f(key):\n    return CACHE[key]\n"}
PATCH = "--- a/pkg/cache.py\n+++ b/pkg/cache.py\n@@ -4,2 +4,2 @@\n def f(key):\n" \
        "-    return CACHE[key]\n+    return CACHE.get(key)\n"


def noisy(n: int, size: int = 120) -> list[tuple[str, str]]:
    """``n`` localized files in rank order, each about ``size`` characters."""
    return [(f"pkg/noise{i}.py",
             "\n".join(f"VALUE_{i}_{j} = {j}" for j in range(size // 14)) + "\n")
            for i in range(n)]


def chars(text: str) -> int:
    return len(text)


def shown_paths(text: str) -> list[str]:
    return re.findall(r"^### (\S+)$",
                      text.split("--- BEGIN FILE ---")[1].split("--- END FILE ---")[0], re.M)


def limit_for(files: list[tuple[str, str]]) -> int:
    """The character budget that fits exactly these files (in this order)."""
    return len(render_repair_prompt(ISSUE, files))


def with_noisy(*args, **kwargs):
    """The builder with every instance drawn for the ground-truth-plus-noisy variant."""
    return build_repair_prompt(*args, truth_only_share=0.0, **kwargs)


# -------------------------------------------------------------------------------------- the builder

def test_ground_truth_then_noisy_files_in_rank_order_while_the_prompt_fits():
    candidates = noisy(6)
    # room for two noisy files, not three
    budget = limit_for(list(TRUTH.items()) + candidates[:2]) + 5
    built = with_noisy(ISSUE, TRUTH, candidates, budget, chars, random.Random(0))
    assert (set(built.files) == {"pkg/cache.py", "pkg/noise0.py", "pkg/noise1.py"}
            and built.noisy == 2)
    assert len(built.text) <= budget
    assert set(shown_paths(built.text)) == set(built.files)
    assert list(built.files) == shown_paths(built.text)  # the label's files in prompt order
    for path, content in built.files.items():
        assert content.rstrip() in built.text


def test_a_noisy_file_that_does_not_fit_is_skipped_for_the_next_one():
    big, small = ("pkg/big.py", "X = 1\n" * 400), noisy(1)[0]
    budget = limit_for(list(TRUTH.items()) + [small]) + 5
    built = with_noisy(ISSUE, TRUTH, [big, small], budget, chars, random.Random(0))
    assert set(built.files) == {"pkg/cache.py", small[0]}


def test_at_most_five_files_and_the_ground_truth_is_not_counted_twice():
    candidates = [("pkg/cache.py", "stale copy\n")] + noisy(8)
    built = with_noisy(ISSUE, TRUTH, candidates, None, chars, random.Random(0))
    assert len(built.files) == 5 and built.noisy == 4
    # the ground truth, not the localizer's copy
    assert built.files["pkg/cache.py"] == TRUTH["pkg/cache.py"]
    # the four best-ranked noisy files
    assert set(built.files) == {"pkg/cache.py", *(p for p, _ in noisy(4))}
    three = with_noisy(ISSUE, TRUTH, noisy(8), None, chars, random.Random(0), max_files=3)
    assert len(three.files) == 3


def test_an_instance_whose_noisy_files_do_not_fit_falls_back_to_its_ground_truth():
    """Before: such an instance was dropped, and none was ever shown its ground truth alone."""
    truth_only = limit_for(list(TRUTH.items()))
    for candidates, budget in ((noisy(4), truth_only + 5), ([], None)):  # none fits; none found
        built = with_noisy(ISSUE, TRUTH, candidates, budget, chars, random.Random(0))
        assert built.files == TRUTH and built.noisy == 0 and built.fell_back
        assert shown_paths(built.text) == ["pkg/cache.py"]
    five = {f"pkg/t{i}.py": "T = 1\n" for i in range(5)}  # no room left for a noisy file
    built = with_noisy(ISSUE, five, noisy(4), None, chars, random.Random(0))
    assert built.files.keys() == five.keys() and built.fell_back
    two = with_noisy(ISSUE, TRUTH, noisy(1), None, chars, random.Random(0), min_noisy_files=2)
    assert two.files == TRUTH and two.fell_back  # fewer noisy files than swe_min_noisy_files


def test_an_instance_is_dropped_only_when_its_ground_truth_alone_does_not_fit():
    truth_only = limit_for(list(TRUTH.items()))
    for share in (0.0, 1.0):
        assert build_repair_prompt(ISSUE, TRUTH, noisy(4), truth_only - 1, chars, random.Random(0),
                                   truth_only_share=share) is None
    six = {f"pkg/t{i}.py": "T = 1\n" for i in range(6)}  # more ground truth than a prompt shows
    assert build_repair_prompt(ISSUE, six, [], None, chars, random.Random(0)) is None


def test_the_ground_truth_only_variant_shows_no_noisy_file_even_when_they_fit():
    built = build_repair_prompt(ISSUE, TRUTH, noisy(4), None, chars, random.Random(0),
                                truth_only_share=1.0)
    assert built.files == TRUTH and built.noisy == 0 and not built.fell_back
    assert shown_paths(built.text) == ["pkg/cache.py"] and "return CACHE[key]" in built.text


def test_the_variant_is_drawn_per_instance_and_seed_whatever_the_limit():
    """Data.swe_truth_only_share of the instances (default 0.5) get the ground truth alone; an
    instance keeps its variant at every prompt limit (the 8B's 16K and 24K stages) and load."""
    def variants(seed: int, budget=None, share=0.5):
        out = []
        for i in range(400):
            rng = random.Random(f"swe-prompt:{seed}:inst-{i}")
            built = build_repair_prompt(ISSUE, TRUTH, noisy(4), budget, chars, rng,
                                        truth_only_share=share)
            out.append(built.noisy == 0)
        return out

    drawn = variants(0)
    assert 0.42 < sum(drawn) / len(drawn) < 0.58
    assert variants(0) == drawn and variants(1) != drawn
    one_fits = limit_for(list(TRUTH.items()) + noisy(1)) + 5
    assert variants(0, budget=one_fits) == drawn
    assert 0.15 < sum(variants(0, share=0.25)) / 400 < 0.35
    assert not any(variants(0, share=0.0)) and all(variants(0, share=1.0))


def test_the_order_is_shuffled_and_fixed_by_the_seed():
    def order(seed):
        built = with_noisy(ISSUE, TRUTH, noisy(4), None, chars, random.Random(seed))
        return shown_paths(built.text)

    # the same instance and seed: the same prompt (a resumed run rebuilds it)
    assert order(3) == order(3)
    orders = {tuple(order(seed)) for seed in range(20)}
    assert len(orders) > 5
    # the ground truth is not always first
    assert {o.index("pkg/cache.py") for o in orders} == set(range(5))


def test_every_prompt_respects_the_budget_after_shuffling():
    for seed in range(30):
        rng = random.Random(seed)
        candidates = noisy(8, size=rng.randrange(50, 400))
        budget = rng.randrange(limit_for(list(TRUTH.items())),
                               limit_for(list(TRUTH.items()) + candidates))
        built = build_repair_prompt(ISSUE, TRUTH, candidates, budget, chars, random.Random(seed))
        assert len(built.text) <= budget and "pkg/cache.py" in built.files and len(built.files) <= 5


# --------------------------------------------------------------------------------------- row schema

def row(**fields) -> dict:
    base = {"instance_id": "pkg__pkg-1", "problem_statement": ISSUE, "patch": PATCH,
            "golden_files": TRUTH,
            "candidate_files": [{"path": p, "content": c} for p, c in noisy(6)]}
    return {k: v for k, v in {**base, **fields}.items() if v is not None}


def test_a_row_with_candidate_files_gets_the_built_prompt_and_its_files_in_the_label():
    messages, label = adapt_row("swe", row(), "swe:1", PromptBudget(None, len,
                                                                    truth_only_share=0.0))
    [turn] = messages
    assert shown_paths(turn["content"]) == list(label["files"]) and len(label["files"]) == 5
    assert label["golden_patch"] == PATCH and label["problem_statement"] == ISSUE
    VALIDATORS["swe"](label)  # the golden patch applies to the shown files
    answer = "### pkg/cache.py\n<<<<<<< SEARCH\n    return CACHE[key]\n=======\n" \
             "    return CACHE.get(key)\n>>>>>>> REPLACE\n"
    assert swe_reward(answer, label) == 1.0
    as_json = row(candidate_files=json.dumps(row()["candidate_files"]),
                  golden_files=json.dumps(TRUTH))
    noisy_only = PromptBudget(None, len, truth_only_share=0.0)
    assert adapt_row("swe", as_json, "swe:2", noisy_only) == (messages, label)


def test_a_row_with_files_and_no_prompt_shows_its_files():
    """Before: the issue text alone was the prompt, without a line of code to edit."""
    messages, label = adapt_row("swe", {"problem_statement": ISSUE, "patch": PATCH,
                                        "relevant_file_contents": TRUTH},
                            "swe:1")
    assert (shown_paths(messages[0]["content"]) == ["pkg/cache.py"]
            and "return CACHE[key]" in messages[0]["content"])


@pytest.mark.parametrize("fields, message", [
    ({"candidate_files": {"pkg/a.py": "x"}},
     "swe:7: field 'candidate_files' must be a list of {path, content}"),
    ({"candidate_files": [{"path": "pkg/a.py"}]},
     "swe:7: 'candidate_files' items must be {file_path, content}"),
    ({"candidate_files": "[{"}, "swe:7: field 'candidate_files' is a string but not JSON"),
    ({"prompt": "Fix it."}, "swe:7: field 'prompt' with 'candidate_files'"),
    ({"golden_files": [{"file_path": 3, "content": "x"}]}, "swe:7: 'golden_files' items must be"),
    ({"problem_statement": " ", "issue": None},
     "swe:7: field 'problem_statement' must be a non-empty string"),
])
def test_malformed_rows_end_in_one_line(fields, message):
    with pytest.raises(SchemaError) as err:
        adapt_row("swe", row(**fields), "swe:7")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_issue_field_is_accepted_for_problem_statement():
    _, label = adapt_row("swe", row(problem_statement=None, issue=ISSUE), "swe:1")
    assert label["problem_statement"] == ISSUE


# --------------------------------------------------------------------------------------- the loader

@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory):
    rows = fx.localized_rows(fx.load_instances(), rows=4, max_file_chars=12_000)
    assert len(rows) == 4
    path = tmp_path_factory.mktemp("swe") / "train.jsonl"
    path.write_text("".join(json.dumps({"uid": r["instance_id"], **r}) + "\n" for r in rows))
    return path, {r["instance_id"]: r for r in rows}


def _load(path, tok, limit, **data):
    return load_prompts(config.Data(source=str(path), **data), tok, "think", get_domain("swe"),
                        limit,
                        validate_label=VALIDATORS["swe"])


def test_the_stage_limit_decides_each_instance_context(rows_file, tok):
    """T13/T20: the 8B's SWE RL runs at 16K input, then 24K: the same rows load with more localized
    context in the second part; every prompt (templated, as the engine sees it) stays within its
    stage's limit."""
    path, rows = rows_file
    noisy_only = dict(min_prompt_tokens=8 * K, swe_truth_only_share=0.0)
    short, long = _load(path, tok, 16 * K, **noisy_only), _load(path, tok, 24 * K, **noisy_only)
    assert [p.uid for p in short] == [p.uid for p in long] and len(short) == 4
    grew = 0
    for a, b in zip(short, long):
        truth = rows[a.uid]
        for p, limit in ((a, 16 * K), (b, 24 * K)):
            assert len(p.prompt_tokens) <= limit
            assert (set(truth["golden_files"]) <= set(p.label["files"])
                    and len(p.label["files"]) <= 5)
            text = tok.decode(p.prompt_tokens)
            assert shown_paths(text) == list(p.label["files"])
            assert swe_reward(fx.search_replace_answer(_instance(truth["instance_id"])),
                              p.label) == 1.0
        shown = lambda p: sum(len(c) for c in p.label["files"].values())  # noqa: E731
        assert shown(b) >= shown(a)
        grew += a.prompt_tokens != b.prompt_tokens
    assert grew >= 3  # the longer limit showed more code for (nearly) every instance
    again = _load(path, tok, 16 * K, **noisy_only)
    # rebuilt identically
    assert [p.prompt_tokens for p in again] == [p.prompt_tokens for p in short]
    reseeded = _load(path, tok, 16 * K, **noisy_only, seed=1)
    # Data.seed: another shuffle
    assert [p.prompt_tokens for p in reseeded] != [p.prompt_tokens for p in short]


def _tokens(tok, issue: str, files) -> int:
    text = render([{"role": "user", "content": render_repair_prompt(issue, files)}], "think")
    return len(tok.encode(text, add_special_tokens=False))


def test_rows_fall_back_to_their_ground_truth_and_drop_only_when_it_does_not_fit(rows_file, tok,
                                                                                  caplog):
    """Before: a row whose noisy files did not fit was dropped; none showed its ground truth."""
    path, rows = rows_file
    truth, one_noisy = {}, {}
    for u, r in rows.items():
        golden, issue = list(r["golden_files"].items()), r["problem_statement"]
        truth[u] = _tokens(tok, issue, golden)
        one_noisy[u] = min(_tokens(tok, issue, [*golden, (c["path"], c["content"])])
                           for c in r["candidate_files"])
    limit = max(truth.values())  # every ground truth fits; not every noisy file next to it
    assert any(one_noisy[u] > limit for u in rows) and any(one_noisy[u] <= limit for u in rows)
    prompts = _load(path, tok, limit, swe_truth_only_share=0.0)
    assert len(prompts) == 4 and prompts.dropped_no_context == 0
    for p in prompts:
        golden = set(rows[p.uid]["golden_files"])
        assert (set(p.label["files"]) == golden) == (one_noisy[p.uid] > limit)  # fell back
        assert shown_paths(tok.decode(p.prompt_tokens)) == list(p.label["files"])
    cut = sorted(truth.values())[1]  # two rows' ground truth fits, two rows' does not
    fewer = _load(path, tok, cut, swe_truth_only_share=0.0)
    assert len(fewer) == 2 and fewer.dropped_no_context == 2 and fewer.dropped_too_long == 0
    assert "dropped 2 of 4 SWE rows whose ground-truth files alone do not fit" in caplog.text
    with pytest.raises(DataError, match=r"no usable rows \(0 longer than max_prompt_tokens=300, 4 "
                                        r"whose ground truth alone fits no prompt in "
                                        r"data.swe_max_files=5\)"):
        _load(path, tok, 300)


def test_each_instance_keeps_its_variant_at_every_limit(rows_file, tok):
    """data.swe_truth_only_share (default 0.5): the instances drawn for the ground truth alone show
    it at 16K and at 24K; the others show noisy files at both (every noisy file here fits 16K)."""
    path, rows = rows_file

    def truth_only(limit: int, **data) -> set:
        prompts = _load(path, tok, limit, **data)
        return {p.uid for p in prompts if set(p.label["files"]) == set(rows[p.uid]["golden_files"])}

    drawn = truth_only(16 * K)
    assert 0 < len(drawn) < 4 and truth_only(24 * K) == drawn
    assert truth_only(16 * K, seed=1) != drawn  # another data seed, another draw
    assert truth_only(16 * K, swe_truth_only_share=1.0) == set(rows)


@functools.lru_cache(maxsize=None)
def _instances() -> dict:
    return {inst.instance_id: inst for inst in fx.load_instances()}


def _instance(instance_id: str) -> fx.Instance:
    return _instances()[instance_id]


# ------------------------------------------------------------------------------------------ config

@pytest.mark.parametrize("override, message", [
    ("stages.math.data.swe_max_files=0", "stages.math.data.swe_max_files: expected >= 1, got 0"),
    ("stages.math.data.swe_min_noisy_files=5",
     "stages.math.data.swe_min_noisy_files: expected 0 to swe_max_files - 1 = 4, got 5"),
    ("stages.math.data.swe_min_noisy_files=-1",
     "stages.math.data.swe_min_noisy_files: expected 0 to"),
    ("stages.math.data.swe_truth_only_share=1.5",
     "stages.math.data.swe_truth_only_share: expected a probability in [0, 1], got 1.5"),
    ("stages.math.reward.judge_reasoning_tokens=-1",
     "stages.math.reward.judge_reasoning_tokens: expected >= 0"),
])
def test_bad_settings_name_the_field(override, message):
    from pathlib import Path

    from nemo_cascade.tooling.cli import load_recipe

    tiny = load_recipe(
        str(Path(__file__).resolve().parents[2] / "recipes" / "tiny.py") + ":math_only")
    with pytest.raises(config.ConfigError) as err:
        apply_overrides(tiny, [override])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_defaults_are_the_papers():
    assert (config.Data().swe_max_files, config.Data().swe_min_noisy_files) == (5, 1)  # §4.7.1
    assert config.Data().swe_truth_only_share == 0.5  # §4.7.1: two variants, no ratio: even
    # App. C.2: the judge answers <judgement>YES</judgement> at once
    assert config.Reward().judge_reasoning_tokens == 0
