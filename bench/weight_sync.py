"""Weight-sync throughput against its limit, a plain memory copy of the same bytes.

Per model (the tiny Qwen3 built in code, SmolLM2-135M-Instruct) and engine precision
(``MODEL:DTYPE``, the engine's ``rollout.dtype``; float32 when not given), each in its own process:
the Megatron actor (TP=1, fp32) and the colocated vLLM-cpu engine are built as in
bench/step_breakdown.py, then, after one warm-up push, each of these is timed ``--repeats`` times
(best and median reported):

    push      weight_sync.push(actor, engine): the whole sync as the stage loop runs it
    actor     list(actor.iter_hf_weights()): gather + HF conversion, tensors kept
    engine    engine.load_weights(<those tensors, pre-materialised, in the actor's dtype>)
              (+ lm_head.weight for tied models, as push sends it)
    repack    vLLM-cpu's own kernel-format step alone: its CPU GEMM dispatch
              (``dispatch_cpu_unquantized_gemm``: a oneDNN matmul handle that reorders the weight
              into oneDNN's blocked layout, or for small bf16 shapes sgl-kernel's packed weight) run
              for every linear layer and LM head the engine serves, on random weights of those
              shapes and the engine's dtype. Every in-place reload on CPU must do this (vLLM
              replaces each linear's weight by such a packed copy after loading): with ``convert``
              it is the floor of ``push`` that no sync design can go below while the engine keeps
              its packed kernels
    memcpy    one flat dst.copy_(src) of the model's bytes, into a preallocated (touched)
              destination
    convert   one flat copy of the model's parameters from the actor's fp32 into a touched
              destination in the engine's dtype: the least data movement of any push (the same as
              memcpy for an fp32 engine; for a bf16 engine it reads twice the bytes it writes)
    memcpy/t  the same bytes as per-tensor copies of the model's shapes, into preallocated
              destinations

MB/s is the model's bytes (what push reports; the tied lm_head alias not counted twice) over the
best time; the ratios divide by the flat memcpy's MB/s. ``push ÷ floor`` is the push's time over
repack + convert (the goal: ≤ 1.5). Results are appended to ``bench/results/weight_sync.jsonl``.
Absolute numbers on the shared 2-core machines are noisy; read the ratios.

    # tiny Qwen3 and SmolLM2-135M-Instruct, fp32 and bf16 engines
    .venv/bin/python bench/weight_sync.py
    .venv/bin/python bench/weight_sync.py --models tiny:bfloat16 --repeats 10
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.step_breakdown import (  # noqa: E402  (same models, one process each)
    model_dir, per_model_main)

RESULTS = ROOT / "bench" / "results" / "weight_sync.jsonl"
PARTS = ("push", "actor", "engine", "repack", "memcpy", "convert", "memcpy_per_tensor")


def _times(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def packed_shapes(engine) -> list[tuple[int, int]]:
    """(N, K) of every weight the CPU engine keeps as a oneDNN handle: its linear layers (fused qkv
    / gate_up as vLLM builds them) and LM head (also packed, for the logits matmul)."""
    from vllm.model_executor.layers.linear import LinearBase
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    def shapes(worker):
        out = []
        for m in worker.model_runner.model.modules():
            if isinstance(m, LinearBase):
                out.append((m.output_size_per_partition, m.input_size_per_partition))
            elif isinstance(m, ParallelLMHead):
                out.append(tuple(m.weight.shape))
        return out
    return engine.llm.collective_rpc(shapes)[0]


def run_one(name_dtype: str, repeats: int) -> dict:
    import torch

    from nemo_cascade import config
    from nemo_cascade import weight_sync
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.rollout.vllm import RolloutEngine

    name, _, dtype = name_dtype.partition(":")
    dtype = dtype or "float32"
    engine_torch_dtype = getattr(torch, dtype)
    with tempfile.TemporaryDirectory() as tmp:
        path = model_dir(name, Path(tmp))
        actor = MegatronActor(path, config.Parallel())
        engine = RolloutEngine(path, config.Rollout(max_prompt_tokens=128, max_response_tokens=64),
                               dtype, seed=0, max_model_len=256, around_generate=cpu.suspended)
        tied = actor.shape.tied_embeddings
        weight_sync.push(actor, engine)  # warm-up
        times: dict[str, list[float]] = {}
        stats = []

        def push():
            stats.append(weight_sync.push(actor, engine))

        times["push"] = _times(push, repeats)
        model_bytes, n_tensors = stats[-1].bytes, stats[-1].tensors

        kept: list = []

        def actor_side():
            kept[:] = list(actor.iter_hf_weights())

        times["actor"] = _times(actor_side, repeats)

        sent = []
        # pre-materialised, in the actor's dtype as push sends them (the engine converts on load)
        for n, t in kept:
            t = t.contiguous()
            sent.append((n, t))
            if tied and n == "model.embed_tokens.weight":
                sent.append(("lm_head.weight", t))
        times["engine"] = _times(lambda: engine.load_weights(sent), repeats)

        with cpu.suspended():  # the limit is plain torch, without the actor's device-rewriting mode
            from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

            packed = []
            for n, k in packed_shapes(engine):
                layer = torch.nn.Module()
                layer.weight = torch.nn.Parameter(torch.randn(n, k, dtype=engine_torch_dtype),
                                                  requires_grad=False)
                packed.append(layer)
            times["repack"] = _times(lambda: [dispatch_cpu_unquantized_gemm(m, remove_weight=False)
                                              for m in packed], repeats)
            del packed
            src = torch.randn(model_bytes // 4)  # the same bytes, whatever the dtype
            dst = torch.empty_like(src)
            dst.copy_(src)  # touch the destination's pages
            times["memcpy"] = _times(lambda: dst.copy_(src), repeats)
            del src, dst
            n_params = model_bytes // engine_torch_dtype.itemsize
            src, dst = torch.randn(n_params), torch.empty(n_params, dtype=engine_torch_dtype)
            dst.copy_(src)
            times["convert"] = _times(lambda: dst.copy_(src), repeats)
            del src, dst
            srcs = [torch.randn(t.shape, dtype=engine_torch_dtype) for _, t in kept]
            dsts = [torch.empty_like(s) for s in srcs]

            def per_tensor():
                for d, s in zip(dsts, srcs):
                    d.copy_(s)

            per_tensor()
            times["memcpy_per_tensor"] = _times(per_tensor, repeats)
        engine.shutdown()
    best = {k: min(v) for k, v in times.items()}
    mbs = {k: model_bytes / 1e6 / best[k] for k in PARTS}
    floor = best["repack"] + best["convert"]
    median = {k: statistics.median(v) for k, v in times.items()}
    return {"model": name, "engine_dtype": dtype, "push_over_floor": round(best["push"] / floor, 3),
            "push_over_floor_median":
                round(median["push"] / (median["repack"] + median["convert"]), 3),
            "tensors": n_tensors, "bytes": model_bytes, "repeats": repeats,
            "threads": torch.get_num_threads(),
            "best_s": {k: round(best[k], 5) for k in PARTS},
            "median_s": {k: round(median[k], 5) for k in PARTS},
            "mb_per_s": {k: round(mbs[k], 1) for k in PARTS},
            "ratio_to_memcpy": {k: round(mbs[k] / mbs["memcpy"], 4)
                                for k in PARTS if k != "memcpy"}}


def print_table(results: list[dict]) -> None:
    for r in results:
        print(f"\n{r['model']}, {r.get('engine_dtype', 'float32')} engine: {r['tensors']} tensors, "
              f"{r['bytes'] / 1e6:.1f} MB, best of {r['repeats']} ({r['threads']} torch threads)")
        print(f"  {'part':<18} {'best s':>9} {'median s':>9} {'MB/s':>9} {'÷ memcpy':>9}")
        for k in PARTS:
            ratio = r["ratio_to_memcpy"].get(k, 1.0)
            print(f"  {k:<18} {r['best_s'][k]:9.4f} {r['median_s'][k]:9.4f} "
                  f"{r['mb_per_s'][k]:9.1f} {ratio:9.3f}")
        print(f"  push ÷ floor (repack + convert): best {r['push_over_floor']:.2f}, median "
              f"{r['push_over_floor_median']:.2f}  (goal ≤ 1.5)")


def main() -> int:
    return per_model_main(__file__, __doc__.split("\n\n")[0], "--repeats", 5, run_one, print_table,
                          RESULTS, models="tiny,tiny:bfloat16,smollm2,smollm2:bfloat16")


if __name__ == "__main__":
    sys.exit(main())
