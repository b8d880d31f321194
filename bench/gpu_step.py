"""One-GPU measurements of the Megatron actor: HF parity, train-step and log-prob throughput, weight
export.

The project's actor (``nemo_cascade.actor.megatron.MegatronActor``: Megatron-Core, *local* layer
spec, NCCL world size 1, bf16) on one H100/H200, five parts, one JSON line each (stdout, and
appended to ``bench/results/gpu_step.jsonl``):

- ``parity``  tiny Qwen3 (demo_data/tiny_models.py's ``tiny-qwen3``, tied; and an untied twin)
  loaded into the actor; per-token log-probs of a fixed batch against HF ``Qwen3ForCausalLM`` on the
  same device, fp32 and bf16. Exit 1 at the end if an fp32 max |diff| exceeds 1e-3 (the other parts
  still run).
- ``gemm``    a plain bf16 8192³ matmul: what this GPU's cuBLAS reaches, to read the MFU against.
- ``train``   Qwen3-8B dims (hidden 4096, ffn 12288, 32 heads, 8 KV heads, head_dim 128, vocab
  151936, rope θ 1e6, qk-norm, untied) with fewer layers (full 8B needs ~137 GiB for bf16 params +
  fp32 grads + fp32 master + Adam alone), Megatron's own random init (no download), GRPO train steps
  through ``train_step``.
- ``logprob`` the same model's forward-only ``logprobs`` pass.
- ``export``  the weight-sync gather (``actor.iter_hf_weights()``, gathered in buckets: the
  conversion table, the path ``weight_sync.push`` and ``convert.export.export_hf`` use) into
  HF-named tensors, on the device and to host memory, against a plain flat copy of the same bytes.
  vLLM is not on the GPU machine: only the export side is measured, not the engine's
  ``load_weights``.

    PYTHONPATH=.:$MCORE python bench/gpu_step.py             # GPU, all parts (~2-3 min on an H200)
    PYTHONPATH=.:$MCORE python bench/gpu_step.py --only train --layers 8 --micro-batch 2
    .venv/bin/python bench/gpu_step.py --preset tiny         # CPU smoke test: gloo, fp32, tiny dims
"""
from __future__ import annotations

import os

