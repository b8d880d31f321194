"""The actor's GPU precision and long-context settings: which layer spec (Transformer Engine or
Megatron-Core's local one), FP8, sequence parallelism (SP), context parallelism (CP) and activation
recompute.

Two parts, both small functions of the config:

- :func:`plan` turns ``Model`` + ``Parallel`` + the machine (:class:`Env`) into a :class:`Plan`:
  whether TE is used, the extra ``TransformerConfig`` keyword arguments, and the multiple that
  sequence lengths are padded to. Every impossible combination raises one
  :class:`~nemo_cascade.config.ConfigError` line naming the field.
- :func:`layer_spec` builds the Megatron layer spec of that choice.

How the sequences of a batch are laid out for that model (CP chunks, packed ``thd`` rows, pipeline
shapes) is actor/sequence_layout.py.

Field names are megatron-core 0.16.1's (``transformer_config.py``, ``fp8_utils.get_fp8_recipe``).
Nothing here imports megatron at module level, so the mappings and every error are unit-testable on
any machine.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass
from typing import Any

import torch
from packaging.version import InvalidVersion, Version

from nemo_cascade.config import ConfigError, Model, Parallel
from nemo_cascade.config.checks import validate_parallel_settings
from nemo_cascade.convert.shape import ARCHS

log = logging.getLogger(__name__)

FP8_RECIPES = {"delayed": "delayed", "current": "tensorwise", "blockwise": "blockwise"}
"""``model.fp8`` → ``TransformerConfig.fp8_recipe``. megatron-core calls per-tensor current scaling
``tensorwise`` (TE's ``Float8CurrentScaling``); blockwise is TE's ``Float8BlockScaling`` (1×128 /
128×128)."""

FP8_MIN_CAPABILITY = {"delayed": (8, 9), "current": (8, 9), "blockwise": (9, 0)}
"""FP8 tensor cores start at compute capability 8.9 (Ada) / 9.0 (Hopper); TE's blockwise recipe is a
Hopper kernel (on Blackwell TE would need MXFP8 instead)."""

FP8_MIN_TE = {"delayed": "1.0", "current": "2.2.0.dev0", "blockwise": "2.3.0.dev0"}
"""The TE versions below which megatron-core 0.16.1's ``get_fp8_recipe`` rejects a recipe."""

FP8_ALIGN = 16
"""TE's FP8 GEMMs need the token dimension a multiple of 16 (megatron's ``get_fp8_align_size``)."""

RECOMPUTE: dict[str, dict[str, Any]] = {
    "none": {},
    # Only the attention core (softmax(QKᵀ)V, the activations quadratic in sequence length) is
    # recomputed.
    "selective": dict(recompute_granularity="selective", recompute_modules=["core_attn"]),
    # Every layer keeps only its input and recomputes the rest in backward (uniform, one layer per
    # unit).
    "full": dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1),
}


@dataclass(frozen=True)
class Env:
    """What the machine offers: a CUDA device (and its compute capability) and an importable TE."""

    cuda: bool
    capability: tuple[int, int] | None = None
    te_version: str | None = None
    """``transformer_engine.__version__``; None when it is not importable."""
    te_error: str | None = None
    """Why an installed ``transformer_engine`` (``importlib.util.find_spec`` finds it) does not
    import; None when it imports or is not installed."""
    apex_wgrad: bool = False
    """Apex's ``fused_weight_gradient_mlp_cuda`` imports (megatron's own flag for it): what
    megatron's ``ColumnParallelLinear`` — the LM head on every spec — requires for
    ``gradient_accumulation_fusion``."""


@dataclass(frozen=True)
class Plan:
    """The actor's resolved settings."""

    te: bool
    """Transformer Engine layer spec (fused norm+linear names in the conversion table) instead of
    local."""
    config_kwargs: dict[str, Any]
    """Extra ``TransformerConfig`` keyword arguments (SP, CP, recompute, FP8)."""
    seq_multiple: int
    """Microbatch sequence lengths are right-padded to a multiple of this (SP, CP and FP8 shard/tile
    them)."""
    fused_attention: bool = False
    """Local spec on CPU: torch's fused attention (:mod:`.fused_attention`), packed rows block by
    block."""


