"""torchrun worker: train the actor one step, push into the colocated vLLM engine, compare
log-probs.

Run: torchrun --nproc_per_node=N tests/integration/sync_worker.py MODEL_DIR OUT.json TP
     [ENGINE_TP [ENGINE_DTYPE [ENGINE_COMPILE]]]
Every rank has its own engine (or, with ENGINE_TP > 1, a share of one); every rank checks that its
engine's prompt log-probs for a fixed continuation equal the actor's after the push (and differ from
the pre-training ones, so a push that did nothing fails), and again after a second training step and
push.
"""
import json
import sys

import torch


def main():
    model_dir, out, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
    engine_tp = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    engine_dtype = sys.argv[5] if len(sys.argv) > 5 else "float32"  # the actor stays fp32
    engine_compile = sys.argv[6] if len(sys.argv) > 6 else "auto"  # rollout.compile
    import torch.distributed as dist

    from nemo_cascade import config
    from nemo_cascade import weight_sync
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.rollout.vllm import RolloutEngine

    world = int(__import__("os").environ.get("WORLD_SIZE", "1"))
    actor = MegatronActor(model_dir, config.Parallel(tp=tp, dp=world // tp, micro_batch_size=2),
                          seed=3)
    engine = RolloutEngine(model_dir,
                           config.Rollout(max_response_tokens=8, kv_cache_gib=0.25,
                                          tensor_parallel_size=engine_tp, compile=engine_compile),
                           engine_dtype, seed=0, distributed=world > 1, max_model_len=128,
                           around_generate=cpu.suspended)
    tokens = torch.randint(3, 256, (1, 40), generator=torch.Generator().manual_seed(5))
    prompt, continuation = tokens[0, :12].tolist(), tokens[0, 12:].tolist()
    before = engine.score_logprobs(prompt, continuation)

    actor.configure_optimizer(config.Actor(lr=1e-2), total_steps=2)
    mask = torch.zeros_like(tokens, dtype=torch.float32)
    mask[:, 12:] = 1

    # push the continuation's likelihood up: a large, visible weight change
    def loss_fn(logprobs, mb):
        return -(logprobs * mb["loss_mask"]).sum(), mb["loss_mask"].sum().int(), {}

    def train_push_score():
        actor.train_step({"tokens": tokens, "loss_mask": mask}, loss_fn)
        stats = weight_sync.push(actor, engine, bucket_bytes=50_000)  # small buckets: many gathers
        return (stats, torch.tensor(engine.score_logprobs(prompt, continuation)),
                actor.logprobs(tokens)[0, 12:])

    stats, after, expect = train_push_score()
    # a second push must overwrite the first everywhere (a CPU engine keeps its plain weights
    # between pushes)
    _, after_again, expect_again = train_push_score()
    diffs = torch.cat([after - expect, after_again - expect_again]).abs()
    result = {"max_diff": float(diffs.max()), "mean_diff": float(diffs.mean()),
              "moved": float((torch.tensor(before) - expect).abs().max()),
              "moved_again": float((after - expect_again).abs().max()),
              "tensors": stats.tensors, "bytes": stats.bytes,
              "weight_dtypes": engine.weight_dtypes()}
    results = [None] * world
    dist.all_gather_object(results, result)
    if dist.get_rank() == 0:
        json.dump(results, open(out, "w"))
    engine.shutdown()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
