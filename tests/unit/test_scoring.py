"""Stage scoring: a Scorer per domain from config.Reward, the batch-level code-switch penalty,
reward metrics, label validation at load time, and the reward settings' config checks."""
import json

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.data.loader import DataError, load_prompts
from nemo_cascade.rewards import (VALIDATORS, MixedScorer, Scorer, apply_code_switch_penalty,
                                  get_domain, penalize_code_switching, resolve_code_switch_penalty,
                                  reward_metrics, stage_scorer)
from nemo_cascade.types import Prompt, PromptGroup


def group(label, texts, domain="math", user_text=""):
    n = len(texts)
    return PromptGroup(
        prompt=Prompt(prompt_tokens=[1], domain=domain, label=label, user_text=user_text),
        response_tokens_G_T=[[2]] * n, rollout_logprobs_G_T=[[-0.1]] * n,
        finish_reason_G=["stop"] * n, response_text_G=list(texts))


@pytest.mark.parametrize("domain, setting, expected", [
    ("math", "auto", -1.0), ("code", "auto", 0.0), ("rlhf", "auto", "batch_min_minus_10"),
    ("ifeval", "auto", None), ("swe", "auto", None), ("math", "none", None), ("code", "-0.5", -0.5),
    ("math", "batch_min_minus_10", "batch_min_minus_10"),
])
def test_resolve_code_switch_penalty(domain, setting, expected):
    assert resolve_code_switch_penalty(domain, setting) == expected


def test_math_scorer_fills_rewards_and_details_across_groups():
    groups = [group("5", ["\\boxed{5}", "no answer"]),
              group("\\frac12", ["\\boxed{0.5}", "\\boxed{2}"])]
    Scorer("math").score(groups)
    assert [g.rewards_G for g in groups] == [[1.0, 0.0], [1.0, 0.0]]
    assert reward_metrics(groups) == {"answer_found": 0.75}


def test_math_scorer_uses_the_configured_answer_pattern():
    groups = [group("42", ["so #### 42", "\\boxed{42}"])]
    Scorer("math", config.Reward(answer_pattern="gsm8k")).score(groups)
    assert groups[0].rewards_G == [1.0, 0.0]


def test_ifeval_scorer_reports_per_instruction_pass_rates():
    label = {"prompt": "Answer in lowercase, no commas.",
             "instruction_id_list": ["change_case:english_lowercase", "punctuation:no_comma"],
             "kwargs": [{}, {}]}
    groups = [group(label, ["all lowercase and no commas here", "Upper Case, With Commas",
                            "lower, but comma"], domain="ifeval")]
    Scorer("ifeval").score(groups)
    assert groups[0].rewards_G == [1.0, 0.0, 0.0]
    assert reward_metrics(groups) == {"if_pass/change_case:english_lowercase": 2 / 3,
                                      "if_pass/punctuation:no_comma": 1 / 3}


def test_code_scorer_runs_the_sandbox():
    label = {"tests": [{"input": "2 3\n", "output": "5\n"}]}
    ok = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    groups = [group(label, [ok, "```python\nprint(6)\n```"], domain="code")]
    Scorer("code", config.Reward(workers=2)).score(groups)
    assert groups[0].rewards_G == [1.0, 0.0]


def test_code_switch_penalty_spans_the_whole_gathered_batch():
    a = group("5", ["\\boxed{5}", "首先计算 \\boxed{5}"])
    b = group("7", ["\\boxed{3}", "\\boxed{7}"])
    a.rewards_G, b.rewards_G = [2.0, 1.5], [-3.0, 0.5]        # e.g. raw reward-model scores
    assert apply_code_switch_penalty([a, b], "batch_min_minus_10") == 1
    # min over both groups: −3 − 10
    assert a.rewards_G == [2.0, -13.0] and b.rewards_G == [-3.0, 0.5]
    c = group("5", ["\\boxed{5}", "首先计算 \\boxed{5}"])
    Scorer("math").score([c])
    assert apply_code_switch_penalty([c], -1.0) == 1
    assert c.rewards_G == [1.0, -1.0]                         # math §4.5: replaced, not decremented
    # counted, rewards untouched
    assert apply_code_switch_penalty([group("5", ["首先计算"])], None) == 1


