"""Per-GPU memory of every stage of a cascade on its parallel layout: ``nemo-cascade plan RECIPE``.

An estimate from the model's shape and the config, for planning layouts on 8×H100-80GB nodes before
a job queues; nothing here imports torch, megatron or vllm at module level, and nothing is measured.
Per GPU:

- **actor state**: bf16 parameters (2 B/param), the fp32 gradient buffer (4 B/param:
  ``grad_reduce_in_fp32``) and the optimizer's fp32 master copy + Adam m, v (12 B/param; 8 with fp32
  parameters, which are their own master), i.e. 18 B/param. Parameters and gradients split over TP ×
  PP (the embedding and LM head over TP, on the first / last pipeline stage); Megatron's distributed
  optimizer shards the optimizer part over DP × CP.
- **activations** of the stage's longest sequence (GRPO: ``max_prompt_tokens`` + the longest
  response phase; SFT: ``sft_max_tokens``; reward model: ``rm_max_tokens`` per row, a pair's two
  rows in one microbatch) × ``micro_batch_size`` rows, from :func:`layer_activation_bytes`
  (calibrated on the local spec, see there): TP splits the per-head / FFN parts, sequence
  parallelism also the hidden-size parts, CP the sequence; ``selective`` recompute drops the unfused
  attention's S² part, ``full`` keeps one bf16 layer input per layer plus one layer's activations
  while it is recomputed. 1F1B: pipeline rank r holds pp − r microbatches in flight; the last rank
  adds the LM head's 16·S·V/TP (vocab-parallel cross-entropy).
- **the colocated vLLM engine** (``rollout/vllm.py``): ``rollout.tensor_parallel_size`` = t
  consecutive ranks share an engine, each GPU holding 1/t of its weights (t = 1: a whole copy per
  rank); it may take ``gpu_memory_utilization`` × GPU memory (one engine serves the cascade, built
  with the first GRPO stage's ``rollout``), its KV cache is that budget minus the weights, and a
  token of KV costs 2 × layers × kv_heads × head_dim × 2 bytes, the KV heads split over t
  (replicated once t exceeds them). It sleeps (level 2: weights and KV cache dropped, the next
  weight push refills them; ``rollout.engine_start.sleep_level``) during the actor's GRPO train
  step, so a GRPO stage peaks at max(actor state + activations, actor state + the engine's budget).
  The gate puts it to sleep after evaluating, so an SFT or reward-model stage trained after the
  engine was built does not pay for it on the GPU.
- the cascade's own reward-model server (a ``reward_model`` stage's export, served on rank 0's GPU
  to the end): :func:`plan_rm_server` gives it what the later stages leave, and the cascade asks
  :func:`size_rm_server` for it at its start (``cascade/rm_server.py`` turns that into its ``vllm
  serve`` settings).
- a reward-model stage trains a second actor (the RM) while the policy actor keeps its parameters
  and gradient buffer (its optimizer is freed: ``cascade.train_reward_model``).

Checked against an H200 (bench/gpu_step.py, 12 Qwen3-8B-shaped layers, 4096 tokens, local spec, no
recompute): :func:`estimate_bytes` 123.8 GiB, measured peak 112–116 GiB — the numbers run ~7–10 %
high.
"""
from nemo_cascade.tooling.plan.memory import (ACTIVATION_MARGIN, FIXED_BYTES, GIB, GPUS_PER_NODE,
                                              actor_bytes, engine_bytes, estimate_bytes,
                                              head_activation_bytes, layer_activation_bytes,
                                              rank_params)
from nemo_cascade.tooling.plan.shapes import PRESETS, SIZE_PRESETS, resolve_shape, shape_from_config
from nemo_cascade.tooling.plan.stages import (CascadePlan, StagePlan, plan_cascade, plan_rm_server,
                                              size_rm_server)

__all__ = [
    "PRESETS", "SIZE_PRESETS", "resolve_shape", "shape_from_config", "layer_activation_bytes",
    "head_activation_bytes", "estimate_bytes", "rank_params", "actor_bytes", "engine_bytes",
    "StagePlan", "CascadePlan", "plan_cascade", "GIB", "FIXED_BYTES", "ACTIVATION_MARGIN",
    "GPUS_PER_NODE", "plan_rm_server", "size_rm_server",
]
