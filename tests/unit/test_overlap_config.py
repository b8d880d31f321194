"""parallel.overlap_grad_reduce / overlap_param_gather: the rules between them (one ConfigError line
naming the field, from config.validate, the CLI overrides and the actor's plan alike) and what the
actor hands Megatron. The training behaviour is tested at DP=2 in
tests/dist/test_overlap_comm.py."""
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade.config import Cascade, ConfigError, Model, Parallel, from_dict, to_dict, validate
from nemo_cascade.actor import precision
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.config.checks import validate_parallel_settings

TINY = str(Path(__file__).resolve().parents[2] / "recipes" / "tiny.py")
NEEDS_DISTOPT = (
    "parallel.overlap_param_gather: needs parallel.distributed_optimizer=true (only "
    "the distributed "
    "optimizer all-gathers parameters after its step)")
NEEDS_GRAD = (
    "parallel.overlap_param_gather: needs parallel.overlap_grad_reduce=true (as in "
    "Megatron-LM, which "
    "asserts the same)")


def test_defaults_are_off():
    p = Parallel()
    assert (p.overlap_grad_reduce, p.overlap_param_gather) == (False, False)


@pytest.mark.parametrize("fields", [
    dict(overlap_grad_reduce=True),
    dict(overlap_grad_reduce=True, distributed_optimizer=False),
    dict(overlap_grad_reduce=True, overlap_param_gather=True),
    dict(overlap_grad_reduce=True, overlap_param_gather=True, tp=2, pp=2, sequence_parallel=True),
])
def test_valid_combinations(fields):
    validate_parallel_settings(Model(), Parallel(**fields))
    # gloo runs both overlaps on CPU
    precision.plan(Model(), Parallel(**fields), precision.Env(cuda=False))


@pytest.mark.parametrize("fields,message", [
    (dict(overlap_param_gather=True, overlap_grad_reduce=True,
          distributed_optimizer=False), NEEDS_DISTOPT),
    (dict(overlap_param_gather=True, distributed_optimizer=False), NEEDS_DISTOPT),
    (dict(overlap_param_gather=True), NEEDS_GRAD), ])
def test_invalid_combinations_name_the_field(fields, message):
    with pytest.raises(ConfigError) as e:
        validate_parallel_settings(Model(), Parallel(**fields))
    assert str(e.value) == message and "\n" not in message
    # the actor checks before building
    with pytest.raises(ConfigError, match="^parallel.overlap_param_gather: "):
        precision.plan(Model(), Parallel(**fields), precision.Env(cuda=False))


def test_overrides_and_validate():
    tiny = load_recipe(TINY + ":math_only")
    cfg = apply_overrides(
        tiny, ["parallel.overlap_grad_reduce=true", "parallel.overlap_param_gather=true"])
    assert cfg.parallel.overlap_grad_reduce and cfg.parallel.overlap_param_gather
    validate(cfg)
    with pytest.raises(ConfigError,
                       match="^parallel.overlap_param_gather: needs parallel.overlap_grad_reduce"):
        validate(apply_overrides(tiny, ["parallel.overlap_param_gather=true"]))
    with pytest.raises(
            ConfigError,
            match="^parallel.overlap_param_gather: needs parallel.distributed_optimizer"):
        validate(replace(cfg, parallel=replace(cfg.parallel, distributed_optimizer=False)))
    assert from_dict(Cascade, to_dict(cfg)) == cfg


def test_actor_wires_megatron(monkeypatch):
    """The DDP config gets both fields (and the bucket size); with overlap_grad_reduce the schedule
    gets Megatron-LM's no_sync / grad_sync hooks, without it none (Megatron's defaults)."""
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.transformer import TransformerConfig

    from nemo_cascade.actor import megatron

    made = {}

    class FakeDDP:
        def __init__(self, config, ddp_config, module):
            made["ddp"] = ddp_config

        def no_sync(self):
            pass

        def start_grad_sync(self):
            pass

    import megatron.core.distributed as D

    monkeypatch.setattr(D, "DistributedDataParallel", FakeDDP)
    for fields, synced in [(dict(), False), (dict(overlap_grad_reduce=True), True),
                           (dict(overlap_grad_reduce=True, overlap_param_gather=True), True)]:
        actor = megatron.MegatronActor.__new__(megatron.MegatronActor)
        actor.parallel, actor.model = Parallel(**fields), None
        actor.tconfig = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=1)
        module = actor._wrap_ddp()
        ddp: DistributedDataParallelConfig = made["ddp"]
        assert ddp.overlap_grad_reduce == actor.parallel.overlap_grad_reduce
        assert ddp.overlap_param_gather == actor.parallel.overlap_param_gather
        assert ddp.use_distributed_optimizer and ddp.grad_reduce_in_fp32 and ddp.bucket_size is None
        assert (actor.tconfig.no_sync_func == module.no_sync) is synced
        assert (actor.tconfig.grad_sync_func == module.start_grad_sync) is synced
        # align_param_gather off: the pre-hooks chain the buckets
        assert actor.tconfig.param_sync_func is None
        assert actor.tconfig.finalize_model_grads_func is not None
