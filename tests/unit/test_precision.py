"""actor/precision.py: config → TE/local spec choice, megatron TransformerConfig fields, sequence
padding, the CP sequence layout — and one clear ConfigError line for every combination a machine
cannot run."""
from dataclasses import fields, replace

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.actor import precision, sequence_layout

CPU = precision.Env(cuda=False)
HOPPER = precision.Env(cuda=True, capability=(9, 0), te_version="2.8.0")
AMPERE = precision.Env(cuda=True, capability=(8, 0), te_version="2.8.0")
ADA = precision.Env(cuda=True, capability=(8, 9), te_version="2.8.0")
NO_TE = precision.Env(cuda=True, capability=(9, 0), te_version=None)
OLD_TE = precision.Env(cuda=True, capability=(9, 0), te_version="2.1.0")


def model(**kw):
    return config.Model(**kw)


# ----------------------------------------------------------------------------------- spec selection

@pytest.mark.parametrize("impl,env,expected", [
    ("local", HOPPER, False), ("local", CPU, False),
    ("auto", CPU, False), ("auto", NO_TE, False), ("auto", HOPPER, True), ("auto", AMPERE, True),
    ("transformer_engine", HOPPER, True),
])
def test_transformer_engine_choice(impl, env, expected):
    assert precision.use_transformer_engine(model(transformer_impl=impl), env) is expected


@pytest.mark.parametrize("env,message", [
    (CPU, "model.transformer_impl: 'transformer_engine' needs a CUDA GPU and none is visible"),
    (NO_TE, "model.transformer_impl: 'transformer_engine' needs the transformer_engine package, "
            "which is not importable here"),
])
def test_transformer_engine_requested_but_unavailable(env, message):
    with pytest.raises(config.ConfigError, match="^" + message):
        precision.plan(model(transformer_impl="transformer_engine"), config.Parallel(), env)


def test_this_cpu_machine_plans_the_local_spec():
    assert precision.probe() == precision.Env(cuda=False), \
        "tests run on CPU machines; TE is only probed where CUDA exists"
    assert precision.plan(model(), config.Parallel()) == precision.Plan(
        te=False, config_kwargs=dict(sequence_parallel=False, context_parallel_size=1,
                                     **NO_FUSIONS),
        seq_multiple=1, fused_attention=True)


def test_torchs_fused_attention_only_on_cpu():
    """Measured on CPU (docs/performance.md): torch's fused kernel is ~2x Megatron's unfused
    attention in fp32, and packed rows by block beat the block-diagonal mask in either precision; on
    GPUs the spec's own attention stays (TE's, or the local one)."""
    assert precision.plan(model(), config.Parallel(), CPU).fused_attention
    assert precision.plan(model(dtype="bfloat16"), config.Parallel(), CPU).fused_attention
    assert not precision.plan(model(), config.Parallel(), HOPPER).fused_attention
    assert not precision.plan(model(), config.Parallel(), NO_TE).fused_attention
    from nemo_cascade.actor.fused_attention import FusedAttention

    fused, unfused = (precision.layer_spec(False, "qwen3", 2, fused_attention=f)
                      .layer_specs[0].submodules for f in (True, False))
    assert fused.self_attention.submodules.core_attention is FusedAttention
    assert unfused.self_attention.submodules.core_attention is not FusedAttention


def test_bf16_attention_softmax_needs_no_fp32_copies():
    """attention_softmax_in_fp32 is off (convert.megatron_args): torch's softmax accumulates bf16
    scores in fp32 and rounds once, so Megatron's unfused softmax gives the same bf16 probabilities
    without copying the scores to fp32."""
    from megatron.core.fusions.fused_softmax import FusedScaleMaskSoftmax
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.utils import attention_mask_func

    from nemo_cascade.convert import megatron_args
    from nemo_cascade.convert.shape import shape_from_dict

    shape = shape_from_dict(dict(architectures=["Qwen3ForCausalLM"], vocab_size=256, hidden_size=64,
                                 num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
                                 num_key_value_heads=2))
    kwargs = megatron_args.transformer_config_kwargs(shape, 1, 1, bf16=True)
    assert kwargs["attention_softmax_in_fp32"] is False
    scores = (torch.randn(2, 4, 64, 64, generator=torch.Generator().manual_seed(0)) * 4).bfloat16()
    blocked = torch.ones(64, 64, dtype=torch.bool).triu(1).expand(2, 1, 64, 64)
    probs = [FusedScaleMaskSoftmax(False, True, AttnMaskType.causal, False, attention_mask_func,
                                   in_fp32, None)(scores, blocked)
             for in_fp32 in (True, False)]
    assert probs[0].dtype == probs[1].dtype == torch.bfloat16 and torch.equal(probs[0], probs[1])


