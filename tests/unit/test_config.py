"""Typed config: overrides, validation, serialisation, recipe loading and the CLI's one-line
errors."""
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")


@pytest.fixture
def tiny():
    return load_recipe(TINY + ":math_only")


def test_overrides_reach_nested_fields(tiny):
    cfg = apply_overrides(tiny, [
        "stages.math.steps=5", "parallel.tp=2", "stages.1.rollout.temperature=0.6",
        "stages.*.actor.lr=1e-4", "wandb=true", "stages.math.grpo.overlong=filter"])
    math = config.stage_by_name(cfg, "math")
    assert math.steps == 5 and cfg.parallel.tp == 2 and math.rollout.temperature == 0.6
    assert all(s.actor.lr == 1e-4 for s in cfg.stages) and cfg.wandb is True
    assert math.grpo.overlong == "filter"
    assert config.stage_by_name(tiny, "math").steps != 5, \
        "the original config is frozen and unchanged"


@pytest.mark.parametrize("override,message", [
    ("bogus=1", "bogus: unknown key 'bogus'; expected one of"),
    ("parallel.tq=2", "parallel.tq: unknown key 'tq'"),
    ("parallel.tp=two", "parallel.tp: expected int, got 'two'"),
    ("stages.math.grpo.overlong=drop",
     "stages.math.grpo.overlong: expected one of ['none', 'filter', 'zero']"),
    ("stages.rlhf.steps=3", "stages.rlhf.steps: no stage 'rlhf'; stages are ['sft', 'math']"),
    ("parallel=3", "parallel: 'parallel' is a section"),
    ("stages.math.steps", "expected KEY=VALUE"),
    ("stages.math.steps=0", "stages.math.steps: expected >= 1, got 0"),
    ("stages.math.grpo.group_size=1", "GRPO needs >= 2 samples per prompt"),
    ("wandb=maybe", "wandb: expected bool"),
    ("gate.alpha=1.0", "gate.alpha: 1.0 is not a significance level in (0, 1)"),
    ("gate.rule=median", "gate.rule: expected one of ['paired', 'unpaired']"),
])
def test_bad_overrides_name_the_field(tiny, override, message):
    with pytest.raises(config.ConfigError) as e:
        apply_overrides(tiny, [override])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_validate_model_and_world(tiny):
    with pytest.raises(config.ConfigError, match="exactly one of model.hf_path"):
        config.validate(replace(tiny, model=config.Model(hf_path="x", build="tiny-qwen3")))
    with pytest.raises(config.ConfigError,
                       match=r"tp × pp × dp = 1×1×1 must equal the world size 2"):
        config.validate(tiny, world_size=2)
    with pytest.raises(config.ConfigError, match="unique non-empty name"):
        config.validate(replace(tiny, stages=(tiny.stages[0], tiny.stages[0])))


def test_dict_roundtrip(tiny):
    assert config.from_dict(config.Cascade, config.to_dict(tiny)) == tiny
    bad = config.to_dict(tiny)
    bad["stages"][0]["rollout"]["temprature"] = 1.0
    with pytest.raises(config.ConfigError,
                       match=r"stages.0.rollout: unknown key\(s\) \['temprature'\]"):
        config.from_dict(config.Cascade, bad)


def test_recipe_loading_errors(tmp_path):
    with pytest.raises(config.ConfigError, match="no such file"):
        load_recipe(str(tmp_path / "missing.py"))
    with pytest.raises(config.ConfigError, match="no function 'nope'"):
        load_recipe(TINY + ":nope")
    (tmp_path / "bad.py").write_text("def recipe():\n    return 3\n")
    with pytest.raises(config.ConfigError,
                       match="returned int, expected nemo_cascade.config.Cascade"):
        load_recipe(str(tmp_path / "bad.py"))
    assert load_recipe(TINY + ":two_ranks").parallel.tp == 2


@pytest.mark.parametrize("text, says", [
    ("import no_such_module\n",
     "raised ModuleNotFoundError: No module named 'no_such_module' ({path}:1)"),
    ("def recipe(:\n", "raised SyntaxError: invalid syntax ({path}:1)"),
    ("def recipe():\n    return {{}}['stages']\n", "recipe() raised KeyError: 'stages' ({path}:2)"),
])
def test_a_recipe_whose_own_code_fails_is_one_line_naming_its_line(tmp_path, text, says):
    path = tmp_path / "mine.py"
    path.write_text(text.format())
    with pytest.raises(config.ConfigError) as e:
        load_recipe(str(path))
    assert str(e.value) == f"recipe {path}: " + says.format(path=path)
    proc = _cli("run", str(path))
    assert proc.returncode == 2 and \
        proc.stderr.strip() == f"nemo-cascade: error: recipe {path}: " + says.format(path=path)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args,message", [
    ((TINY, "stages.math.lr=1"), "stages.math.lr: unknown key 'lr'"),
    ((TINY, "stages.sft.data.source=/nonexistent.jsonl"), "/nonexistent.jsonl: no such file"),
    ((TINY, "model.build=", "model.hf_path=/nonexistent"),
     "/nonexistent/config.json: no such file"),
    ((TINY, "model.build=huge"), "model.build: unknown shape 'huge'"),
    ((TINY, "stages.math.domain=chess"), "stages.math.domain: expected one of"),
])
def test_cli_user_errors_are_one_line(args, message):
    proc = _cli("run", *args)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


