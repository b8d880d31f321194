"""``rollout.dtype``: the engine's precision resolved from the config, the conversion a GPU engine
applies on load, its place in the stage hash, and preflight's refusal of bf16 sampling on a CPU
without bf16 instructions."""
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.cascade.lineage import _canonical, config_hash
from nemo_cascade.runtime import cpu_math
from nemo_cascade.rollout import engine_dtype

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny():
    # sft → math (one GRPO stage)
    return load_recipe(str(ROOT / "recipes" / "tiny.py") + ":math_only")


def _one_line_error(fn) -> str:
    with pytest.raises(config.ConfigError) as e:
        fn()
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("model,rollout,want", [("float32", "auto", "float32"),
                                                ("bfloat16", "auto", "bfloat16"),
                                                ("float32", "bfloat16", "bfloat16"),
                                                ("bfloat16", "float32", "float32")])
def test_auto_is_the_actors_dtype_and_an_explicit_one_wins(model, rollout, want):
    assert config.engine_dtype(config.Model(dtype=model), config.Rollout(dtype=rollout)) == want


def test_the_override_sets_it_and_a_bad_value_is_one_line(tiny):
    cfg = apply_overrides(tiny, ["stages.math.rollout.dtype=bfloat16"])
    assert config.engine_dtype(cfg.model, config.stage_by_name(cfg, "math").rollout) == "bfloat16"
    assert "rollout.dtype" in _one_line_error(
        lambda: apply_overrides(tiny, ["stages.math.rollout.dtype=fp16"]))


def test_grpo_stages_must_agree_on_the_one_engine_dtype(tiny):
    math = config.stage_by_name(tiny, "math")
    second = replace(math, name="math2", rollout=replace(math.rollout, dtype="bfloat16"))
    cfg = replace(tiny, stages=tiny.stages + (second,))
    msg = _one_line_error(lambda: config.validate(cfg))
    assert msg.startswith("stages.math2.rollout.dtype: bfloat16 differs from stage math's auto")
    # auto beside the same explicit dtype is the same engine
    config.validate(replace(cfg, stages=tiny.stages
                            + (replace(second, rollout=replace(math.rollout, dtype="float32")),)))


def test_stage_hash_unchanged_at_auto_and_changed_when_set(tiny):
    math = config.stage_by_name(tiny, "math")
    before = 5  # the schema version before rollout.dtype existed (config.FIELDS_ADDED[6])
    assert "dtype" not in _canonical(math, before)["rollout"]
    bf16 = replace(math, rollout=replace(math.rollout, dtype="bfloat16"))
    # a resume must not switch what samples
    assert config_hash(bf16, before) != config_hash(math, before)


def test_gpu_engine_load_converts_each_tensor_once_and_passes_matching_ones_through():
    a, b = torch.randn(4, 3), torch.randn(5).to(torch.bfloat16)
    out = list(engine_dtype.in_dtype([("a", a), ("b", b)], torch.bfloat16))
    assert [n for n, _ in out] == ["a", "b"]
    assert out[0][1].dtype == torch.bfloat16 and torch.equal(out[0][1], a.to(torch.bfloat16))
    assert out[0][1].device == a.device
    assert out[1][1] is b  # already the engine's dtype: no copy
    back = list(engine_dtype.in_dtype([("a", a)], torch.float32))
    assert back[0][1] is a  # an fp32 engine beside an fp32 actor (the default) copies nothing
    tied = list(engine_dtype.in_dtype([("embed", a), ("lm_head", a)], torch.bfloat16))
    assert tied[1][1] is tied[0][1]  # the tied head's alias reuses the converted tensor


def test_cpu_flags_reads_x86_and_arm_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n\n"
                   "processor\t: 1\nflags\t: fpu\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert "avx512_bf16" in engine_dtype.cpu_flags(x86) and "bf16" in engine_dtype.cpu_flags(arm)
    assert engine_dtype.cpu_flags(tmp_path / "absent") == set()


