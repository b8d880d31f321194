"""A reward domain is one object in one registry: the registry agrees with the config's list and the suites, and
a domain defined in a test alone loads rows, validates labels, scores through the stage scorer, sets its code-switch
default and reports its metrics — in training and in evaluation — without any other module edited."""
import json
import re
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.data.loader import DataError, load_prompts
from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.evaluate import eval_output, runner
from nemo_cascade.evaluate.suites import REGISTERED_SUITES, SUITES, Suite, load_rows
from nemo_cascade.rewards import (DOMAINS, REWARDS, VALIDATORS, RewardDomain, adapt_row, get_domain,
                                  penalize_code_switching, register, resolve_code_switch_rule,
                                  reward_metrics, stage_scorer, training_validator)
from nemo_cascade.rewards.reward_domain import without_details
from nemo_cascade.types import Prompt, PromptGroup


def test_the_registry_holds_exactly_the_config_s_domains():
    """config.REWARD_DOMAINS is what configs validate against (config cannot import the registry): a domain added
    to one and not the other fails here."""
    assert set(DOMAINS) == set(config.REWARD_DOMAINS)
    assert all(name == d.name for name, d in DOMAINS.items())


def test_every_suite_is_scored_by_a_registered_domain():
    assert {s.domain for s in (*SUITES.values(), *REGISTERED_SUITES.values())} <= set(DOMAINS)


def test_views_follow_the_registry():
    assert set(VALIDATORS) == set(DOMAINS)
    assert set(REWARDS) == set(DOMAINS) - {"rlhf", "arena"}  # they need a served RM / judge
    assert REWARDS["math"]("\\boxed{4}", "4") == 1.0


# ------------------------------------------------------------------------------------------ a toy domain

def _adapt(row, where):
    if not isinstance(row.get("word"), str):
        raise SchemaError(f"{where}: expected field 'word' (a string)")
    return [{"role": "user", "content": f"Spell {row['word']} backwards."}], {"reversed": row["word"][::-1]}


def _validate(label):
    if not (isinstance(label, dict) and isinstance(label.get("reversed"), str)):
        raise ValueError("toy label: expected {'reversed': str}")


def _verdicts(settings):
    def batch(responses, labels):
        scores = [1.0 if r.strip() == lab["reversed"] else 0.0 for r, lab in zip(responses, labels)]
        return scores, [{"exact": s == 1.0} for s in scores]
    return batch


def _metrics(details):
    return {"toy/exact": sum(d["exact"] for d in details) / len(details)}


TOY = RewardDomain("toy", _adapt, _validate, _verdicts, code_switch_penalty=-3.0, code_switch_rule="fixed_script",
                   batch_metrics=_metrics, eval_metrics=lambda records: {"toy/records": len(records)},
                   report_notes=lambda m: [f"{m['toy/records']} toy records"])


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY
    finally:
        del DOMAINS["toy"]


class Tok:  # the loader only needs encode()
    def encode(self, text, add_special_tokens=False):
        return list(range(len(text.split())))


def test_a_registered_domain_runs_end_to_end(toy, tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ({"word": "abc"}, {"word": "stressed"})) + "\n")
    prompts = load_prompts(config.Data(source=str(path)), Tok(), "no_think", get_domain("toy"), 512,
                           validate_label=training_validator("toy", config.Data()))
    assert [p.label for p in prompts] == [{"reversed": "cba"}, {"reversed": "desserts"}]
    assert VALIDATORS["toy"] is _validate and "toy" not in REWARDS

    groups = [PromptGroup(prompt=p, response_tokens_G_T=[[1], [1]], rollout_logprobs_G_T=[[0.0], [0.0]],
                          finish_reason_G=["stop"] * 2, response_text_G=texts)
              for p, texts in zip(prompts, (["cba", "abc"], ["desserts", "desserts"]))]
    stage_scorer(["toy"], config.Reward()).score(groups)
    assert [g.rewards_G for g in groups] == [[1.0, 0.0], [1.0, 1.0]]
    assert reward_metrics(groups) == {"toy/exact": 0.75}
    assert resolve_code_switch_rule("toy", "auto") == "fixed_script"
    groups[0].response_text_G = ["cba", "Ответ: abc"]  # Cyrillic in a Latin-script prompt's answer
    assert penalize_code_switching(groups, "auto") == 1 and groups[0].rewards_G == [1.0, -3.0]


def test_a_registered_domain_s_rows_and_labels_fail_in_one_line(toy, tmp_path):
    with pytest.raises(SchemaError, match=r"^t.jsonl:3: expected field 'word'"):
        adapt_row("toy", {"text": "x"}, "t.jsonl:3")
    path = tmp_path / "toy.jsonl"
    path.write_text(json.dumps({"prompt": "p", "label": {"reversed": 3}}) + "\n")
    with pytest.raises(DataError, match=r"toy.jsonl:1: toy label: expected"):
        load_prompts(config.Data(source=str(path)), Tok(), "no_think", get_domain("toy"), 512,
                     validate_label=VALIDATORS["toy"])


def test_a_registered_domain_s_suite_reports_its_metrics(toy, tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text(json.dumps({"uid": "a", "messages": [{"role": "user", "content": "abc"}],
                                "label": {"reversed": "cba"}}) + "\n")
    suite = Suite("tiny-toy", "toy", "toy", load_rows("toy"), lambda: path, mode="no_think", samples=2,
                  max_tokens=8, metric="exact", paper="a test")
    assert runner._reward_settings(suite, runner.EvalSettings(judge_url="http://x")).judge_url == ""
    records = [{"uid": "a", "too_long": False, "values": [1.0, 0.0], "correct": [True, False],
                "scores": [1.0, 0.0], "finish_reasons": ["stop", "stop"], "response_tokens": [1, 1]}]
    metrics = runner.suite_metrics(suite, records)
    assert metrics["toy/records"] == 1 and metrics["avg@2"] == 0.5
    doc = {"suites": {"tiny-toy": {"domain": "toy", "metric": "exact", "metrics": metrics, "data": {"items": 1},
                                   "seconds": {"total": 1.0}, "decoding": {
                                       "samples": 2, "mode": "no_think", "temperature": 0.6, "top_p": 0.95,
                                       "max_tokens": 8}}}}
    assert "1 toy records" in eval_output.markdown(doc)


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="'toy' is already registered"):
        register(TOY)


def test_the_docs_worked_example_is_a_working_domain():
    """docs/rewards.md "Adding a reward domain": its module, run as nemo_cascade/rewards/reverse.py would be."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "rewards.md").read_text()
    code = re.search(r"```python\n(# nemo_cascade/rewards/reverse\.py.*?)```", text, re.S).group(1)
    module = {"__name__": "nemo_cascade.rewards.reverse", "__package__": "nemo_cascade.rewards"}
    exec(compile(code, "docs/rewards.md", "exec"), module)
    register(module["DOMAIN"])
    try:
        messages, label = adapt_row("reverse", {"word": "abc"}, "r.jsonl:1")
        VALIDATORS["reverse"](label)
        prompt = Prompt(prompt_tokens=[1], domain="reverse", label=label, user_text=messages[-1]["content"])
        groups = [PromptGroup(prompt=prompt, response_tokens_G_T=[[1], [1]], rollout_logprobs_G_T=[[0.0], [0.0]],
                              finish_reason_G=["stop"] * 2, response_text_G=["cba", "abc"])]
        stage_scorer(["reverse"]).score(groups)
        assert groups[0].rewards_G == [1.0, 0.0] and reward_metrics(groups) == {"reverse/exact": 0.5}
    finally:
        del DOMAINS["reverse"]
