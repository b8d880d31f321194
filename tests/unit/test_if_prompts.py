"""synthetic:if_requests (demo_data/if_prompts.py): every row is satisfiable (its reference passes
the project's IFEval checkers), splits are fixed by the request, instruction pairs respect the clash
table, no IFEval prompt is reused, and the set loads through the prompt loader."""
import gzip
import json
from pathlib import Path

import pytest

from nemo_cascade.config import Data
from nemo_cascade.tooling.demo_data.if_prompts import (CLASHES, GROUPS, SLOTS, TEMPLATES,
                                                       if_requests, requests, split_of)
from nemo_cascade.data.loader import load_prompts, load_sft_examples
from nemo_cascade.tooling.demo_data.synthetic_domains import DOMAIN_TASKS
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.rewards import REWARDS, VALIDATORS, get_domain
from nemo_cascade.rewards.ifeval import IFEVAL, per_instruction, validate_label

ROOT = Path(__file__).resolve().parents[2]
# tools/fetch_smollm2.py writes it; absent on a bare checkout
SMOLLM2 = ROOT / "models" / "smollm2-135m-instruct"
REQUIRED = {
    "change_case:english_lowercase", "change_case:english_capital", "punctuation:no_comma",
    "startend:quotation", "startend:end_checker", "detectable_format:title",
    "detectable_format:number_bullet_lists", "detectable_content:postscript",
    "detectable_content:number_placeholders", "detectable_format:number_highlighted_sections",
    "keywords:existence", "keywords:forbidden_words", "keywords:frequency",
    "length_constraints:number_words", "length_constraints:number_sentences",
    "length_constraints:number_paragraphs", "detectable_format:json_format",
    "combination:repeat_prompt", "change_case:capital_word_frequency",
    "detectable_format:constrained_response"}


@pytest.fixture(scope="module")
def rows():
    return {split: if_requests(split, 0, 0) for split in ("train", "test")}


def _all(rows):
    return rows["train"] + rows["test"]


def test_every_reference_response_passes_every_instruction(rows):
    for row in _all(rows):
        validate_label(row["label"])
        assert row["label"] == {k: row[k] for k in ("prompt", "instruction_id_list", "kwargs")}
        verdicts = per_instruction(row["response"], row["label"])
        assert all(verdicts), (row["prompt"], row["response"], verdicts)
    sample = _all(rows)[::50]  # the domain's reward (the one the IF-RL stage calls) agrees
    assert all(REWARDS["ifeval"](r["response"], r["label"]) == 1.0 for r in sample)


def test_instructions_are_not_free(rows):
    """A plain answer that ignores the instructions fails most rows: the set has signal for RL."""
    plain = "This is my answer, written plainly. It has a comma and says nothing special."
    failed = [REWARDS["ifeval"](plain, r["label"]) == 0.0 for r in _all(rows)]
    assert sum(failed) / len(failed) > 0.85


def test_sizes_and_splits_are_fixed_by_the_request(rows):
    train, test = ({r["uid"] for r in rows[s]} for s in ("train", "test"))
    assert len(train) == len(rows["train"]) and len(test) == len(rows["test"]) and not train & test
    assert len(train) + len(test) >= 3000 and 0.07 < len(test) / (len(train) + len(test)) < 0.13
    assert all(split_of(u) == "train" for u in train) and all(split_of(u) == "test" for u in test)
    # a held-out request is never trained on under other instructions
    base = {s: {r["uid"].split("#")[0] for r in rows[s]} for s in rows}
    assert not base["train"] & base["test"]
    assert len({r["prompt"] for r in _all(rows)}) == len(train) + len(test)
    # seed and size never move a row between splits; the seed orders, reproducibly
    assert {r["uid"] for r in if_requests("test", 0, 7)} == test
    assert {r["uid"] for r in if_requests("train", 40, 3)} <= train
    assert ([r["uid"] for r in if_requests("train", 40, 3)]
            == [r["uid"] for r in if_requests("train", 40, 3)])
    assert ([r["uid"] for r in if_requests("train", 40, 3)]
            != [r["uid"] for r in if_requests("train", 40, 4)])
    with pytest.raises(ValueError, match="exceeds"):
        if_requests("test", len(test) + 1, 0)
    with pytest.raises(ValueError, match="split"):
        if_requests("dev", 1, 0)