def test_cli_rejects_model_shapes_the_layout_cannot_split(tmp_path):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=256, head_dim=16, num_attention_heads=4,
                       num_key_value_heads=1)
    proc = _cli("run", TINY, "model.build=", f"model.hf_path={tmp_path}", "parallel.tp=2")
    assert (proc.returncode == 2
            and "parallel.tp=2 must divide the model's num_key_value_heads=1" in proc.stderr)
    proc = _cli("run", TINY, "model.build=", f"model.hf_path={tmp_path}")
    assert proc.returncode == 2 and "head_dim 16 < 32" in proc.stderr


# -------------------------------------------------------------------------- per-stage GRPO settings

def test_length_curriculum_override_and_phase_lookup(tiny):
    cfg = apply_overrides(tiny, ["stages.math.length_curriculum=30:24:filter,10:32:zero"])
    math = config.stage_by_name(cfg, "math")
    assert math.length_curriculum == (config.LengthPhase(30, 24, "filter"),
                                      config.LengthPhase(10, 32, "zero"))
    assert [config.phase_at(math, s)[0] for s in (0, 29, 30, 39)] == [0, 0, 1, 1]
    assert config.phase_at(math, 30)[1].max_response_tokens == 32
    with pytest.raises(ValueError, match="past"):
        config.phase_at(math, 40)
    # phases survive config.json
    assert config.from_dict(config.Cascade, config.to_dict(cfg)) == cfg
    plain = config.stage_by_name(tiny, "math")  # no curriculum: one phase of rollout/grpo settings
    assert config.length_phases(plain) == \
        (config.LengthPhase(plain.steps, plain.rollout.max_response_tokens, "none"),)
    assert config.phase_at(plain, plain.steps - 1) == (0, config.length_phases(plain)[0])


def test_grpo_settings_overrides(tiny):
    cfg = apply_overrides(tiny, [
        "stages.math.mode=half", "stages.math.grpo.refill_max_rounds=3",
        "stages.math.grpo.epoch_filter=true", "stages.math.grpo.readmit_unsolved=0.2",
        "stages.math.rollout.top_k=20", "chat_style=cascade2"])
    math = config.stage_by_name(cfg, "math")
    assert (math.mode, math.grpo.refill_max_rounds, math.grpo.epoch_filter) == ("half", 3, True)
    # §4.5.2 default kept
    assert (math.grpo.readmit_unsolved, math.grpo.readmit_solved) == (0.2, 0.01)
    assert math.rollout.top_k == 20 and cfg.chat_style == "cascade2"


@pytest.mark.parametrize("override,message", [
    ("stages.math.length_curriculum=30:24:filter,5:32:zero",
     "stages.math.length_curriculum: phase steps sum to 35, expected steps=40"),
    ("stages.math.length_curriculum=40:24:clip",
     "stages.math.length_curriculum: expected one of ['none'"),
    ("stages.math.length_curriculum=40",
     "stages.math.length_curriculum: expected "
     "STEPS:TOKENS[:OVERLONG][:T<temperature>][:C<clip ratio>]"),
    ("stages.math.length_curriculum=40:0:zero",
     "stages.math.length_curriculum.0: steps and max_response_tokens"),
    ("stages.math.length_curriculum.0.steps=3", "set 'length_curriculum' as a whole"),
    ("stages.sft.mode=half", "stages.sft.mode: 'half' splits GRPO batches"),
    ("stages.math.mode=both", "stages.math.mode: expected one of ['think', 'no_think', 'half']"),
    ("stages.math.grpo.refill_max_rounds=-1", "stages.math.grpo.refill_max_rounds: expected >= 0"),
    ("stages.math.grpo.readmit_solved=1.5",
     "stages.math.grpo.readmit_solved: expected a probability"),
    ("stages.math.rollout.top_k=0", "stages.math.rollout.top_k: expected -1 (off) or >= 1"),
    ("chat_style=cascade3", "chat_style: expected one of ['cascade1', 'cascade2', 'chatml']"),
])
def test_bad_grpo_settings_name_the_field(tiny, override, message):
    with pytest.raises(config.ConfigError) as e:
        apply_overrides(tiny, [override])
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_refill_needs_the_drop_and_epoch_filter_needs_pass_fail(tiny):
    with pytest.raises(config.ConfigError,
                       match="refill_max_rounds: refilling replaces dropped groups"):
        apply_overrides(tiny, ["stages.math.grpo.refill_max_rounds=2",
                                      "stages.math.grpo.drop_zero_variance_groups=false"])
    with pytest.raises(config.ConfigError, match="epoch_filter: needs a pass/fail reward"):
        apply_overrides(tiny, [
            "stages.math.domain=rlhf", "stages.math.reward.reward_model_url=http://x",
            "stages.math.grpo.epoch_filter=true"])


def test_engine_tensor_parallel_must_tile_the_world_and_match_across_stages(tiny):
    """One rollout engine serves every stage; its TP groups are consecutive ranks
    (rollout/vllm.py)."""
    cfg = apply_overrides(tiny, ["parallel.dp=4", "stages.math.rollout.tensor_parallel_size=2"])
    assert config.stage_by_name(cfg, "math").rollout.tensor_parallel_size == 2
    with pytest.raises(config.ConfigError,
                       match=r"stages.math.rollout.tensor_parallel_size: expected a divisor of "
                             r"the world size 4 \(parallel tp × pp × cp × dp\), got 3"):
        apply_overrides(cfg, ["stages.math.rollout.tensor_parallel_size=3"])
    two = replace(cfg, stages=cfg.stages + (
        replace(config.stage_by_name(cfg, "math"), name="math2",
                rollout=config.Rollout(tensor_parallel_size=4)),))
    with pytest.raises(config.ConfigError,
                       match="stages.math2.rollout.tensor_parallel_size: 4 differs from stage "
                             "math's 2; one engine serves every stage"):
        config.validate(two)
