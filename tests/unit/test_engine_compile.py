"""``rollout.compile``: the engine runs eagerly or compiled — eager on CPU and compiled on GPU by
default (auto), either on request; every GRPO stage must agree (one engine serves them); the setting
reaches vLLM's ``enforce_eager``."""
from dataclasses import replace

import pytest

from nemo_cascade import config
from nemo_cascade.rollout.vllm import RolloutEngine
from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade.tooling.cli import load_recipe


@pytest.mark.parametrize("setting, on_cpu, eager", [
    ("auto", True, True), ("auto", False, False), ("on", True, False), ("on", False, False),
    ("off", True, True), ("off", False, True)])
def test_auto_is_eager_on_cpu_only(setting, on_cpu, eager):
    assert config.engine_eager(config.Rollout(compile=setting), on_cpu) is eager


def _engine(rollout: config.Rollout, on_cpu: bool) -> RolloutEngine:
    """An engine object with only what its vLLM settings read (no vLLM is started)."""
    engine = object.__new__(RolloutEngine)
    engine.rollout, engine.on_cpu, engine.max_model_len = rollout, on_cpu, 256
    engine.model_path, engine.hf_overrides, engine.distributed = "model", {}, False
    return engine


@pytest.mark.parametrize("on_cpu", [True, False])
def test_the_setting_reaches_vllm(on_cpu):
    for setting, eager in (("on", False), ("off", True), ("auto", on_cpu)):
        kwargs = _engine(config.Rollout(compile=setting), on_cpu)._llm_kwargs("float32", 0)
        assert kwargs["enforce_eager"] is eager, (setting, on_cpu)


def test_every_grpo_stage_must_agree():
    cfg = load_recipe("recipes/tiny.py")
    assert config.validate(apply_overrides(cfg, ["stages.*.rollout.compile=on"]))
    with pytest.raises(config.ConfigError,
                       match=r"stages\.math\.rollout\.compile: on differs from stage .*one engine"):
        apply_overrides(cfg, ["stages.math.rollout.compile=on"])
    with pytest.raises(config.ConfigError,
                       match=r"rollout\.compile: expected one of \['auto', 'on', 'off'\]"):
        apply_overrides(cfg, ["stages.*.rollout.compile=yes"])


def test_setting_it_changes_the_stage_hash_and_auto_leaves_older_runs_alone():
    from nemo_cascade.cascade.lineage import _canonical

    stage = load_recipe("recipes/tiny.py").stages[-1]
    # a version-6 manifest: hashed as before at auto
    assert "compile" not in _canonical(stage, 6)["rollout"]
    compiled = replace(stage, rollout=replace(stage.rollout, compile="on"))
    assert _canonical(compiled, 6)["rollout"]["compile"] == "on"