NO_FUSIONS = dict(bias_activation_fusion=False, bias_dropout_fusion=False,
                  masked_softmax_fusion=False, apply_rope_fusion=False,
                  gradient_accumulation_fusion=False)


def test_the_chosen_spec_is_logged_in_one_line(caplog):
    import logging

    with caplog.at_level(logging.INFO, logger=precision.__name__):
        precision.plan(model(), config.Parallel(), CPU)
        precision.plan(model(), config.Parallel(), HOPPER)
        precision.plan(model(), config.Parallel(), NO_TE)
    assert [r.getMessage() for r in caplog.records] == [
        "actor layer spec: local (model.transformer_impl=auto: no CUDA); "
        "core attention: torch's fused, by block in packed rows",
        "actor layer spec: transformer_engine (TE 2.8.0, model.transformer_impl=auto)",
        "actor layer spec: local (model.transformer_impl=auto: transformer_engine not installed)"]


# ------------------------------------------------------------------------------ a broken TE install

def _broken_te(monkeypatch, sub_module_fails: bool):
    """transformer_engine 'installed' (find_spec finds it) but failing to import: the package
    itself, or the ``transformer_engine.pytorch`` part megatron uses (None in sys.modules makes
    ``import`` raise)."""
    import importlib.util
    import sys
    import types

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if name == "transformer_engine"
                                          else real(name, *a)))
    if sub_module_fails:
        monkeypatch.setitem(sys.modules, "transformer_engine",
                            types.ModuleType("transformer_engine"))
        monkeypatch.setitem(sys.modules, "transformer_engine.pytorch", None)
    else:
        monkeypatch.setitem(sys.modules, "transformer_engine", None)


@pytest.mark.parametrize("sub_module_fails", [False, True])
def test_installed_but_broken_te_is_an_error_not_a_silent_fallback(monkeypatch, sub_module_fails):
    _broken_te(monkeypatch, sub_module_fails)
    version, error = precision.import_transformer_engine()
    assert version is None and "Error: import of transformer_engine" in error and "\n" not in error
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    env = precision.probe()
    assert env.cuda and env.te_version is None and env.te_error == error
    for impl in ("auto", "transformer_engine"):
        with pytest.raises(config.ConfigError,
                           match=rf"^model\.transformer_impl={impl}: transformer_engine is "
                                 rf"installed but does not import \(\w+Error: .*\); reinstall it "
                                 rf".* or set model\.transformer_impl=local$"):
            precision.plan(model(transformer_impl=impl), config.Parallel(), env)
    assert not precision.plan(model(transformer_impl="local"), config.Parallel(), env).te


def test_absent_te_is_not_an_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformer_engine" else real(name, *a))
    assert precision.import_transformer_engine() == (None, None)
    assert not precision.plan(model(), config.Parallel(), NO_TE).te


# ------------------------------------------------------------------------------------ fusions

APEX = precision.Env(cuda=True, capability=(9, 0), te_version="2.8.0", apex_wgrad=True)


