"""On-policy distillation (algorithms/distill.py, teachers.py): the per-token teacher advantage and
its loss, the teachers chosen per domain from the gate's rows, held as frozen weights in the real
actor and scored against HF transformers, and the one-line errors for a teacher that cannot
teach."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.algorithms import distill, grpo
from nemo_cascade.config import GRPO, Distill
from nemo_cascade.evaluate.eval_output import write_eval
from nemo_cascade.cascade.teachers import Teacher, Teachers, best_row, check_teacher, resolve
from nemo_cascade.types import Prompt, PromptGroup
from tests.tolerance import Net, assert_close

META = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}


def test_teacher_advantage_is_the_log_prob_gap_on_trained_tokens():
    student = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, 0.0]])
    teacher = torch.tensor([[-0.5, -3.0, -0.5], [-1.0, -1.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    gap = distill.teacher_advantages(student, teacher, mask)
    assert gap.tolist() == [[0.5, -1.0, 0.0], [2.0, 0.0, 0.0]]


def test_importance_weights_are_clipped_ratios():
    mask = torch.ones(1, 3)
    student = torch.log(torch.tensor([[0.9, 0.1, 0.5]]))
    sampler = torch.log(torch.tensor([[0.3, 0.5, 0.5]]))  # ratios 3, 0.2, 1
    w = distill.importance_weights(student, sampler, mask, 0.5, 2.0)
    torch.testing.assert_close(w, torch.tensor([[2.0, 0.5, 1.0]]))


def test_distill_loss_gradient_follows_the_reverse_kl():
    """With the sampler equal to the student and no reward, the gradient is −Σ(t − s)·∇s / n: it
    raises the student's log-prob where the teacher's is higher; the metric is KL(student ‖
    teacher)'s estimate."""
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, requires_grad=True)
    tokens = torch.randint(0, 6, (2, 4))

    def token_logprobs(x):
        return torch.log_softmax(x, -1).gather(-1, tokens[..., None])[..., 0]

    lp = token_logprobs(logits)
    gap = torch.tensor([[0.0, 1.0, -1.0, 0.5], [0.2, 0.0, 0.0, 3.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    num, den, metrics = distill.distill_loss_terms(
        lp, lp.detach() + gap, lp.detach(), torch.zeros(2), mask, GRPO(), Distill()
    )
    (grad,) = torch.autograd.grad(num / den, logits)
    again = logits.detach().requires_grad_()
    (want,) = torch.autograd.grad(-(gap * token_logprobs(again) * mask).sum() / mask.sum(), again)
    torch.testing.assert_close(grad, want)
    kl_sum, count = metrics["reverse_kl"].tolist()
    assert count == 5 and kl_sum == pytest.approx(-0.5)


def test_reward_weight_adds_the_group_advantage():
    lp = torch.zeros(1, 3, requires_grad=True)
    mask = torch.ones(1, 3)
    d = Distill(reward_weight=0.5)
    num, den, _ = distill.distill_loss_terms(
        lp, torch.zeros(1, 3), torch.zeros(1, 3), torch.tensor([2.0]), mask, GRPO(), d
    )
    assert float((num / den).detach()) == pytest.approx(-1.0)  # −w·(0 + 0.5 · 2) per token, w = 1


def _group(prompt, responses, domain):
    return PromptGroup(
        prompt=Prompt(prompt_tokens=prompt, domain=domain, label="1"),
        response_tokens_G_T=responses,
        rollout_logprobs_G_T=[[-0.5] * len(r) for r in responses],
        finish_reason_G=["stop"] * len(responses),
        rewards_G=[1.0] * len(responses),
    )


def test_the_batch_knows_each_positions_sequence_and_domain():
    groups = [
        _group([11, 12], [[21, 22, 23], [24]], "math"),
        _group([13], [[25], [26, 27]], "rlhf"),
    ]
    cfg = GRPO(adv_eps=0.0, share_prompts=False, drop_zero_variance_groups=False)
    batch = grpo.make_batch(groups, cfg, pad_id=99)
    assert batch.domains_S == ["math", "math", "rlhf", "rlhf"]
    assert batch.sequence_B_T.tolist() == [[0, 0, 0, 0, 0], [1, 1, 1, 2, 2], [3, 3, 3, -1, -1]]


# ----------------------------------------------------------------------------------- teachers
def _row(folder: Path, scores: dict[str, tuple[str, float]]) -> Path:
    suites = {}
    for name, (domain, score) in scores.items():
        suites[name] = {
            "suite": name,
            "domain": domain,
            "metric": "accuracy",
            "decoding": {
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": -1,
                "samples": 1,
                "max_tokens": 8,
                "mode": "think",
                "template": "cascade1",
                "seed": 0,
                "max_model_len": 64,
            },
            "data": {"path": "x", "sha256": "0", "items": 1, "limit": 1},
            "metrics": {
                "avg@1": score,
                "stderr": 0.0,
                "pass@1": score,
                "truncated": 0.0,
                "mean_response_tokens": 1.0,
                "too_long": 0,
            },
            "records": [],
            "seconds": {"total": 1.0},
            "reward": {},
        }
    write_eval(folder, suites, META)
    return folder


def test_best_picks_the_row_with_the_highest_mean_over_the_domains_suites(tmp_path):
    rows = [
        (_row(tmp_path / "base", {"m1": ("math", 0.1), "r": ("rlhf", 0.2)}), "BASE"),
        (
            _row(
                tmp_path / "0-sft", {"m1": ("math", 0.5), "m2": ("math", 0.1), "r": ("rlhf", 0.9)}
            ),
            "SFT",
        ),
        (
            _row(
                tmp_path / "1-math", {"m1": ("math", 0.6), "m2": ("math", 0.2), "r": ("rlhf", 0.9)}
            ),
            "M",
        ),
    ]
    assert best_row(rows, "math", "w")[1] == "M"
    assert best_row(rows, "rlhf", "w")[1] == "SFT"  # equal scores: the earlier, less trained row
    with pytest.raises(config.ConfigError, match="code=best needs a gate row with a code suite"):
        best_row(rows, "code", "stages.repair.distill.teachers")
    stage = config.Stage(
        name="repair",
        kind="distill",
        domain="math",
        extra_data=(config.Data(source="x", domain="rlhf"),),
        distill=Distill(teachers=("math=best", "rlhf=sft")),
    )
    teachers = resolve(stage, rows, {"sft": tmp_path / "0-sft"}, "BASE")
    assert [(t.domain, str(t.folder), t.row) for t in teachers] == [
        ("math", "M", "1-math"),
        ("rlhf", str(tmp_path / "0-sft" / "hf"), ""),
    ]


def _cascade(*teachers: str, gate=("tiny-math",)) -> config.Cascade:
    sft = config.Stage(name="sft", kind="sft", data=config.Data(source="synthetic:arithmetic"))
    repair = config.Stage(
        name="repair",
        kind="distill",
        domain="math",
        data=config.Data(source="synthetic:arithmetic"),
        distill=Distill(teachers=teachers),
    )
    return config.Cascade(
        model=config.Model(build="tiny-qwen3"), stages=(sft, repair), gate=config.Gate(suites=gate)
    )


@pytest.mark.parametrize(
    "teachers,gate,message",
    [
        ((), ("tiny-math",), "expected exactly one DOMAIN=SOURCE for each of ['math']"),
        (("math=sft", "math=base"), ("tiny-math",), "expected exactly one DOMAIN=SOURCE"),
        (
            ("code=sft",),
            ("tiny-math",),
            "'code=sft' is not DOMAIN=SOURCE for a domain of the stage's prompts",
        ),
        (
            ("math=later",),
            ("tiny-math",),
            "math=later: expected best, base, an earlier policy stage ['sft']",
        ),
        (("math=best",), (), "math=best picks the gate row that scored highest"),
    ],
)
def test_teacher_settings_are_checked_with_one_line(teachers, gate, message):
    with pytest.raises(config.ConfigError) as e:
        config.validate(_cascade(*teachers, gate=gate))
    assert message in str(e.value) and "\n" not in str(e.value)
    config.validate(_cascade("math=sft"))
    config.validate(_cascade("math=/some/folder"))
    with pytest.raises(config.ConfigError, match="only a distill stage has teachers"):
        cfg = _cascade("math=sft")
        config.validate(replace(cfg, stages=(cfg.stages[0], replace(cfg.stages[1], kind="grpo"))))
    with pytest.raises(config.ConfigError, match=r"0 < ratio_low <= 1 <= ratio_high"):
        cfg = _cascade("math=sft")
        bad = replace(cfg.stages[1], distill=replace(cfg.stages[1].distill, ratio_high=0.9))
        config.validate(replace(cfg, stages=(cfg.stages[0], bad)))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A student and a teacher of one shape and tokenizer (other seeds), and one of another
    vocabulary."""
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    root = tmp_path_factory.mktemp("models")
    build_tiny_tokenizer(root / "tokenizer")
    for name, vocab, seed in (("student", 320, 5), ("teacher", 320, 6), ("wide", 384, 6)):
        make_tiny_hf_model(root / name, vocab_size=vocab, arch="qwen3", seed=seed)
        shutil.copy(root / "tokenizer" / "tokenizer.json", root / name)
    return root


def test_a_teacher_that_cannot_teach_is_one_line(models, tmp_path):
    student = str(models / "student")
    check_teacher(Teacher("math", "t", models / "teacher"), student, "w")
    with pytest.raises(
        config.ConfigError, match=r"math=t: .*wide differs from the student in \['vocab_size'\]"
    ):
        check_teacher(Teacher("math", "t", models / "wide"), student, "w")
    with pytest.raises(
        config.ConfigError, match="holds no config.json; expected a finished HF export"
    ):
        check_teacher(Teacher("math", "t", tmp_path / "missing"), student, "w")
    other_tokens = tmp_path / "retokenized"
    shutil.copytree(models / "teacher", other_tokens)
    tok = json.loads((other_tokens / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    first, second = list(vocab)[40:42]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (other_tokens / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(config.ConfigError, match="tokenizer differs from the student's"):
        check_teacher(Teacher("math", "t", other_tokens), student, "w")


def test_teachers_score_each_domain_as_hf_and_leave_the_student_as_it_was(models, tmp_path):
    from transformers import AutoModelForCausalLM

    from nemo_cascade.actor.megatron import MegatronActor

    student = str(models / "student")
    actor = MegatronActor(student, config.Parallel(micro_batch_size=2))
    before = {n: p.detach().clone() for n, p in actor.model.named_parameters()}
    half = tmp_path / "half-written"  # a teacher whose weights file was cut short
    shutil.copytree(models / "teacher", half)
    weights = (half / "model.safetensors").read_bytes()
    (half / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(
        Exception, match="half-written/model.safetensors: unreadable safetensors file"
    ):
        Teachers(actor, [Teacher("math", "half", half)], student, "w")
    teachers = Teachers(
        actor,
        [Teacher("math", "t", models / "teacher"), Teacher("rlhf", "base", Path(student))],
        student,
        "w",
    )
    assert teachers.bytes == 2 * sum(p.numel() * 4 for p in actor.model.parameters())
    g = torch.Generator().manual_seed(2)
    randint = lambda n: torch.randint(3, 320, (n,), generator=g).tolist()  # noqa: E731
    groups = [
        _group(randint(4), [randint(6), randint(3)], "math"),
        _group(randint(5), [randint(4)], "rlhf"),
    ]
    batch = grpo.make_batch(
        groups, GRPO(drop_zero_variance_groups=False, share_prompts=False), pad_id=0
    )
    got = teachers.logprobs(batch, 0.7)
    for n, p in actor.model.named_parameters():
        assert torch.equal(p, before[n]), f"{n} not swapped back"
    net = Net.of(models / "student", batch.tokens_B_T.shape[1])
    for s, (prompt, response, domain) in enumerate(
        [(g.prompt_tokens, r, g.domain) for g in groups for r in g.response_tokens_G_T]
    ):
        hf = AutoModelForCausalLM.from_pretrained(
            models / ("teacher" if domain == "math" else "student"), torch_dtype=torch.float32
        )
        ids = torch.tensor([prompt + response])
        logits = hf(ids).logits[0, :-1].float() / 0.7
        want = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[len(prompt) - 1 :, 0]
        positions = (batch.sequence_B_T == s) & (batch.loss_mask_B_T > 0)
        assert_close(
            got[positions], want, torch.float32, net.forward_terms(), what=f"{domain} teacher"
        )
    assert float(got[batch.sequence_B_T < 0].abs().sum()) == 0.0
    # the loss the stage trains with, on the real actor
    tensors = {**batch.tensors(), "teacher_logprobs": got}
    actor.configure_optimizer(config.Actor(lr=0.0), 10)
    result = actor.train_step(tensors, partial(distill.distill_loss, GRPO(), Distill()), 0.7)
    assert result.metrics["reverse_kl"] > 0 and "importance_clipped" in result.metrics


def test_the_planner_counts_every_teacher_as_a_parameter_copy_and_a_forward():
    from nemo_cascade.tooling.plan import plan_cascade
    from nemo_cascade.tooling.plan_time import optimizer_seconds, stage_time

    cfg = _cascade("math=sft")
    two = replace(
        cfg.stages[1],
        extra_data=(config.Data(source="synthetic:arithmetic", domain="ifeval"),),
        distill=Distill(teachers=("math=sft", "ifeval=best")),
    )
    plain = replace(cfg.stages[1], kind="grpo", distill=Distill())
    plans = [
        plan_cascade(replace(cfg, stages=(cfg.stages[0], s)), shape="qwen3-8b").stages[1]
        for s in (plain, cfg.stages[1], two)
    ]
    params = plans[1].actor_state - plans[0].actor_state
    assert params > 0 and plans[2].actor_state - plans[0].actor_state == 2 * params
    assert "1 frozen parameter copies" in plans[1].notes[0]
    cascade = plan_cascade(replace(cfg, stages=(cfg.stages[0], two)), shape="qwen3-8b")
    flat = plan_cascade(replace(cfg, stages=(cfg.stages[0], plain)), shape="qwen3-8b")
    t_two = stage_time(two, cascade, 240, 3600).train_s
    t_plain = stage_time(plain, flat, 240, 3600).train_s
    adam = optimizer_seconds(flat.shape.params(), flat.world)  # the student's alone
    assert t_two - adam == pytest.approx((t_plain - adam) * (6 + 2 * 2) / 6)


def test_the_smollm2_repair_recipe_distills_after_math_from_math_and_the_best_row():
    from nemo_cascade.config.recipe_file import load_recipe

    cfg = load_recipe(str(Path(__file__).resolve().parents[2] / "recipes" /
                          "smollm2.py:filtered_with_repair"))
    config.validate(cfg)
    names = [s.name for s in cfg.stages]
    repair = cfg.stages[names.index("math") + 1]
    assert repair.kind == "distill" and repair.grpo.group_size == 4
    assert config.teacher_sources(repair) == {"math": "math", "ifeval": "best"}
    assert config.stage_domains(repair) == ("math", "ifeval")


def test_the_tiny_repair_recipe_repairs_on_demand():
    """recipes/tiny.py:with_repair places no distill stage itself: the gate inserts one after a
    GRPO stage it flags, and RLHF trains on chat prompts of its own, not the math stage's."""
    from nemo_cascade.config.recipe_file import load_recipe

    cfg = load_recipe(str(Path(__file__).resolve().parents[2] / "recipes" / "tiny.py:with_repair"))
    config.validate(cfg)
    assert cfg.gate.on_regression == "repair" and cfg.gate.repair.steps == 12
    assert not [s for s in cfg.stages if s.kind == "distill"]
    rlhf, math = (config.stage_by_name(cfg, n) for n in ("rlhf", "math"))
    assert rlhf.data.source == "synthetic:chat_arithmetic" != math.data.source