def probe() -> Env:
    """The running machine. TE is imported only where CUDA exists: without it TE is unusable anyway,
    and on CPU machines it is not installed (its presence breaks megatron-core's imports there,
    docs/scaling.md)."""
    if not torch.cuda.is_available():
        return Env(cuda=False)
    capability = tuple(torch.cuda.get_device_capability())
    te_version, te_error = import_transformer_engine()
    from megatron.core.tensor_parallel import layers  # its import-time probe of apex's wgrad kernel

    return Env(cuda=True, capability=capability, te_version=te_version, te_error=te_error,
               apex_wgrad=bool(layers._grad_accum_fusion_available))


def import_transformer_engine() -> tuple[str | None, str | None]:
    """``(version, None)`` when TE imports, ``(None, None)`` when it is not installed, and ``(None,
    reason)`` when it is installed but fails to import (built for another torch or CUDA, a missing
    library): a broken install is reported, never taken for an absent one."""
    if importlib.util.find_spec("transformer_engine") is None:
        return None, None
    try:
        te = importlib.import_module("transformer_engine")
        importlib.import_module("transformer_engine.pytorch")  # the part Megatron uses
    except Exception as e:  # ImportError, OSError from a shared library, a version assert
        return None, " ".join(f"{type(e).__name__}: {e}".split())[:300]
    return str(getattr(te, "__version__", "0")), None


def use_transformer_engine(model: Model, env: Env) -> bool:
    """``local`` → False; ``transformer_engine`` → True (or an error naming what is missing);
    ``auto`` → TE exactly when CUDA is present and ``transformer_engine`` imports."""
    impl = model.transformer_impl
    if impl == "local":
        return False
    if env.cuda and env.te_error and impl in ("auto", "transformer_engine"):
        raise ConfigError(f"model.transformer_impl={impl}: transformer_engine is installed but "
                          f"does not import ({env.te_error}); reinstall it for this torch and CUDA "
                          "(the gpu extra), or set model.transformer_impl=local")
    if impl == "auto":
        return env.cuda and env.te_version is not None
    if impl != "transformer_engine":
        raise ConfigError("model.transformer_impl: expected auto, local or transformer_engine, "
                          f"got {impl!r}")
    if not env.cuda:
        raise ConfigError("model.transformer_impl: 'transformer_engine' needs a CUDA GPU and none "
                          "is visible (use 'auto' or 'local' on CPU)")
    if env.te_version is None:
        raise ConfigError("model.transformer_impl: 'transformer_engine' needs the "
                          "transformer_engine package, which is not importable here (install the "
                          "gpu extra, or use 'auto' or 'local')")
    return True


def check(model: Model, parallel: Parallel, env: Env, te: bool) -> None:
    """Every combination this machine cannot run, as one ConfigError line naming the field (the
    rules that hold on any machine are config.checks.validate_parallel_settings)."""
    if model.fp8 != "none":
        _check_fp8(model.fp8, env, te)
    if parallel.cp > 1 and not te:
        raise ConfigError(f"parallel.cp={parallel.cp}: context parallelism runs inside Transformer "
                          "Engine's attention; it needs a CUDA GPU with transformer_engine and "
                          "model.transformer_impl auto or transformer_engine (got "
                          f"{model.transformer_impl!r}, {'CUDA' if env.cuda else 'no CUDA'}, "
                          f"{'TE ' + env.te_version if env.te_version else 'no TE'})")