@pytest.mark.parametrize("env,te,rope_scaling,expected", [
    (CPU, False, False, {}),
    (NO_TE, False, False, dict(bias_activation_fusion=True, bias_dropout_fusion=True)),
    (HOPPER, True, False,
     dict(bias_activation_fusion=True, bias_dropout_fusion=True, apply_rope_fusion=True)),
    # local spec chosen
    (HOPPER, False, False, dict(bias_activation_fusion=True, bias_dropout_fusion=True)),
    # YaRN: unfused RoPE
    (HOPPER, True, True, dict(bias_activation_fusion=True, bias_dropout_fusion=True)),
    # TE without fused RoPE
    (precision.Env(cuda=True, capability=(9, 0), te_version="1.3"), True, False,
     dict(bias_activation_fusion=True, bias_dropout_fusion=True)),
    (APEX, True, False, dict(bias_activation_fusion=True, bias_dropout_fusion=True,
                             apply_rope_fusion=True, gradient_accumulation_fusion=True)),
    (replace(APEX, te_version=None), False, False, dict(bias_activation_fusion=True,
                                                        bias_dropout_fusion=True,
                                                        gradient_accumulation_fusion=True)),
])
def test_fusions_are_on_exactly_where_their_kernels_exist(env, te, rope_scaling, expected):
    assert precision.fusion_kwargs(env, te, rope_scaling) == {**NO_FUSIONS, **expected}


def test_plan_carries_the_fusions():
    assert (precision.plan(model(), config.Parallel(), APEX)
            .config_kwargs["gradient_accumulation_fusion"] is True)
    assert (precision.plan(model(), config.Parallel(), HOPPER)
            .config_kwargs["apply_rope_fusion"] is True)
    assert (precision.plan(model(), config.Parallel(), HOPPER, rope_scaling=True)
            .config_kwargs["apply_rope_fusion"] is False)
    assert (precision.plan(model(), config.Parallel(), CPU)
            .config_kwargs["bias_activation_fusion"] is False)


def test_gpu_fusions_without_te_are_accepted_by_megatron():
    """The fusions a CUDA machine without TE or apex gets pass TransformerConfig's own checks for
    this repo's MLP (SwiGLU, no bias: megatron's fused SwiGLU is the one it allows)."""
    import torch.nn.functional as F
    from megatron.core.transformer import TransformerConfig

    kw = precision.fusion_kwargs(NO_TE, te=False)
    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                            gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False,
                            **kw)
    assert cfg.bias_activation_fusion and cfg.bias_dropout_fusion and not cfg.apply_rope_fusion


def test_megatron_refuses_gradient_accumulation_fusion_without_apex():
    """Why ``apex_wgrad`` gates it: megatron's ColumnParallelLinear (every GPTModel's LM head)
    raises without apex's kernel, whatever the layer spec."""
    from megatron.core.tensor_parallel import layers

    assert layers._grad_accum_fusion_available is False, "no apex on CPU machines"
    assert "fused_weight_gradient_mlp_cuda" in inspect_source(layers.ColumnParallelLinear.__init__)


def inspect_source(fn) -> str:
    import inspect

    return inspect.getsource(fn)


# ---------------------------------------------------------------------------------- pipeline shapes

@pytest.mark.parametrize("seq_len,mbs,thd,expected",
                         [(64, 4, False, (64, 4)), (64, 4, True, (256, 1)), (64, 1, True, (64, 1))])
def test_pipeline_shape(seq_len, mbs, thd, expected):
    assert sequence_layout.pipeline_shape(seq_len, mbs, thd) == expected


@pytest.mark.parametrize("te,packed,expected", [(True, True, (4 * 16, 1)), (True, False, (16, 4)),
                                                (False, True, (16, 4))])
