"""Typed config: overrides, validation, serialisation, recipe loading and the CLI's one-line errors."""
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config as C
from nemo_cascade.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")


@pytest.fixture
def tiny():
    return load_recipe(TINY)


def test_overrides_reach_nested_fields(tiny):
    cfg = C.apply_overrides(tiny, ["stages.math.steps=5", "parallel.tp=2", "stages.1.rollout.temperature=0.6",
                                   "stages.*.actor.lr=1e-4", "wandb=true", "stages.math.grpo.overlong=filter"])
    math = C.stage_by_name(cfg, "math")
    assert math.steps == 5 and cfg.parallel.tp == 2 and math.rollout.temperature == 0.6
    assert all(s.actor.lr == 1e-4 for s in cfg.stages) and cfg.wandb is True
    assert math.grpo.overlong == "filter"
    assert C.stage_by_name(tiny, "math").steps != 5, "the original config is frozen and unchanged"


@pytest.mark.parametrize("override,message", [
    ("bogus=1", "bogus: unknown key 'bogus'; expected one of"),
    ("parallel.tq=2", "parallel.tq: unknown key 'tq'"),
    ("parallel.tp=two", "parallel.tp: expected int, got 'two'"),
    ("stages.math.grpo.overlong=drop", "stages.math.grpo.overlong: expected one of ['none', 'filter', 'zero']"),
    ("stages.rlhf.steps=3", "stages.rlhf.steps: no stage 'rlhf'; stages are ['sft', 'math']"),
    ("parallel=3", "parallel: 'parallel' is a section"),
    ("stages.math.steps", "expected KEY=VALUE"),
    ("stages.math.steps=0", "stages.math.steps: expected >= 1, got 0"),
    ("stages.math.grpo.group_size=1", "GRPO needs >= 2 samples per prompt"),
    ("wandb=maybe", "wandb: expected bool"),
])
def test_bad_overrides_name_the_field(tiny, override, message):
    with pytest.raises(C.ConfigError) as e:
        C.apply_overrides(tiny, [override])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_validate_model_and_world(tiny):
    with pytest.raises(C.ConfigError, match="exactly one of model.hf_path"):
        C.validate(replace(tiny, model=C.Model(hf_path="x", build="tiny-qwen3")))
    with pytest.raises(C.ConfigError, match=r"tp × pp × dp = 1×1×1 must equal the world size 2"):
        C.validate(tiny, world_size=2)
    with pytest.raises(C.ConfigError, match="unique non-empty name"):
        C.validate(replace(tiny, stages=(tiny.stages[0], tiny.stages[0])))


def test_dict_roundtrip(tiny):
    assert C.from_dict(C.Cascade, C.to_dict(tiny)) == tiny
    bad = C.to_dict(tiny)
    bad["stages"][0]["rollout"]["temprature"] = 1.0
    with pytest.raises(C.ConfigError, match=r"stages.0.rollout: unknown key\(s\) \['temprature'\]"):
        C.from_dict(C.Cascade, bad)


def test_recipe_loading_errors(tmp_path):
    with pytest.raises(C.ConfigError, match="no such file"):
        load_recipe(str(tmp_path / "missing.py"))
    with pytest.raises(C.ConfigError, match="no function 'nope'"):
        load_recipe(TINY + ":nope")
    (tmp_path / "bad.py").write_text("def recipe():\n    return 3\n")
    with pytest.raises(C.ConfigError, match="returned int, expected nemo_cascade.config.Cascade"):
        load_recipe(str(tmp_path / "bad.py"))
    assert load_recipe(TINY + ":two_ranks").parallel.tp == 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "nemo_cascade.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("args,message", [
    ((TINY, "stages.math.lr=1"), "stages.math.lr: unknown key 'lr'"),
    ((TINY, "stages.sft.data.source=/nonexistent.jsonl"), "/nonexistent.jsonl: no such file"),
    ((TINY, "model.build=", "model.hf_path=/nonexistent"), "/nonexistent/config.json: no such file"),
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
    from nemo_cascade.convert.tiny import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=256, head_dim=16, num_attention_heads=4, num_key_value_heads=1)
    proc = _cli("run", TINY, "model.build=", f"model.hf_path={tmp_path}", "parallel.tp=2")
    assert proc.returncode == 2 and "parallel.tp=2 must divide the model's num_key_value_heads=1" in proc.stderr
    proc = _cli("run", TINY, "model.build=", f"model.hf_path={tmp_path}")
    assert proc.returncode == 2 and "head_dim 16 < 32" in proc.stderr
