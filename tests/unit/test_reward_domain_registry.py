"""A reward domain is one object in one registry: the registry agrees with the config's list and the
suites, and a domain defined in a test alone loads rows, validates labels, scores through the stage
scorer, sets its code-switch default and reports its metrics — in training and in evaluation —
without any other module edited."""
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
                                  reward_metrics, stage_scorer, training_validator, unregister)
from nemo_cascade.rewards.reward_domain import without_details
from nemo_cascade.types import Prompt, PromptGroup


def test_the_registry_holds_exactly_the_config_s_domains():
    """config.REWARD_DOMAINS is what configs validate against (config cannot import the registry): a
    domain added to one and not the other fails here."""
    assert set(DOMAINS) == set(config.REWARD_DOMAINS)
    assert all(name == d.name for name, d in DOMAINS.items())


def test_every_suite_is_scored_by_a_registered_domain():
    assert {s.domain for s in (*SUITES.values(), *REGISTERED_SUITES.values())} <= set(DOMAINS)


def test_views_follow_the_registry():
    assert set(VALIDATORS) == set(DOMAINS)
    assert set(REWARDS) == set(DOMAINS) - {"rlhf", "arena"}  # they need a served RM / judge
    assert REWARDS["math"]("\\boxed{4}", "4") == 1.0


# ------------------------------------------------------------------------------------- a toy domain

def _adapt(row, where):
    if not isinstance(row.get("word"), str):
        raise SchemaError(f"{where}: expected field 'word' (a string)")
    return [{"role": "user",
             "content": f"Spell {row['word']} backwards."}], {"reversed": row["word"][::-1]}


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


TOY = RewardDomain("toy", _adapt, _validate, _verdicts, code_switch_penalty=-3.0,
                   code_switch_rule="fixed_script", batch_metrics=_metrics,
                   eval_metrics=lambda records: {"toy/records": len(records)},
                   report_notes=lambda m: [f"{m['toy/records']} toy records"])


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY
    finally:
        unregister("toy")


class Tok:  # the loader only needs encode()
    def encode(self, text, add_special_tokens=False):
        return list(range(len(text.split())))


def test_a_registered_domain_runs_end_to_end(toy, tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text("\n".join(json.dumps(r)
                              for r in ({"word": "abc"}, {"word": "stressed"})) + "\n")
    prompts = load_prompts(config.Data(source=str(path)), Tok(), "no_think", get_domain("toy"), 512,
                           validate_label=training_validator("toy", config.Data()))
    assert [p.label for p in prompts] == [{"reversed": "cba"}, {"reversed": "desserts"}]
    assert VALIDATORS["toy"] is _validate and "toy" not in REWARDS

    groups = [
        PromptGroup(prompt=p, response_tokens_G_T=[[1], [1]], rollout_logprobs_G_T=[[0.0], [0.0]],
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
    suite = Suite("tiny-toy", "toy", "toy", load_rows("toy"), lambda: path, mode="no_think",
                  samples=2, max_tokens=8, metric="exact", paper="a test")
    assert runner._reward_settings(suite, runner.EvalSettings(judge_url="http://x")).judge_url == ""
    records = [{
        "uid": "a", "too_long": False, "values": [1.0, 0.0], "correct": [True, False],
        "scores": [1.0, 0.0], "finish_reasons": ["stop", "stop"], "response_tokens": [1, 1]}]
    metrics = runner.suite_metrics(suite, records)
    assert metrics["toy/records"] == 1 and metrics["avg@2"] == 0.5
    doc = {
        "suites": {
            "tiny-toy": {
                "domain": "toy", "metric": "exact", "metrics": metrics, "data": {"items": 1},
                "seconds": {"total": 1.0}, "decoding": {
                    "samples": 2, "mode": "no_think", "temperature": 0.6, "top_p": 0.95,
                    "max_tokens": 8}}}}
    assert "1 toy records" in eval_output.markdown(doc)


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="'toy' is already registered"):
        register(TOY)


def _scored_by_the_stage_scorer(domain: str, label, responses: list[str]) -> PromptGroup:
    prompt = Prompt(prompt_tokens=[1], domain=domain, label=label, user_text="")
    group = PromptGroup(prompt=prompt, response_tokens_G_T=[[1]] * len(responses),
                        rollout_logprobs_G_T=[[0.0]] * len(responses),
                        finish_reason_G=["stop"] * len(responses), response_text_G=responses)
    stage_scorer([domain]).score([group])
    return group


def test_the_docs_plugin_is_a_working_domain_loaded_once(tmp_path):
    """docs/rewards.md "A domain of your own": its plugin file, loaded as its recipe loads it
    (twice, as a test or two recipes would: registered once); the domain scores through the stage
    scorer and a config naming it validates, until it is unregistered."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "rewards.md").read_text()
    code = re.search(r"```python\n(# reverse\.py\n.*?)```", text, re.S).group(1)
    (tmp_path / "reverse.py").write_text(code)
    first = config.load_plugin(tmp_path / "reverse.py")
    model = config.Model(build="tiny-qwen3")
    stage = config.Stage(name="r", kind="grpo", domain="reverse",
                         data=config.Data(source="w.jsonl"))
    try:
        assert config.load_plugin(str(tmp_path / "reverse.py")) is first
        assert "reverse" in config.REWARD_DOMAINS
        assert REGISTERED_SUITES["reverse-words"].domain == "reverse"
        _, label = adapt_row("reverse", {"word": "abc"}, "r.jsonl:1")
        VALIDATORS["reverse"](label)
        group = _scored_by_the_stage_scorer("reverse", label, ["cba", "abc"])
        assert group.rewards_G == [1.0, 0.0]
        assert reward_metrics([group]) == {"reverse/exact": 0.5}
        config.validate(config.Cascade(name="r", model=model, stages=(stage,)))
    finally:
        unregister("reverse")
        del REGISTERED_SUITES["reverse-words"]
    unknown = r"stages\.r\.domain: expected one of .*got 'reverse'"
    with pytest.raises(config.ConfigError, match=unknown):
        config.validate(config.Cascade(name="r", model=model, stages=(stage,)))


def test_a_plugin_that_is_missing_or_fails_is_one_line(tmp_path):
    with pytest.raises(config.ConfigError, match=r"^plugin .*nope\.py: no such Python file$"):
        config.load_plugin(tmp_path / "nope.py")
    (tmp_path / "bad.py").write_text("x = 1\nraise KeyError('word')\n")
    raised = r"bad\.py: raised KeyError: 'word' \(.*bad\.py:2\)$"
    with pytest.raises(config.ConfigError, match=raised):
        config.load_plugin(tmp_path / "bad.py")
    # on a batch host without the stack, a recipe whose plugin needs it is "not checked here"
    from nemo_cascade.config.recipe_file import RecipeImportError, load_recipe

    (tmp_path / "needs.py").write_text("import no_such_stack_module\n")
    (tmp_path / "recipe.py").write_text(
        "from pathlib import Path\nfrom nemo_cascade.config import load_plugin\n"
        "load_plugin(Path(__file__).with_name('needs.py'))\n")
    with pytest.raises(RecipeImportError, match=r"^plugin .*needs\.py: raised ModuleNotFoundError"):
        load_recipe(str(tmp_path / "recipe.py"))