def test_pipeline_stages_receive_packed_te_rows_as_one_sequence(monkeypatch, te, packed, expected):
    """PP > 1, TE, packed rows, micro_batch_size 4: the first stage runs ``[1, 4·T]`` (thd) and
    sends ``[4·T, 1, hidden]``; the schedule must size the receiving buffers so, or later stages
    hand TE 4-D input."""
    from types import SimpleNamespace

    import megatron.core.pipeline_parallel as pp

    from nemo_cascade.actor.megatron import MegatronActor

    seen = {}
    monkeypatch.setattr(pp, "get_forward_backward_func", lambda: lambda **kw: seen.update(kw) or [])
    batch = {"tokens": torch.zeros(8, 13, dtype=torch.long)}
    if packed:
        batch.update(segment_ids=torch.ones(8, 13, dtype=torch.long),
                     position_ids=torch.zeros(8, 13))
    stub = SimpleNamespace(te=te, plan=precision.Plan(te=te, config_kwargs={}, seq_multiple=16),
                           module=None, parallel=config.Parallel(pp=2, micro_batch_size=4),
                           _forward_step=lambda *a: None, _microbatches=lambda b: ([b], 8))
    MegatronActor._run(stub, batch, None, 1.0, forward_only=True)
    assert (seen["seq_length"], seen["micro_batch_size"]) == expected


# ------------------------------------------------------------------------------------ mappings

@pytest.mark.parametrize("fp8,recipe", [("delayed", "delayed"), ("current", "tensorwise"),
                                        ("blockwise", "blockwise")])
def test_fp8_maps_to_megatron_recipe(fp8, recipe):
    kw = precision.plan(model(fp8=fp8, dtype="bfloat16"), config.Parallel(), HOPPER).config_kwargs
    assert kw["fp8"] == "hybrid" and kw["fp8_recipe"] == recipe
    assert ("fp8_amax_history_len" in kw) == (fp8 == "delayed")


@pytest.mark.parametrize("recompute,expected", [
    ("none", {}),
    ("selective", dict(recompute_granularity="selective", recompute_modules=["core_attn"])),
    ("full", dict(recompute_granularity="full", recompute_method="uniform",
                  recompute_num_layers=1)),
])
def test_recompute_maps_to_megatron(recompute, expected):
    kw = precision.transformer_config_kwargs(model(), config.Parallel(recompute=recompute))
    assert {k: v for k, v in kw.items() if k.startswith("recompute")} == expected


def test_parallel_fields_map_to_megatron():
    kw = precision.plan(model(), config.Parallel(tp=2, cp=4, sequence_parallel=True),
                        HOPPER).config_kwargs
    assert kw["sequence_parallel"] is True and kw["context_parallel_size"] == 4


@pytest.mark.parametrize("fp8,recompute,cp,sp", [
    ("delayed", "full", 1, False), ("current", "selective", 2, True),
    ("blockwise", "none", 1, True), ("none", "full", 1, True),
])
def test_kwargs_are_accepted_by_megatron_transformer_config(fp8, recompute, cp, sp):
    """The names and values must be megatron-core 0.16.1's: its __post_init__ validates recompute
    settings."""
    from megatron.core.transformer import TransformerConfig

    kw = precision.transformer_config_kwargs(
        model(fp8=fp8), config.Parallel(tp=2, cp=cp, sequence_parallel=sp, recompute=recompute))
    assert set(kw) <= {f.name for f in fields(TransformerConfig)}
    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                            tensor_model_parallel_size=2, **kw)
    assert cfg.context_parallel_size == cp and cfg.sequence_parallel is sp
    assert cfg.recompute_granularity == (None if recompute == "none" else recompute)
    assert cfg.fp8 == (None if fp8 == "none" else "hybrid")


@pytest.mark.parametrize("fp8,tp,cp,sp,expected", [
    ("none", 1, 1, False, 1), ("none", 2, 1, False, 1), ("none", 4, 1, True, 4),
    ("none", 2, 2, False, 4), ("none", 2, 2, True, 8), ("delayed", 1, 1, False, 16),
    ("current", 2, 2, True, 128),
])
def test_sequence_multiple(fp8, tp, cp, sp, expected):
    assert precision.seq_multiple(model(fp8=fp8),
                                  config.Parallel(tp=tp, cp=cp, sequence_parallel=sp)) == expected


# ------------------------------------------------------------------------------------ every error