def test_malformed_label_fails_at_load_time_naming_the_line(tmp_path):
    path = tmp_path / "code.jsonl"
    rows = [{"prompt": "add", "label": {"tests": [{"input": "1", "output": "1"}]}},
            {"prompt": "bad", "label": {"tests": [], "time_limit": 5}}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    class Tok:  # the loader only needs encode()
        def encode(self, text, add_special_tokens=False):
            return list(range(len(text.split())))

    with pytest.raises(DataError,
                       match=r"code.jsonl:2: code label: 'tests' must be a non-empty list"):
        load_prompts(config.Data(source=str(path)), Tok(), "no_think", get_domain("code"), 512,
                     validate_label=VALIDATORS["code"])


def _cfg(**reward):
    stage = config.Stage(name="s", domain=reward.pop("domain", "math"),
                         data=config.Data(source="synthetic:arithmetic"),
                         reward=config.Reward(**reward))
    return config.Cascade(model=config.Model(build="tiny-qwen3"), stages=(stage,))


@pytest.mark.parametrize("reward, message", [
    ({"code_switch_penalty": "minus one"}, "stages.s.reward.code_switch_penalty"),
    ({"code_switch_rule": "chinese_only"},
     "stages.s.reward.code_switch_rule: expected one of .*english_prompt_only"),
    ({"code_switch_script": "klingon"},
     "stages.s.reward.code_switch_script: expected one of .*'chinese'"),
    ({"verify_timeout_s": 0}, "stages.s.reward.verify_timeout_s"),
    ({"workers": -1}, "stages.s.reward.workers"),
    ({"domain": "rlhf"}, "stages.s.reward.reward_model_url"),
    ({"domain": "ifeval", "if_rm_bonus": True}, "stages.s.reward.reward_model_url"),
    ({"domain": "chess"}, "stages.s.domain"),
])
def test_reward_settings_are_validated(reward, message):
    with pytest.raises(config.ConfigError, match=message) as error:
        config.validate(_cfg(**reward))
    assert "\n" not in str(error.value)


def test_reward_override_from_the_command_line():
    cfg = apply_overrides(_cfg(), ["stages.s.reward.code_switch_penalty=-2",
                                   "stages.s.reward.sandbox=unsafe"])
    assert (cfg.stages[0].reward.code_switch_penalty == "-2"
            and cfg.stages[0].reward.sandbox == "unsafe")
    with pytest.raises(config.ConfigError, match="stages.s.reward.sandbox"):
        apply_overrides(_cfg(), ["stages.s.reward.sandbox=docker"])
    cfg = apply_overrides(_cfg(), ["stages.s.reward.code_switch_rule=fixed_script",
                                          "stages.s.reward.code_switch_script=japanese"])
    assert (cfg.stages[0].reward.code_switch_rule,
            cfg.stages[0].reward.code_switch_script) == ("fixed_script", "japanese")
    with pytest.raises(config.ConfigError, match="stages.s.reward.code_switch_rule") as error:
        apply_overrides(_cfg(), ["stages.s.reward.code_switch_rule=english"])
    assert "\n" not in str(error.value)


def test_swe_scorer_reports_which_branch_of_eq2_each_sample_took():
    files = {"pkg/mod.py": "def f(x):\n    return x + 1\n"}
    golden = ("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x + 1\n"
              "+    return x + 2\n")
    label = {"golden_patch": golden, "files": files, "problem_statement": "f should add 2"}
    VALIDATORS["swe"](label)
    same = "```diff\n" + golden + "```"
    other = ("### pkg/mod.py\n<<<<<<< SEARCH\n    return x + 1\n=======\n"
             "    return x + 3\n>>>>>>> REPLACE\n")
    groups = [group(label, [same, "", other, "no edits at all, just prose"], domain="swe")]
    Scorer("swe").score(groups)
    rewards = groups[0].rewards_G
    assert rewards[:2] == [1.0, 0.0] and 0.0 < rewards[2] < 1.0 and rewards[3] == -1.0
    metrics = reward_metrics(groups)
    assert (metrics["swe/matches_golden"] == metrics["swe/unchanged"] == metrics["swe/graded"]
            == 0.25)


# --------------------------------------------------------------- scoring while generating (§4.6.2)

def test_scoring_as_finished_scores_handed_over_groups_and_the_rest_alike():
    from nemo_cascade.rewards import ScoreAsFinished

    def batch():
        return [group("5", ["\\boxed{5}", "x"]), group("7", ["\\boxed{1}", "\\boxed{7}"]),
                group("2", ["\\boxed{2}"] * 2)]

    together = Scorer("math").score(batch())
    for enabled in (True, False):
        groups = batch()
        with ScoreAsFinished(Scorer("math", config.Reward(workers=4)), enabled,
                             group_size=2) as scoring:
            assert (scoring.on_group is None) == (not enabled)
            if enabled:  # the engine hands over groups 2 and 0 as they finish; group 1 never comes
                scoring.on_group(2, groups[2])
                scoring.on_group(0, groups[0])
            assert scoring.finish(groups) is groups
        assert ([g.rewards_G for g in groups] == [g.rewards_G for g in together]
                == [[1, 0], [0, 1], [1, 1]])
        assert [g.reward_details_G for g in groups] == [g.reward_details_G for g in together]


def test_scoring_as_finished_raises_what_a_group_s_scoring_raised():
    from nemo_cascade.rewards import ScoreAsFinished

    bad = group({"tests": "not a list"}, ["print(1)"], domain="code")
    with ScoreAsFinished(Scorer("code"), True, group_size=1) as scoring:
        scoring.on_group(0, bad)
        with pytest.raises(ValueError, match="labels\\[0\\]"):
            scoring.finish([bad])


def test_mixed_scorer_judges_each_group_in_its_own_domain():
    """Mixed-domain RL (Stage.extra_data): the same text is right as a math answer and wrong as an
    IF response."""
    label = {"prompt": "Answer in lowercase.",
             "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}
    text = "so the answer to this question is clearly \\boxed{5} and that is all there is to it"
    math_g, if_g = group("5", [text, "\\boxed{6}"]), group(label, [text, "SHOUT"], domain="ifeval")
    scorer = stage_scorer(("math", "ifeval"), config.Reward())
    assert isinstance(scorer, MixedScorer) and isinstance(stage_scorer(("math",)), Scorer)
    scorer.score([math_g, if_g])
    assert (math_g.rewards_G, if_g.rewards_G) == ([1.0, 0.0], [1.0, 0.0])
    metrics = reward_metrics([math_g, if_g])
    assert (metrics["reward_mean/math"], metrics["prompts/ifeval"]) == (0.5, 1)
    with pytest.raises(ValueError, match="a prompt of domain 'code' in a stage scoring"):
        scorer.score([group({"tests": []}, ["x"], domain="code")])


def test_mixed_batch_gets_each_domain_s_code_switch_penalty():
    """auto: math −1 (§4.5), code 0 (§4.6), each applied to its own domain's groups of one batch."""
    mixed = "答案 answer 是 5"
    math_g, code_g = (group("5", [mixed, "\\boxed{5}"]),
                      group({"tests": []}, [mixed, "fine"], domain="code"))
    math_g.rewards_G, code_g.rewards_G = [1.0, 1.0], [1.0, 1.0]
    assert penalize_code_switching([math_g, code_g], "auto") == 2
    assert (math_g.rewards_G, code_g.rewards_G) == ([-1.0, 1.0], [0.0, 1.0])


# ---- the code-switch rule reads the prompt (§4.3.2, §4.5.2) -------------------------------------

EN_PROMPT = "Write a short note thanking a colleague for their help."
ZH_PROMPT = "请写一段简短的感谢信，感谢同事的帮助。"
JA_PROMPT = "同僚の助けに感謝する短いメモを書いてください。"
RU_PROMPT = "Напишите короткую записку с благодарностью коллеге."
ZH_CODE_PROMPT = "请解释这段代码的作用：\n```python\nprint(sum(range(10)))\n```"


def test_rlhf_penalty_spares_answers_to_non_english_prompts():
    """§4.3.2: batch min − 10 only "when the prompt is purely in English" and the answer is not. A
    Chinese answer to a Chinese prompt (the RLHF prompts are partly multilingual) keeps its
    reward-model score."""
    zh = group({"prompt": ZH_PROMPT}, ["谢谢你的帮助，我非常感激。", "Thank you, 非常感谢!"], "rlhf", ZH_PROMPT)
    ja = group({"prompt": JA_PROMPT}, ["助けてくれてありがとうございました。"], "rlhf", JA_PROMPT)
    ru = group({"prompt": RU_PROMPT}, ["Спасибо за помощь!"], "rlhf", RU_PROMPT)
    code = group({"prompt": ZH_CODE_PROMPT}, ["这段代码打印 45。"], "rlhf", ZH_CODE_PROMPT)
    en = group({"prompt": EN_PROMPT},
               ["Thanks so much for your help!", "Thanks, 非常感谢 for the help!"], "rlhf", EN_PROMPT)
    zh.rewards_G, ja.rewards_G, ru.rewards_G, code.rewards_G, en.rewards_G = (
        [1.5, 0.5], [2.0], [1.0], [0.2], [3.0, -2.0])
    assert penalize_code_switching([zh, ja, ru, code, en], "auto") == 1
    assert ((zh.rewards_G, ja.rewards_G, ru.rewards_G, code.rewards_G)
            == ([1.5, 0.5], [2.0], [1.0], [0.2]))
    assert en.rewards_G == [3.0, -12.0]                    # the batch's minimum (−2) − 10


def test_fixed_script_rule_keeps_the_old_behaviour():
    zh = group({"prompt": ZH_PROMPT}, ["谢谢你的帮助，我非常感激。"], "rlhf", ZH_PROMPT)
    zh.rewards_G = [1.0]
    assert penalize_code_switching([zh], "auto", "fixed_script") == 1
    assert zh.rewards_G == [-9.0]
    zh.rewards_G = [1.0]
    assert penalize_code_switching([zh], "auto", "fixed_script", "chinese") == 0


MATH_ZH = "已知 2x + 3 = 7，求 x 的值。"
MATH_EN = "Given 2x + 3 = 7, find x."


def test_math_penalty_checks_the_answer_against_the_problem_s_language():
    """§4.5.2: −1 for a response in a language other than the problem's, scored by the math Scorer
    a stage uses and the stage's own settings (auto penalty −1 and auto rule), which the scorer
    applies to a whole round."""
    zh = group("2", ["两边减 3 再除以 2，所以 x = 2，答案 \\boxed{2}", "Вычтем 3 и разделим на 2: \\boxed{2}",
                     "两边减 3 (subtract 3) 再除以 2: \\boxed{2}"], user_text=MATH_ZH)
    en = group("2", ["Subtract 3 and halve: \\boxed{2}", "Subtract 3, 然后除以 2: \\boxed{2}"],
               user_text=MATH_EN)
    scorer = Scorer("math", config.Reward())
    scorer.score([zh, en])
    assert scorer.penalize_code_switching([zh, en]) == 2  # the stage loop's call on a whole round
    # Chinese fine (English words neutral); Russian not
    assert zh.rewards_G == [1.0, -1.0, 1.0]
    assert en.rewards_G == [1.0, -1.0]


def test_loaded_prompts_carry_their_user_turns_to_the_rule(tmp_path):
    """The prompt text the rule reads comes from the data: every user turn (not the system prompt,
    not the template), for each templating of a half-half prompt set."""
    path = tmp_path / "rlhf.jsonl"
    rows = [{"messages": [{"role": "system", "content": "You are a helpful assistant."},
                          {"role": "user", "content": "你好，请介绍一下你自己。"},
                          {"role": "assistant", "content": "我是一个助手。"},
                          {"role": "user", "content": "continue"}]},
            {"prompt": EN_PROMPT}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")

    class Tok:
        def encode(self, text, add_special_tokens=False):
            return list(range(len(text.split())))

    prompts = load_prompts(config.Data(source=str(path)), Tok(), "half", get_domain("rlhf"), 512)
    assert [p.user_text for p in prompts] == ["你好，请介绍一下你自己。\n\ncontinue", EN_PROMPT]
    assert [p.user_text for p in prompts.alternate] == [p.user_text for p in prompts]
    answers = ["我很高兴认识你。", "Glad to meet you, 很高兴认识你."]
    groups = [PromptGroup(prompt=p, response_tokens_G_T=[[2]], rollout_logprobs_G_T=[[-0.1]],
                          finish_reason_G=["stop"], response_text_G=[a], rewards_G=[1.0])
              for p, a in zip(prompts, answers)]
    # the Chinese conversation's answer is not flagged
    assert penalize_code_switching(groups, "auto") == 1
    assert [g.rewards_G for g in groups] == [[1.0], [-9.0]]


class _SlowScorer:
    """A scorer whose every call waits until the test lets it go (``release``), then gives each
    sample 1.0."""

    def __init__(self):
        import threading

        self.settings, self.release = config.Reward(workers=2), threading.Event()

    def score(self, groups):
        self.release.wait(10)
        for g in groups:
            g.rewards_G, g.reward_details_G = [1.0] * g.group_size, [{}] * g.group_size
        return groups


def test_scoring_as_finished_keeps_each_group_once_it_is_scored():
    """Rollout checkpoints (runtime/step_rollouts.py) get a group when its score is known; unscored
    at once when scoring waits for the batch."""
    from nemo_cascade.rewards import ScoreAsFinished

    for enabled in (True, False):
        kept, groups = [], [group("5", ["\\boxed{5}", "x"]), group("7", ["\\boxed{7}"] * 2)]
        with ScoreAsFinished(Scorer("math", config.Reward(workers=2)), enabled, 2,
                             keep=lambda i, g: kept.append((i, list(g.rewards_G)))) as scoring:
            assert scoring.on_group is not None
            scoring.on_group(1, groups[1])
            scoring.on_group(0, groups[0])
            scoring.finish(groups)
        assert sorted(kept) == ([(0, [1.0, 0.0]), (1, [1.0, 1.0])] if enabled
                                else [(0, []), (1, [])])


def test_a_stop_while_groups_are_scored_ends_the_wait_keeping_what_was_scored():
    from nemo_cascade.rewards import ScoreAsFinished
    from nemo_cascade.runtime.stop_request import GenerationStopped

    slow, kept, asked = _SlowScorer(), [], []
    groups = [group("5", ["a", "b"]), group("7", ["c", "d"])]

    def should_stop():
        asked.append(True)
        return len(asked) >= 2  # the second look finds a stop request

    with pytest.raises(GenerationStopped):
        with ScoreAsFinished(slow, True, 1, keep=lambda i, g: kept.append(i)) as scoring:
            scoring.on_group(0, groups[0])
            scoring.on_group(1, groups[1])
            with pytest.raises(GenerationStopped):
                scoring.finish(groups, should_stop)
            slow.release.set()  # what scores now still reaches keep before the pool closes
            raise GenerationStopped("as the stage does")
    assert len(asked) == 2 and sorted(kept) == [0, 1]