def test_requests_are_many_short_and_varied():
    reqs = requests()
    assert len({r[0] for r in reqs}) == len(reqs) >= 400
    # many shapes and topics
    assert len(TEMPLATES) >= 15 and sum(len(v) for v in SLOTS.values()) >= 60
    # repeatable under no_comma; short
    assert all("," not in r[0] and len(r[0].split()) <= 16 for r in reqs)


def test_instruction_coverage_and_no_clashing_pair(rows):
    group_of = {i: g for g, ids in GROUPS.items() for i in ids}
    assert set(group_of) <= set(IFEVAL)
    seen = set()
    for row in _all(rows):
        ids = row["instruction_id_list"]
        assert len(ids) in (1, 2) and len({group_of[i] for i in ids}) == len(ids), ids
        assert frozenset(ids) not in CLASHES, ids
        seen.update(ids)
    assert len(seen) >= 15 and REQUIRED <= seen, REQUIRED - seen
    assert {len(r["instruction_id_list"]) for r in _all(rows)} == {1, 2}
    # the pairs the task names as unsatisfiable are excluded (by the table or by sharing a group)
    for a, b in [("startend:quotation", "detectable_format:number_bullet_lists"),
                 ("change_case:english_lowercase", "change_case:english_capital"),
                 ("detectable_format:json_format", "detectable_format:title")]:
        assert frozenset((a, b)) in CLASHES or group_of[a] == group_of[b]


def test_kwargs_fit_a_small_model(rows):
    for row in _all(rows):
        for iid, kw in zip(row["instruction_id_list"], row["kwargs"]):
            if iid == "length_constraints:number_words" and kw["relation"] == "at least":
                assert kw["num_words"] <= 100
            if iid == "length_constraints:number_sentences" and kw["relation"] == "at least":
                assert kw["num_sentences"] <= 6
            # IFEval's shape: everything before the repeat sentence
            if iid == "combination:repeat_prompt":
                assert row["prompt"].startswith(
                    kw["prompt_to_repeat"] + "\nFirst repeat the request")


def test_disjoint_from_ifeval_prompts(rows):
    with gzip.open(ROOT / "data" / "ifeval" / "input_data.jsonl.gz", "rt", encoding="utf-8") as f:
        ifeval = [json.loads(line)["prompt"].strip() for line in f if line.strip()]
    assert len(ifeval) == 541
    lowered = [p.lower() for p in ifeval]
    for row in _all(rows):
        assert not any(p in row["prompt"]
                       for p in ifeval if len(p) <= len(row["prompt"])), row["prompt"]
    for request, *_ in requests():
        assert not any(request.lower() in p for p in lowered), request


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def test_loads_through_the_prompt_loader(tok, rows):
    assert DOMAIN_TASKS["if_requests"] is if_requests
    data = Data(source="synthetic:if_requests", size=12, split="test", seed=1)
    prompts = load_prompts(data, tok, "no_think", get_domain("ifeval"), 512,
                           validate_label=VALIDATORS["ifeval"])
    expected = if_requests("test", 12, 1)
    assert len(prompts) == 12 and prompts.dropped_too_long == 0
    assert [p.uid for p in prompts] == [r["uid"] for r in expected]
    assert [p.label for p in prompts] == [r["label"] for r in expected]
    assert all(p.domain == "ifeval" and p.mode == "no_think" for p in prompts)
    assert expected[0]["prompt"] in tok.decode(prompts[0].prompt_tokens)
    sft = load_sft_examples(Data(source="synthetic:if_requests", size=4), tok, "no_think", 512)
    assert len(sft) == 4 and all(r[-1] == tok.eos_token_id for _, r in sft)


@pytest.mark.skipif(not (SMOLLM2 / "tokenizer.json").exists(),
                    reason="SmolLM2 not extracted (tools/fetch_smollm2.py)")
def test_lengths_fit_smollm2(rows):
    """Prompts stay within ~100 SmolLM2 tokens and the reference answers within ~200 (the stage's
    budgets)."""
    from transformers import AutoTokenizer

    smol = AutoTokenizer.from_pretrained(SMOLLM2)
    sample = _all(rows)[::5]
    assert max(len(smol.encode(r["prompt"])) for r in sample) <= 100
    assert max(len(smol.encode(r["response"])) for r in sample) <= 200
    prompts = load_prompts(Data(source="synthetic:if_requests", size=8, split="test"), smol,
                           "no_think", get_domain("ifeval"),
                           160, validate_label=VALIDATORS["ifeval"])
    assert len(prompts) == 8