@pytest.mark.parametrize("m,p,env,message", [
    (dict(fp8="delayed"), {}, CPU, "model.fp8=delayed: FP8 training needs a CUDA GPU"),
    (dict(fp8="current"), {}, NO_TE,
     "model.fp8=current: FP8 runs through Transformer Engine layers; it needs "
     "transformer_engine installed"),
    (dict(fp8="delayed", transformer_impl="local"), {}, HOPPER,
     "model.fp8=delayed: FP8 runs through Transformer Engine layers; "
     "model.transformer_impl='local' cannot use it"),
    (dict(fp8="delayed"), {}, AMPERE,
     r"model.fp8=delayed: needs a GPU of compute capability >= 8\.9 \(Ada/Hopper "
     r"or newer\); this one is 8\.0"),
    (dict(fp8="blockwise"), {}, ADA,
     r"model.fp8=blockwise: needs a GPU of compute capability >= 9\.0 \(Hopper"),
    (dict(fp8="current"), {}, OLD_TE,
     r"model.fp8=current: needs transformer_engine >= 2\.2\.0, found 2\.1\.0"),
    (dict(fp8="blockwise"), {}, OLD_TE,
     r"model.fp8=blockwise: needs transformer_engine >= 2\.3\.0, found 2\.1\.0"),
    ({}, dict(cp=2), CPU,
     "parallel.cp=2: context parallelism runs inside Transformer Engine's attention; it needs "
     "a CUDA GPU with transformer_engine"),
    ({}, dict(cp=2), NO_TE, r"parallel.cp=2: context parallelism .* \(got 'auto', CUDA, no TE\)"),
    (dict(transformer_impl="local"), dict(cp=2), HOPPER,
     "parallel.cp=2: context parallelism runs inside Transformer Engine's attention; "
     "model.transformer_impl='local' cannot use it"),
    ({}, dict(sequence_parallel=True), HOPPER,
     r"parallel.sequence_parallel: needs parallel.tp > 1 .*got tp=1"),
    ({}, dict(recompute="some"), HOPPER,
     r"parallel.recompute: expected one of \['none', 'selective', 'full'\], got 'some'"),
    ({}, dict(cp=0), HOPPER, "parallel.cp: expected an integer >= 1, got 0"),
    (dict(fp8="e4m3"), {}, HOPPER, "model.fp8: expected one of"),
    (dict(transformer_impl="te"), {}, HOPPER, "model.transformer_impl: expected one of"),
])
def test_impossible_combinations_are_one_line_config_errors(m, p, env, message):
    with pytest.raises(config.ConfigError, match="^" + message) as err:
        precision.plan(model(**m), config.Parallel(**p), env)
    assert "\n" not in str(err.value)


def test_fp8_recipes_that_this_hardware_allows():
    assert precision.plan(model(fp8="delayed"), config.Parallel(), ADA).te
    assert precision.plan(model(fp8="current"), config.Parallel(), ADA).te
    plan = precision.plan(model(fp8="blockwise", transformer_impl="transformer_engine"),
                          config.Parallel(tp=2, cp=2, sequence_parallel=True), HOPPER)
    assert plan.te and plan.seq_multiple == 2 * 2 * 2 * 16


# ---------------------------------------------------------------------------------- config.validate

@pytest.fixture
def cascade():
    from nemo_cascade.tooling.cli import load_recipe
    from tests.unit.test_config import TINY

    return load_recipe(TINY + ":math_only")


def test_world_size_counts_context_parallel(cascade):
    cfg = replace(cascade, parallel=replace(cascade.parallel, tp=2, cp=2, dp=2),
                  stages=tuple(replace(s, grpo=replace(s.grpo, sequence_packing=False))
                               for s in cascade.stages if s.kind == "grpo"))
    config.validate(cfg, world_size=8)
    with pytest.raises(
            config.ConfigError,
            match=r"^parallel: tp × pp × cp × dp = 2×1×2×2 must equal the world size 4$"):
        config.validate(cfg, world_size=4)
    with pytest.raises(config.ConfigError,
                       match=r"^parallel: tp × pp × dp = 2×1×2 must equal the world size 8$"):
        config.validate(replace(cfg, parallel=replace(cfg.parallel, cp=1)), world_size=8)