# less fragmentation near the cap
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import argparse
import gc
import json
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from nemo_cascade.tooling.plan import PRESETS as SHAPES
from nemo_cascade.convert.shape import ModelShape
from nemo_cascade.tooling.plan import estimate_bytes

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "gpu_step.jsonl"
PARTS = ("parity", "gemm", "train", "logprob", "export")
PEAK_MEASURED_TFLOPS = 790.0
"""H200 SXM bf16 dense matmul peak as measured (the number MFU is read against)."""
PEAK_THEORETICAL_TFLOPS = 989.0
"""H100/H200 SXM bf16 dense peak from the datasheet (1979 with sparsity)."""
PARITY_TOL = 1e-3
T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[gpu_step {time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def gib(n: float) -> float:
    return round(n / 2**30, 2)


ROPE_THETA = 1e6
"""Qwen3-8B's rope θ (huggingface.co/Qwen/Qwen3-8B config.json)."""


def matmul_params(shape: ModelShape) -> int:
    """Parameters that take part in a matmul per token: every layer's linears and the LM head (tied
    or not); not the input embedding (a lookup) nor the norms."""
    h, q = shape.hidden_size, shape.head_dim
    heads, kv = shape.num_attention_heads, shape.num_key_value_heads
    per_layer = h * (heads + 2 * kv) * q + heads * q * h + 3 * h * shape.ffn_hidden_size
    return shape.num_layers * per_layer + shape.vocab_size * h


def hf_config(shape: ModelShape) -> dict:
    """The config.json of Qwen3-8B (huggingface.co/Qwen/Qwen3-8B) with these dims."""
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
            "hidden_size": shape.hidden_size, "intermediate_size": shape.ffn_hidden_size,
            "num_attention_heads": shape.num_attention_heads,
            "num_key_value_heads": shape.num_key_value_heads, "head_dim": shape.head_dim,
            "vocab_size": shape.vocab_size, "num_hidden_layers": shape.num_layers,
            "rope_theta": ROPE_THETA, "rms_norm_eps": 1e-6, "max_position_embeddings": 40960,
            "tie_word_embeddings": shape.tied_embeddings, "attention_bias": False,
            "hidden_act": "silu", "torch_dtype": "bfloat16"}


QWEN3_8B = SHAPES["qwen3-8b"]
TINY = ModelShape("tiny Qwen3 dims", hidden_size=128, ffn_hidden_size=384, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, vocab_size=1024, num_layers=2)

PRESETS = {
    "8b": dict(shape=QWEN3_8B, model_name="Qwen3-8B dims", dtype="bfloat16", seq_len=4096,
               micro_batch=1, microbatches=8, warmup=2, steps=5),
    "tiny": dict(shape=TINY, model_name="tiny Qwen3 dims", dtype="float32", seq_len=64,
                 micro_batch=2, microbatches=2, warmup=1, steps=1),
}


# ------------------------------------------------------------------------------------------- memory
# estimate_bytes (18 B/param of state + the calibrated per-layer activations) lives in
# nemo_cascade/tooling/plan/memory.py, where `nemo-cascade plan` uses the same formula for whole
# cascades on their parallel layouts.


def choose_layers(shape: ModelShape, micro_batch: int, seq_len: int, budget: float) -> int:
    fits = [L for L in range(1, shape.num_layers + 1)
            if estimate_bytes(shape, L, micro_batch, seq_len)["total"] <= budget]
    if not fits:
        raise SystemExit(
            f"gpu_step: not even 1 layer fits in {gib(budget)} GiB at micro-batch {micro_batch} × "
            f"{seq_len} tokens; lower --seq-len or --micro-batch")
    return fits[-1]


# ------------------------------------------------------------------------------------------- output
class Out:
    def __init__(self, path: Path, common: dict):
        self.path, self.common = path, common
        path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, record: dict) -> None:
        line = json.dumps({**self.common, **record})
        print(line, flush=True)
        with self.path.open("a") as f:
            f.write(line + "\n")


def environment(device: torch.device) -> dict:
    import megatron.core
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "megatron_core": getattr(megatron.core, "__version__", "?")}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(device=props.name, device_memory_gib=gib(props.total_memory),
                   cuda=torch.version.cuda)
    else:
        env.update(device="cpu", threads=torch.get_num_threads())
    return env