def _check_fp8(recipe: str, env: Env, te: bool) -> None:
    where = f"model.fp8={recipe}"
    if not env.cuda:
        raise ConfigError(f"{where}: FP8 training needs a CUDA GPU (compute capability >= 8.9) "
                          "with transformer_engine; none is visible (set model.fp8=none on CPU)")
    if not te:
        raise ConfigError(f"{where}: FP8 runs through Transformer Engine layers; it needs "
                          "transformer_engine installed and model.transformer_impl auto or "
                          "transformer_engine")
    need = FP8_MIN_CAPABILITY[recipe]
    if env.capability is not None and tuple(env.capability) < need:
        raise ConfigError(f"{where}: needs a GPU of compute capability >= {need[0]}.{need[1]} "
                          f"({'Hopper' if need >= (9, 0) else 'Ada/Hopper'} or newer); this one is "
                          f"{env.capability[0]}.{env.capability[1]}")

    try:
        too_old = Version(env.te_version or "0") < Version(FP8_MIN_TE[recipe])
    except InvalidVersion:  # an unusual local build string: let megatron's own version check speak
        too_old = False
    if too_old:
        raise ConfigError(f"{where}: needs transformer_engine >= "
                          f"{FP8_MIN_TE[recipe].split('.dev')[0]}, found {env.te_version}")


def transformer_config_kwargs(model: Model, parallel: Parallel) -> dict[str, Any]:
    """The ``TransformerConfig`` fields these settings own (the model's shape comes from
    convert.megatron_args)."""
    kwargs: dict[str, Any] = dict(sequence_parallel=parallel.sequence_parallel,
                                  context_parallel_size=parallel.cp,
                                  **RECOMPUTE[parallel.recompute])
    if model.fp8 != "none":
        # hybrid: e4m3 for weights and activations, e5m2 (more range) for gradients — the standard
        # training format.
        kwargs.update(fp8="hybrid", fp8_recipe=FP8_RECIPES[model.fp8])
        if model.fp8 == "delayed":
            # Scales from the max |x| of the last 1024 steps (NeMo/Megatron recipes): one outlier
            # batch cannot overflow the next step, which a history of 1 (megatron's default) allows.
            kwargs.update(fp8_amax_history_len=1024, fp8_amax_compute_algo="max")
    return kwargs


def seq_multiple(model: Model, parallel: Parallel) -> int:
    """Sequence lengths must split evenly: CP cuts a sequence into 2·cp chunks, SP cuts each CP
    shard over the TP ranks, and FP8 GEMMs need each rank's token count a multiple of 16. A product,
    not an lcm: the condition is on each rank's shard, not on the whole sequence."""
    m = 2 * parallel.cp if parallel.cp > 1 else 1
    if parallel.sequence_parallel:
        m *= parallel.tp
    if model.fp8 != "none":
        m *= FP8_ALIGN
    return m


def fusion_kwargs(env: Env, te: bool, rope_scaling: bool = False) -> dict[str, bool]:
    """Megatron's kernel fusions, each on exactly where this machine has what it runs on
    (docs/scaling.md, "GPU path: decisions and the source they follow"); all off on CPU, where the
    unfused path is what the parity tests compare. ``rope_scaling``: the model's RoPE is YaRN-scaled
    (App. B)."""
    if not env.cuda:
        return dict(bias_activation_fusion=False, bias_dropout_fusion=False,
                    masked_softmax_fusion=False,
                    apply_rope_fusion=False, gradient_accumulation_fusion=False)
    return dict(
        # SwiGLU and bias-dropout-add are megatron's own jit_fuser (torch.compile) functions: any
        # CUDA torch.
        bias_activation_fusion=True, bias_dropout_fusion=True,
        # Read only by the local spec's attention, whose causal kernel ignores the explicit
        # block-diagonal mask of packed rows: on, packed examples would attend to each other. TE's
        # attention never reads it.
        masked_softmax_fusion=False,
        # TE's fused RoPE (megatron's TE extension; TE >= 1.4). Its thd form drops YaRN's attention
        # scaling.
        apply_rope_fusion=te and not rope_scaling and _version_at_least(env.te_version, "1.4"),
        # Megatron's ColumnParallelLinear (the LM head, on either spec) refuses it without apex's
        # kernel.
        gradient_accumulation_fusion=env.apex_wgrad,
    )


def _version_at_least(version: str | None, least: str) -> bool:
    try:
        return version is not None and Version(version) >= Version(least)
    except InvalidVersion:
        return False