def test_validate_runs_the_machine_independent_rules(cascade):
    with pytest.raises(config.ConfigError,
                       match="^parallel.sequence_parallel: needs parallel.tp > 1"):
        config.validate(replace(cascade,
                                parallel=replace(cascade.parallel, sequence_parallel=True)))
    with pytest.raises(config.ConfigError,
                       match="^model.fp8=current: FP8 runs through Transformer Engine"):
        config.validate(
            replace(cascade, model=replace(cascade.model, fp8="current", transformer_impl="local")))
    config.validate(
        replace(cascade, parallel=replace(cascade.parallel, tp=2, sequence_parallel=True)))


def test_context_parallel_only_for_grpo_stages(cascade):
    assert {s.kind for s in cascade.stages} >= {"sft", "grpo"}
    with pytest.raises(config.ConfigError,
                       match=r"^stages\.sft\.kind: parallel\.cp=2 splits every sequence over "
                             r"ranks, which the actor supports for grpo stages only, not sft"):
        config.validate(replace(cascade, parallel=replace(cascade.parallel, cp=2)))


def test_cli_launches_tp_pp_cp_dp_processes():
    import inspect

    from nemo_cascade.tooling import cli

    assert ("world = cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.cp * cfg.parallel.dp"
            in inspect.getsource(cli.cmd_run))


# ---------------------------------------------------------------------------------- sequence layout

class _Group:
    """What megatron reads from a CP group here: its size and this rank (no process group
    needed)."""

    def __init__(self, size, rank):
        self.size, self.rank = (lambda: size), (lambda: rank)


@pytest.mark.parametrize("cp", [1, 2, 3, 4])
def test_cp_split_is_megatrons_layout_and_unsplit_inverts_it(cp, monkeypatch):
    import megatron.core.utils as mu

    # megatron treats a group as size 1 unless torch.distributed is initialised; read the stand-in
    # directly
    monkeypatch.setattr(mu, "get_pg_size", lambda g: g.size())
    monkeypatch.setattr(mu, "get_pg_rank", lambda g: g.rank())
    x = torch.arange(3 * 8 * cp).reshape(3, 8 * cp)
    parts = [sequence_layout.cp_split(x, cp, r) for r in range(cp)]
    for r, part in enumerate(parts):
        theirs = mu.get_batch_on_this_cp_rank({"tokens": x.clone()},
                                              cp_group=_Group(cp, r))["tokens"]
        assert torch.equal(part, theirs)
    assert torch.equal(sequence_layout.cp_unsplit(parts), x)
    if cp == 2:  # chunks 0+3 on rank 0, 1+2 on rank 1: an early and a late chunk each
        assert parts[0][0].tolist() == [0, 1, 2, 3, 12, 13, 14, 15]


def test_cp_gather_without_a_group_is_the_identity():
    x = torch.randn(2, 5)
    assert sequence_layout.cp_gather(x, None) is x


def test_thd_boundaries_follow_examples_and_rows():
    segments = torch.tensor([[1, 1, 2, 2, 2, 0, 0],
                             [1, 1, 1, 1, 1, 1, 1],
                             [1, 2, 3, 3, 0, 0, 0]])
    cu, longest = sequence_layout.thd_boundaries(segments)
    assert cu.dtype == torch.int32
    assert cu.tolist() == [0, 2, 5, 7, 14, 15, 16, 18, 21] and longest == 7


def test_pad_seq_and_round_up():
    x = torch.tensor([[1, 2, 3]])
    assert sequence_layout.pad_seq(x, 5).tolist() == [[1, 2, 3, 0, 0]]
    assert sequence_layout.pad_seq(x, 3) is x
    assert [sequence_layout.round_up(n, 4) for n in (1, 4, 5)] == [4, 4, 8]