def free(*_) -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------- parity
def hf_logprobs(model, tokens_B_T: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Same alignment as the actor: [b, t] = log p(tokens[t] | tokens[:t]), 0 at t = 0."""
    with torch.no_grad():
        logits = model(tokens_B_T.to(device)).logits.float()
    lp = (torch.log_softmax(logits[:, :-1], dim=-1)
          .gather(-1, tokens_B_T[:, 1:, None].to(device)).squeeze(-1))
    return torch.nn.functional.pad(lp, (1, 0)).cpu()


def parity(out: Out, device: torch.device, scratch: Path) -> bool:
    """Actor vs HF per-token log-probs on two tiny Qwen3 models; returns True when fp32 agrees to
    PARITY_TOL."""
    from transformers import Qwen3ForCausalLM

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS, make_tiny_hf_model

    # Parity means IEEE fp32 on both sides: no TF32 in matmuls (torch's default, stated here for
    # certainty).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    models = {"tiny-qwen3 (tied)": BUILDERS["tiny-qwen3"](scratch / "tiny-tied")}
    models["tiny-qwen3 (untied)"] = make_tiny_hf_model(
        scratch / "tiny-untied", vocab_size=512, tie_word_embeddings=False, hidden_size=128,
        intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32)
    ok = True
    for name, path in models.items():
        vocab = json.loads((Path(path) / "config.json").read_text())["vocab_size"]
        tokens = torch.randint(0, vocab, (4, 128), generator=torch.Generator().manual_seed(0))
        lp = {}
        for dtype in ("float32", "bfloat16"):
            say(f"parity {name} {dtype}")
            actor = MegatronActor(str(path), config.Parallel(micro_batch_size=2), dtype=dtype)
            lp[f"actor_{dtype}"] = actor.logprobs(tokens)
            del actor
            free()
            hf = Qwen3ForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype),
                                                  attn_implementation="eager").to(device).eval()
            lp[f"hf_{dtype}"] = hf_logprobs(hf, tokens, device)
            del hf
            free()
        diff = lambda a, b: float((lp[a] - lp[b]).abs().max())  # noqa: E731
        record = {"part": "parity", "model": name, "tokens": list(tokens.shape),
                  "fp32_max_abs_diff": diff("actor_float32", "hf_float32"),
                  "bf16_max_abs_diff": diff("actor_bfloat16", "hf_bfloat16"),
                  "bf16_actor_vs_fp32_hf": diff("actor_bfloat16", "hf_float32"),
                  "bf16_hf_vs_fp32_hf": diff("hf_bfloat16", "hf_float32"),
                  "fp32_tolerance": PARITY_TOL}
        record["pass"] = record["fp32_max_abs_diff"] <= PARITY_TOL
        ok &= record["pass"]
        out.emit(record)
    return ok


# --------------------------------------------------------------------------------------------- gemm
def gemm(out: Out, device: torch.device) -> None:
    n, iters = (8192, 100) if device.type == "cuda" else (256, 5)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a, b = (torch.randn(n, n, dtype=dtype, device=device) for _ in range(2))
    for _ in range(5):
        a @ b
    sync()
    t = time.perf_counter()
    for _ in range(iters):
        a @ b
    sync()
    tflops = 2 * n**3 * iters / (time.perf_counter() - t) / 1e12
    out.emit({"part": "gemm", "shape": [n, n, n], "dtype": str(dtype), "tflops": round(tflops, 1),
              "vs_measured_peak_790": round(tflops / PEAK_MEASURED_TFLOPS, 3),
              "vs_theoretical_989": round(tflops / PEAK_THEORETICAL_TFLOPS, 3)})
    del a, b
    free()


# ---------------------------------------------------------------------------------------- big model
def build_actor(shape: ModelShape, dtype: str, micro_batch: int, scratch: Path, train: bool):
    """The project's actor on a config.json only: Megatron's own random init stands in for weights
    (an 8B-shaped checkpoint would be ~8–16 GB written and read back for numbers nobody looks
    at)."""
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor

    class RandomInitActor(MegatronActor):
        def load_hf(self, hf_path, optional=frozenset()):
            pass  # keep Megatron's initialisation (normal, std 0.02)

    folder = scratch / f"qwen3-{shape.num_layers}l"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf_config(shape), indent=2))
    actor = RandomInitActor(str(folder), config.Parallel(micro_batch_size=micro_batch), dtype=dtype)
    if train:
        actor.configure_optimizer(config.Actor(lr=1e-6), total_steps=100)
    return actor


def grpo_batch(rows: int, seq_len: int, vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tokens; the first S/8 of each row is prompt (no loss), the rest response with
    ±advantages."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(rows, seq_len)
    mask[:, max(seq_len // 8, 1):] = 1.0
    return {"tokens": torch.randint(0, vocab, (rows, seq_len), generator=g), "loss_mask": mask,
            "advantages": torch.randn(rows, generator=g),
            "rollout_logprobs": torch.zeros(rows, seq_len)}


# stage.sft_loss (not imported: cascade/stage.py pulls in rewards and data loaders)
def sft_loss(logprobs_B_T, mb):
    from nemo_cascade.algorithms import sft

    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


def flops_per_token(shape: ModelShape, seq_len: int, train: bool) -> float:
    """6·N (train) or 2·N (forward) with N = matmul parameters, plus attention 12·L·heads·hd·S
    (train) or 4·L·heads·hd·S (forward) for the full S×S score matrix (PaLM App. B; the unfused
    local attention does compute all of it, causal masking only discards the upper half)."""
    attn = shape.num_layers * shape.num_attention_heads * shape.head_dim * seq_len
    return ((6 * matmul_params(shape) + 12 * attn) if train
            else (2 * matmul_params(shape) + 4 * attn))


FLOPS_FORMULA = (
    "train: (6*N_matmul + 12*L*heads*head_dim*S) per token; forward: (2*N_matmul + "
    "4*L*heads*head_dim*S); N_matmul = linears of all layers + LM head (not the input embedding)")


def timed(fn, warmup: int, steps: int) -> tuple[list[float], object]:
    result = None
    for i in range(warmup):
        say(f"  warm-up {i + 1}/{warmup}")
        result = fn()
    times = []
    for i in range(steps):
        sync()
        t = time.perf_counter()
        result = fn()
        sync()
        times.append(time.perf_counter() - t)
        say(f"  step {i + 1}/{steps}: {times[-1]:.3f} s")
    return times, result


def throughput(shape: ModelShape, tokens: int, seconds: float, seq_len: int, train: bool) -> dict:
    tflops = flops_per_token(shape, seq_len, train) * tokens / seconds / 1e12
    return {"tokens_per_s_per_gpu": round(tokens / seconds, 1), "model_tflops": round(tflops, 1),
            "mfu_vs_measured_peak_790": round(tflops / PEAK_MEASURED_TFLOPS, 3),
            "mfu_vs_theoretical_989": round(tflops / PEAK_THEORETICAL_TFLOPS, 3)}


def train_part(out: Out, actor, shape: ModelShape, a, common: dict) -> None:
    from nemo_cascade import config
    from nemo_cascade.algorithms import grpo

    rows = a.micro_batch * a.microbatches
    batch = grpo_batch(rows, a.seq_len, shape.vocab_size)
    loss_fn = partial(grpo.actor_loss, config.GRPO()) if a.loss == "grpo" else sft_loss
    if a.loss == "sft":
        batch = {k: batch[k] for k in ("tokens", "loss_mask")}
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    state_alloc = torch.cuda.memory_allocated() if torch.cuda.is_available() else 0
    say(f"train: {a.warmup} warm-up + {a.steps} timed {a.loss} steps of {rows} × "
        f"{a.seq_len} tokens")
    times, metrics = timed(lambda: actor.train_step(batch, loss_fn), a.warmup, a.steps)
    step_s = sum(times) / len(times)
    record = {"part": "train", **common, "loss": a.loss, "rows_per_step": rows,
              "tokens_per_step": rows * a.seq_len, "step_s_mean": round(step_s, 4),
              "step_s_min": round(min(times), 4),
              **throughput(shape, rows * a.seq_len, step_s, a.seq_len, True),
              "flops_formula": FLOPS_FORMULA, "last_loss": metrics.loss,
              "last_grad_norm": metrics.grad_norm}
    if torch.cuda.is_available():
        record.update(
            memory_before_steps_gib=gib(state_alloc),
            memory_after_steps_gib=gib(torch.cuda.memory_allocated()),  # + Adam state (lazy)
            peak_memory_allocated_gib=gib(torch.cuda.max_memory_allocated()),
            peak_memory_reserved_gib=gib(torch.cuda.max_memory_reserved()),
            peak_estimate_gib=gib(
                estimate_bytes(shape, shape.num_layers, a.micro_batch, a.seq_len)["total"]))
    out.emit(record)


def logprob_part(out: Out, actor, shape: ModelShape, a, common: dict) -> None:
    rows = a.micro_batch * a.microbatches
    tokens = grpo_batch(rows, a.seq_len, shape.vocab_size, seed=1)["tokens"]
    say(f"logprob: {a.warmup} warm-up + {a.steps} timed passes of {rows} × {a.seq_len} tokens")
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    times, lp = timed(lambda: actor.logprobs(tokens), a.warmup, a.steps)
    pass_s = sum(times) / len(times)
    record = {"part": "logprob", **common, "rows": rows, "tokens_per_pass": rows * a.seq_len,
              "pass_s_mean": round(pass_s, 4),
              **throughput(shape, rows * a.seq_len, pass_s, a.seq_len, False),
              "flops_formula": FLOPS_FORMULA, "finite": bool(torch.isfinite(lp).all())}
    if torch.cuda.is_available():
        record["peak_memory_allocated_gib"] = gib(torch.cuda.max_memory_allocated())
    out.emit(record)


def _best(fn, repeats: int = 2) -> float:
    """Fastest of `repeats` runs (the first pays page faults and allocator growth)."""
    best = float("inf")
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def export_part(out: Out, actor, a, common: dict) -> None:
    """The sync/export gather against flat copies of the same bytes."""
    device = actor.device
    bucket_bytes = int(a.bucket_mb * 1e6) or actor.weights.agreed_bucket_bytes()
    meta = [(n, t.numel() * t.element_size()) for n, t in actor.iter_hf_weights()]
    nbytes = sum(b for _, b in meta)

    # weight_sync.push's stream; each tensor copied once, as the engine's param.copy_ would
    def to_device():
        for _, t in actor.iter_hf_weights(bucket_bytes=bucket_bytes):
            torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t)

    # convert.hf_io.write_sharded's per-tensor step (export_hf), without the disk write
    def to_host():
        for _, t in actor.iter_hf_weights():
            t.detach().contiguous().cpu()

    say(f"export: {len(meta)} tensors, {nbytes / 1e9:.2f} GB")
    record = {"part": "export", **common, "tensors": len(meta), "gb": round(nbytes / 1e9, 3),
              "bucket_mb": round(bucket_bytes / 1e6, 1)}
    flat = torch.empty(nbytes, dtype=torch.uint8, device=device)
    timings = {
        "gather_to_device": _best(to_device), "flat_device_copy": _best(lambda: flat.clone()),
        "export_to_host": _best(to_host), "flat_d2h_pageable": _best(lambda: flat.cpu())}
    if device.type == "cuda":
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        timings["flat_d2h_pinned"] = _best(lambda: pinned.copy_(flat, non_blocking=True))
        del pinned
    del flat
    free()
    for k, s in timings.items():
        record[f"{k}_s"] = round(s, 4)
        record[f"{k}_gbps"] = round(nbytes / 1e9 / s, 2)
    record["device_ratio"] = round(timings["flat_device_copy"] / timings["gather_to_device"], 3)
    record["host_ratio_vs_pageable"] = round(
        timings["flat_d2h_pageable"] / timings["export_to_host"], 3)
    if "flat_d2h_pinned" in timings:
        record["host_ratio_vs_pinned"] = round(
            timings["flat_d2h_pinned"] / timings["export_to_host"], 3)
    record["note"] = ("export side only: vLLM is not installed here, so the engine's load_weights "
                      "is not measured; gather_to_device = iter_hf_weights() (weight sync's "
                      "buckets) with one device copy per tensor; export_to_host = "
                      "iter_hf_weights() + .contiguous().cpu() per tensor (export_hf without the "
                      "disk write); ratios = flat copy time / gather time (1.0 = at the copy "
                      "limit); best of 2")
    out.emit(record)


def big_model(out: Out, parts: set[str], a, device: torch.device, scratch: Path) -> None:
    """Train / logprob / export on the 8B-shaped model; one retry with 2 fewer layers on
    out-of-memory."""
    base: ModelShape = a.shape
    if a.layers:
        layers = a.layers
    elif device.type == "cuda":
        budget = a.mem_fraction * torch.cuda.get_device_properties(device).total_memory
        full = estimate_bytes(base, base.num_layers, a.micro_batch, a.seq_len)
        layers = choose_layers(base, a.micro_batch, a.seq_len, budget)
        out.emit({"part": "memory_plan", "full_model_layers": base.num_layers,
                  "full_model_params": full["params"], "full_model_state_gib": gib(full["state"]),
                  "full_model_train_estimate_gib": gib(full["total"]), "budget_gib": gib(budget),
                  "chosen_layers": layers, "chosen_estimate": {
                      k: gib(v) if k != "params" else v
                      for k, v in estimate_bytes(base, layers, a.micro_batch, a.seq_len).items()},
                  "note": "state = 18 B/param (bf16 param, fp32 grad, fp32 master, Adam m+v); "
                          "see estimate_bytes"})
    else:
        layers = base.num_layers
    for attempt in range(2):
        shape = replace(base, num_layers=layers)
        common = {"model": f"{a.model_name}, {layers} layers, random init", "layers": layers,
                  "params": shape.params(), "dtype": a.dtype, "seq_len": a.seq_len,
                  "micro_batch": a.micro_batch}
        try:
            say(f"building the actor: {layers} layers, {shape.params() / 1e9:.2f} B params, "
                f"{a.dtype}")
            actor = build_actor(shape, a.dtype, a.micro_batch, scratch, train="train" in parts)
            if "train" in parts:
                train_part(out, actor, shape, a, common)
            if "logprob" in parts:
                logprob_part(out, actor, shape, a, common)
            if "export" in parts:
                export_part(out, actor, a, common)
            del actor
            free()
            return
        except torch.OutOfMemoryError as e:
            error = str(e).splitlines()[0]
        actor = None  # the traceback is gone: the actor's memory can be freed now
        free()
        out.emit({
            "part": "oom", **common, "error": error,
            "peak_memory_allocated_gib": (gib(torch.cuda.max_memory_allocated())
                                          if torch.cuda.is_available() else None),
            "estimate_gib": gib(estimate_bytes(shape, layers, a.micro_batch, a.seq_len)["total"])})
        if attempt or layers <= 2:
            raise SystemExit(1)
        layers -= 2
        say(f"out of memory; retrying with {layers} layers")


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="8b")
    p.add_argument("--only", default=",".join(PARTS),
                   help=f"comma-separated subset of {','.join(PARTS)}")
    p.add_argument("--layers", type=int, default=0,
                   help="0 = the most that fit (estimate_bytes, --mem-fraction)")
    p.add_argument("--mem-fraction", type=float, default=0.9,
                   help="share of GPU memory the estimate may use")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--micro-batch", type=int, help="rows per microbatch")
    p.add_argument("--microbatches", type=int, help="microbatches per optimizer step")
    p.add_argument("--warmup", type=int)
    p.add_argument("--steps", type=int, help="timed steps (and timed log-prob passes)")
    p.add_argument("--dtype", choices=["bfloat16", "float32"])
    p.add_argument("--loss", choices=["grpo", "sft"], default="grpo")
    p.add_argument(
        "--bucket-mb", type=float, default=0.0,
        help="weight-gather bucket size (0: weight sync's own, from free memory with a cap)")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    for k, v in PRESETS[a.preset].items():
        if getattr(a, k, None) is None:
            setattr(a, k, v)
    if min(a.steps, a.micro_batch, a.microbatches, a.seq_len) < 1 or a.warmup < 0:
        p.error("--steps, --micro-batch, --microbatches and --seq-len must be >= 1, --warmup >= 0")
    parts = set(a.only.split(","))
    if parts - set(PARTS):
        p.error(
            f"--only: unknown part(s) {sorted(parts - set(PARTS))}; choose from {','.join(PARTS)}")
    return a, parts


def main(argv=None) -> int:
    a, parts = parse(argv)
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cpu" and a.preset != "tiny":
        print("gpu_step: no CUDA device; run --preset tiny on a CPU machine", file=sys.stderr)
        return 2
    say(f"preset {a.preset} on {device}; parts {','.join(p for p in PARTS if p in parts)}")
    out = Out(a.out, {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "bench": "gpu_step",
                      "preset": a.preset, **environment(device)})
    from nemo_cascade.actor.process_groups import init_distributed

    init_distributed()  # NCCL on the GPU (world size 1), gloo on CPU
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        if "parity" in parts:
            ok = parity(out, device, Path(tmp))
        if "gemm" in parts:
            gemm(out, device)
        if parts & {"train", "logprob", "export"}:
            big_model(out, parts, a, device, Path(tmp))
    import torch.distributed as dist

    dist.destroy_process_group()
    say("done" + ("" if ok else f": PARITY FAILED (fp32 max |diff| > {PARITY_TOL})"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