def describe(model: Model, env: Env, te: bool) -> str:
    """One line: the layer spec chosen and why (logged when the actor is planned)."""
    if te:
        return (f"actor layer spec: transformer_engine (TE {env.te_version}, "
                f"model.transformer_impl={model.transformer_impl})")
    why = ("requested" if model.transformer_impl == "local" else
           "no CUDA" if not env.cuda else "transformer_engine not installed")
    return f"actor layer spec: local (model.transformer_impl={model.transformer_impl}: {why})"


def plan(model: Model, parallel: Parallel, env: Env | None = None, *,
         rope_scaling: bool = False) -> Plan:
    """Resolve and check everything for this machine (``env``: :func:`probe` unless given)."""
    env = probe() if env is None else env
    # the machine-independent rules, shared with config.validate
    validate_parallel_settings(model, parallel)
    te = use_transformer_engine(model, env)
    check(model, parallel, env, te)
    fused = not te and not env.cuda
    attention = "; core attention: torch's fused, by block in packed rows" if fused else ""
    log.info("%s%s", describe(model, env, te), attention)
    return Plan(te=te, config_kwargs={**transformer_config_kwargs(model, parallel),
                                      **fusion_kwargs(env, te, rope_scaling)},
                seq_multiple=seq_multiple(model, parallel), fused_attention=fused)


# -------------------------------------------------------------------------------------- layer specs

class LocalRMSNorm(torch.nn.RMSNorm):
    """The local spec's RMSNorm (megatron's ``WrappedTorchNorm`` builds the same
    ``torch.nn.RMSNorm``), but usable with sequence parallelism: there each TP rank normalises only
    its sequence shard, so the weight's gradient is partial. Marking it ``sequence_parallel`` makes
    ``finalize_model_grads`` sum it over the TP group — exactly what TE and Apex norms do;
    ``WrappedTorchNorm`` instead refuses SP outright."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_unused):
        # In the parameter dtype, like every other weight (megatron's wrapper leaves norms in fp32,
        # so a bf16 actor ran unfused fp32 norms and synced fp32 norm tensors: measured on an H200,
        # docs/performance.md). The optimizer keeps fp32 master copies of bf16 parameters.
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)
        self.weight.sequence_parallel = bool(config.sequence_parallel)


def layer_spec(te: bool, arch: str, num_layers: int, fused_attention: bool = False):
    """The GPT decoder spec for ``GPTModel(transformer_layer_spec=...)``.

    TE: ``get_gpt_layer_with_transformer_engine_spec`` — the pre-attention / pre-MLP norms are fused
    into ``linear_qkv`` / ``linear_fc1`` (``layer_norm_weight``; convert.table's ``te=True`` names),
    the final norm is TE's. Local: megatron's local spec with :class:`LocalRMSNorm` for every norm
    (block-level spec of ``num_layers`` layers — this pipeline stage's — so the final norm is one
    too), its core attention torch's fused one with ``fused_attention`` (:class:`Plan`). Qwen3 has
    per-head q/k RMSNorm. (Qwen2's q/k/v biases need no spec change: ``linear_qkv`` gets its bias
    from ``TransformerConfig.add_qkv_bias``, convert.shape.)"""
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_layer_local_spec, get_gpt_layer_with_transformer_engine_spec)

    qk = ARCHS[arch].qk_norm
    if te:
        return get_gpt_layer_with_transformer_engine_spec(qk_layernorm=qk)
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules

    layer = get_gpt_layer_local_spec(qk_layernorm=qk, normalization="RMSNorm")
    sub = layer.submodules
    sub.input_layernorm = sub.pre_mlp_layernorm = LocalRMSNorm
    if qk:
        attention = sub.self_attention.submodules
        attention.q_layernorm = attention.k_layernorm = LocalRMSNorm
    if fused_attention:
        from nemo_cascade.actor.fused_attention import FusedAttention

        sub.self_attention.submodules.core_attention = FusedAttention
    return TransformerBlockSubmodules(layer_specs=[layer] * num_layers, layer_norm=LocalRMSNorm)


__all__ = ["Env", "Plan", "probe", "plan", "check", "use_transformer_engine",
           "transformer_config_kwargs", "seq_multiple", "layer_spec", "LocalRMSNorm", "FP8_RECIPES",
           "RECOMPUTE", "fusion_kwargs", "describe", "import_transformer_engine"]