def test_local_spec_norms_support_sequence_parallel():
    """The local spec's norms are LocalRMSNorm (torch RMSNorm, flagged for SP's TP gradient sum);
    megatron's WrappedTorchNorm refuses sequence_parallel outright."""
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                            tensor_model_parallel_size=2, sequence_parallel=True,
                            normalization="RMSNorm")
    with pytest.raises(AssertionError, match="sequence parallel not supported"):
        WrappedTorchNorm(cfg, 64)
    spec = precision.layer_spec(False, "qwen3", num_layers=2)
    layer = spec.layer_specs[0].submodules
    assert len(spec.layer_specs) == 2 and spec.layer_norm is precision.LocalRMSNorm
    assert layer.input_layernorm is layer.pre_mlp_layernorm is precision.LocalRMSNorm
    assert layer.self_attention.submodules.q_layernorm is precision.LocalRMSNorm
    norm = precision.LocalRMSNorm(cfg, 64, eps=1e-6)
    assert (isinstance(norm, torch.nn.RMSNorm) and norm.weight.sequence_parallel is True
            and norm.eps == 1e-6)


@pytest.mark.parametrize("arch", ["qwen3", "llama", "qwen2"])
def test_te_table_names_are_megatrons_own_te_names(arch):
    """TE's spec cannot be built without TE, but megatron-core maps local-spec names to TE-spec
    names itself (the local layer spec's ``sharded_state_dict_keys_map``, used to load TE
    checkpoints into local models): the table's ``te=True`` names must be exactly that mapping of
    its local names, and nothing else may change."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    from nemo_cascade.convert import table

    keys_map = (get_gpt_layer_local_spec(qk_layernorm=arch == "qwen3", normalization="RMSNorm")
                .submodules.sharded_state_dict_keys_map)
    local, te = (table.rules_for(arch, tied_embeddings=False),
                 table.rules_for(arch, tied_embeddings=False, te=True))
    renamed = 0
    for lr, tr in zip(local, te, strict=True):
        expected = lr.megatron
        for old, new in keys_map.items():
            expected = expected.replace("{i}." + old, "{i}." + new)
        assert tr.megatron == expected and (tr.hf, tr.tp, tr.reshape) == (lr.hf, lr.tp, lr.reshape)
        renamed += tr.megatron != lr.megatron
    assert renamed == 2, \
        "input_layernorm → linear_qkv.layer_norm_weight, pre_mlp_layernorm → linear_fc1's"


def test_te_fused_norms_have_the_norm_shape():
    """With PP > 1 a stage that does not own a tensor receives it into a buffer of ``_full_shape``;
    TE's ``linear_qkv.layer_norm_weight`` is a [hidden] norm, not the [qkv, hidden] linear its name
    contains."""
    from types import SimpleNamespace

    from nemo_cascade.actor.hf_weights import HFWeights
    from nemo_cascade.convert.shape import shape_from_dict
    from nemo_cascade.convert import table

    shape = shape_from_dict(dict(architectures=["Qwen3ForCausalLM"], vocab_size=256, hidden_size=64,
                                 intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=16))
    local, te = table.table_for(shape), table.table_for(shape, te=True)
    for lo, t in zip(local.entries, te.entries, strict=True):
        assert te.full_shape(t) == local.full_shape(lo), t.megatron
    stub = SimpleNamespace(table=te)  # the actor's weights ask the table
    assert ([HFWeights._full_shape(stub, t) for t in te.entries]
            == [local.full_shape(e) for e in local.entries])


def test_qkv_bias_has_the_fused_output_shape():
    """Qwen2's fused q/k/v bias, received by a PP stage that does not own it, is [(H + 2G)·d], not
    the weight's [(H + 2G)·d, hidden] that its name's ``linear_qkv`` would give."""
    from types import SimpleNamespace

    from nemo_cascade.actor.hf_weights import HFWeights
    from nemo_cascade.convert.shape import shape_from_dict
    from nemo_cascade.convert import table

    shape = shape_from_dict(dict(architectures=["Qwen2ForCausalLM"], vocab_size=256,
                                 hidden_size=128, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2))
    conversion = table.table_for(shape)
    bias = next(e for e in conversion.entries if e.megatron.endswith("linear_qkv.bias"))
    assert HFWeights._full_shape(SimpleNamespace(table=conversion), bias) == ((4 + 2 * 2) * 32,)