@pytest.mark.parametrize("arch,flags,ok", [
    ("x86_64", {"avx512f", "avx512_bf16"}, True), ("x86_64", {"amx_bf16", "amx_tile"}, True),
    ("x86_64", {"avx2", "avx512f"}, False), ("aarch64", {"asimd", "bf16"}, True),
    ("aarch64", {"asimd"}, False), ("ppc64le", {"altivec"}, True), ("x86_64", set(), True)])
def test_cpu_bf16_problem(arch, flags, ok):
    assert (engine_dtype.cpu_bf16_problem(arch, flags) is None) == ok


def test_preflight_refuses_bf16_sampling_on_a_cpu_without_bf16(tiny):
    bf16 = apply_overrides(tiny, ["stages.math.rollout.dtype=bfloat16"])
    msg = _one_line_error(lambda: engine_dtype.check_cpu_engine_dtype(
        bf16, on_cpu=True, arch="x86_64", flags={"avx2"}))
    assert msg.startswith(
        "stages.math.rollout.dtype: bfloat16, but this x86_64 CPU has no bf16 instructions")
    auto_bf16 = replace(tiny, model=replace(tiny.model, dtype="bfloat16"))
    assert "rollout.dtype=auto (model.dtype)" in _one_line_error(
        lambda: engine_dtype.check_cpu_engine_dtype(auto_bf16, on_cpu=True, arch="x86_64",
                                                    flags={"avx2"}))
    # a CUDA engine: not a CPU's business
    engine_dtype.check_cpu_engine_dtype(bf16, on_cpu=False, arch="x86_64", flags={"avx2"})
    engine_dtype.check_cpu_engine_dtype(bf16, on_cpu=True, arch="x86_64", flags={"avx512_bf16"})
    # fp32 sampling runs anywhere
    engine_dtype.check_cpu_engine_dtype(tiny, on_cpu=True, arch="x86_64", flags={"avx2"})


def test_a_bf16_actor_on_a_cpu_without_bf16_is_warned_about_in_one_line(tiny):
    bf16 = replace(tiny, model=replace(tiny.model, dtype="bfloat16"))
    line = engine_dtype.cpu_actor_dtype_warning(bf16, on_cpu=True, arch="x86_64", flags={"avx2"})
    assert line.startswith("model.dtype=bfloat16 on this x86_64 CPU without bf16 instructions")
    assert line.endswith("set model.dtype=float32") and "\n" not in line
    for cfg, on_cpu, flags in ((bf16, True, {"avx512_bf16"}), (bf16, False, {"avx2"}),
                               (tiny, True, {"avx2"})):
        assert engine_dtype.cpu_actor_dtype_warning(cfg, on_cpu, "x86_64", flags) is None


# ----------------------------------------------------------------------------------- AMX permission
def test_only_a_bf16_engine_on_an_amx_cpu_asks_for_amx():
    assert cpu_math.amx_permission_needed("bfloat16", amx_tile_supported=True)
    assert not cpu_math.amx_permission_needed("float32", amx_tile_supported=True)
    assert not cpu_math.amx_permission_needed("bfloat16", amx_tile_supported=False)


def test_amx_permission_is_requested_and_a_refusal_is_one_line(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    monkeypatch.setattr(torch.cpu, "_init_amx", lambda: asked.append(1) or True)
    engine_dtype.request_amx_permission("bfloat16")
    engine_dtype.request_amx_permission("float32")
    assert asked == [1], "asked once, for bf16 only"
    monkeypatch.setattr(torch.cpu, "_init_amx", lambda: False)
    with pytest.raises(engine_dtype.AMXPermissionError,
                       match=r"^rollout.dtype: bfloat16 .* set rollout.dtype=float32$"):
        engine_dtype.request_amx_permission("bfloat16")


def test_a_bf16_server_on_an_amx_cpu_is_refused_in_one_line(monkeypatch):
    """A served model's engine runs in a worker vLLM starts fresh, where the permission cannot be
    asked for."""
    from nemo_cascade.rewards import serve

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    serve._check_cpu_serving_dtype("float32")
    with pytest.raises(ValueError,
                       match=r"^vllm serve --dtype bfloat16 on this CPU: .*; serve in float32$"):
        serve._check_cpu_serving_dtype("bfloat16")
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    serve._check_cpu_serving_dtype("bfloat16")
